//! The async API under tokio (the `tokio` feature; scripts/test.sh runs
//! the tests with `--all-features`): a task awaiting `CompletionQueue::next`
//! gets each completion, and `wait_async` refuses a channel that is not
//! the CQ's.
#![cfg(feature = "tokio")]

use std::net::IpAddr;
use std::time::Duration;

use ferroce::{
    Access, AsyncChannel, ConnectOptions, Context, QpInitAttr, QpType, RecvWr, SendWr, WcOpcode,
    WcStatus,
};

#[test]
fn a_task_awaits_each_receive() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    // A completion that never comes would hang the test: fail it instead.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(60));
        eprintln!("a_task_awaits_each_receive: no completion within 60 s");
        std::process::exit(1);
    });
    rt.block_on(async {
        let ips: [IpAddr; 2] = [
            "127.0.0.132".parse().unwrap(),
            "127.0.0.133".parse().unwrap(),
        ];
        let (a, b) = (
            Context::open(ips[0]).unwrap(),
            Context::open(ips[1]).unwrap(),
        );
        let chan = AsyncChannel::new(b.create_comp_channel().unwrap()).unwrap();
        let (ca, cb) = (
            a.create_cq(16).unwrap(),
            b.create_cq_with_channel(16, chan.channel()).unwrap(),
        );
        let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
        let (ma, mb) = (
            pa.reg_mr(64, Access::LOCAL_WRITE).unwrap(),
            pb.reg_mr(64, Access::LOCAL_WRITE).unwrap(),
        );
        let qa = pa
            .create_qp(&QpInitAttr::new(QpType::Rc, &ca, &ca))
            .unwrap();
        let qb = pb
            .create_qp(&QpInitAttr::new(QpType::Rc, &cb, &cb))
            .unwrap();
        let opts = ConnectOptions::default();
        qa.connect(&qb.endpoint(), &opts).unwrap();
        qb.connect(&qa.endpoint(), &opts).unwrap();

        // A channel that is not the CQ's is refused, with the fix named.
        let other = AsyncChannel::new(a.create_comp_channel().unwrap()).unwrap();
        let e = cb.wait_async(&other, 1).await.unwrap_err();
        assert!(e.to_string().contains("create_cq_with_channel"), "{e}");

        for i in 0..3u64 {
            qb.post_recv(RecvWr::new(i, &[mb.sge(0, 64)])).unwrap();
        }
        // The sends come from another thread, each a moment after the task
        // has begun to await it.
        let sender = std::thread::spawn(move || {
            for i in 0..3u64 {
                std::thread::sleep(Duration::from_millis(20));
                qa.post_send(SendWr::send(i, &[ma.sge(0, 8)])).unwrap();
                assert!(!ca.wait(1, Duration::from_secs(10)).unwrap().is_empty());
            }
        });
        for i in 0..3u64 {
            let wc = cb.next(&chan).await.unwrap();
            let got = (wc.wr_id, wc.status, wc.opcode);
            assert_eq!(got, (i, WcStatus::Success, WcOpcode::Recv));
        }
        sender.join().unwrap();
    });
}
