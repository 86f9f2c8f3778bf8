//! RC SEND, RDMA WRITE, RDMA READ and both atomics between two endpoints on
//! loopback (127.0.0.1 and 127.0.0.2, UDP port 4791), in one process.
//!
//! `cargo run -p ferroce --example rc_ops`

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, Context, Mtu, Psn, QpInitAttr, QpType, RecvWr, SendOp, SendWr,
    WcStatus, WorkCompletion, connect_qp,
};

fn wait_one(cq: &CompletionQueue) -> WorkCompletion {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(wc) = cq.poll(1).expect("poll").pop() {
            return wc;
        }
        assert!(Instant::now() < deadline, "no completion within 10 s");
        std::hint::spin_loop();
    }
}

fn main() -> Result<(), ferroce::Error> {
    let a_ip: IpAddr = "127.0.0.1".parse().unwrap();
    let b_ip: IpAddr = "127.0.0.2".parse().unwrap();
    let (a, b) = (Context::open(a_ip)?, Context::open(b_ip)?);
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (ca, cb) = (a.create_cq(64)?, b.create_cq(64)?);
    let (ma, mb) = (pa.reg_mr(1 << 16, access)?, pb.reg_mr(1 << 16, access)?);
    let qa = pa.create_qp(&QpInitAttr::new(QpType::Rc, &ca, &ca))?;
    let qb = pb.create_qp(&QpInitAttr::new(QpType::Rc, &cb, &cb))?;
    let (psn_a, psn_b) = (Psn::new(0x1000), Psn::new(0x2000));
    connect_qp(&qa, QpType::Rc, b_ip, qb.qpn(), psn_a, psn_b, Mtu::Mtu1024)?;
    connect_qp(&qb, QpType::Rc, a_ip, qa.qpn(), psn_b, psn_a, Mtu::Mtu1024)?;

    // SEND: 3000 bytes (three packets) into a posted receive.
    let msg: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    ma.write(0, &msg)?;
    qb.post_recv(RecvWr {
        wr_id: 1,
        sg: vec![mb.sge(0, 4096)],
    })?;
    qa.post_send(SendWr::new(1, SendOp::Send, vec![ma.sge(0, 3000)]))?;
    let (s, r) = (wait_one(&ca), wait_one(&cb));
    assert_eq!(
        (s.status, r.status, r.byte_len),
        (WcStatus::Success, WcStatus::Success, 3000)
    );
    println!("SEND         3000 B: receiver got {} bytes", r.byte_len);

    // WRITE 5000 bytes to B at offset 8192, then READ them back to A at 16384.
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    ma.write(4096, &data)?;
    qa.post_send(SendWr::new(
        2,
        SendOp::Write {
            remote_addr: mb.addr() + 8192,
            rkey: mb.rkey(),
        },
        vec![ma.sge(4096, 5000)],
    ))?;
    assert_eq!(wait_one(&ca).status, WcStatus::Success);
    let mut check = vec![0u8; 5000];
    mb.read(8192, &mut check)?;
    assert_eq!(check, data);
    println!("RDMA WRITE   5000 B: landed in B's memory");
    qa.post_send(SendWr::new(
        3,
        SendOp::Read {
            remote_addr: mb.addr() + 8192,
            rkey: mb.rkey(),
        },
        vec![ma.sge(16384, 5000)],
    ))?;
    assert_eq!(wait_one(&ca).status, WcStatus::Success);
    ma.read(16384, &mut check)?;
    assert_eq!(check, data);
    println!("RDMA READ    5000 B: read back identical");

    // FETCH_ADD then COMPARE_SWAP on a counter in B.
    mb.write(32768, &40u64.to_ne_bytes())?;
    let counter = mb.addr() + 32768;
    qa.post_send(SendWr::new(
        4,
        SendOp::FetchAdd {
            remote_addr: counter,
            rkey: mb.rkey(),
            add: 2,
        },
        vec![ma.sge(40000, 8)],
    ))?;
    assert_eq!(wait_one(&ca).status, WcStatus::Success);
    qa.post_send(SendWr::new(
        5,
        SendOp::CompareSwap {
            remote_addr: counter,
            rkey: mb.rkey(),
            compare: 42,
            swap: 100,
        },
        vec![ma.sge(40008, 8)],
    ))?;
    assert_eq!(wait_one(&ca).status, WcStatus::Success);
    let (mut old1, mut old2, mut now) = ([0u8; 8], [0u8; 8], [0u8; 8]);
    ma.read(40000, &mut old1)?;
    ma.read(40008, &mut old2)?;
    mb.read(32768, &mut now)?;
    println!(
        "FETCH_ADD +2 saw {}, COMPARE_SWAP 42->100 saw {}, counter is now {}",
        u64::from_ne_bytes(old1),
        u64::from_ne_bytes(old2),
        u64::from_ne_bytes(now)
    );
    assert_eq!(u64::from_ne_bytes(now), 100);
    Ok(())
}
