//! The engine's own cost, with no I/O: two endpoints in one thread, each
//! packet handed straight from one's `poll_transmit` to the other's
//! `handle_datagram`, as the driver does minus the sockets.
//!
//! `cargo run --release -p ferroce-core --example engine_bench [-- ROUNDS [lat|bw]]`
//! (one measure alone, for a profiler).
//!
//! * 8-byte WRITE ping-pong, as `ferroce perf write --lat` runs it (each
//!   side waits for its WRITE's completion and the peer's value; an ACK
//!   leaves with the next WRITE): nanoseconds per half round trip, both
//!   endpoints' work.
//! * 64 KiB WRITE stream at RoCE MTU 1024 (16 WRITEs outstanding):
//!   nanoseconds per packet, both endpoints' work (building, checking,
//!   placing, ACKs, completions).
//!
//! Beside each, the baseline measured in the same run: copying the bytes
//! the packets carry once (per half round trip, or per packet), the least
//! any implementation does with them.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant as Clock;

use ferroce_core::verbs::{
    Access, Mtu, Path, QpAttr, QpState, QpType, RemoteSlice, RoceMode, SendOp, SendWr, Sge,
    WcStatus, WorkCompletion,
};
use ferroce_core::{Endpoint, EndpointConfig, Instant, MrInfo, QpInit};
use ferroce_wire::Psn;

struct Side {
    ep: Endpoint,
    addr: IpAddr,
    qpn: u32,
    cq: u32,
    mr: MrInfo,
}

fn side(seed: u64, last: u8, mr_len: usize) -> Side {
    let mut ep = Endpoint::new(EndpointConfig { seed });
    let pd = ep.alloc_pd();
    let cq = ep.create_cq(4096).expect("cq");
    let qpn = ep
        .create_qp(QpInit {
            pd,
            qp_type: QpType::Rc,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 256,
            max_recv_wr: 256,
            sq_sig_all: true,
            srq: None,
        })
        .expect("qp");
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let mr = ep.reg_mr(pd, mr_len, access).expect("mr");
    let addr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, last));
    Side {
        ep,
        addr,
        qpn,
        cq,
        mr,
    }
}

fn connect(a: &mut Side, b: &Side, mtu: Mtu) {
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let step = |state, f: &dyn Fn(&mut QpAttr)| {
        let mut attr = QpAttr {
            state: Some(state),
            ..QpAttr::default()
        };
        f(&mut attr);
        attr
    };
    let init = step(QpState::Init, &|a| {
        a.pkey_index = Some(0);
        a.port = Some(1);
        a.access = Some(access);
    });
    let path = Path {
        remote: b.addr,
        udp_src_port: 0xc000,
        traffic_class: 0,
        hop_limit: 64,
        roce: RoceMode::V2,
    };
    let rtr = step(QpState::Rtr, &|a| {
        a.path = Some(path);
        a.path_mtu = Some(mtu);
        a.dest_qpn = Some(b.qpn);
        a.rq_psn = Some(Psn::new(100));
        a.max_dest_rd_atomic = Some(16);
        a.min_rnr_timer = Some(1);
    });
    let rts = step(QpState::Rts, &|a| {
        a.sq_psn = Some(Psn::new(100));
        a.timeout = Some(14);
        a.retry_cnt = Some(7);
        a.rnr_retry = Some(7);
        a.max_rd_atomic = Some(16);
    });
    for attr in [init, rtr, rts] {
        a.ep.modify_qp(a.qpn, &attr).expect("modify");
    }
}

fn pair(mr_len: usize, mtu: Mtu) -> (Side, Side) {
    let mut a = side(1, 1, mr_len);
    let mut b = side(2, 2, mr_len);
    connect(&mut a, &b, mtu);
    connect(&mut b, &a, mtu);
    (a, b)
}

/// Moves everything `from` has to send into `to`; returns the packets and
/// their bytes.
fn pump(from: &mut Side, to: &mut Side, now: Instant) -> (u64, u64) {
    let (mut n, mut bytes) = (0, 0);
    while let Some(t) = from.ep.poll_transmit(now) {
        n += 1;
        bytes += t.data.len() as u64;
        to.ep.handle_datagram(now, from.addr, &t.data);
        from.ep.recycle(t.data);
    }
    (n, bytes)
}

/// Completions taken from `s`'s CQ.
fn completions(s: &mut Side) -> usize {
    let mut wcs = [WorkCompletion::default(); 16];
    let n = s.ep.poll_cq_into(s.cq, &mut wcs).expect("poll");
    let wcs = &wcs[..n];
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    n
}

fn write(s: &mut Side, peer: &MrInfo, len: u32, offset: u64) {
    let sg = [Sge {
        lkey: s.mr.lkey,
        offset,
        len,
    }];
    let remote = RemoteSlice::new(peer.addr + offset, peer.rkey, u64::from(len));
    s.ep.post_send(s.qpn, SendWr::new(0, SendOp::Write { remote }, &sg))
        .expect("post");
}

/// ns per half round trip of an 8-byte WRITE ping-pong, and the bytes
/// its packets carry per half round trip.
fn latency(rounds: u64) -> (f64, f64) {
    let (mut a, mut b) = pair(4096, Mtu::Mtu1024);
    let now = Instant::from_nanos(1);
    let (am, bm) = (a.mr, b.mr);
    let mut bytes = 0;
    let start = Clock::now();
    for _ in 0..rounds {
        write(&mut a, &bm, 8, 0);
        bytes += pump(&mut a, &mut b, now).1;
        completions(&mut b);
        write(&mut b, &am, 8, 0);
        bytes += pump(&mut b, &mut a, now).1;
        completions(&mut a);
    }
    // The last ACK.
    pump(&mut a, &mut b, now);
    completions(&mut b);
    let half_trips = (2 * rounds) as f64;
    let ns = start.elapsed().as_nanos() as f64 / half_trips;
    (ns, bytes as f64 / half_trips)
}

/// ns per packet of a 64 KiB WRITE stream, and the packets' mean size.
fn stream(messages: u64) -> (f64, f64) {
    const LEN: u32 = 64 << 10;
    const OUTSTANDING: u64 = 16;
    let (mut a, mut b) = pair(LEN as usize * OUTSTANDING as usize, Mtu::Mtu1024);
    let now = Instant::from_nanos(1);
    let bm = b.mr;
    let (mut posted, mut done, mut packets, mut bytes) = (0u64, 0u64, 0u64, 0u64);
    let start = Clock::now();
    while done < messages {
        while posted < messages && posted - done < OUTSTANDING {
            write(&mut a, &bm, LEN, (posted % OUTSTANDING) * u64::from(LEN));
            posted += 1;
        }
        let (n, sz) = pump(&mut a, &mut b, now);
        packets += n;
        bytes += sz;
        pump(&mut b, &mut a, now);
        done += completions(&mut a) as u64;
    }
    let ns = start.elapsed().as_nanos() as f64 / packets as f64;
    (ns, bytes as f64 / packets as f64)
}

/// ns to copy `size` bytes once, a buffer at a time through a ring of
/// buffers as large as the stream's memory.
fn copy_baseline(size: usize, count: u64) -> f64 {
    let src = vec![0x5au8; 1 << 20];
    let mut dst = vec![0u8; size];
    let slots = src.len() / size;
    let start = Clock::now();
    for i in 0..count {
        let at = (i as usize % slots) * size;
        dst.copy_from_slice(&src[at..at + size]);
        black_box(&mut dst);
    }
    start.elapsed().as_nanos() as f64 / count as f64
}

fn main() {
    let rounds: u64 = std::env::args()
        .nth(1)
        .map_or(200_000, |s| s.parse().expect("ROUNDS: a number"));
    let messages = (rounds / 20).max(100);
    match std::env::args().nth(2).as_deref() {
        Some("lat") => return println!("{:.0} ns per half round trip", latency(rounds).0),
        Some("bw") => return println!("{:.0} ns per packet", stream(messages).0),
        _ => {}
    }
    // Warm up, then measure.
    latency(rounds / 10);
    let (lat, lat_bytes) = latency(rounds);
    stream(messages / 10);
    let (per_packet, size) = stream(messages);
    let copy_small = copy_baseline(lat_bytes as usize, rounds * 2);
    let copy_big = copy_baseline(size as usize, messages * 64);
    println!("the engine alone: two endpoints, one thread, no I/O");
    println!("| measure | engine | copying the bytes once | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| 8 B WRITE ping-pong, per half round trip | {lat:.0} ns | {copy_small:.1} ns | {:.0}x |",
        lat / copy_small
    );
    println!(
        "| 64 KiB WRITE stream, per {size:.0}-byte packet | {per_packet:.0} ns | {copy_big:.1} ns | {:.1}x |",
        per_packet / copy_big
    );
}
