//! Application-owned memory registered in place (`Backing::from_raw`, what
//! a C caller's `ibv_reg_mr` becomes): a peer's WRITE lands in it, and once
//! the region is dropped the memory is the owner's again, untouched since.
//! Over loopback (127.0.0.176/177, port 4791).
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

use ferroce::{
    Access, Backing, ConnectOptions, Context, Mtu, QpInitAttr, QpType, SendOp, SendWr, WcStatus,
};

#[test]
fn a_remote_write_lands_in_raw_memory() {
    const LEN: usize = 64 << 10;
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let open = |ip: &str| {
        let ctx = Context::open(ip.parse().unwrap()).unwrap();
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(64).unwrap();
        let qp = pd
            .create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq))
            .unwrap();
        (ctx, pd, cq, qp)
    };
    let (_ca, pa, qa_cq, qa) = open("127.0.0.176");
    let (_cb, pb, _qb_cq, qb) = open("127.0.0.177");
    let opts = ConnectOptions {
        mtu: Some(Mtu::Mtu4096),
        ..ConnectOptions::default()
    };
    qa.connect(&qb.endpoint(), &opts).unwrap();
    qb.connect(&qa.endpoint(), &opts).unwrap();

    // The "application's" memory: a leaked box, reached only through the
    // region until it is dropped.
    let raw: *mut u8 = Box::into_raw(vec![0xeeu8; LEN].into_boxed_slice()).cast();
    // SAFETY: `raw` is a live allocation of LEN bytes that nothing touches
    // until `dst` is dropped below.
    let backing = unsafe { Backing::from_raw(raw, LEN) }.unwrap();
    let dst = pb.reg_mr_with(backing, access).unwrap();
    let src = pa.reg_mr_with(vec![0x5au8; LEN], access).unwrap();

    let op = SendOp::Write {
        remote: dst.remote().at(4096, 8192).unwrap(),
    };
    qa.post_send(SendWr::new(1, op, &[src.sge(0, 8192)]))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let wc = loop {
        if let Some(wc) = qa_cq.poll(1).unwrap().pop() {
            break wc;
        }
        assert!(Instant::now() < deadline, "no completion");
    };
    assert_eq!(wc.status, WcStatus::Success);
    // Read through the region while registered...
    let mut seen = [0u8; 2];
    dst.read(4095, &mut seen).unwrap();
    assert_eq!(seen, [0xee, 0x5a]);
    // ... and it gives no box back: the memory is not its to give.
    assert!(dst.into_inner().is_none());

    // SAFETY: the region is gone (deregistered), so the loan is over and
    // this is the same allocation of LEN bytes.
    let mem = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(raw, LEN)) };
    assert!(mem[..4096].iter().all(|&x| x == 0xee));
    assert!(mem[4096..4096 + 8192].iter().all(|&x| x == 0x5a));
    assert!(mem[4096 + 8192..].iter().all(|&x| x == 0xee));
}
