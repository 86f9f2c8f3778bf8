//! RC SEND, RDMA WRITE, RDMA READ and both atomics between two endpoints on
//! loopback (127.0.0.1 and 127.0.0.2, UDP port 4791), in one process. The
//! two sides exchange their QP endpoints and region descriptions through
//! their byte encodings, as two processes would over a socket.
//!
//! `cargo run -p ferroce --example rc_ops`

use std::error::Error;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, QpEndpoint, QpInitAttr, QpType, RecvWr,
    RemoteRegion, SendWr, WorkCompletion,
};

/// The next completion, or an error naming the failed work request.
fn wait_one(cq: &CompletionQueue) -> Result<WorkCompletion, Box<dyn Error>> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut wc = [WorkCompletion::default()];
    loop {
        if cq.poll_into(&mut wc)? == 1 {
            return Ok(*wc[0].ok()?);
        }
        if Instant::now() > deadline {
            return Err("no completion within 10 s".into());
        }
        std::hint::spin_loop();
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let a_ip: IpAddr = "127.0.0.1".parse()?;
    let b_ip: IpAddr = "127.0.0.2".parse()?;
    let (a, b) = (Context::open(a_ip)?, Context::open(b_ip)?);
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
    let (ca, cb) = (a.create_cq(64)?, b.create_cq(64)?);
    let (ma, mb) = (pa.reg_mr(1 << 16, access)?, pb.reg_mr(1 << 16, access)?);
    let qa = pa.create_qp(&QpInitAttr::new(QpType::Rc, &ca, &ca))?;
    let qb = pb.create_qp(&QpInitAttr::new(QpType::Rc, &cb, &cb))?;

    // What each side would send the other out of band.
    let (wire_a, wire_b) = (qa.endpoint().to_bytes(), qb.endpoint().to_bytes());
    let b_memory = RemoteRegion::from_bytes(&mb.remote().to_bytes())?;
    let opts = ConnectOptions::default();
    qa.connect(&QpEndpoint::from_bytes(&wire_b)?, &opts)?;
    qb.connect(&QpEndpoint::from_bytes(&wire_a)?, &opts)?;
    println!("connected {:?}\n       to {:?}", qa, qb.endpoint());

    // SEND: 3000 bytes (three packets) into a posted receive.
    let msg: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    ma.write(0, &msg)?;
    qb.post_recv(RecvWr::new(1, &[mb.sge(0, 4096)]))?;
    qa.post_send(SendWr::send(1, &[ma.sge(0, 3000)]))?;
    wait_one(&ca)?;
    let r = wait_one(&cb)?;
    assert_eq!(r.byte_len, 3000);
    println!("SEND         3000 B: receiver got {} bytes", r.byte_len);

    // WRITE 5000 bytes to B at offset 8192, then READ them back to A at 16384.
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    ma.write(4096, &data)?;
    let target = b_memory.at(8192, 5000)?;
    qa.post_send(SendWr::write(2, &[ma.sge(4096, 5000)], target))?;
    wait_one(&ca)?;
    let mut check = vec![0u8; 5000];
    mb.read(8192, &mut check)?;
    assert_eq!(check, data);
    println!("RDMA WRITE   5000 B: landed in B's memory");
    qa.post_send(SendWr::read(3, &[ma.sge(16384, 5000)], target))?;
    wait_one(&ca)?;
    ma.read(16384, &mut check)?;
    assert_eq!(check, data);
    println!("RDMA READ    5000 B: read back identical");

    // A slice past the end of B's region is refused before anything is sent.
    let err = b_memory.at(1 << 16, 8).unwrap_err();
    println!("out of bounds: {err}");

    // FETCH_ADD then COMPARE_SWAP on a counter in B.
    mb.write(32768, &40u64.to_ne_bytes())?;
    let counter = b_memory.at(32768, 8)?;
    qa.post_send(SendWr::fetch_add(4, &[ma.sge(40000, 8)], counter, 2))?;
    wait_one(&ca)?;
    qa.post_send(SendWr::compare_swap(
        5,
        &[ma.sge(40008, 8)],
        counter,
        42,
        100,
    ))?;
    wait_one(&ca)?;
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
