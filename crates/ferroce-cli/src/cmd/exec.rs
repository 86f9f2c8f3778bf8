//! `ferroce exec`: runs an unmodified RDMA program on ferroce's libraries.
//!
//! The build leaves `libibverbs.so` and `librdmacm.so` beside the `ferroce`
//! binary (`cargo build --release -p ferroce-cli -p ferroce-verbs -p
//! ferroce-rdmacm`), under cargo's names. Programs load them by their
//! sonames, `libibverbs.so.1` and `librdmacm.so.1`, so `exec` keeps a
//! directory of links under those names, `ferroce-libs/` beside the binary
//! (or beside the libraries `--lib-dir` names; where that directory cannot
//! be written, `ferroce-libs-UID` in the temporary directory), puts it first on
//! `LD_LIBRARY_PATH`, sets `FERROCE_DEVICES` from `-L` and
//! `FERROCE_BACKEND` from `--backend`, and then replaces itself with the
//! program (`execvp`), so that the program's exit status, signals and
//! standard streams are its own. `--print-env` prints the same settings
//! as shell `export` lines instead, for a shell or a job script.

use std::ffi::OsString;
use std::io;
use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{Args, ValueEnum};

use crate::error::Error;

/// The libraries: the file cargo builds, and the name programs load.
const LIBRARIES: [(&str, &str); 2] = [
    ("libibverbs.so", "libibverbs.so.1"),
    ("librdmacm.so", "librdmacm.so.1"),
];

/// The directory of soname links, beside the libraries.
const LINK_DIR: &str = "ferroce-libs";

/// Arguments of `ferroce exec`.
#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    /// An address that becomes a device (ferroce0, ferroce1, ... in the
    /// order given); repeat for more. Default: FERROCE_DEVICES as it is, or
    /// 127.0.0.1. Two processes on one machine need two addresses.
    #[arg(short = 'L', long = "local", value_name = "ADDRESS")]
    local: Vec<IpAddr>,
    /// The backend the devices open on (raw needs root).
    #[arg(long, value_enum)]
    backend: Option<Backend>,
    /// The directory holding libibverbs.so and librdmacm.so (default: the
    /// directory of this binary, where cargo puts them).
    #[arg(long, value_name = "DIR")]
    lib_dir: Option<PathBuf>,
    /// Print the settings as `export` lines instead of running a program.
    #[arg(long, conflicts_with = "program")]
    print_env: bool,
    /// The program and its arguments (after `--`).
    #[arg(
        value_name = "PROGRAM",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required_unless_present = "print_env"
    )]
    program: Vec<OsString>,
}

/// The backends a device can open on (`FERROCE_BACKEND`).
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Backend {
    /// RoCE v2 over kernel UDP sockets (unprivileged).
    Udp,
    /// Raw Ethernet: RoCE v1 and v2 (root).
    Raw,
}

pub(crate) fn run(args: &ExecArgs) -> Result<bool, Error> {
    let libs = match &args.lib_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe()?
            .parent()
            .map(Path::to_path_buf)
            .ok_or_else(|| Error::Usage("cannot find the ferroce binary's directory".into()))?,
    };
    let links = soname_links(&libs)?;
    let env = settings(args, &links);
    if args.print_env {
        for (k, v) in &env {
            println!("export {k}={}", shell_quote(&v.to_string_lossy()));
        }
        return Ok(true);
    }
    let (program, rest) = args
        .program
        .split_first()
        .ok_or_else(|| Error::Usage("name a program to run after --".into()))?;
    let err = Command::new(program).args(rest).envs(env).exec();
    Err(Error::Usage(format!(
        "cannot run {}: {}",
        program.to_string_lossy(),
        explain(&err)
    )))
}

/// A directory that holds soname links to the libraries in `libs`:
/// `libs/ferroce-libs/`, or, where that cannot be written (a build owned by
/// another user), `ferroce-libs-UID` in the temporary directory.
fn soname_links(libs: &Path) -> Result<PathBuf, Error> {
    for (file, _) in LIBRARIES {
        let lib = libs.join(file);
        if !lib.is_file() {
            return Err(Error::Usage(format!(
                "{} not found: build the libraries with `cargo build --release -p ferroce-verbs \
                 -p ferroce-rdmacm` (they land beside the ferroce binary), or name their \
                 directory with --lib-dir",
                lib.display()
            )));
        }
    }
    let beside = libs.join(LINK_DIR);
    link_into(libs, &beside).or_else(|first| {
        let uid = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
        let own = std::env::temp_dir().join(format!("{LINK_DIR}-{uid}"));
        link_into(libs, &own).map_err(|e| {
            Error::Usage(format!(
                "cannot make the library links in {} ({first}) nor in {} ({e})",
                beside.display(),
                own.display()
            ))
        })
    })
}

/// Makes `dir` hold `libibverbs.so.1` and `librdmacm.so.1` pointing to the
/// libraries in `libs`; links already right are left as they are, so a
/// directory another user made serves too.
fn link_into(libs: &Path, dir: &Path) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    for (file, soname) in LIBRARIES {
        let (lib, link) = (libs.join(file), dir.join(soname));
        if std::fs::canonicalize(&link).ok() == std::fs::canonicalize(&lib).ok() {
            continue;
        }
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(std::path::absolute(&lib)?, &link)?;
    }
    Ok(dir.to_path_buf())
}

/// The environment the program gets: the link directory first on
/// `LD_LIBRARY_PATH`, and the devices and backend asked for.
fn settings(args: &ExecArgs, links: &Path) -> Vec<(&'static str, OsString)> {
    let mut path = OsString::from(links);
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut env = vec![("LD_LIBRARY_PATH", path)];
    if !args.local.is_empty() {
        let list: Vec<String> = args.local.iter().map(IpAddr::to_string).collect();
        env.push(("FERROCE_DEVICES", list.join(",").into()));
    }
    if let Some(b) = args.backend {
        let name = match b {
            Backend::Udp => "udp",
            Backend::Raw => "raw",
        };
        env.push(("FERROCE_BACKEND", name.into()));
    }
    env
}

/// `s` quoted for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Why a program could not be started, with the way out where there is one.
fn explain(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!("{e} (is it installed and on PATH?)"),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        exec: ExecArgs,
    }

    fn parse(argv: &[&str]) -> ExecArgs {
        Cli::try_parse_from(std::iter::once("exec").chain(argv.iter().copied()))
            .expect("parses")
            .exec
    }

    #[test]
    fn makes_soname_links_to_the_built_libraries() {
        let dir = std::env::temp_dir().join(format!("ferroce-exec-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let missing = soname_links(&dir).unwrap_err().to_string();
        assert!(missing.contains("cargo build --release"), "{missing}");
        for (file, _) in LIBRARIES {
            std::fs::write(dir.join(file), file).unwrap();
        }
        let links = soname_links(&dir).unwrap();
        // A second run keeps the links it finds right.
        assert_eq!(soname_links(&dir).unwrap(), links);
        for (file, soname) in LIBRARIES {
            assert_eq!(std::fs::read_to_string(links.join(soname)).unwrap(), file);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sets_devices_backend_and_library_path() {
        let args = parse(&[
            "-L",
            "127.0.0.2",
            "-L",
            "::1",
            "--backend",
            "raw",
            "--",
            "rping",
        ]);
        assert_eq!(args.program, ["rping"]);
        let env = settings(&args, Path::new("/x/ferroce-libs"));
        let get = |k| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert!(
            get("LD_LIBRARY_PATH")
                .unwrap()
                .to_string_lossy()
                .starts_with("/x/ferroce-libs")
        );
        assert_eq!(get("FERROCE_DEVICES").unwrap(), "127.0.0.2,::1");
        assert_eq!(get("FERROCE_BACKEND").unwrap(), "raw");
        let plain = parse(&["ibv_devinfo", "-v"]);
        assert_eq!(plain.program, ["ibv_devinfo", "-v"]);
        assert!(settings(&plain, Path::new("/x")).len() == 1);
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
    }
}
