//! Sequences met against the Linux kernel's Soft-RoCE (rdma_rxe) in the rig
//! (`scripts/interop.sh`), replayed by hand on the simulated network.

use ferroce_wire::Opcode;
use ferroce_wire::aeth::{AethRepr, NakCode, Syndrome};

use super::read_mr;
use super::util::{Pair, connect, craft, emit, parse, pattern, recv_wr, rmem, send_wr, sge};
use super::write_mr;
use crate::verbs::{Mtu, QpType, SendOp, WcStatus};

/// rxe, with netem reordering in front of it, answered a retransmitted
/// 64-packet SEND with a PSN sequence NAK from the middle of the message
/// that was already stale: right behind it came the ACK of the whole
/// message. The NAK sends the requester back into the message; the ACK
/// then completes it. The next message must start after the last PSN of
/// the acknowledged one. It used to start at the PSN the NAK named, which
/// rxe takes for duplicates and then, with a SEND_MIDDLE where it expects
/// a SEND_FIRST, answers with NAK INVALID_REQUEST: the QP failed with
/// REM_INV_REQ_ERR (`ibv_rc_pingpong -s 65536 -c` under 3% loss).
#[test]
fn a_message_acknowledged_after_a_rewind_into_it_is_not_reused() {
    const LEN: usize = 2048; // 8 packets at MTU 256
    for resend_lost in [false, true] {
        let mut p = Pair::new(4791 + u64::from(resend_lost));
        let [a, b] = connect(&mut p, QpType::Rc, 4 * LEN, Mtu::Mtu256);
        for id in [1, 2] {
            p.eps[1]
                .post_recv(
                    b.qpn,
                    recv_wr(id, &sge(&b, (id - 1) * LEN as u64, LEN as u32)),
                )
                .unwrap();
        }
        let first = pattern(LEN, 3);
        write_mr(&mut p, 0, a.mr.lkey, 0, &first);
        p.eps[0]
            .post_send(a.qpn, send_wr(1, SendOp::Send, &sge(&a, 0, LEN as u32)))
            .unwrap();
        let request = p.take_transmits(0);
        assert_eq!(request.len(), 8);
        let f = parse(&request[0]).bth.psn;
        for pkt in &request {
            p.deliver(1, pkt);
        }
        let ack = p.take_transmits(1);
        assert_eq!(parse(ack.last().unwrap()).bth.psn, f + 7);

        // The stale NAK, from the middle of the message, then the ACK.
        let mut nak = craft(Opcode::RC_ACKNOWLEDGE, f + 3, a.qpn, 0);
        nak.aeth = Some(AethRepr {
            syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
            msn: 0,
        });
        p.deliver(0, &emit(&nak, &[]));
        if resend_lost {
            // The requester goes back and resends; all of it is lost.
            let resent = p.take_transmits(0);
            assert_eq!(parse(&resent[0]).bth.psn, f + 3, "go-back-N from the NAK");
        }
        p.deliver(0, ack.last().unwrap());
        let wcs = p.completions(0, a.cq);
        assert_eq!(wcs.len(), 1);
        assert_eq!(wcs[0].status, WcStatus::Success);

        // The next message: after the acknowledged one, whole.
        write_mr(&mut p, 0, a.mr.lkey, LEN, &pattern(64, 9));
        p.eps[0]
            .post_send(a.qpn, send_wr(2, SendOp::Send, &sge(&a, LEN as u64, 64)))
            .unwrap();
        let next = p.take_transmits(0);
        let t = parse(&next[0]);
        assert_eq!(
            (t.bth.opcode, t.bth.psn),
            (Opcode::RC_SEND_ONLY, f + 8),
            "resend_lost = {resend_lost}"
        );
        for pkt in &next {
            p.deliver(1, pkt);
        }
        let got = p.wait_cqes(1, b.cq, 2);
        assert!(got.iter().all(|w| w.status == WcStatus::Success));
        assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, LEN), first);
        assert_eq!(read_mr(&p, 1, b.mr.lkey, LEN, 64), pattern(64, 9));
    }
}

/// rxe, 16 READs of 8 packets outstanding, 3% loss and 10% reordering: the
/// responder's PSN sequence NAK for a request after a half-received READ is
/// an implied NAK for that READ's lost responses. The requester must ask
/// for the rest of it (from the first response missing), not for all of it
/// again: starting over threw away what had arrived, made the responses to
/// the resume already in flight look like a gap, and asked again, until the
/// QP failed with RETRY_EXC_ERR having completed nothing.
#[test]
fn an_implied_nak_resumes_a_read_after_what_arrived() {
    const LEN: usize = 2048; // 8 responses at MTU 256
    let mut p = Pair::new(4793);
    let [a, b] = connect(&mut p, QpType::Rc, 4 * LEN, Mtu::Mtu256);
    let data = pattern(LEN, 5);
    write_mr(&mut p, 1, b.mr.lkey, 0, &data);
    p.eps[1]
        .post_recv(b.qpn, recv_wr(1, &sge(&b, LEN as u64, 64)))
        .unwrap();
    let read = SendOp::Read {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, read, &sge(&a, 0, LEN as u32)))
        .unwrap();
    p.eps[0]
        .post_send(a.qpn, send_wr(2, SendOp::Send, &sge(&a, LEN as u64, 64)))
        .unwrap();
    let requests = p.take_transmits(0);
    assert_eq!(requests.len(), 2);
    let f = parse(&requests[0]).bth.psn;
    // The READ arrives, the SEND is lost: the responder answers the READ
    // and NAKs the SEND's PSN when something after it shows up.
    p.deliver(1, &requests[0]);
    let responses = p.take_transmits(1);
    assert_eq!(responses.len(), 8);
    for r in &responses[..4] {
        p.deliver(0, r); // the last four are lost
    }
    let mut nak = craft(Opcode::RC_ACKNOWLEDGE, f + 8, a.qpn, 0);
    nak.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
        msn: 1,
    });
    p.deliver(0, &emit(&nak, &[]));

    let again = p.take_transmits(0);
    let resume = parse(&again[0]);
    assert_eq!(resume.bth.opcode, Opcode::RC_RDMA_READ_REQUEST);
    assert_eq!(resume.bth.psn, f + 4, "from the first response missing");
    let reth = resume.reth.expect("a RETH");
    assert_eq!((reth.va, reth.dma_len), (b.mr.addr + 1024, 1024));
    assert_eq!(parse(&again[1]).bth.psn, f + 8, "the SEND after it");
    for pkt in &again {
        p.deliver(1, pkt);
    }
    p.settle(100_000);
    let wcs = p.completions(0, a.cq);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(read_mr(&p, 0, a.mr.lkey, 0, LEN), data);
}
