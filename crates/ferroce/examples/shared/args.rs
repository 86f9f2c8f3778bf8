//! The command line the two-context examples (`owed_ack`, `post_wait`)
//! share: `[COUNT [FIRST SECOND]]`, the addresses 127.0.0.1 and 127.0.0.2
//! by default.

use std::net::IpAddr;

/// The count (`default` if absent; `what` names it in the panic of a bad
/// one) and the two contexts' addresses.
pub(crate) fn count_and_addrs(default: usize, what: &str) -> (usize, IpAddr, IpAddr) {
    let mut args = std::env::args().skip(1);
    let count = args.next().map_or(default, |s| {
        s.parse().unwrap_or_else(|_| panic!("{what}: a count"))
    });
    let mut addr = |fallback: &str, name: &str| -> IpAddr {
        args.next()
            .map_or(fallback.into(), |s| s)
            .parse()
            .unwrap_or_else(|_| panic!("{name}: an IP address"))
    };
    let first = addr("127.0.0.1", "the first address");
    let second = addr("127.0.0.2", "the second address");
    (count, first, second)
}
