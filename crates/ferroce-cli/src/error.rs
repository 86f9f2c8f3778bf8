//! The command's error: each variant names what went wrong and, where there
//! is one, the way out. `main` prints it after `ferroce: ` and exits 2.

use std::io;
use std::net::{IpAddr, SocketAddr};

use crate::capture::CaptureError;

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The command line asks for something that cannot run.
    #[error("{0}")]
    Usage(String),
    /// Another process holds the RoCE UDP port on this address.
    #[error(
        "UDP port {port} on {addr} is taken (another ferroce process, or the kernel's \
         rdma_rxe, already uses that address): give this one another local address \
         with -L (e.g. 127.0.0.3 on loopback)"
    )]
    AddrTaken { addr: IpAddr, port: u16 },
    /// The address is not one of this machine's.
    #[error(
        "{addr} is not an address of this machine, so no device can bind it: give -L an \
         address `ip addr` lists (on loopback, any 127.0.0.x)"
    )]
    NotLocal { addr: IpAddr },
    /// The device could not be opened for another reason.
    #[error("opening a device on {addr}: {source}")]
    Device {
        addr: IpAddr,
        source: ferroce::Error,
    },
    /// A verbs call failed.
    #[error(transparent)]
    Verbs(#[from] ferroce::Error),
    /// The server did not accept a connection in time.
    #[error("cannot connect to {addr} within {secs} s: {source} (is a server listening there?)")]
    Connect {
        addr: SocketAddr,
        secs: u64,
        source: io::Error,
    },
    /// The server's TCP port could not be bound.
    #[error(
        "listening on TCP {addr}: {source} (is another server using it? choose another \
         port with -p)"
    )]
    Listen { addr: SocketAddr, source: io::Error },
    /// A server refuses a client that sent nothing usable; it serves on.
    #[error("{0}")]
    Refused(String),
    /// The two sides' TCP exchange failed.
    #[error("exchange with {peer}: {what}")]
    Exchange { peer: String, what: String },
    /// Client and server were started for different tests.
    #[error("{0}")]
    Mismatch(String),
    /// A capture could not be read or written.
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// Standard I/O or TCP.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The run itself failed (a stall, an error completion, bad data).
    #[error("{0}")]
    Run(String),
}

impl From<String> for Error {
    fn from(s: String) -> Self {
        Self::Run(s)
    }
}

impl From<&str> for Error {
    fn from(s: &str) -> Self {
        Self::Run(s.to_owned())
    }
}

/// Opens a device, saying plainly when its UDP port is taken.
pub(crate) fn open_device(cfg: ferroce::DeviceConfig) -> Result<ferroce::Context, Error> {
    ferroce::Context::open_with(cfg).map_err(|source| match &source {
        ferroce::Error::Io(e) if e.kind() == io::ErrorKind::AddrInUse => Error::AddrTaken {
            addr: cfg.local,
            port: cfg.port,
        },
        ferroce::Error::Io(e) if e.kind() == io::ErrorKind::AddrNotAvailable => {
            Error::NotLocal { addr: cfg.local }
        }
        _ => Error::Device {
            addr: cfg.local,
            source,
        },
    })
}
