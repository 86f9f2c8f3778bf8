//! rdma_cm's per-port RoCE settings, `default_roce_mode` and
//! `default_roce_tos`, as the kernel keeps them in configfs
//! (`/sys/kernel/config/rdma_cm/<device>/ports/<port>/...`), kept by
//! ferroce in a settings file of the same shape.
//!
//! The rdma_cm layer asks [`RoceSettings::load`] once and then
//! [`RoceSettings::port`] for the device and port of each connection: a
//! connection that does not set its own ToS sends with the port's
//! `default_roce_tos` as its path's traffic class (the IP header's DSCP and
//! ECN bits, or a RoCE v1 GRH's traffic class), as the kernel's `cma.c`
//! does. `default_roce_mode` is the RoCE version (the kernel's default GID
//! type) of the connections an ID starts on the port: their MADs and their
//! QP's path. RoCE v1 needs a device on the raw-Ethernet backend; the file
//! may say it for any device, and an ID on a device of the UDP backend is
//! then refused when it resolves its address ([`SettingError::RoceV1OnUdp`]
//! says why). The passive side answers in the version of the request,
//! whatever its own port's mode.
//!
//! # The file
//!
//! One setting per line, its configfs path under `rdma_cm/` and the value
//! configfs would take, `#` starting a comment line:
//!
//! ```text
//! ferroce0/ports/1/default_roce_mode = RoCE v2
//! ferroce0/ports/1/default_roce_tos = 32
//! ```
//!
//! A plain file rather than TOML: its keys are the paths the documents
//! and `ferroce config set` use, its values the strings configfs takes,
//! checked by the same parsers, and rewriting one value leaves the rest of
//! the file (comments, order) as it was, with no dependency. Which files
//! are read and written: [`SettingsPaths`]. A missing file is no settings
//! (RoCE v2, ToS 0); a malformed one is an error naming the file, the line
//! and the fix, never skipped.
//!
//! Values are read as Linux 6.1's configfs reads them (checked in the rxe
//! rig): a mode is exactly `RoCE v2` or `IB/RoCE v1` (and here also
//! `RoCE v1`, the documents' and rdma-core's spelling); a ToS
//! is 0-255 in decimal, `0x` hex or `0` octal (`040` is 32), as
//! `kstrtou8(.., 0, ..)`; one trailing newline is allowed. In the file,
//! spaces around `=` are not part of the value.

use std::fmt;
use std::str::FromStr;

mod file;
#[cfg(test)]
mod tests;

pub use file::{ConfigError, RoceSettings, SettingsPaths, write_setting};

use crate::DEVICE_NAME;

/// The environment variable naming the one settings file to use
/// ([`crate::env::CONFIG`]).
pub const SETTINGS_ENV: &str = crate::env::CONFIG;
/// The settings file's name, in `/etc/ferroce/` and the user's
/// `~/.config/ferroce/`.
pub const FILE_NAME: &str = "rdma_cm.conf";
/// The system-wide settings file.
pub const SYSTEM_FILE: &str = "/etc/ferroce/rdma_cm.conf";
/// The ports of a ferroce device: one, port 1 (`phys_port_cnt`).
pub const PORTS: u8 = 1;

/// The RoCE version rdma_cm uses for a port's connections (configfs
/// `default_roce_mode`; the kernel calls it the default GID type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum RoceMode {
    /// RoCE v1: the IB transport over Ethernet (ethertype 0x8915).
    V1,
    /// RoCE v2: over UDP/IP (port 4791). The default.
    #[default]
    V2,
}

impl RoceMode {
    /// As configfs prints it (the kernel's GID type names).
    pub const fn as_configfs(self) -> &'static str {
        match self {
            Self::V1 => "IB/RoCE v1",
            Self::V2 => "RoCE v2",
        }
    }

    /// A mode as configfs takes it (one trailing newline allowed).
    pub fn parse(text: &str) -> Result<Self, SettingError> {
        match text.strip_suffix('\n').unwrap_or(text) {
            "RoCE v2" => Ok(Self::V2),
            "IB/RoCE v1" | "RoCE v1" => Ok(Self::V1),
            _ => Err(SettingError::BadMode(text.to_owned())),
        }
    }
}

impl fmt::Display for RoceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_configfs())
    }
}

impl FromStr for RoceMode {
    type Err = SettingError;
    fn from_str(s: &str) -> Result<Self, SettingError> {
        Self::parse(s)
    }
}

/// The settings of `port` of `device` from the files the environment
/// names: [`RoceSettings::load`] then [`RoceSettings::port`], for a caller
/// that wants one port once (rdma_cm resolving a route).
pub fn port_settings(device: &str, port: u8) -> Result<PortSettings, ConfigError> {
    Ok(RoceSettings::load()?.port(device, port))
}

/// A ToS as configfs takes it: `kstrtou8` with base 0 (decimal, `0x`
/// hex, a leading `0` octal; a `+` sign and one trailing newline allowed).
pub fn parse_tos(text: &str) -> Result<u8, SettingError> {
    let bad = || SettingError::BadTos(text.to_owned());
    let t = text.strip_suffix('\n').unwrap_or(text);
    let t = t.strip_prefix('+').unwrap_or(t);
    let (digits, radix) = if let Some(hex) = t.strip_prefix("0x").or(t.strip_prefix("0X")) {
        (hex, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        (&t[1..], 8)
    } else {
        (t, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(bad());
    }
    match u64::from_str_radix(digits, radix).map(u8::try_from) {
        Ok(Ok(tos)) => Ok(tos),
        _ => Err(SettingError::TosOutOfRange(text.to_owned())),
    }
}

/// One port's settings, as the rdma_cm layer uses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortSettings {
    /// `default_roce_mode`: the RoCE version of the connections the port
    /// starts (v1 only on the raw-Ethernet backend).
    pub mode: RoceMode,
    /// `default_roce_tos`: the traffic class (IPv4 TOS / IPv6 traffic
    /// class: DSCP and ECN) of connections that do not set their own.
    pub tos: u8,
}

/// A port's attributes, named as configfs names its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Attribute {
    /// `default_roce_mode`: [`PortSettings::mode`].
    DefaultRoceMode,
    /// `default_roce_tos`: [`PortSettings::tos`].
    DefaultRoceTos,
}

impl Attribute {
    /// Every attribute, in configfs's order.
    pub const ALL: [Self; 2] = [Self::DefaultRoceMode, Self::DefaultRoceTos];

    /// The configfs file name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::DefaultRoceMode => "default_roce_mode",
            Self::DefaultRoceTos => "default_roce_tos",
        }
    }

    /// This attribute's value in `p`, as configfs prints it.
    pub fn value_in(self, p: &PortSettings) -> String {
        match self {
            Self::DefaultRoceMode => p.mode.to_string(),
            Self::DefaultRoceTos => p.tos.to_string(),
        }
    }

    /// Parses `text` as this attribute's value and sets it in `p`.
    pub fn set_in(self, p: &mut PortSettings, text: &str) -> Result<(), SettingError> {
        match self {
            Self::DefaultRoceMode => p.mode = RoceMode::parse(text)?,
            Self::DefaultRoceTos => p.tos = parse_tos(text)?,
        }
        Ok(())
    }
}

impl FromStr for Attribute {
    type Err = SettingError;
    fn from_str(s: &str) -> Result<Self, SettingError> {
        Self::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| SettingError::UnknownAttribute(s.to_owned()))
    }
}

/// A setting's name: `<device>/ports/<port>/<attribute>`, its path under
/// configfs's `rdma_cm/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// [`DEVICE_NAME`].
    pub device: String,
    /// 1 to [`PORTS`].
    pub port: u8,
    /// Which of the port's settings.
    pub attribute: Attribute,
}

impl FromStr for Key {
    type Err = SettingError;
    /// Only ferroce's devices and ports: `ferroce0/ports/1/...`.
    fn from_str(s: &str) -> Result<Self, SettingError> {
        let parts: Vec<&str> = s.split('/').collect();
        let [device, "ports", port, attribute] = parts[..] else {
            return Err(SettingError::BadKey(s.to_owned()));
        };
        if device != DEVICE_NAME {
            return Err(SettingError::UnknownDevice(device.to_owned()));
        }
        let port = match port.parse::<u8>() {
            Ok(p) if (1..=PORTS).contains(&p) => p,
            _ => {
                return Err(SettingError::NoSuchPort {
                    device: device.to_owned(),
                    port: port.to_owned(),
                });
            }
        };
        Ok(Self {
            device: device.to_owned(),
            port,
            attribute: attribute.parse()?,
        })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/ports/{}/{}",
            self.device,
            self.port,
            self.attribute.name()
        )
    }
}

/// What is wrong with a setting; each message ends with the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingError {
    /// A line that is not `key = value`.
    NotKeyValue(String),
    /// A key not of the form `<device>/ports/<port>/<attribute>`.
    BadKey(String),
    /// A device other than [`DEVICE_NAME`].
    UnknownDevice(String),
    /// A port other than 1.
    NoSuchPort {
        /// The device named.
        device: String,
        /// The port asked for, as written.
        port: String,
    },
    /// An attribute configfs does not have.
    UnknownAttribute(String),
    /// Not a mode configfs takes.
    BadMode(String),
    /// Not a number as configfs takes it.
    BadTos(String),
    /// A number past 255.
    TosOutOfRange(String),
    /// `default_roce_mode` is RoCE v1 for a port whose device is on the
    /// UDP backend, which sends RoCE v2 only: reported when an ID resolves
    /// its address there.
    RoceV1OnUdp,
    /// The same key twice in one file.
    Duplicate {
        /// The key.
        key: String,
        /// The line that set it first.
        first_line: usize,
    },
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let example = "e.g. `ferroce0/ports/1/default_roce_tos = 32`";
        match self {
            Self::NotKeyValue(l) => write!(
                f,
                "`{l}` is not `<device>/ports/<port>/<attribute> = <value>`: write it so \
                 ({example}), or make it a comment with `#`"
            ),
            Self::BadKey(k) => write!(
                f,
                "`{k}` is not a setting: name it `<device>/ports/<port>/<attribute>`, as under \
                 /sys/kernel/config/rdma_cm ({example})"
            ),
            Self::UnknownDevice(d) => write!(
                f,
                "no device `{d}`: ferroce's device is {DEVICE_NAME} (`ferroce ibstat -l`)"
            ),
            Self::NoSuchPort { device, port } => {
                write!(f, "{device} has no port `{port}`: its only port is 1")
            }
            Self::UnknownAttribute(a) => write!(
                f,
                "no attribute `{a}`: a port has default_roce_mode and default_roce_tos"
            ),
            Self::BadMode(m) => write!(
                f,
                "`{}` is not a RoCE mode: write `RoCE v2` or `IB/RoCE v1` (exactly, as \
                 configfs takes them)",
                m.trim_end_matches('\n')
            ),
            Self::BadTos(t) => write!(
                f,
                "`{}` is not a ToS: write a number from 0 to 255 (decimal, 0x hex or 0 octal, \
                 as configfs takes it)",
                t.trim_end_matches('\n')
            ),
            Self::TosOutOfRange(t) => write!(
                f,
                "ToS {} is out of range: it is one byte of the IP header, 0 to 255",
                t.trim_end_matches('\n')
            ),
            Self::RoceV1OnUdp => write!(
                f,
                "default_roce_mode is RoCE v1, but the device is on the UDP backend, which \
                 sends RoCE v2 only: open it on the raw-Ethernet backend (`--raw` in the \
                 ferroce tools, DeviceConfig::backend = BackendKind::Raw), or set \
                 default_roce_mode to `RoCE v2` (`ferroce config set \
                 {DEVICE_NAME}/ports/1/default_roce_mode 'RoCE v2'`)"
            ),
            Self::Duplicate { key, first_line } => write!(
                f,
                "{key} is set again (first on line {first_line}): keep one of the two"
            ),
        }
    }
}

impl std::error::Error for SettingError {}
