//! What `ferroce cmatose`, `udaddy` and `mckey` share, as librdmacm's
//! `examples/common.c` serves ucmatose and udaddy: the listening ID (and
//! the devices a wildcard listen needs), waiting for events and
//! completions, and the end of a run ("test complete", "return status N",
//! exit status N as the C tools' `return ret` gives it).
//!
//! A failure in the middle of a run is reported where it happens, on the
//! line the C tool prints (its event lines on stdout) or, for what only
//! ferroce checks, on stderr naming the cause; the run then ends with the
//! C tool's status (the event's, or -1 for a failed call).

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use ferroce::cm::{CmEvent, CmId, EventChannel, PortSpace};
use ferroce::{CompletionQueue, Context, WcStatus, WorkCompletion};

use super::device::{open_on, open_wildcard};
use super::events::wait_event;
use crate::error::Error;

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

/// A listening ID, and the devices a wildcard listen opened for it.
pub(crate) struct Listener {
    _id: CmId,
    // Dropped after the ID: they keep the wildcard listen reachable.
    _devices: Vec<Context>,
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

/// A device on every address of the family on every interface that is up.
fn open_every_device(tool: &str, v6: bool) -> Result<Vec<Context>, Failed> {
    let all = open_wildcard(v6, true, |addr| open_on(addr, None, None))
        .map_err(|e| call_failed(tool, "listing the network interfaces", e))?;
    for (addr, e) in &all.skipped {
        eprintln!("{tool}: not listening on {addr}: {e}");
    }
    if all.opened.is_empty() {
        eprintln!(
            "{tool}: no device could be opened for the wildcard listen (no interface is up, \
             or other processes hold UDP port 4791 on every address): give -b ADDRESS"
        );
        return Err(Failed(CALL_FAILED));
    }
    Ok(all.opened.into_iter().map(|(_, ctx)| ctx).collect())
}

/// The next event on `ch`: without a limit (a server waiting for its
/// clients), or giving up after [`STALL`] saying what was awaited.
pub(crate) fn next_event(
    tool: &str,
    ch: &EventChannel,
    forever: bool,
    awaited: &str,
) -> Result<CmEvent, Failed> {
    match wait_event(ch, None, (!forever).then_some(STALL)) {
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
