//! `ferroce mckey` receiver and sender as two processes on loopback
//! (127.0.3.4x), as mckey runs: both join the group through rdma_cm, the
//! sender's messages reach every receiving ID (two QPs of one device;
//! the sender blocks its own loopback, `-l`), and the options mckey has
//! that ferroce cannot serve are refused.

mod cmtools;
mod common;

use std::net::Ipv4Addr;

use cmtools::{Side, wait_for_device};
use common::{ferroce, spawn};

const JOINED: &str = "mckey: joined dgid: ::ffff:239.255.3.41 mlid 0x0 sl 0";

#[test]
fn a_sender_reaches_every_receiving_id() {
    let mut rx = spawn(&[
        "mckey",
        "-m",
        "239.255.3.41",
        "-b",
        "127.0.3.41",
        "-c",
        "2",
        "-C",
        "5",
    ]);
    wait_for_device(Ipv4Addr::new(127, 0, 3, 41), &mut rx);
    // -l: the sender's QP does not get its own messages back.
    let tx = ferroce(&[
        "mckey",
        "-m",
        "239.255.3.41",
        "-b",
        "127.0.3.42",
        "-s",
        "-l",
        "-C",
        "5",
    ]);
    let rx = rx.wait_with_output().expect("the receiver ends");
    Side::of(&tx).expect(
        "sender",
        0,
        &[
            "mckey: starting client",
            "mckey: joining",
            JOINED,
            "initiating data transfers",
            "data transfers complete",
            "test complete",
            "return status 0",
        ],
    );
    Side::of(&rx).expect(
        "receiver",
        0,
        &[
            "mckey: starting server",
            "mckey: joining",
            JOINED,
            JOINED,
            "receiving data transfers",
            "data transfers complete",
            "test complete",
            "return status 0",
        ],
    );
}

#[test]
fn what_ferroce_cannot_serve_is_refused_with_the_reason() {
    for (args, says) in [
        (&["-M", "ff12::1", "-b", "127.0.3.43"][..], "AF_IB"),
        (&["-m", "239.1.1.1", "-p", "0x2"][..], "InfiniBand"),
        (
            &["-m", "127.0.3.44", "-b", "127.0.3.43", "-C", "0"][..],
            "not a multicast",
        ),
    ] {
        let out = ferroce(&[&["mckey"][..], args].concat());
        let side = Side::of(&out);
        assert_ne!(side.code, Some(0), "{args:?}");
        let all = format!("{}\n{}", side.lines.join("\n"), side.stderr);
        assert!(all.contains(says), "{args:?}: {all}");
    }
}
