//! Every environment variable the `ferroce` crate, the C libraries
//! (`libibverbs.so.1`, `librdmacm.so.1`) and the `ferroce` command read
//! about themselves, in one place: each name is a constant whose doc says
//! what it does, the values it takes and its default (the book's
//! Configuration page lists the same text).
//!
//! Contract: the environment is read once, at the first [`Env::get`], and
//! never again; the code that acts on a setting takes the parsed value
//! ([`crate::DeviceConfig::gso`], [`crate::RawOptions`]'s test knobs,
//! [`crate::BackendKind::from_env`] ...), never the variable. A value that
//! is not one of those a variable takes is a warning naming the variable
//! and the values it takes ([`Env::warnings`]; logged at `warn` when
//! parsed, and printed on stderr by the C libraries, which log nothing
//! without [`LOG`]); the variable then has its default, except
//! [`BACKEND`], whose bad value fails the opening of a device.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use crate::BackendKind;

/// `FERROCE_DEVICES`, read by `libibverbs.so.1`: the devices, one per
/// address, comma- or space-separated (`127.0.0.1,::1`); default
/// `127.0.0.1`; named `ferroce0`, `ferroce1`, ... in that order. A word
/// that is not an address is left out with a warning; an address that is
/// not the host's is left out.
pub const DEVICES: &str = "FERROCE_DEVICES";

/// The device address when [`DEVICES`] is unset.
pub const DEFAULT_DEVICES: &str = "127.0.0.1";

/// `FERROCE_BACKEND`, read by `libibverbs.so.1` and `librdmacm.so.1` (and
/// the devices rdma_cm opens for an address): `udp` (RoCE v2 through UDP
/// sockets; also when unset or empty) or `raw` (the raw-Ethernet backend;
/// needs root). Another value fails `ibv_open_device` and
/// `rdma_resolve_addr` with EINVAL and a message on stderr.
pub const BACKEND: &str = "FERROCE_BACKEND";

/// `FERROCE_CONFIG`, read by the libraries and `ferroce`: when set (not
/// empty), the only settings file read and written for rdma_cm's
/// `default_roce_mode` and `default_roce_tos`; else
/// `/etc/ferroce/rdma_cm.conf` and the user's file
/// ([`crate::roce_config::SettingsPaths`]).
pub const CONFIG: &str = "FERROCE_CONFIG";

/// `FERROCE_LOG`, read by `ferroce` and `libibverbs.so.1`: a `tracing`
/// `EnvFilter` (`debug`, `ferroce_core=trace`), the log on stderr; for
/// `ferroce` it overrides `-v`/`-q`; unset or empty, the library prints
/// nothing.
pub const LOG: &str = "FERROCE_LOG";

/// `FERROCE_GSO`, read for every device (`ferroce::Context`): `0` (or
/// `off`, `false`, `no`) turns off UDP GSO trains
/// (`DeviceConfig::gso = false`), so that a capture on `lo` shows every
/// packet; `1` (`on`, `true`, `yes`) or unset: on.
pub const GSO: &str = "FERROCE_GSO";

/// `XDG_CONFIG_HOME`, read by the libraries and `ferroce`: where the
/// user's settings file lives (`$XDG_CONFIG_HOME/ferroce/rdma_cm.conf`;
/// unset or relative: `~/.config/ferroce/rdma_cm.conf`, from `HOME`).
pub const XDG_CONFIG_HOME: &str = "XDG_CONFIG_HOME";

/// `HOME`: the user's home directory, for the settings file when
/// [`XDG_CONFIG_HOME`] is unset.
pub const HOME: &str = "HOME";

/// `FERROCE_RAW_DROP_ONE_IN=N`, a test-only knob: a raw device drops one
/// frame in N that it sends, at random (counted in `tx_injected_drops`);
/// unset or 0: none. Not for production use.
pub const RAW_DROP_ONE_IN: &str = "FERROCE_RAW_DROP_ONE_IN";

/// `FERROCE_RAW_SLOW_RX_US=N`, a test-only knob: a raw device's receive
/// takes at most 8 frames from the ring, then sleeps N µs, watching its
/// backlog (and sending XOFF/XON) every 50 µs meanwhile; unset: a normal
/// receive. Not for production use.
pub const RAW_SLOW_RX_US: &str = "FERROCE_RAW_SLOW_RX_US";

/// The parsed environment (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Env {
    /// [`DEVICES`] as set, else [`DEFAULT_DEVICES`].
    pub devices: String,
    /// [`BACKEND`]: the backend, or the error that names the variable and
    /// the values it takes.
    pub backend: Result<BackendKind, String>,
    /// [`CONFIG`], when set and not empty.
    pub config: Option<PathBuf>,
    /// [`XDG_CONFIG_HOME`], when set and not empty.
    pub xdg_config_home: Option<PathBuf>,
    /// [`HOME`], when set and not empty.
    pub home: Option<PathBuf>,
    /// [`LOG`], when set and not blank.
    pub log: Option<String>,
    /// [`GSO`]: UDP GSO trains on.
    pub gso: bool,
    /// [`RAW_DROP_ONE_IN`] (0: no frame is dropped on purpose).
    pub raw_drop_one_in: u32,
    /// [`RAW_SLOW_RX_US`] (`None`: receives are not slowed).
    pub raw_slow_rx: Option<Duration>,
    /// One line per bad value: the variable, what it was, what it takes.
    pub warnings: Vec<String>,
}

impl Env {
    /// The process's environment, read and parsed at the first call; its
    /// warnings are logged then.
    pub fn get() -> &'static Self {
        static ENV: OnceLock<Env> = OnceLock::new();
        ENV.get_or_init(|| {
            let env = Self::parse(|name| std::env::var_os(name));
            for w in &env.warnings {
                tracing::warn!("{w}");
            }
            env
        })
    }

    /// The settings `lookup` (a variable's value, `None` when unset)
    /// gives; [`get`](Self::get) with the process's environment.
    pub fn parse(lookup: impl Fn(&str) -> Option<OsString>) -> Self {
        let text = |name: &str| {
            lookup(name)
                .map(|v| v.to_string_lossy().into_owned())
                .filter(|v| !v.trim().is_empty())
        };
        let path = |name: &str| lookup(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let mut warnings = Vec::new();
        let devices = text(DEVICES).unwrap_or_else(|| DEFAULT_DEVICES.into());
        let bad: Vec<&str> = device_words(&devices)
            .filter(|w| w.parse::<std::net::IpAddr>().is_err())
            .collect();
        if !bad.is_empty() {
            warnings.push(format!(
                "{DEVICES}={devices:?}: {bad:?} left out, not IP addresses: set it to \
                 addresses separated by commas or spaces (127.0.0.1,::1)"
            ));
        }
        let backend =
            BackendKind::parse(&text(BACKEND).unwrap_or_default()).map_err(|e| e.to_string());
        let gso = match text(GSO) {
            None => true,
            Some(v) => parse_switch(&v).unwrap_or_else(|| {
                warnings.push(format!(
                    "{GSO}={v:?} is not a switch: set it to 0 (off, false, no) or 1 (on, true, \
                     yes); GSO stays on"
                ));
                true
            }),
        };
        let mut number = |name: &str, what: &str| {
            let v = text(name)?;
            match v.trim().parse::<u32>() {
                Ok(n) => Some(n),
                Err(_) => {
                    warnings.push(format!(
                        "{name}={v:?} is not a whole number: set it to {what}; ignored"
                    ));
                    None
                }
            }
        };
        let raw_drop_one_in =
            number(RAW_DROP_ONE_IN, "N, to drop one frame in N (0: none)").unwrap_or(0);
        let raw_slow_rx = number(RAW_SLOW_RX_US, "the microseconds each receive sleeps")
            .map(|us| Duration::from_micros(us.into()));
        Self {
            devices,
            backend,
            config: path(CONFIG),
            xdg_config_home: path(XDG_CONFIG_HOME),
            home: path(HOME),
            log: text(LOG),
            gso,
            raw_drop_one_in,
            raw_slow_rx,
            warnings,
        }
    }
}

/// The words of a [`DEVICES`] list.
pub fn device_words(spec: &str) -> impl Iterator<Item = &str> {
    spec.split([',', ' ', '\t']).filter(|w| !w.is_empty())
}

/// `0`/`off`/`false`/`no` or `1`/`on`/`true`/`yes`, any case.
fn parse_switch(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "0" | "off" | "false" | "no" => Some(false),
        "1" | "on" | "true" | "yes" => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Env {
        Env::parse(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        let e = env(&[]);
        assert_eq!(e.devices, DEFAULT_DEVICES);
        assert_eq!(e.backend, Ok(BackendKind::Udp));
        assert!(e.gso && e.config.is_none() && e.log.is_none());
        assert_eq!((e.raw_drop_one_in, e.raw_slow_rx), (0, None));
        assert!(e.warnings.is_empty());
    }

    #[test]
    fn values_are_parsed() {
        let e = env(&[
            (DEVICES, "127.0.0.2,::1"),
            (BACKEND, "raw"),
            (GSO, "0"),
            (CONFIG, "/tmp/x.conf"),
            (LOG, "debug"),
            (RAW_DROP_ONE_IN, "40"),
            (RAW_SLOW_RX_US, "1000"),
        ]);
        assert_eq!(e.devices, "127.0.0.2,::1");
        assert_eq!(e.backend, Ok(BackendKind::Raw));
        assert!(!e.gso);
        assert_eq!(e.config, Some(PathBuf::from("/tmp/x.conf")));
        assert_eq!(e.log.as_deref(), Some("debug"));
        assert_eq!(e.raw_drop_one_in, 40);
        assert_eq!(e.raw_slow_rx, Some(Duration::from_millis(1)));
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    }

    #[test]
    fn bad_values_warn_naming_the_variable_and_keep_defaults() {
        let e = env(&[
            (GSO, "maybe"),
            (RAW_DROP_ONE_IN, "often"),
            (DEVICES, "127.0.0.1 lo"),
        ]);
        assert!(e.gso);
        assert_eq!(e.raw_drop_one_in, 0);
        assert_eq!(e.warnings.len(), 3, "{:?}", e.warnings);
        assert!(e.warnings[0].contains("FERROCE_DEVICES") && e.warnings[0].contains("\"lo\""));
        assert!(
            e.warnings[1].contains("FERROCE_GSO=\"maybe\"") && e.warnings[1].contains("0 (off")
        );
        assert!(e.warnings[2].contains("FERROCE_RAW_DROP_ONE_IN"));
        let bad = env(&[(BACKEND, "rxe")]).backend.unwrap_err();
        assert!(
            bad.contains("FERROCE_BACKEND=\"rxe\" names no backend"),
            "{bad}"
        );
    }
}
