//! The C ABI's speed: perftest's `ib_write_bw -s 65536` and `ib_write_lat
//! -s 8` (Debian's, unmodified) on ferroce's `libibverbs.so.1`, each run
//! beside the same test by `ferroce perf`, interleaved, so that both see
//! the same machine. Goals: the C path carries at least 90% of
//! `ferroce perf`'s bandwidth and takes at most 110% of its latency.
//!
//! The library is `libibverbs.so` from `cargo build --release -p
//! ferroce-verbs`: found with `--libibverbs`, `FERROCE_LIBIBVERBS`, or
//! beside the `ferroce` binary (both land in `target/release`). It is
//! linked as `libibverbs.so.1` into a temporary directory that
//! `LD_LIBRARY_PATH` names. Without the library or perftest the rows are
//! skipped, and the table says why and how to get them.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{BenchArgs, Figure, Peers, median_of, perf};
use crate::error::Error;

/// The bandwidth test's message size and the latency test's.
pub(super) const BW_SIZE: u64 = 65536;
pub(super) const LAT_SIZE: u64 = 8;

/// How long one perftest process may take before it is killed.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The C ABI rows: (perftest, ferroce perf) for bandwidth (GB/s) and for
/// latency (t_typical, and the worst run's t_avg, µs); or why they were
/// not measured.
pub(super) enum CabiFigures {
    Measured(Box<CabiRows>),
    Skipped(String),
}

/// Each row's medians: perftest's, `ferroce perf`'s, and the median of
/// the ratios of the runs taken side by side (steadier than the ratio of
/// the medians when other jobs come and go: each pair saw the same load).
pub(super) struct CabiRows {
    pub(super) bw: Row,
    pub(super) lat: Row,
    /// The latency runs' means, the worst run of each: a median hides a
    /// run whose round trips now and then waited milliseconds for the
    /// driver thread (`ib_write_lat` waits on memory, not in the library).
    pub(super) lat_avg: Row,
}

/// (perftest, ferroce perf, paired ratio).
pub(super) type Row = (Figure, Figure, Figure);

/// The medians of side-by-side runs; any failed run fails the row.
pub(super) fn row(c_abi: Vec<Result<f64, Error>>, own: Vec<Result<f64, Error>>) -> Row {
    paired(c_abi, own, median_of)
}

/// The largest of side-by-side runs (and of their ratios); any failed run
/// fails the row.
fn worst_row(c_abi: Vec<Result<f64, Error>>, own: Vec<Result<f64, Error>>) -> Row {
    paired(c_abi, own, |v| {
        let v = v.into_iter().collect::<Result<Vec<f64>, Error>>()?;
        Ok(v.into_iter().fold(f64::NAN, f64::max))
    })
}

/// Side-by-side runs summed up by `of`: (perftest's, ferroce perf's,
/// their ratios').
fn paired(
    c_abi: Vec<Result<f64, Error>>,
    own: Vec<Result<f64, Error>>,
    of: impl Fn(Vec<Result<f64, Error>>) -> Figure,
) -> Row {
    let pairs: Result<Vec<(f64, f64)>, Error> = c_abi
        .into_iter()
        .zip(own)
        .map(|(a, b)| Ok((a?, b?)))
        .collect();
    match pairs {
        Ok(p) => {
            let ratios = p.iter().map(|&(a, b)| Ok(a / b)).collect();
            let (a, b): (Vec<f64>, Vec<f64>) = p.into_iter().unzip();
            (
                of(a.into_iter().map(Ok).collect()),
                of(b.into_iter().map(Ok).collect()),
                of(ratios),
            )
        }
        Err(e) => {
            let see = || Err(Error::Run("C ABI row: see above".into()));
            (Err(e), see(), see())
        }
    }
}

/// Where the library and the two perftest tools are.
struct Setup {
    libs: LibDir,
    write_bw: PathBuf,
    write_lat: PathBuf,
}

/// A temporary directory that holds ferroce's libraries under the names
/// programs load (`libibverbs.so.1`, and `librdmacm.so.1` when asked),
/// for `LD_LIBRARY_PATH`; removed on drop.
pub(super) struct LibDir(PathBuf);

impl LibDir {
    /// Links the library [`library`] finds, and `librdmacm.so` beside it
    /// when `rdmacm` is set, into a directory named after `tag`.
    pub(super) fn new(args: &BenchArgs, tag: &str, rdmacm: bool) -> Result<Self, String> {
        let verbs = library(args)?;
        let dir = std::env::temp_dir().join(format!("ferroce-bench-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let libs = Self(dir);
        libs.link(&verbs, "libibverbs.so.1")?;
        if rdmacm {
            let cm = found(verbs.with_file_name("librdmacm.so"), "ferroce-rdmacm")?;
            libs.link(&cm, "librdmacm.so.1")?;
        }
        Ok(libs)
    }

    fn link(&self, lib: &Path, name: &str) -> Result<(), String> {
        let link = self.0.join(name);
        std::os::unix::fs::symlink(lib, &link)
            .map_err(|e| format!("cannot link {} as {}: {e}", lib.display(), link.display()))
    }

    /// The directory, for `LD_LIBRARY_PATH`.
    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for LibDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The library to load: the option, the environment, or beside this binary.
fn library(args: &BenchArgs) -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find this binary's directory: {e}"))?;
    let env = std::env::var_os("FERROCE_LIBIBVERBS").map(PathBuf::from);
    found(choose(args.libibverbs.clone(), env, &exe), "ferroce-verbs")
}

/// The option, else the environment, else `libibverbs.so` beside `exe`.
fn choose(option: Option<PathBuf>, env: Option<PathBuf>, exe: &Path) -> PathBuf {
    option
        .or(env)
        .unwrap_or_else(|| exe.with_file_name("libibverbs.so"))
}

/// `path` if it is a file, else why not and how to build it (`package`).
fn found(path: PathBuf, package: &str) -> Result<PathBuf, String> {
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} not found: build it with `cargo build --release -p {package}` \
             (it lands beside the ferroce binary) or name libibverbs.so with --libibverbs",
            path.display()
        ))
    }
}

/// A program on `PATH`, else which Debian package brings it.
pub(super) fn tool_on_path(name: &str, package: &str) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!("{name} not found: install Debian's {package} (scripts/setup-test-deps.sh)")
        })
}

fn setup(args: &BenchArgs) -> Result<Setup, String> {
    let write_bw = tool_on_path("ib_write_bw", "perftest")?;
    let write_lat = tool_on_path("ib_write_lat", "perftest")?;
    Ok(Setup {
        libs: LibDir::new(args, "cabi", false)?,
        write_bw,
        write_lat,
    })
}

/// Runs every C ABI measure `args.repeat` times, each perftest run right
/// beside its `ferroce perf` run.
pub(super) fn measure(args: &BenchArgs, mut next_port: impl FnMut() -> u16) -> CabiFigures {
    let setup = match setup(args) {
        Ok(s) => s,
        Err(why) => return CabiFigures::Skipped(why),
    };
    let iters = (args.bytes / BW_SIZE).max(1).to_string();
    let lat_iters = args.lat_iters.to_string();
    let bw_args = ["-s", &BW_SIZE.to_string(), "-n", &iters].map(String::from);
    let lat_args = ["-s", &LAT_SIZE.to_string(), "-n", &lat_iters].map(String::from);
    let (mut c_bw, mut r_bw, mut c_lat, mut r_lat) = (vec![], vec![], vec![], vec![]);
    let (mut c_avg, mut r_avg) = (vec![], vec![]);
    for _ in 0..args.repeat.max(1) {
        eprintln!("ib_write_bw and ferroce perf write -s {BW_SIZE} ...");
        c_bw.push(
            perftest(
                args.peers(),
                &setup.libs,
                &setup.write_bw,
                &bw_args,
                next_port(),
            )
            .map(|cols| mbs_to_gbs(cols.get(3).copied())),
        );
        let ours = ["write"]
            .map(String::from)
            .into_iter()
            .chain(bw_args.clone());
        r_bw.push(
            perf(args, &ours.collect::<Vec<_>>(), next_port())
                .map(|cols| mbs_to_gbs(cols.get(3).copied())),
        );
        eprintln!("ib_write_lat and ferroce perf write --lat -s {LAT_SIZE} ...");
        // #bytes #iterations t_min t_max t_typical t_avg ...
        let (lat, avg) = split_lat(perftest(
            args.peers(),
            &setup.libs,
            &setup.write_lat,
            &lat_args,
            next_port(),
        ));
        c_lat.push(lat);
        c_avg.push(avg);
        let ours = ["write", "--lat"].map(String::from).into_iter();
        let (lat, avg) = split_lat(perf(
            args,
            &ours.chain(lat_args.clone()).collect::<Vec<_>>(),
            next_port(),
        ));
        r_lat.push(lat);
        r_avg.push(avg);
    }
    CabiFigures::Measured(Box::new(CabiRows {
        bw: row(c_bw, r_bw),
        lat: row(c_lat, r_lat),
        lat_avg: worst_row(c_avg, r_avg),
    }))
}

/// A latency run's t_typical and t_avg (columns 4 and 5 of its data row);
/// a failed run fails both, its error told once.
fn split_lat(cols: Result<Vec<f64>, Error>) -> (Result<f64, Error>, Result<f64, Error>) {
    match cols {
        Ok(c) => {
            let col = |i: usize| c.get(i).copied().unwrap_or(f64::NAN);
            (Ok(col(4)), Ok(col(5)))
        }
        Err(e) => (Err(e), Err(Error::Run("C ABI row: see above".into()))),
    }
}

/// perftest's MB/s (2^20 bytes) as GB/s.
fn mbs_to_gbs(mb: Option<f64>) -> f64 {
    mb.map_or(f64::NAN, |mb| mb * 1_048_576.0 / 1e9)
}

/// One perftest pair on loopback, `tool` on the library in `libs`: the
/// server on `peers.server`'s device, the client on `peers.client`'s;
/// returns the numbers of the client's data row.
pub(super) fn perftest(
    peers: Peers,
    libs: &LibDir,
    tool: &Path,
    extra: &[String],
    port: u16,
) -> Result<Vec<f64>, Error> {
    let name = tool.file_name().unwrap_or_default().to_string_lossy();
    let text = pair(peers, &name, &extra.join(" "), port, |to| {
        let mut c = Command::new(tool);
        c.args(["-x", "0", "-p", &port.to_string()])
            .args(extra)
            .args(to.map(|a| a.to_string()))
            .env("LD_LIBRARY_PATH", libs.path());
        c
    })?;
    data_row(&text).ok_or_else(|| format!("{name}: no data row in its output:\n{text}").into())
}

/// A server and client pair on loopback, each from `command` (its
/// argument: the server to connect to, `None` for the server itself), the
/// server on `peers.server`'s device and the client on `peers.client`'s;
/// returns the client's standard output. `name` and `what` name the run in
/// errors.
pub(super) fn pair(
    peers: Peers,
    name: &str,
    what: &str,
    port: u16,
    command: impl Fn(Option<IpAddr>) -> Command,
) -> Result<String, Error> {
    let run = |device: IpAddr, to: Option<IpAddr>| {
        command(to)
            .env("FERROCE_DEVICES", device.to_string())
            .env_remove("FERROCE_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    };
    let server = Reaper::new(run(peers.server, None)?);
    wait_listening(port, Duration::from_secs(10)).map_err(|e| format!("{name} server: {e}"))?;
    let client = finish(run(peers.client, Some(peers.server))?, name)?;
    let server = finish(server.take(), name)?;
    let text = String::from_utf8_lossy(&client.stdout).into_owned();
    if !client.status.success() || !server.status.success() {
        return Err(format!(
            "{name} {what} failed: client {}, server {}:\n{text}{}{}",
            client.status,
            server.status,
            String::from_utf8_lossy(&client.stderr),
            String::from_utf8_lossy(&server.stderr),
        )
        .into());
    }
    Ok(text)
}

/// The numbers of the first line after perftest's `#bytes` header.
fn data_row(text: &str) -> Option<Vec<f64>> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"));
    let row = lines.nth(1)?;
    let cols: Vec<f64> = row
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .collect();
    (!cols.is_empty()).then_some(cols)
}

/// Kills its child on drop, so that a failed run leaves no server behind.
pub(super) struct Reaper(Option<Child>);

impl Reaper {
    pub(super) fn new(child: Child) -> Self {
        Self(Some(child))
    }

    pub(super) fn take(mut self) -> Child {
        // Present until taken, and taken only here.
        self.0.take().expect("a reaper holds its child until taken")
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The child's output, killing it if it runs past [`RUN_LIMIT`].
pub(super) fn finish(child: Child, name: &str) -> Result<Output, Error> {
    let mut child = Reaper::new(child);
    let deadline = Instant::now() + RUN_LIMIT;
    loop {
        if let Some(c) = child.0.as_mut()
            && c.try_wait()?.is_some()
        {
            return Ok(child.take().wait_with_output()?);
        }
        if Instant::now() > deadline {
            return Err(format!("{name} ran past {RUN_LIMIT:?} and was killed").into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until something listens on TCP `port` (read from /proc, so that
/// no probe takes the server's one accept).
pub(super) fn wait_listening(port: u16, limit: Duration) -> Result<(), String> {
    let hex = format!(":{port:04X}");
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let listening = ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
            std::fs::read_to_string(f).is_ok_and(|t| {
                t.lines().any(|l| {
                    let mut w = l.split_whitespace();
                    let local = w.nth(1).unwrap_or("");
                    local.ends_with(&hex) && w.nth(1) == Some("0A")
                })
            })
        });
        if listening {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "nothing listens on TCP port {port} after {limit:?}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_the_option_then_the_environment_then_beside_the_binary() {
        let exe = Path::new("/opt/x/release/ferroce");
        let (opt, env) = (PathBuf::from("/a/lib.so"), PathBuf::from("/b/lib.so"));
        assert_eq!(choose(Some(opt.clone()), Some(env.clone()), exe), opt);
        assert_eq!(choose(None, Some(env.clone()), exe), env);
        assert_eq!(
            choose(None, None, exe),
            Path::new("/opt/x/release/libibverbs.so")
        );
        let why = found(PathBuf::from("/nonexistent/libibverbs.so"), "ferroce-verbs").unwrap_err();
        assert!(
            why.contains("cargo build --release -p ferroce-verbs"),
            "{why}"
        );
    }

    #[test]
    fn a_row_is_the_median_of_paired_ratios() {
        let runs = |v: &[f64]| v.iter().map(|&x| Ok(x)).collect::<Vec<_>>();
        // The second pair ran under load: both low, their ratio steady.
        let (c, own, ratio) = row(runs(&[2.0, 0.5, 2.2]), runs(&[2.1, 0.6, 2.0]));
        assert_eq!((c.unwrap(), own.unwrap()), (2.0, 2.0));
        assert_eq!(ratio.unwrap(), 2.0 / 2.1);
        let failed = vec![Ok(1.0), Err(Error::Run("ib_write_bw failed".into()))];
        let (c, _, ratio) = row(failed, runs(&[1.0, 1.0]));
        assert!(c.unwrap_err().to_string().contains("ib_write_bw failed"));
        assert!(ratio.is_err());
    }

    #[test]
    fn reads_perftest_data_rows() {
        let bw = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n \
                  65536      5000             2721.46            2223.96\t\t   0.035583\n---\n";
        assert_eq!(data_row(bw).unwrap()[3], 2223.96);
        let lat = "---\n #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n \
                   8       5000          5.50           206.12       6.91\n";
        assert_eq!(data_row(lat).unwrap()[4], 6.91);
        assert!(data_row("no table here\n").is_none());
        assert!(data_row(" #bytes x\n ---\n").is_none());
    }
}
