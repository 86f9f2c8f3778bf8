//! The API end to end over real UDP sockets on loopback: two contexts in
//! one process (each test uses its own 127.0.0.x pair, port 4791).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, DeviceConfig, FlushLevel, FlushType,
    MemoryRegion, Mtu, MwType, ProtectionDomain, Psn, QpInitAttr, QpType, QueuePair, RecvWr,
    SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion,
};

fn wait(cq: &CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut v = Vec::new();
    while v.len() < n {
        v.extend(cq.poll(n - v.len()).unwrap());
        assert!(
            Instant::now() < deadline,
            "only {} of {n} completions",
            v.len()
        );
    }
    v
}

struct End {
    _ctx: Context,
    pd: ProtectionDomain,
    cq: CompletionQueue,
    mr: MemoryRegion,
    qp: QueuePair,
}

fn pair(a: &str, b: &str, qp_type: QpType, len: usize) -> (End, End) {
    pair_on_ports(a, b, qp_type, len, [4791, 4791])
}

/// Two devices; when both have the same address they need two ports.
fn pair_on_ports(a: &str, b: &str, qp_type: QpType, len: usize, ports: [u16; 2]) -> (End, End) {
    let access = Access::LOCAL_WRITE
        | Access::REMOTE_WRITE
        | Access::REMOTE_READ
        | Access::REMOTE_ATOMIC
        | Access::FLUSH_GLOBAL;
    let ips: [IpAddr; 2] = [a.parse().unwrap(), b.parse().unwrap()];
    let mut side = 0;
    // First PSNs on both sides of the 24-bit wrap.
    let mut mk = |ip: IpAddr, psn: u32| {
        let mut cfg = DeviceConfig::new(ip);
        cfg.port = ports[side];
        cfg.peer_port = ports[1 - side];
        side += 1;
        let ctx = Context::open_with(cfg).unwrap();
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(4096).unwrap();
        let mr = pd.reg_mr(len, access | Access::MW_BIND).unwrap();
        let mut attr = QpInitAttr::new(qp_type, &cq, &cq);
        attr.max_send_wr = 1024;
        attr.max_recv_wr = 1024;
        attr.psn = Some(Psn::new(psn));
        let qp = pd.create_qp(&attr).unwrap();
        (ctx, pd, cq, mr, qp)
    };
    let (c0, d0, q0, m0, p0) = mk(ips[0], 0xfffff0);
    let (c1, d1, q1, m1, p1) = mk(ips[1], 7);
    let opts = ConnectOptions {
        mtu: Some(Mtu::Mtu4096),
        access,
        ..ConnectOptions::default()
    };
    p0.connect(&p1.endpoint(), &opts).unwrap();
    p1.connect(&p0.endpoint(), &opts).unwrap();
    (
        End {
            _ctx: c0,
            pd: d0,
            cq: q0,
            mr: m0,
            qp: p0,
        },
        End {
            _ctx: c1,
            pd: d1,
            cq: q1,
            mr: m1,
            qp: p1,
        },
    )
}

#[test]
fn rc_write_read_8_mib_and_atomics() {
    const LEN: usize = 8 << 20;
    let (a, b) = pair("127.0.0.21", "127.0.0.22", QpType::Rc, 2 * LEN);
    let data: Vec<u8> = (0..LEN)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761) as u8)
        .collect();
    a.mr.write(0, &data).unwrap();
    let b_mem = b.mr.remote();
    let target = b_mem.at(0, LEN as u64).unwrap();
    a.qp.post_send(SendWr::write(1, &[a.mr.sge(0, LEN as u32)], target))
        .unwrap();
    a.qp.post_send(SendWr::read(2, &[a.mr.sge(LEN as u64, LEN as u32)], target))
        .unwrap();
    let wcs = wait(&a.cq, 2);
    assert!(
        wcs.iter().all(|w| w.status == WcStatus::Success),
        "{wcs:?}\nA {:?}\nB {:?}",
        a._ctx.stats(),
        b._ctx.stats()
    );
    let mut back = vec![0u8; LEN];
    b.mr.read(0, &mut back).unwrap();
    assert!(back == data, "WRITE data differs");
    a.mr.read(LEN as u64, &mut back).unwrap();
    assert!(back == data, "READ data differs");
    // Concurrent fetch-and-adds from many posts all count once.
    for i in 0..100 {
        let counter = b_mem.at(8, 8).unwrap();
        a.qp.post_send(SendWr::fetch_add(10 + i, &[a.mr.sge(0, 8)], counter, 1))
            .unwrap();
    }
    wait(&a.cq, 100);
    let mut c = [0u8; 8];
    b.mr.read(8, &mut c).unwrap();
    assert_eq!(
        u64::from_ne_bytes(c),
        u64::from_ne_bytes(data[8..16].try_into().unwrap()).wrapping_add(100)
    );
}

/// ATOMIC WRITE and FLUSH through the driver and real sockets: 8 bytes
/// placed whole, then a FLUSH of the range after a WRITE, completing once
/// both are in the peer's memory.
#[test]
fn rc_atomic_write_and_flush() {
    let (a, b) = pair("127.0.0.27", "127.0.0.28", QpType::Rc, 1 << 16);
    let b_mem = b.mr.remote();
    a.mr.write(0, &0x0102_0304_0506_0708u64.to_ne_bytes())
        .unwrap();
    a.qp.post_send(SendWr::atomic_write(
        1,
        &[a.mr.sge(0, 8)],
        b_mem.at(64, 8).unwrap(),
    ))
    .unwrap();
    let w = wait(&a.cq, 1)[0];
    assert_eq!(
        (w.status, w.opcode, w.byte_len),
        (WcStatus::Success, WcOpcode::AtomicWrite, 8)
    );
    let mut got = [0u8; 8];
    b.mr.read(64, &mut got).unwrap();
    assert_eq!(got, 0x0102_0304_0506_0708u64.to_ne_bytes());
    let data: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    a.mr.write(1024, &data).unwrap();
    let range = b_mem.at(1024, 40_000).unwrap();
    a.qp.post_send(SendWr::write(2, &[a.mr.sge(1024, 40_000)], range))
        .unwrap();
    a.qp.post_send(SendWr::flush(
        3,
        range,
        FlushType::Global,
        FlushLevel::Range,
    ))
    .unwrap();
    let w = wait(&a.cq, 2);
    assert_eq!(
        (w[1].wr_id, w[1].status, w[1].opcode, w[1].byte_len),
        (3, WcStatus::Success, WcOpcode::Flush, 40_000)
    );
    let mut back = vec![0u8; 40_000];
    b.mr.read(1024, &mut back).unwrap();
    assert!(back == data);
}

/// Memory windows through the driver: a type 2 window bound by the
/// responder opens 4 KiB of its region to the peer's WRITE and READ, its
/// range bounds them, the peer's SEND with invalidate closes it; a type 1
/// window moves with a bind.
#[test]
fn rc_memory_windows() {
    let (a, b) = pair("127.0.0.29", "127.0.0.30", QpType::Rc, 1 << 16);
    let mw = b.pd.alloc_mw(MwType::Two).unwrap();
    let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let peer = b.qp.bind_mw(&mw, b.mr.window(8192, 4096, rw), 1).unwrap();
    assert_eq!(wait(&b.cq, 1)[0].opcode, WcOpcode::BindMw);
    assert_eq!(peer.rkey(), mw.rkey().unwrap());
    a.mr.write(0, &[0x3c; 4096]).unwrap();
    a.qp.post_send(SendWr::write(
        2,
        &[a.mr.sge(0, 4096)],
        peer.at(0, 4096).unwrap(),
    ))
    .unwrap();
    a.qp.post_send(SendWr::read(
        3,
        &[a.mr.sge(4096, 100)],
        peer.at(3996, 100).unwrap(),
    ))
    .unwrap();
    let w = wait(&a.cq, 2);
    assert!(w.iter().all(|w| w.status == WcStatus::Success), "{w:?}");
    let mut got = vec![0u8; 4096];
    b.mr.read(8192, &mut got).unwrap();
    assert!(got.iter().all(|&x| x == 0x3c));
    // A type 1 window, moved by a second bind: the first key is dead.
    let one = b.pd.alloc_mw(MwType::One).unwrap();
    let first = b.qp.bind_mw(&one, b.mr.window(0, 64, rw), 4).unwrap();
    let moved = b.qp.bind_mw(&one, b.mr.window(64, 64, rw), 5).unwrap();
    assert_ne!(first.rkey(), moved.rkey());
    assert_eq!(wait(&b.cq, 2).len(), 2);
    a.qp.post_send(SendWr::write(
        6,
        &[a.mr.sge(0, 64)],
        moved.at(0, 64).unwrap(),
    ))
    .unwrap();
    assert_eq!(wait(&a.cq, 1)[0].status, WcStatus::Success);
    // The peer closes the type 2 window with its SEND; then a WRITE
    // through it is refused (and the connection goes to the error state).
    b.qp.post_recv(RecvWr::new(7, &[b.mr.sge(0, 64)])).unwrap();
    a.qp.post_send(SendWr::new(
        8,
        SendOp::SendWithInv(peer.rkey()),
        &[a.mr.sge(0, 8)],
    ))
    .unwrap();
    let r = wait(&b.cq, 1)[0];
    assert_eq!(r.invalidated_rkey, Some(peer.rkey()));
    assert_eq!(wait(&a.cq, 1)[0].status, WcStatus::Success);
    a.qp.post_send(SendWr::write(9, &[a.mr.sge(0, 8)], peer.at(0, 8).unwrap()))
        .unwrap();
    assert_eq!(wait(&a.cq, 1)[0].status, WcStatus::RemAccessErr);
}

#[test]
fn rc_and_uc_sends_with_immediate() {
    for (qp_type, addrs) in [
        (QpType::Rc, ("127.0.0.23", "127.0.0.24")),
        (QpType::Uc, ("127.0.0.25", "127.0.0.26")),
    ] {
        let (a, b) = pair(addrs.0, addrs.1, qp_type, 1 << 20);
        for i in 0..64u64 {
            b.qp.post_recv(RecvWr::new(i, &[b.mr.sge(i * 16384, 16384)]))
                .unwrap();
        }
        for i in 0..64u64 {
            let sg = [a.mr.sge(0, (i * 200) as u32)];
            a.qp.post_send(SendWr::new(i, SendOp::SendWithImm(i as u32), &sg))
                .unwrap();
        }
        let got = wait(&b.cq, 64);
        for (i, w) in got.iter().enumerate() {
            assert_eq!(
                (w.wr_id, w.status, w.byte_len, w.imm),
                (i as u64, WcStatus::Success, i as u32 * 200, Some(i as u32))
            );
        }
        wait(&a.cq, 64);
    }
}

#[test]
fn rc_over_ipv6_loopback() {
    let (a, b) = pair_on_ports("::1", "::1", QpType::Rc, 1 << 20, [47981, 47982]);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    a.mr.write(0, &data).unwrap();
    b.qp.post_recv(RecvWr::new(1, &[b.mr.sge(0, 400_000)]))
        .unwrap();
    a.qp.post_send(SendWr::send(1, &[a.mr.sge(0, 300_000)]))
        .unwrap();
    let source = b.mr.remote().at(0, 300_000).unwrap();
    a.qp.post_send(SendWr::read(2, &[a.mr.sge(500_000, 300_000)], source))
        .unwrap();
    let r = wait(&b.cq, 1);
    assert_eq!((r[0].status, r[0].byte_len), (WcStatus::Success, 300_000));
    let s = wait(&a.cq, 2);
    assert!(s.iter().all(|w| w.status == WcStatus::Success), "{s:?}");
    let mut back = vec![0u8; 300_000];
    a.mr.read(500_000, &mut back).unwrap();
    assert!(back == data);
}
