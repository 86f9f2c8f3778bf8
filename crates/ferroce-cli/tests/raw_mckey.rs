//! UD multicast on the raw-Ethernet backend (`mckey --raw`), across a veth
//! pair between two network namespaces the test creates and removes (tag
//! `mc`): a raw sender reaches a raw receiver's two IDs, and each backend
//! talks to the other (the raw device frames the group to its 01:00:5e
//! MAC address and joins the group on its interface; the UDP device joins
//! it on a socket). Needs root; prints SKIPPED otherwise.

mod common;
mod raw_netns;

use common::text;
use raw_netns::{A, B, Netns, assert_ok};

const GROUP: &str = "239.255.79.7";

/// `mckey -m GROUP -b ADDR` with `extra`, on the raw backend if `raw`.
fn mckey<'a>(raw: bool, addr: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["mckey", "-m", GROUP, "-b", addr, "-C", "20"];
    if raw {
        v.push("--raw");
    }
    v.extend_from_slice(extra);
    v
}

#[test]
fn multicast_between_raw_and_udp_devices_both_ways() {
    let Some(ns) = Netns::new("mc") else { return };
    for (rx_raw, tx_raw) in [(true, true), (true, false), (false, true)] {
        let rx = mckey(rx_raw, A, &["-c", "2"]);
        let tx = mckey(tx_raw, B, &["-s"]);
        let (r, s) = ns.pair(&rx, &tx, &[]);
        let what = format!("receiver raw={rx_raw}, sender raw={tx_raw}");
        assert_ok(&format!("{what}: sender"), &s);
        assert_ok(&format!("{what}: receiver"), &r);
        let out = text(&r).0;
        assert_eq!(
            out.matches("mckey: joined dgid").count(),
            2,
            "{what}: {out}"
        );
        assert!(out.contains("data transfers complete"), "{what}: {out}");
    }
}
