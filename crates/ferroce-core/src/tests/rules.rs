//! Smaller rules of the send queue: fences and the initiator depth hold
//! requests back, and UD Q_Keys (a wrong one is dropped; one with the high
//! bit set means the sending QP's own).

use super::ops::ud_dest;
use super::util::{Opts, Pair, Side, connect, connect_with, pattern, recv_wr, rmem, send_wr, sge};
use super::{read_mr, write_mr};
use crate::verbs::{Mtu, QpType, SendOp, WcStatus};

fn read(b: &Side, off: u64) -> SendOp {
    SendOp::Read {
        remote: rmem(b.mr.addr + off, b.mr.rkey),
    }
}

fn write(b: &Side, off: u64) -> SendOp {
    SendOp::Write {
        remote: rmem(b.mr.addr + off, b.mr.rkey),
    }
}

/// Posts `wrs` on endpoint 0 and returns how many request packets go out
/// before any response comes back.
fn first_burst(p: &mut Pair, a: &Side, wrs: Vec<crate::verbs::SendWr<'_>>) -> usize {
    for wr in wrs {
        p.eps[0].post_send(a.qpn, wr).unwrap();
    }
    let burst = p.take_transmits(0);
    for pkt in &burst {
        p.deliver(1, pkt);
    }
    burst.len()
}

#[test]
fn a_fence_waits_for_the_reads_before_it() {
    for fence in [false, true] {
        let mut p = Pair::new(500 + u64::from(fence));
        let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
        write_mr(&mut p, 1, b.mr.lkey, 0, &pattern(2048, 1));
        let sg = sge(&a, 0, 8);
        let mut fenced = send_wr(2, write(&b, 4096), &sg);
        fenced.fence = fence;
        let sg_read = sge(&a, 0, 2048);
        let wrs = vec![
            send_wr(1, read(&b, 0), &sg_read),
            fenced,
            send_wr(3, write(&b, 5000), &sg),
        ];
        // A fenced WRITE holds back itself and everything after it.
        let sent = first_burst(&mut p, &a, wrs);
        assert_eq!(sent, if fence { 1 } else { 3 }, "fence {fence}");
        let wcs = p.wait_cqes(0, a.cq, 3);
        assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
        assert_eq!(read_mr(&p, 0, a.mr.lkey, 0, 2048), pattern(2048, 1));
    }
}

#[test]
fn the_initiator_depth_bounds_reads_and_atomics_in_flight() {
    for depth in [1u8, 2, 4] {
        let mut p = Pair::new(510 + u64::from(depth));
        let [a, b] = connect_with(
            &mut p,
            Opts {
                max_rd_atomic: depth,
                ..Opts::new(QpType::Rc, 8192, Mtu::Mtu1024)
            },
        );
        let add = SendOp::FetchAdd {
            remote: rmem(b.mr.addr + 4096, b.mr.rkey),
            add: 1,
        };
        let sgs = [
            sge(&a, 0, 64),
            sge(&a, 1024, 8),
            sge(&a, 64, 64),
            sge(&a, 1032, 8),
        ];
        let wrs = vec![
            send_wr(1, read(&b, 0), &sgs[0]),
            send_wr(2, add, &sgs[1]),
            send_wr(3, read(&b, 64), &sgs[2]),
            send_wr(4, add, &sgs[3]),
        ];
        assert_eq!(
            first_burst(&mut p, &a, wrs),
            usize::from(depth),
            "depth {depth}"
        );
        let wcs = p.wait_cqes(0, a.cq, 4);
        assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
        assert_eq!(read_mr(&p, 1, b.mr.lkey, 4096, 8), 2u64.to_ne_bytes());
    }
}

#[test]
fn ud_q_keys() {
    let mut p = Pair::new(520);
    let [a, b] = connect(&mut p, QpType::Ud, 8192, Mtu::Mtu1024);
    write_mr(&mut p, 0, a.mr.lkey, 0, &pattern(100, 2));
    p.eps[1]
        .post_recv(b.qpn, recv_wr(1, &sge(&b, 0, 4096)))
        .unwrap();
    // Both QPs have Q_Key 0x11111111 (see `connect`).
    for (id, qkey) in [(1, 0x1111_1112), (2, 0x8000_0000), (3, 0xffff_ffff)] {
        let sg = sge(&a, 0, 100);
        let mut wr = send_wr(id, SendOp::Send, &sg);
        wr.ud = Some(crate::verbs::UdDest {
            qkey,
            ..ud_dest(&p, b.qpn)
        });
        p.eps[0].post_send(a.qpn, wr).unwrap();
    }
    // UD completes on sending, delivered or not.
    let wcs = p.wait_cqes(0, a.cq, 3);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    p.settle(1000);
    // The wrong Q_Key is dropped; the high bit asks for the sender's own
    // Q_Key (IBA C10-15), which matches: the first of those takes the one
    // receive, the second finds none.
    let stats = p.eps[1].stats();
    assert_eq!((stats.rx_bad_qkey, stats.rx_unexpected), (1, 1));
    let r = p.completions(1, b.cq);
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].status, r[0].byte_len, r[0].src_qp),
        (WcStatus::Success, 140, a.qpn)
    );
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 40, 100), pattern(100, 2));
}

/// UC has no retransmission: a lost packet loses its message, whose
/// receive then takes the next message instead.
#[test]
fn uc_loses_a_message_with_a_gap_and_delivers_the_next() {
    let mut p = Pair::new(530);
    let [a, b] = connect(&mut p, QpType::Uc, 8192, Mtu::Mtu1024);
    write_mr(&mut p, 0, a.mr.lkey, 0, &pattern(3000, 3));
    p.eps[1]
        .post_recv(b.qpn, recv_wr(1, &sge(&b, 0, 4096)))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(1, SendOp::Send, &sge(&a, 0, 3000)))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(2, SendOp::Send, &sge(&a, 2000, 100)))
        .unwrap();
    let pkts = p.take_transmits(0);
    assert_eq!(pkts.len(), 4);
    for (i, pkt) in pkts.iter().enumerate() {
        if i != 1 {
            p.deliver(1, pkt); // the MIDDLE of the first SEND is lost
        }
    }
    let r = p.completions(1, b.cq);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].byte_len),
        (1, WcStatus::Success, 100)
    );
    assert_eq!(
        read_mr(&p, 1, b.mr.lkey, 0, 100),
        pattern(3000, 3)[2000..2100]
    );
    assert_eq!(p.eps[1].stats().rx_out_of_sequence, 1);
    // Both SENDs completed at the sender when they were sent.
    assert_eq!(p.completions(0, a.cq).len(), 2);
}

/// A WRITE whose payload differs from the length its RETH announced is an
/// invalid request.
#[test]
fn a_write_longer_or_shorter_than_its_reth_is_naked() {
    use ferroce_wire::Opcode;
    use ferroce_wire::aeth::{NakCode, Syndrome};
    use ferroce_wire::reth::RethRepr;

    use super::util::{craft, emit, parse};
    for (seed, payload) in [(540, 16usize), (541, 4)] {
        let mut p = Pair::new(seed);
        let [_a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
        let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
        let mut t = craft(Opcode::RC_RDMA_WRITE_ONLY, epsn, b.qpn, payload);
        t.reth = Some(RethRepr {
            va: b.mr.addr,
            rkey: b.mr.rkey,
            dma_len: 8,
        });
        p.deliver(1, &emit(&t, &vec![0xab; payload]));
        let out = p.take_transmits(1);
        let nak = parse(&out[0]).aeth.map(|a| a.syndrome);
        assert_eq!(
            nak,
            Some(Syndrome::Nak(NakCode::InvalidRequest)),
            "{payload} bytes"
        );
        assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 16), [0; 16]);
    }
}
