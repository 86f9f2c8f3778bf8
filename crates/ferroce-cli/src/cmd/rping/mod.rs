//! `ferroce rping`: librdmacm's `rping` example, the same command line, the
//! same wire protocol and the same output, over `ferroce::cm`.
//!
//! # The protocol (rping's, from rdma-core's `librdmacm/examples/rping.c`)
//! The client connects through rdma_cm (TCP port space, port 7174 by
//! default, one read each way), then for each ping:
//! 1. fills its *start* buffer with `rdma-ping-N: ` and a run of ASCII
//!    letters that starts one letter later every ping ([`fill_ping`]), the
//!    last byte 0, and SENDs its address, R_Key and length (a 16-byte
//!    [`Info`], network order);
//! 2. the server RDMA READs that buffer into its own, prints it with `-v`
//!    (`server ping data: ...`), and SENDs a 16-byte "go ahead";
//! 3. the client SENDs the [`Info`] of its second (*rdma*) buffer;
//! 4. the server RDMA WRITEs the string it read (up to and with its NUL)
//!    there and SENDs another "go ahead";
//! 5. the client compares the two buffers with `-V`, prints `ping data:
//!    ...` with `-v`.
//!
//! After `-C` pings (0: forever) the client disconnects. The server serves
//! until its client disconnects and exits (with `-P`, every client, each
//! on a thread of its own, forever or for `--connections N`).
//!
//! # Where this differs from rping
//! - Without `-a` the server listens on every non-loopback address of the
//!   host (IPv4; `-a ::` IPv6), opening a ferroce device on each: a ferroce
//!   process has no devices until it opens them, and rping's wildcard
//!   listen serves every RDMA device of the host.
//! - The client waits (up to [`DISCONNECT_WAIT`], 30 s) for the DREP of
//!   its DREQ, so a lost DREQ is sent again; rping destroys its ID at once.
//! - A client whose server disconnects before `-C` pings fails (rping
//!   exits 0); with `-C 0` that is the normal end, as in rping.
//! - Exit status: 0, or 2 with the cause on stderr (rping: 255, and 22 for
//!   a bad option).
//! - Data from the peer is checked before use: a message of another size,
//!   a buffer larger than `-S`, a sink smaller than the data end the
//!   connection with the reason (rping's READ or WRITE would fail).

mod client;
mod conn;
mod server;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Args;
use ferroce::Context;

use super::{rdma_cm, tcp};
use crate::error::Error;

/// rping's default port.
pub(crate) const DEFAULT_PORT: u16 = 7174;
/// rping's smallest `-S`: room for `rdma-ping-2147483647: ` and its NUL
/// (`sizeof(stringify(INT_MAX)) + sizeof(RPING_MSG_FMT)`).
pub(crate) const MIN_SIZE: u32 = 26;
/// rping's largest `-S` (`RPING_BUFSIZE - 1`).
pub(crate) const MAX_SIZE: u32 = 64 * 1024 - 1;
/// How long the client waits for the DREP of its DREQ. The CM resends a
/// lost DREQ every 6 s or so (2 x packet life time + response timeout);
/// 30 s covers four resends. Leaving earlier, with the connection still
/// open on the server, makes the server's kernel take the next client of
/// this host with the same QPN for a stale connection (REJ reason 10:
/// seen against rxe under netem when the 10 s this was first lost a DREQ
/// twice).
pub(crate) const DISCONNECT_WAIT: Duration = Duration::from_secs(30);

/// Arguments of `ferroce rping` (rping's options).
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("role").required(true).args(["server", "client"])))]
pub(crate) struct RpingArgs {
    /// Server side. Without -a, listens on every non-loopback IPv4 address
    /// of the host (-a :: for IPv6).
    #[arg(short = 's')]
    pub(crate) server: bool,
    /// Client side (needs -a).
    #[arg(short = 'c')]
    pub(crate) client: bool,
    /// The server's address (a host name or an address): where the server
    /// listens, where the client connects.
    #[arg(short = 'a')]
    pub(crate) addr: Option<String>,
    /// The client's source address.
    #[arg(short = 'I')]
    pub(crate) source: Option<String>,
    /// The port (rdma_cm's TCP port space).
    #[arg(short = 'p', default_value_t = DEFAULT_PORT)]
    pub(crate) port: u16,
    /// Pings (0: until interrupted).
    #[arg(short = 'C', default_value_t = 0)]
    pub(crate) count: u32,
    /// Ping data size in bytes (26 to 65535); the server's must be at least
    /// the client's.
    #[arg(short = 'S', default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(i64::from(MIN_SIZE)..=i64::from(MAX_SIZE)))]
    pub(crate) size: u32,
    /// Print the ping data.
    #[arg(short = 'v')]
    pub(crate) verbose: bool,
    /// Validate the ping data (client).
    #[arg(short = 'V')]
    pub(crate) validate: bool,
    /// Debug lines (rping's DEBUG_LOG) on stdout.
    #[arg(short = 'd')]
    pub(crate) debug: bool,
    /// Persistent server: serve every client, each on its own thread.
    #[arg(short = 'P')]
    pub(crate) persistent: bool,
    /// Create the QP without the CM and move it with the CM's attributes
    /// (`rdma_init_qp_attr`), as rping -q.
    #[arg(short = 'q')]
    pub(crate) self_create_qp: bool,
    /// Persistent server: exit after this many connections have ended
    /// (ferroce's, not rping's; for scripts).
    #[arg(long, requires = "persistent")]
    pub(crate) connections: Option<u32>,
    /// UDP port this device receives RoCE on (4791; change only to run two
    /// devices on one address, such as ::1, with -a or -I given).
    #[arg(long, default_value_t = 4791)]
    pub(crate) roce_port: u16,
    /// UDP port the peer receives RoCE on.
    #[arg(long, default_value_t = 4791)]
    pub(crate) peer_roce_port: u16,
    /// Open the device on the raw-Ethernet backend (needs CAP_NET_RAW):
    /// frames built by ferroce, RoCE v2 or, with the port's
    /// default_roce_mode set to `IB/RoCE v1` (`ferroce config`), RoCE v1.
    #[arg(long)]
    pub(crate) raw: bool,
    /// VLAN, priorities and PFC (with --raw).
    #[command(flatten)]
    pub(crate) qos: crate::cmd::qos::QosArgs,
}

impl RpingArgs {
    /// Whether the devices use other RoCE ports than 4791.
    fn custom_ports(&self) -> bool {
        self.roce_port != 4791 || self.peer_roce_port != 4791
    }
}

/// What to print: rping's `-v` and `-d`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Print {
    pub(crate) verbose: bool,
    pub(crate) debug: bool,
}

impl Print {
    /// A DEBUG_LOG line (stdout, as rping).
    pub(crate) fn debug(self, line: std::fmt::Arguments<'_>) {
        if self.debug {
            println!("{line}");
        }
    }
}

pub(crate) fn run(args: &RpingArgs) -> Result<bool, Error> {
    let print = Print {
        verbose: args.verbose,
        debug: args.debug,
    };
    if args.server {
        server::run(args, print)
    } else {
        client::run(args, print)
    }
}

/// `-a`/`-I` as an address (`port` added).
pub(crate) fn address(what: &str, s: &str, port: u16) -> Result<SocketAddr, Error> {
    let a = tcp::resolve(s, port).map_err(|e| Error::Usage(format!("{what}: {e}")))?;
    Ok(SocketAddr::new(a.ip().to_canonical(), port))
}

/// Opens the device on `local` (the CM finds it there), saying plainly
/// when its port is taken.
pub(crate) fn open(args: &RpingArgs, local: IpAddr) -> Result<Context, Error> {
    let ports = (args.roce_port, args.peer_roce_port);
    rdma_cm::device::open_on(local, args.raw.then_some(&args.qos), Some(ports))
}

/// The ping data of ping `n` in a buffer of `size` bytes, as rping's client
/// fills it: `rdma-ping-N: `, then ASCII 'A' (65) to 'z' (122) over and
/// over from `first`, the last byte 0. Returns the next ping's `first`.
pub(crate) fn fill_ping(buf: &mut [u8], n: u32, first: u8) -> u8 {
    let prefix = format!("rdma-ping-{n}: ");
    let head = prefix.len().min(buf.len());
    buf[..head].copy_from_slice(&prefix.as_bytes()[..head]);
    let mut c = first;
    for b in &mut buf[head..] {
        *b = c;
        c = if c >= b'z' { b'A' } else { c + 1 };
    }
    if let Some(last) = buf.last_mut() {
        *last = 0;
    }
    if first >= b'z' { b'A' } else { first + 1 }
}

/// The bytes of `buf` before its first NUL (all of it if none), as rping's
/// `%s` prints them; bytes outside printable ASCII (peer data) as `\xNN`.
pub(crate) fn c_string(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let mut s = String::with_capacity(end);
    for &b in &buf[..end] {
        if (0x20..0x7f).contains(&b) {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

/// `struct rping_rdma_info`: a buffer's address, R_Key and length, in
/// network order (16 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Info {
    pub(crate) buf: u64,
    pub(crate) rkey: u32,
    pub(crate) size: u32,
}

impl Info {
    pub(crate) const LEN: usize = 16;

    pub(crate) fn to_bytes(self) -> [u8; Self::LEN] {
        let mut b = [0; Self::LEN];
        b[..8].copy_from_slice(&self.buf.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..].copy_from_slice(&self.size.to_be_bytes());
        b
    }

    pub(crate) fn from_bytes(b: &[u8; Self::LEN]) -> Self {
        let (buf, rest) = b.split_at(8);
        let (rkey, size) = rest.split_at(4);
        Self {
            buf: u64::from_be_bytes(buf.try_into().unwrap_or_default()),
            rkey: u32::from_be_bytes(rkey.try_into().unwrap_or_default()),
            size: u32::from_be_bytes(size.try_into().unwrap_or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ping_data_is_rpings() {
        let mut buf = [0xffu8; 32];
        let next = fill_ping(&mut buf, 0, b'A');
        assert_eq!(&buf[..31], b"rdma-ping-0: ABCDEFGHIJKLMNOPQR");
        assert_eq!(buf[31], 0);
        assert_eq!(next, b'B');
        // The letters wrap from 'z' back to 'A', and so does the start.
        let next = fill_ping(&mut buf, 12, b'y');
        assert_eq!(&buf[..31], b"rdma-ping-12: yzABCDEFGHIJKLMNO");
        assert_eq!(next, b'z');
        assert_eq!(fill_ping(&mut buf, 13, b'z'), b'A');
    }

    #[test]
    fn the_letters_include_the_six_between_z_and_a() {
        let mut buf = [0u8; 64];
        fill_ping(&mut buf, 1, b'X');
        assert_eq!(&buf[13..22], b"XYZ[\\]^_`");
    }

    #[test]
    fn info_is_sixteen_bytes_in_network_order() {
        let info = Info {
            buf: 0x0102_0304_0506_0708,
            rkey: 0x1122_3344,
            size: 64,
        };
        let b = info.to_bytes();
        assert_eq!(
            b,
            [1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 64]
        );
        assert_eq!(Info::from_bytes(&b), info);
    }

    #[test]
    fn peer_strings_print_safely() {
        assert_eq!(c_string(b"rdma-ping-0: AB\0junk"), "rdma-ping-0: AB");
        assert_eq!(c_string(b"a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(c_string(b"no nul"), "no nul");
    }
}
