//! What `ferroce cmatose` and `ferroce udaddy` share, as librdmacm's
//! `examples/common.c` serves ucmatose and udaddy: their address options,
//! `--raw` (which `rdma-server`/`rdma-client` take too) and the source
//! address a route gives (rping's too), the listening ID (and the devices
//! a wildcard listen needs), waiting for
//! events and completions, and the end of a run ("test complete",
//! "return status N", exit status N as the C tools' `return ret` gives it).
//!
//! A failure in the middle of a run is reported where it happens, on the
//! line the C tool prints (its event lines on stdout) or, for what only
//! ferroce checks, on stderr naming the cause; the run then ends with the
//! C tool's status (the event's, or -1 for a failed call).

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

use clap::Args;
use ferroce::cm::{CmEvent, CmId, EventChannel, PortSpace};
use ferroce::{BackendKind, CompletionQueue, Context, DeviceConfig, WcStatus, WorkCompletion};

use crate::cmd::qos::QosArgs;
use crate::error::{Error, open_device};

/// The timeout the C tools give `rdma_resolve_addr` and
/// `rdma_resolve_route` (2000 ms).
pub(crate) const RESOLVE_TIMEOUT: Duration = Duration::from_millis(2000);

/// Longest wait for the next rdma_cm event or completion, except while a
/// server waits for its clients (it waits as long as the C tools do:
/// forever). The C tools never give up; a ferroce run says what it was
/// waiting for instead of hanging. Longer than the CM's own limit, so
/// that an unanswered REQ or SIDR_REQ ends as in the C tools, with
/// UNREACHABLE (a REQ to an address nobody serves: 98 s, measured).
pub(crate) const STALL: Duration = Duration::from_secs(120);

/// The status of a failed call (the C tools return librdmacm's -1).
pub(crate) const CALL_FAILED: i32 = -1;
/// The status of a wait that gave up (-ETIMEDOUT).
pub(crate) const TIMED_OUT: i32 = -110;
/// The status of a connect request beyond `-c` (-ENOMEM, as the C tools).
pub(crate) const NO_ROOM: i32 = -12;
/// The status of a test that cannot run as asked (-EINVAL).
pub(crate) const INVALID: i32 = -22;

/// Why a run ended early: the status the C tool would return. What went
/// wrong has been printed already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Failed(pub(crate) i32);

/// Says on stderr that `what` failed and why (the tools' `perror`), and
/// returns the status of a failed call.
pub(crate) fn call_failed(tool: &str, what: &str, err: impl std::fmt::Display) -> Failed {
    eprintln!("{tool}: {what}: {err}");
    Failed(CALL_FAILED)
}

/// `-f`: the address formats the C tools take. Names and IP addresses
/// work alike here; AF_IB GIDs need an InfiniBand subnet.
pub(crate) fn check_format(format: Option<&str>) -> Result<(), Error> {
    let Some(f) = format else { return Ok(()) };
    let f = f.to_ascii_lowercase();
    if f.starts_with("gid") {
        return Err(Error::Usage(
            "-f gid (AF_IB addressing) needs an InfiniBand subnet; ferroce speaks RoCE: \
             give IP addresses or host names (-f ip or -f name)"
                .into(),
        ));
    }
    if !(f.starts_with("ip") || f.starts_with("name")) {
        eprintln!("Warning: unknown address format");
    }
    Ok(())
}

/// `strtoul(s, NULL, 0)` for the one-byte options (`-t`, `-a`): decimal,
/// `0x` hex or leading-0 octal, refused (rather than truncated) above 255.
pub(crate) fn parse_byte(s: &str) -> Result<u8, String> {
    let t = s.trim();
    let parsed = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        u64::from_str_radix(&t[1..], 8)
    } else {
        t.parse()
    };
    let v = parsed.map_err(|_| format!("{s:?} is not a number (decimal, 0x hex or 0 octal)"))?;
    u8::try_from(v).map_err(|_| format!("{v} does not fit in a byte (0 ..= 255)"))
}

/// `-s HOST` / `-b HOST`: an IP address or a name, resolved to its first
/// address, with `port`.
pub(crate) fn resolve(flag: &str, host: &str, port: u16) -> Result<SocketAddr, Error> {
    let name = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = name.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (name, port)
        .to_socket_addrs()
        .map_err(|e| Error::Usage(format!("{flag} {host:?}: cannot resolve it ({e})")))?
        .next()
        .ok_or_else(|| Error::Usage(format!("{flag} {host:?} has no address")))
}

/// A listening ID, and the devices a wildcard listen opened for it.
pub(crate) struct Listener {
    _id: CmId,
    // Dropped after the ID: they keep the wildcard listen reachable.
    _devices: Vec<Context>,
}

/// `--raw` of the rdma_cm tools, with the raw backend's QoS flags.
#[derive(Debug, Args, Clone, Copy, Default)]
pub(crate) struct RawArgs {
    /// Open the device on the raw-Ethernet backend (needs CAP_NET_RAW):
    /// frames built by ferroce, RoCE v2 or, with the port's
    /// default_roce_mode set to `IB/RoCE v1` (`ferroce config`), RoCE v1
    /// (ferroce's, not the C tool's). The device is on the local address,
    /// or on a client's route to its server.
    #[arg(long)]
    pub(crate) raw: bool,
    /// VLAN, priorities and PFC (with --raw).
    #[command(flatten)]
    pub(crate) qos: QosArgs,
}

impl RawArgs {
    /// With `--raw`, the raw device the run holds: on `local` (the tool's
    /// `local_flag`), or for a client without one on the address the
    /// routing table uses towards `server`. rdma_cm binds its IDs to the
    /// device the process has on an address, and opens a UDP-backend one
    /// only where it has none, so this must come before the first ID
    /// resolves or binds. A server needs its address: the raw backend
    /// opens one interface, not every one.
    pub(crate) fn open(
        &self,
        local: Option<IpAddr>,
        local_flag: &str,
        server: Option<IpAddr>,
    ) -> Result<Option<Context>, Error> {
        if !self.raw {
            return Ok(None);
        }
        let at = match (local, server) {
            (Some(ip), _) if !ip.is_unspecified() => ip,
            (_, Some(dst)) => source_towards(dst, local_flag)?,
            _ => {
                return Err(Error::Usage(format!(
                    "--raw as a server needs the address to serve on (the raw backend opens \
                     the one interface that holds it): add {local_flag} ADDRESS"
                )));
            }
        };
        open_device(DeviceConfig {
            backend: BackendKind::Raw,
            raw: self.qos.options(),
            ..DeviceConfig::new(at)
        })
        .map(Some)
    }
}

/// The local address the routing table uses towards `dst` (a connected
/// UDP socket; nothing is sent). `flag` is the tool's option that gives
/// the source address instead.
pub(crate) fn source_towards(dst: IpAddr, flag: &str) -> Result<IpAddr, Error> {
    let any: IpAddr = if dst.is_ipv6() {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    let no_route = |e: std::io::Error| {
        Error::Run(format!(
            "no route to {dst} ({e}): add a route, or give the source address with {flag}"
        ))
    };
    let socket = UdpSocket::bind(SocketAddr::new(any, 0)).map_err(no_route)?;
    socket
        .connect(SocketAddr::new(dst, 4791))
        .map_err(no_route)?;
    Ok(socket.local_addr().map_err(no_route)?.ip().to_canonical())
}

/// `rdma_bind_addr` and `rdma_listen` on `bind` (the unspecified address:
/// every device) and `port`. A ferroce process receives RoCE only on the
/// devices it opened, and a wildcard listener listens on those: so a
/// wildcard listen first opens a device on every address of the family of
/// every interface that is up (what the kernel's rxe serves is every
/// netdev it was added to), skipping, with a note, those another process
/// holds.
pub(crate) fn listen(
    tool: &str,
    ch: &EventChannel,
    ps: PortSpace,
    bind: Option<IpAddr>,
    port: u16,
) -> Result<Listener, Failed> {
    let ip = bind.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let devices = if ip.is_unspecified() {
        open_every_device(tool, ip.is_ipv6())?
    } else {
        Vec::new()
    };
    let id = ch
        .create_id(ps)
        .map_err(|e| call_failed(tool, "listen request failed", e))?;
    id.bind_addr(SocketAddr::new(ip, port))
        .map_err(|e| call_failed(tool, "bind address failed", e))?;
    id.listen(0)
        .map_err(|e| call_failed(tool, "failure trying to listen", e))?;
    Ok(Listener {
        _id: id,
        _devices: devices,
    })
}

/// The addresses a wildcard server opens devices on: those of the family
/// (`v6`) of every interface that is up; with `loopback` false, not those of
/// loopback interfaces nor IPv6 link-local ones (which need a scope) or ::1.
/// What `cmatose`, `udaddy`, `rdma-server` and `rping` share.
pub(crate) fn wildcard_addresses(v6: bool, loopback: bool) -> std::io::Result<Vec<IpAddr>> {
    let local_only = |a: &IpAddr| matches!(a, IpAddr::V6(a) if (a.segments()[0] & 0xffc0) == 0xfe80 || a.is_loopback());
    Ok(ferroce::netif::interfaces()?
        .iter()
        .filter(|i| i.up && (loopback || !i.loopback))
        .flat_map(|i| i.addrs.iter().copied())
        .filter(|a| a.is_ipv6() == v6 && (loopback || !local_only(a)))
        .collect())
}

/// A device on every address of the family on every interface that is up.
fn open_every_device(tool: &str, v6: bool) -> Result<Vec<Context>, Failed> {
    let addrs = wildcard_addresses(v6, true)
        .map_err(|e| call_failed(tool, "listing the network interfaces", e))?;
    let mut devices = Vec::new();
    for addr in addrs {
        match open_device(DeviceConfig::new(addr)) {
            Ok(ctx) => devices.push(ctx),
            Err(e) => eprintln!("{tool}: not listening on {addr}: {e}"),
        }
    }
    if devices.is_empty() {
        eprintln!(
            "{tool}: no device could be opened for the wildcard listen (no interface is up, \
             or other processes hold UDP port 4791 on every address): give -b ADDRESS"
        );
        return Err(Failed(CALL_FAILED));
    }
    Ok(devices)
}

/// The next event on `ch`: without a limit (a server waiting for its
/// clients), or giving up after [`STALL`] saying what was awaited.
pub(crate) fn next_event(
    tool: &str,
    ch: &EventChannel,
    forever: bool,
    awaited: &str,
) -> Result<CmEvent, Failed> {
    let got = if forever {
        ch.get_event().map(Some)
    } else {
        ch.get_event_timeout(STALL)
    };
    match got {
        Ok(Some(event)) => Ok(event),
        Ok(None) => {
            eprintln!(
                "{tool}: no rdma_cm event for {} s while waiting for {awaited} (is the peer \
                 still running?)",
                STALL.as_secs()
            );
            Err(Failed(TIMED_OUT))
        }
        Err(e) => Err(call_failed(tool, "failure in rdma_get_cm_event", e)),
    }
}

/// Takes `count` completions from `cq`, giving each to `each` (which may
/// refuse it), as the tools' `poll_cqs` does for one connection. A failed
/// completion ends the run (the C tools count it and go on); so does
/// [`STALL`] without one.
pub(crate) fn take_completions(
    tool: &str,
    conn: usize,
    cq: &CompletionQueue,
    count: u32,
    mut each: impl FnMut(&WorkCompletion) -> Result<(), Failed>,
) -> Result<(), Failed> {
    let mut done = 0;
    let mut last = Instant::now();
    while done < count {
        let left = STALL.saturating_sub(last.elapsed());
        let wcs = cq
            .wait(8.min((count - done) as usize), left)
            .map_err(|e| call_failed(tool, "failed polling CQ", e))?;
        if wcs.is_empty() && left.is_zero() {
            eprintln!(
                "{tool}: connection {conn}: {done} of {count} completions after waiting {} s \
                 for the next (is the peer still running?)",
                STALL.as_secs()
            );
            return Err(Failed(TIMED_OUT));
        }
        for wc in &wcs {
            if wc.status != WcStatus::Success {
                eprintln!(
                    "{tool}: connection {conn}: a {:?} completed with status \"{}\" ({})",
                    wc.opcode,
                    wc.status,
                    wc.status.code()
                );
                return Err(Failed(CALL_FAILED));
            }
            each(wc)?;
        }
        if !wcs.is_empty() {
            done += wcs.len() as u32;
            last = Instant::now();
        }
    }
    Ok(())
}

/// The tools' last lines, after `run` (which creates and destroys the
/// test's IDs and resources between "test complete" and "return status",
/// as the C tools do): success, or the exit with the C tool's status (its
/// low byte, as `return ret` from `main` gives it: 8 for a REJ with reason
/// 8, 146 for -ETIMEDOUT, 255 for -1).
pub(crate) fn finish(status: i32) -> Result<bool, Error> {
    println!("return status {status}");
    if status == 0 {
        return Ok(true);
    }
    let _ = std::io::stdout().flush();
    let code = match status & 0xff {
        0 => 1, // a status the low byte would call success
        c => c,
    };
    std::process::exit(code);
}

/// The status of a run's result.
pub(crate) fn status(result: Result<(), Failed>) -> i32 {
    result.err().map_or(0, |Failed(s)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_parse_as_strtoul_with_base_0() {
        assert_eq!(parse_byte("32"), Ok(32));
        assert_eq!(parse_byte("0x20"), Ok(32));
        assert_eq!(parse_byte("040"), Ok(32));
        assert_eq!(parse_byte("0"), Ok(0));
        assert!(parse_byte("256").unwrap_err().contains("0 ..= 255"));
        assert!(parse_byte("ten").is_err());
    }

    #[test]
    fn gid_addresses_are_refused_and_ip_names_taken() {
        assert!(check_format(Some("gid")).is_err());
        assert!(check_format(Some("ip")).is_ok());
        assert!(check_format(Some("name")).is_ok());
        assert!(check_format(None).is_ok());
    }

    #[test]
    fn hosts_resolve_with_the_port() {
        let a = resolve("-s", "127.0.0.9", 7471).unwrap();
        assert_eq!(a, "127.0.0.9:7471".parse().unwrap());
        let a = resolve("-s", "[::1]", 7174).unwrap();
        assert_eq!(a, "[::1]:7174".parse().unwrap());
        assert!(resolve("-s", "no-such-host.invalid", 1).is_err());
    }
}
