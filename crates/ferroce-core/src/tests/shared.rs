//! Region memory shared with the application as a NIC's DMA shares host
//! memory: the engine writes into a region, reads from it and does its
//! atomics while the application reads, writes or scans the same bytes,
//! with nothing held back on either side (no deferral, no packet left
//! unsent, no retransmission).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::util::{Pair, Side, connect, pattern, recv_wr, rmem, send_wr, sge};
use super::{read_mr, write_mr};
use crate::mr::Region;
use crate::verbs::{Mtu, QpType, SendOp, WcStatus};

fn write_to(side: &Side, offset: u64) -> SendOp {
    SendOp::Write {
        remote: rmem(side.mr.addr + offset, side.mr.rkey),
    }
}

fn region(p: &Pair, i: usize, side: &Side) -> Arc<Region> {
    p.eps[i].region(side.mr.lkey).unwrap()
}

/// Steps the simulation for `d` of its time.
fn run_for(p: &mut Pair, d: Duration) {
    let until = p.now.after(d);
    while p.now < until && p.step() {}
}

/// Nothing was held back or sent twice on either side.
fn assert_nothing_held_back(p: &Pair) {
    for ep in &p.eps {
        let s = ep.stats();
        assert_eq!(s.retransmits, 0, "{s:?}");
        assert_eq!(s.rx_out_of_sequence, 0, "{s:?}");
        assert_eq!(s.rx_duplicate, 0, "{s:?}");
    }
}

#[test]
fn a_write_lands_in_a_region_the_application_is_viewing() {
    let mut p = Pair::new(70);
    let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    let data = pattern(5000, 1);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    let shared = region(&p, 1, &b);
    // The application's view of the whole region, alive while the
    // engine writes into it.
    let view = shared.volatile(0, 8192).unwrap();
    let sg = sge(&a, 0, 5000);
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write_to(&b, 0), &sg))
        .unwrap();
    // Less than the requester's retransmit timeout: done at once.
    run_for(&mut p, Duration::from_micros(500));
    let wc = p.completions(0, a.cq);
    assert_eq!(wc.len(), 1, "not acknowledged at once");
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::Success));
    let mut seen = vec![0u8; 5000];
    view.copy_to(&mut seen[..]);
    assert_eq!(seen, data, "the view sees the engine's writes");
    assert_nothing_held_back(&p);
}

/// READ responses land in a local region the application is writing
/// elsewhere, and the peer reads a region the application is writing.
#[test]
fn reads_go_on_while_the_application_writes_both_regions() {
    let mut p = Pair::new(74);
    let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    let data = pattern(3000, 5);
    write_mr(&mut p, 1, b.mr.lkey, 0, &data);
    let (local, remote) = (region(&p, 0, &a), region(&p, 1, &b));
    let op = SendOp::Read {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, op, &sge(&a, 0, 3000)))
        .unwrap();
    for step in 0..10_000u32 {
        // The application writes the bytes around the ones in flight.
        local.write(4096, &step.to_ne_bytes()).unwrap();
        remote.write(4096, &step.to_ne_bytes()).unwrap();
        if !p.step() {
            break;
        }
    }
    let wc = p.completions(0, a.cq);
    assert_eq!(wc.len(), 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::Success));
    assert_eq!(read_mr(&p, 0, a.mr.lkey, 0, 3000), data);
    assert_nothing_held_back(&p);
}

#[test]
fn ud_and_uc_receives_land_while_the_region_is_viewed() {
    for qp_type in [QpType::Ud, QpType::Uc] {
        let mut p = Pair::new(76);
        let [a, b] = connect(&mut p, qp_type, 8192, Mtu::Mtu1024);
        let data = pattern(500, 7);
        write_mr(&mut p, 0, a.mr.lkey, 0, &data);
        let shared = region(&p, 1, &b);
        let view = shared.volatile(0, 8192).unwrap();
        p.eps[1]
            .post_recv(b.qpn, recv_wr(3, &sge(&b, 0, 4096)))
            .unwrap();
        let sg = sge(&a, 0, 500);
        let mut wr = send_wr(4, SendOp::Send, &sg);
        if qp_type == QpType::Ud {
            wr.ud = Some(super::ops::ud_dest(&p, b.qpn));
        }
        p.eps[0].post_send(a.qpn, wr).unwrap();
        run_for(&mut p, Duration::from_micros(200));
        let r = p.completions(1, b.cq);
        assert_eq!(r.len(), 1, "{qp_type:?}");
        assert_eq!((r[0].wr_id, r[0].status), (3, WcStatus::Success));
        // UD places a 40-byte GRH area first.
        let at = if qp_type == QpType::Ud { 40 } else { 0 };
        let mut seen = vec![0u8; 500];
        view.subslice(at, 500).unwrap().copy_to(&mut seen[..]);
        assert_eq!(seen, data, "{qp_type:?}");
    }
}

/// Another thread scans and writes the target region the whole time the
/// engine writes many messages into it: every message completes at once,
/// nothing is held back or retransmitted.
#[test]
fn an_application_thread_scanning_the_region_holds_nothing_back() {
    const LEN: usize = 64 << 10;
    const MESSAGES: u64 = 64;
    let mut p = Pair::new(71);
    let [a, b] = connect(&mut p, QpType::Rc, LEN, Mtu::Mtu1024);
    let data = pattern(LEN / 2, 2);
    write_mr(&mut p, 0, a.mr.lkey, 0, &data);
    let shared = region(&p, 1, &b);
    let stop = Arc::new(AtomicBool::new(false));
    let app = {
        let (shared, stop) = (shared.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut scans = 0u64;
            let mut chunk = vec![0u8; 4096];
            while !stop.load(Ordering::Relaxed) {
                let view = shared.volatile(0, LEN as u64).unwrap();
                let mut sum = 0u64;
                for at in (0..LEN).step_by(chunk.len()) {
                    view.subslice(at, chunk.len())
                        .unwrap()
                        .copy_to(&mut chunk[..]);
                    sum = chunk.iter().fold(sum, |s, &x| s.wrapping_add(u64::from(x)));
                }
                // The upper half is the application's own: it writes there.
                shared.write(LEN as u64 - 8, &sum.to_ne_bytes()).unwrap();
                scans += 1;
            }
            scans
        })
    };
    let sg = sge(&a, 0, (LEN / 2) as u32);
    for id in 0..MESSAGES {
        p.eps[0]
            .post_send(a.qpn, send_wr(id, write_to(&b, 0), &sg))
            .unwrap();
        let wc = p.wait_cqes(0, a.cq, 1);
        assert_eq!((wc[0].wr_id, wc[0].status), (id, WcStatus::Success));
    }
    stop.store(true, Ordering::Relaxed);
    let scans = app.join().unwrap();
    assert!(scans > 0, "the application thread never ran a scan");
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, LEN / 2), data);
    assert_nothing_held_back(&p);
}

/// The responder's FETCH_ADD is a real atomic on the 8 bytes: the
/// application adding to the same word from another thread meanwhile
/// loses none of the peer's additions, nor its own.
#[test]
fn remote_and_local_fetch_adds_on_one_word_all_count() {
    const REMOTE: u64 = 300;
    let mut p = Pair::new(78);
    let [a, b] = connect(&mut p, QpType::Rc, 8192, Mtu::Mtu1024);
    let shared = region(&p, 1, &b);
    // The word at a region offset whose memory is 8-byte aligned.
    let base = shared.volatile(0, 8).unwrap().ptr_guard().as_ptr() as u64;
    let at = (8 - base % 8) % 8 + 64;
    shared.store_u64(at, 0).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let app = {
        let (shared, stop) = (shared.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut added = 0u64;
            while !stop.load(Ordering::Relaxed) {
                shared.fetch_add(at, 1).unwrap();
                added += 1;
            }
            added
        })
    };
    for id in 0..REMOTE {
        let op = SendOp::FetchAdd {
            remote: rmem(b.mr.addr + at, b.mr.rkey),
            add: 1 << 32,
        };
        p.eps[0]
            .post_send(a.qpn, send_wr(id, op, &sge(&a, 0, 8)))
            .unwrap();
        let wc = p.wait_cqes(0, a.cq, 1);
        assert_eq!(wc[0].status, WcStatus::Success);
    }
    stop.store(true, Ordering::Relaxed);
    let added = app.join().unwrap();
    assert_eq!(shared.load_u64(at).unwrap(), (REMOTE << 32) + added);
    assert_nothing_held_back(&p);
}
