//! What a process's exit does to its rdma_cm connections. The kernel
//! destroys a process's rdma_cm IDs when its descriptor of
//! `/dev/infiniband/rdma_cm` closes, so a peer learns at once (a DREQ)
//! that a connection's process is gone. ferroce's IDs live in the process,
//! so at a normal exit (return from `main`, `exit`) this library's
//! destructor does the same: the DREQ of every connected ID (then a brief
//! wait for the DREPs), the DREP an ID owes for a DREQ it received (qperf's
//! server exits so), and what IDs destroyed just before owe (the driver
//! thread would have sent it in its next round); the peer gets
//! DISCONNECTED promptly rather than after its own timeout.
//!
//! The destructor runs after the application's own `atexit` handlers (it
//! is in this library's `.fini_array`, which the loader runs after them);
//! other threads may still run meanwhile or be stopped anywhere, so it
//! takes no lock it would wait on for long and bounds its wait (to about
//! 200 ms). A process killed by a signal runs no destructor: its peers
//! wait for their own timeouts (see the README's librdmacm section). A
//! child forked from the process leaves the connections alone: they are
//! its parent's.
//!
//! Same contract as `rdmacm.rs`.

use std::time::{Duration, Instant};

use ferroce::cm::CmId;

use super::guard;

/// How long the exit waits for the DREPs of its DREQs (a peer on the same
/// host answers within a millisecond; one that does not is left to its
/// own DREQ handling, as the kernel leaves it after the process's exit).
const EXIT_WAIT: Duration = Duration::from_millis(100);

/// What the exit allows beyond [`EXIT_WAIT`] for the rounds that send.
const EXIT_SLACK: Duration = Duration::from_millis(100);

/// How often the exit looks whether the DREPs have come.
const EXIT_STEP: Duration = Duration::from_millis(1);

/// The destructor: a `.fini_array` entry, run at `exit` (and at unload).
#[used]
#[unsafe(link_section = ".fini_array")]
static DISCONNECT_AT_EXIT: extern "C" fn() = disconnect_at_exit;

/// Runs [`disconnect_all`] on a thread of its own: the exiting thread's
/// thread-locals (which the driver's code and its logging use) are already
/// destroyed when the destructors run. Gives up after a bound.
extern "C" fn disconnect_at_exit() {
    if !super::rdmacm::opened_here() {
        return;
    }
    guard((), || {
        let (done, wait) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("ferroce-exit".into())
            .spawn(move || {
                disconnect_all(EXIT_WAIT);
                let _ = done.send(());
            });
        if spawned.is_ok() {
            let _ = wait.recv_timeout(EXIT_WAIT + EXIT_SLACK);
        }
    });
}

/// Does to the process's IDs what the kernel does when the process's
/// rdma_cm descriptor closes: each connected ID sends its DREQ (and the
/// exit waits up to `wait` for the DREPs, as the process will not be there
/// to resend it); then every ID's communication ends as destroying the ID
/// would (the DREP owed for a DREQ received, a REJ for a connection being
/// set up), and what IDs destroyed just before owe is sent too.
pub(super) fn disconnect_all(wait: Duration) {
    if !super::rdmacm::opened_here() {
        // No rdma_cm here, or a forked child's copy of its parent's.
        return;
    }
    let live: Vec<CmId> = {
        // Another thread holds the list only for a moment; one stopped
        // inside it would hold it for ever, so do not wait for it.
        let Some(list) = try_ids() else {
            return;
        };
        list.iter().map(|(id, _)| id.clone()).collect()
    };
    let pending: Vec<&CmId> = live
        .iter()
        .filter(|id| id.is_connected() && id.disconnect().is_ok())
        .collect();
    let deadline = Instant::now() + wait;
    while pending.iter().any(|id| id.is_connected()) && Instant::now() < deadline {
        std::thread::sleep(EXIT_STEP);
    }
    for id in &live {
        id.abandon();
    }
    for device in super::rdmacm::opened_devices() {
        device.flush_now();
    }
}

/// The live IDs, unless another thread holds the list for longer than a
/// few milliseconds.
fn try_ids() -> Option<std::sync::MutexGuard<'static, Vec<(CmId, usize)>>> {
    let deadline = Instant::now() + Duration::from_millis(10);
    loop {
        if let Some(g) = crate::rdmacm::objects::try_ids() {
            return Some(g);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(EXIT_STEP);
    }
}
