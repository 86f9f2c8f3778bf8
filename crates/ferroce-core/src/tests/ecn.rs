//! Congestion marking on the simulated network: marked packets (BTH FECN
//! set in flight) are ordinary valid packets to the engine. Only the IP
//! header's CE mark (`handle_datagram_ecn`) is answered with CNPs, as on a
//! RoCE v2 NIC; see `dcqcn.rs` for that.

use super::util::{Faults, Pair, connect, pattern, rmem, sge};
use crate::verbs::{Mtu, QpType, SendOp, WcStatus};

#[test]
fn marked_packets_deliver_like_unmarked_ones() {
    let mut p = Pair::new(77);
    let [a, b] = connect(&mut p, QpType::Rc, 3 << 20, Mtu::Mtu4096);
    p.faults = Faults {
        ecn_mark: 0.5,
        loss: 0.01,
        reorder: 0.05,
        ..Faults::default()
    };
    let data = pattern(1 << 20, 9);
    p.eps[0].write_mr(a.mr.lkey, |b| b[..data.len()].copy_from_slice(&data));
    let write = SendOp::Write {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    let read = SendOp::Read {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, super::util::send_wr(1, write, &sge(&a, 0, 1 << 20)))
        .unwrap();
    p.eps[0]
        .post_send(
            a.qpn,
            super::util::send_wr(2, read, &sge(&a, 2 << 20, 1 << 20)),
        )
        .unwrap();
    let mut wcs = Vec::new();
    p.drive_until(1_000_000, |p| {
        wcs.extend(p.completions(0, a.cq));
        wcs.len() == 2
    });
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert_eq!(&p.eps[1].mr_bytes(b.mr.lkey).unwrap()[..1 << 20], &data[..]);
    assert_eq!(
        &p.eps[0].mr_bytes(a.mr.lkey).unwrap()[2 << 20..3 << 20],
        &data[..]
    );
    assert!(p.ecn_marked > 100, "only {} packets marked", p.ecn_marked);
    assert_eq!(
        p.eps[1].stats().rx_malformed + p.eps[0].stats().rx_malformed,
        0
    );
}
