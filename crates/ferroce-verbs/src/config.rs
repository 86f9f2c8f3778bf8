//! Which devices exist: one per address in `FERROCE_DEVICES` (a comma- or
//! space-separated list, e.g. `127.0.0.1` or `127.0.0.2,::1`), default
//! `127.0.0.1`, named `ferroce0`, `ferroce1`, ... in that order. An
//! address that is not one of this host's is left out (it could not be
//! opened), so the names of the others do not move. The environment is
//! read through [`ferroce::env`] (once, for the whole process), at the
//! first `ibv_get_device_list` or unsupported verb, where the warnings of
//! bad values go to stderr.

use std::net::IpAddr;
use std::sync::{Mutex, OnceLock};

use crate::abi::*;
use crate::objects::{Device, OpenDevice};

pub use ferroce::env::{DEFAULT_DEVICES as DEFAULT_DEVICE, DEVICES as DEVICES_VAR, LOG as LOG_VAR};

/// The addresses in `spec`; words that are not addresses are skipped
/// ([`ferroce::env::Env`] warns of them).
pub fn parse_devices(spec: &str) -> Vec<IpAddr> {
    ferroce::env::device_words(spec)
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// Installs a stderr subscriber if [`LOG_VAR`] is set (and the process has
/// none yet), and says the environment's bad values on stderr, once: at
/// the first device lookup, or at the first call of a verb ferroce does
/// not have (which may come before any).
pub(crate) fn init_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(init_subscriber);
}

fn init_subscriber() {
    let env = ferroce::env::Env::get();
    // On stderr, not only in the log: without FERROCE_LOG there is none,
    // and a value that does nothing should not go unnoticed.
    for w in &env.warnings {
        eprintln!("libibverbs (ferroce): {w}");
    }
    let Some(spec) = &env.log else { return };
    match tracing_subscriber::EnvFilter::try_new(spec) {
        Ok(filter) => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .try_init();
        }
        Err(e) => eprintln!(
            "libibverbs (ferroce): {LOG_VAR}={spec:?} is not a log filter ({e}): use a level \
             (error, warn, info, debug, trace) or target=level pairs such as ferroce_core=debug"
        ),
    }
}

/// The process's devices (built on first use, then fixed).
pub(crate) fn devices() -> &'static [&'static Device] {
    static DEVICES: OnceLock<Vec<&'static Device>> = OnceLock::new();
    DEVICES.get_or_init(|| {
        init_logging();
        parse_devices(&ferroce::env::Env::get().devices)
            .into_iter()
            .filter(|&addr| ferroce::query_device(addr).is_ok())
            .enumerate()
            .map(|(i, addr)| &*Box::leak(Box::new(device(i, addr))))
            .collect()
    })
}

/// The device's `dev_name`, which names a uverbs character device under
/// `/dev/infiniband/` (rxe's: `uverbs0`). ferroce has none, and UCX takes
/// a device only if `/dev/infiniband/<dev_name>` is a character device the
/// user may read and write: this name leads from that directory to
/// `/dev/null`, which every user may. So UCX finds ferroce's devices
/// wherever `/dev/infiniband` exists (any host with the kernel's RDMA
/// stack loaded; elsewhere `mkdir /dev/infiniband`, once, as root).
pub const UVERBS_NAME: &str = "../null";

fn device(index: usize, addr: IpAddr) -> Device {
    let name = format!("ferroce{index}");
    Device {
        dev: ibv_device {
            _ops: _ibv_device_ops {
                _dummy1: 0,
                _dummy2: 0,
            },
            node_type: NODE_CA,
            transport_type: TRANSPORT_IB,
            name: c_chars(&name),
            dev_name: c_chars(UVERBS_NAME),
            // No uverbs device: no sysfs paths to read (rxe's are
            // /sys/class/infiniband_verbs/uverbsN and /sys/class/infiniband/rxeN).
            dev_path: [0; SYSFS_PATH_MAX],
            ibdev_path: c_chars(&format!("/sys/class/infiniband/{name}")),
        },
        addr,
        open: Mutex::new(OpenDevice::default()),
    }
}

/// `s` as a NUL-terminated C string in a fixed array (cut to fit).
pub(crate) fn c_chars<const N: usize>(s: &str) -> [std::ffi::c_char; N] {
    let mut out = [0; N];
    for (o, b) in out.iter_mut().zip(s.bytes().take(N - 1)) {
        *o = b as std::ffi::c_char;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_skips_junk() {
        let v = parse_devices("127.0.0.1, ::1 nonsense,,127.0.0.2");
        let want: Vec<IpAddr> = ["127.0.0.1", "::1", "127.0.0.2"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(v, want);
        assert!(parse_devices("").is_empty());
    }

    #[test]
    fn names_are_cut_and_terminated() {
        let a: [std::ffi::c_char; 4] = c_chars("ferroce0");
        assert_eq!(a, [b'f' as _, b'e' as _, b'r' as _, 0]);
    }
}
