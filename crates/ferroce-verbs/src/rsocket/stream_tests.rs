//! Two streams joined by a simulated wire: WRITEs land in the peer's
//! memory, immediates in its completion handling.

use super::*;
use crate::rsocket::wire::{CONN_FLAG_IOMAP, CONN_VERSION, ConnData};

const SGL_ADDR: u64 = 0x10_0000;
const RBUF_ADDR: u64 = 0x20_0000;

struct Sgl([Sge; 2]);

impl TargetSgl for Sgl {
    fn get(&self, i: usize) -> Sge {
        self.0[i]
    }
    fn set(&mut self, i: usize, sge: Sge) {
        self.0[i] = sge;
    }
}

struct End {
    s: Stream,
    sgl: Sgl,
    sbuf: Vec<u8>,
    rbuf: Vec<u8>,
}

fn end(cfg: Config) -> End {
    End {
        s: Stream::new(cfg, (RBUF_ADDR, 9)),
        sgl: Sgl([Sge::default(); 2]),
        sbuf: vec![0; cfg.sbuf_size as usize],
        rbuf: vec![0; cfg.rbuf_size as usize],
    }
}

fn conn_data(e: &End) -> ConnData {
    ConnData {
        version: CONN_VERSION,
        flags: CONN_FLAG_IOMAP,
        credits: e.s.cfg.rq_size,
        target_iomap_size: 0,
        target_sgl: Sge {
            addr: SGL_ADDR,
            key: 5,
            length: SGL_ENTRIES as u32,
        },
        data_buf: e.s.first_half(),
    }
}

fn pair(cfg: Config) -> (End, End) {
    let (mut a, mut b) = (end(cfg), end(cfg));
    let (ca, cb) = (conn_data(&a), conn_data(&b));
    a.s.accept_peer(&cb, &mut a.sgl);
    b.s.accept_peer(&ca, &mut b.sgl);
    (a, b)
}

/// `from` sends up to `data.len()` bytes to `to`; returns how many went.
fn send(from: &mut End, to: &mut End, data: &[u8]) -> usize {
    let mut sent = 0;
    let mut olen = FIRST_TRANSFER;
    while sent < data.len() && from.s.can_send(&from.sgl) {
        let c = from
            .s
            .next_chunk(data.len() - sent, &mut olen, &mut from.sgl);
        let mut at = (c.remote_addr - RBUF_ADDR) as usize;
        for (off, len) in c.pieces {
            let (off, len) = (off as usize, len as usize);
            from.sbuf[off..off + len].copy_from_slice(&data[sent..sent + len]);
            to.rbuf[at..at + len].copy_from_slice(&from.sbuf[off..off + len]);
            at += len;
            sent += len;
        }
        assert!(at <= to.rbuf.len(), "a WRITE never crosses the ring's end");
        assert_eq!(to.s.received(Some(c.msg.encode())), Received::Progress);
        from.s.send_done(c.msg, true);
    }
    sent
}

/// `to` gives `from` the credits it owes.
fn credit(to: &mut End, from: &mut End) {
    while let Some(p) = to.s.credits() {
        if let Some((sge, at, _)) = p.write {
            from.sgl.0[((at - SGL_ADDR) / Sge::LEN as u64) as usize] = sge;
        }
        from.s.received(Some(p.msg.encode()));
        to.s.send_done(p.msg, true);
    }
}

fn recv(to: &mut End, len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for (off, n) in to.s.take(len, false) {
        out.extend_from_slice(&to.rbuf[off as usize..(off + n) as usize]);
    }
    out
}

#[test]
fn a_megabyte_streams_through_small_rings_in_order() {
    let cfg = Config {
        sbuf_size: 16384,
        rbuf_size: 8192,
        sq_size: 16,
        rq_size: 16,
        ..Config::default()
    };
    let (mut a, mut b) = pair(cfg);
    let data: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let (mut sent, mut got) = (0, Vec::new());
    let mut rounds = 0;
    while got.len() < data.len() {
        rounds += 1;
        assert!(rounds < 100_000, "no progress");
        let end = (sent + 1 + rounds % 9000).min(data.len());
        sent += send(&mut a, &mut b, &data[sent..end]);
        got.extend(recv(&mut b, 1 + (rounds * 7919) % 5000));
        credit(&mut b, &mut a);
        credit(&mut a, &mut b);
    }
    assert_eq!(got, data);
}

#[test]
fn a_sender_stops_without_credits_and_goes_on_with_them() {
    let cfg = Config {
        rbuf_size: 8192,
        ..Config::default()
    };
    let (mut a, mut b) = pair(cfg);
    assert_eq!(
        send(&mut a, &mut b, &[7; 10000]),
        4096,
        "half the ring is lent"
    );
    assert!(!a.s.can_send(&a.sgl));
    assert_eq!(recv(&mut b, 10000), vec![7; 4096]);
    credit(&mut b, &mut a);
    assert!(a.s.can_send(&a.sgl));
    // Both halves are free again: both are lent.
    assert_eq!(send(&mut a, &mut b, &[8; 10000]), 8192);
}

#[test]
fn peeking_leaves_the_data() {
    let (mut a, mut b) = pair(Config::default());
    send(&mut a, &mut b, b"hello");
    let p = b.s.take(3, true);
    assert_eq!(p, vec![(0, 3)]);
    assert_eq!(recv(&mut b, 100), b"hello");
    assert!(!b.s.have_data());
}

#[test]
fn disconnect_and_shutdown_close_the_right_directions() {
    let (mut a, mut b) = pair(Config::default());
    let m = a.s.ctrl(Ctrl::Shutdown).expect("a control slot");
    assert_eq!(b.s.received(Some(m.encode())), Received::Progress);
    assert!(!b.s.flags.readable && b.s.flags.writable);
    let m = a.s.ctrl(Ctrl::Disconnect).expect("a control slot");
    assert_eq!(b.s.received(Some(m.encode())), Received::Disconnected);
    assert!(!b.s.flags.connected);
    a.s.send_done(m, true);
    assert!(!a.s.flags.connected);
}

#[test]
fn control_slots_run_out_until_completions_return_them() {
    let (mut a, _b) = pair(Config::default());
    for _ in 0..CTRL_SLOTS {
        assert!(a.s.ctrl(Ctrl::Keepalive).is_some());
    }
    assert!(a.s.ctrl(Ctrl::Keepalive).is_none());
    a.s.send_done(Msg::new(Op::Ctrl, Ctrl::Keepalive.code()), true);
    assert!(a.s.ctrl_ready());
    assert!(!a.s.all_sends_done());
}

/// The accepting side lends its second half as soon as it is connected;
/// that WRITE can land in the connecting side's SGL before the connecting
/// side has taken in the private data, and must survive it.
#[test]
fn a_second_half_lent_before_the_connector_accepts_is_kept() {
    let cfg = Config::default();
    let (mut a, mut b) = (end(cfg), end(cfg));
    let (ca, cb) = (conn_data(&a), conn_data(&b));
    b.s.accept_peer(&ca, &mut b.sgl);
    let early = b.s.credits().expect("the second half is due at once");
    let (sge, at, _) = early.write.expect("it lends the second half");
    a.sgl.0[((at - SGL_ADDR) / Sge::LEN as u64) as usize] = sge;
    a.s.accept_peer(&cb, &mut a.sgl);
    a.s.received(Some(early.msg.encode()));
    b.s.send_done(early.msg, true);
    let data = vec![7u8; cfg.rbuf_size as usize];
    assert_eq!(
        send(&mut a, &mut b, &data),
        data.len(),
        "both halves of the peer's ring are usable with no further credit"
    );
}
