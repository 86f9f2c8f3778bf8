//! The scaffolding the rdma_cm tools share (`rping`, `cmatose`, `udaddy`,
//! `mckey`, `rdma-server`/`rdma-client`, and `perf --perftest -R`):
//!
//! * here, their options: [`CmToolArgs`] (the address, port space and
//!   connection options of ucmatose and udaddy, flattened into each),
//!   [`RawArgs`] (`--raw` and its QoS flags), and the parsers of `-f`,
//!   `-p` as a port space number, `-t`/`-a` and host names;
//! * [`device`]: opening the devices: one on an address (UDP or raw
//!   backend), the source a route gives, one on every address of a
//!   wildcard listen;
//! * [`events`]: waiting for the next rdma_cm event (of one ID, within a
//!   time) and for a connect request;
//! * [`cmtest`]: what the ports of librdmacm's `examples/common.c` tools
//!   (ucmatose, udaddy, mckey) share besides: their statuses, listening
//!   ID, stall-bounded waits and last lines.
//!
//! Each tool's flags, defaults, help and output are its own C tool's; what
//! differs between them is given by the tool (its help text, its port).

pub(crate) mod cmtest;
pub(crate) mod device;
pub(crate) mod events;

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::Args;
use ferroce::cm::PortSpace;

use crate::error::Error;

pub(crate) use device::RawArgs;

/// The timeout the C tools give `rdma_resolve_addr` and
/// `rdma_resolve_route` (2000 ms).
pub(crate) const RESOLVE_TIMEOUT: Duration = Duration::from_millis(2000);

/// Connections per run of ucmatose and udaddy: the CM's limit of
/// connections (or SIDR requests) in setup at once.
pub(crate) const MAX_CONNECTIONS: u32 = 1024;

/// The options ucmatose and udaddy share (librdmacm's `examples/common.c`
/// tools), as ucmatose words them; udaddy rewords its own help with
/// `mut_arg` (the flags, defaults and checks are the same).
#[derive(Debug, Args)]
pub(crate) struct CmToolArgs {
    /// Connect to this server (address or name); without it, be the server.
    #[arg(short = 's', value_name = "server_address")]
    pub(crate) server: Option<String>,
    /// The local address: the server listens on it (without it, on every
    /// IPv4 address of every interface that is up), the client connects from it.
    #[arg(short = 'b', value_name = "bind_address")]
    pub(crate) bind: Option<String>,
    /// Address format: name, ip or ipv6 (gid is refused: AF_IB).
    #[arg(short = 'f', value_name = "address_format")]
    pub(crate) format: Option<String>,
    /// Port space: tcp (ib is refused: AF_IB).
    #[arg(short = 'P', value_name = "port_space")]
    pub(crate) port_space: Option<String>,
    /// Connections.
    #[arg(short = 'c', value_name = "connections", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_CONNECTIONS)))]
    pub(crate) connections: u32,
}

/// The port space a tool runs in (`-P`): the name it takes, and the one it
/// refuses with the reason.
pub(crate) struct PortSpaceName {
    pub(crate) ours: &'static str,
    pub(crate) refused: &'static str,
    pub(crate) why: &'static str,
}

impl CmToolArgs {
    /// `-f` and `-P` as the C tools read them (a prefix, case aside): an
    /// unknown one is warned about, one that needs InfiniBand refused.
    pub(crate) fn check(&self, ps: &PortSpaceName) -> Result<(), Error> {
        check_format(self.format.as_deref())?;
        if let Some(given) = &self.port_space {
            let given = given.to_ascii_lowercase();
            if given.starts_with(ps.refused) {
                return Err(Error::Usage(ps.why.into()));
            }
            if !given.starts_with(ps.ours) {
                eprintln!("Warning: unknown port space format");
            }
        }
        Ok(())
    }

    /// `-s` at `port` (a client's server) and `-b` (the local address).
    pub(crate) fn addresses(
        &self,
        port: u16,
    ) -> Result<(Option<SocketAddr>, Option<IpAddr>), Error> {
        let dst = match &self.server {
            Some(s) => Some(resolve("-s", s, port)?),
            None => None,
        };
        let src = match &self.bind {
            Some(b) => Some(resolve("-b", b, 0)?.ip()),
            None => None,
        };
        Ok((dst, src))
    }
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

/// udaddy's and mckey's `-p`: `strtol(s, NULL, 0)` naming a port space;
/// UDP is the one a UD tool has on RoCE.
pub(crate) fn parse_port_space(s: &str) -> Result<PortSpace, String> {
    let t = s.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u16::from_str_radix(hex, 16),
        None => t.parse(),
    }
    .map_err(|_| format!("{s:?} is not a port space number: 0x111 is UDP"))?;
    match PortSpace::from_value(v) {
        Some(PortSpace::Udp) => Ok(PortSpace::Udp),
        Some(PortSpace::Ipoib) => {
            Err("0x2 (IPoIB) needs an InfiniBand subnet: use 0x111 (UDP)".into())
        }
        _ => Err(format!("{v:#x} is not a UD port space: use 0x111 (UDP)")),
    }
}

/// `host`'s address at `port`, IPv4 first (as `rdma_getaddrinfo` with no
/// family gives them to librdmacm's examples and perftest).
pub(crate) fn resolve_v4_first(host: &str, port: u16) -> Result<SocketAddr, Error> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {host}: {e}"))?
        .min_by_key(|a| a.is_ipv6())
        .ok_or_else(|| format!("{host} has no address").into())
}

/// The unspecified address of `like`'s family.
pub(crate) fn unspecified_like(like: IpAddr) -> IpAddr {
    if like.is_ipv6() {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    }
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

    #[test]
    fn only_the_udp_port_space_number_is_taken() {
        assert_eq!(parse_port_space("0x111"), Ok(PortSpace::Udp));
        assert_eq!(parse_port_space("273"), Ok(PortSpace::Udp));
        assert!(parse_port_space("0x2").unwrap_err().contains("InfiniBand"));
        assert!(parse_port_space("0x106").is_err());
        assert!(parse_port_space("udp").is_err());
    }
}
