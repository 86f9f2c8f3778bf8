//! Connecting with [`ConnectOptions`] and taking completions with
//! `poll_into`, over real UDP sockets on loopback (127.0.0.91-96): options
//! other than the defaults take effect, a mismatch of QP types is refused,
//! and a failed request's completion names itself through `ok()`.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, Error, MemoryRegion, Mtu, QpInitAttr,
    QpState, QpType, QueuePair, RecvWr, RemoteSlice, SendWr, WcStatus, WorkCompletion,
};

struct End {
    ctx: Context,
    cq: CompletionQueue,
    mr: MemoryRegion,
    qp: QueuePair,
}

fn end(ip: &str, qp_type: QpType, mr_access: Access) -> End {
    let ip: IpAddr = ip.parse().unwrap();
    let ctx = Context::open(ip).unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(256).unwrap();
    let mr = pd.reg_mr(1 << 16, mr_access).unwrap();
    let qp = pd.create_qp(&QpInitAttr::new(qp_type, &cq, &cq)).unwrap();
    End { ctx, cq, mr, qp }
}

/// Waits for `out.len()` completions through `poll_into`.
fn wait_into(cq: &CompletionQueue, out: &mut [WorkCompletion]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut n = 0;
    while n < out.len() {
        n += cq.poll_into(&mut out[n..]).unwrap();
        assert!(
            Instant::now() < deadline,
            "{n} of {} completions",
            out.len()
        );
    }
}

#[test]
fn options_other_than_the_defaults_take_effect() {
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let (a, b) = (
        end("127.0.0.91", QpType::Uc, all),
        end("127.0.0.92", QpType::Uc, all),
    );
    // MTU 256: a 1000-byte SEND is four packets each way; the QP grants
    // local write only, so the UC WRITE below is dropped by the receiver.
    let opts = ConnectOptions {
        mtu: Some(Mtu::Mtu256),
        access: Access::LOCAL_WRITE,
        traffic_class: 0x20,
        udp_src_port: Some(0xc123),
        ..ConnectOptions::default()
    };
    a.qp.connect(&b.qp.endpoint(), &opts).unwrap();
    b.qp.connect(&a.qp.endpoint(), &opts).unwrap();
    assert_eq!(a.qp.state().unwrap(), QpState::Rts);
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 3) as u8).collect();
    a.mr.write(0, &data).unwrap();
    let sent_before = a.ctx.stats().tx_packets;
    b.qp.post_recv(RecvWr::new(5, &[b.mr.sge(0, 4096)]))
        .unwrap();
    a.qp.post_send(SendWr::send(6, &[a.mr.sge(0, 1000)]))
        .unwrap();
    let mut wc = [WorkCompletion::default(); 1];
    wait_into(&b.cq, &mut wc);
    assert_eq!((wc[0].ok().unwrap().wr_id, wc[0].byte_len), (5, 1000));
    wait_into(&a.cq, &mut wc);
    assert_eq!(wc[0].wr_id, 6);
    let sent = a.ctx.stats().tx_packets - sent_before;
    assert_eq!(sent, 4, "1000 bytes at MTU 256");
    // WRITE needs REMOTE_WRITE on the QP: refused by b, silently on UC.
    let received_before = b.ctx.stats().rx_packets;
    let target = b.mr.remote().at(8192, 8).unwrap();
    a.qp.post_send(SendWr::write(7, &[a.mr.sge(0, 8)], target))
        .unwrap();
    wait_into(&a.cq, &mut wc);
    std::thread::sleep(Duration::from_millis(100));
    let mut first = [0u8; 8];
    b.mr.read(8192, &mut first).unwrap();
    assert_eq!(first, [0; 8], "the WRITE landed despite the QP's access");
    assert!(
        b.ctx.stats().rx_packets > received_before,
        "the WRITE never arrived"
    );
}

#[test]
fn connect_refuses_another_qp_type_and_ud() {
    let rc = end("127.0.0.93", QpType::Rc, Access::LOCAL_WRITE);
    let uc = end("127.0.0.94", QpType::Uc, Access::LOCAL_WRITE);
    let err = rc
        .qp
        .connect(&uc.qp.endpoint(), &ConnectOptions::default())
        .unwrap_err();
    assert!(matches!(
        err,
        Error::QpTypeMismatch {
            local: QpType::Rc,
            remote: QpType::Uc
        }
    ));
    assert!(err.to_string().contains("same QP type"), "{err}");
    assert_eq!(rc.qp.state().unwrap(), QpState::Reset);
    let pd = uc.ctx.alloc_pd();
    let ud = pd
        .create_qp(&QpInitAttr::new(QpType::Ud, &uc.cq, &uc.cq))
        .unwrap();
    let err = ud
        .connect(&ud.endpoint(), &ConnectOptions::default())
        .unwrap_err();
    assert!(
        err.to_string().contains("UD QPs are not connected"),
        "{err}"
    );
}

#[test]
fn a_failed_write_names_itself_through_ok() {
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let (a, b) = (
        end("127.0.0.95", QpType::Rc, access),
        end("127.0.0.96", QpType::Rc, access),
    );
    let opts = ConnectOptions::default();
    a.qp.connect(&b.qp.endpoint(), &opts).unwrap();
    b.qp.connect(&a.qp.endpoint(), &opts).unwrap();
    // A key b never issued.
    let remote = b.mr.remote();
    let wrong = RemoteSlice::new(remote.addr(), remote.rkey() ^ 0x100, 8);
    a.qp.post_send(SendWr::write(42, &[a.mr.sge(0, 8)], wrong))
        .unwrap();
    let mut wc = [WorkCompletion::default(); 4];
    let deadline = Instant::now() + Duration::from_secs(20);
    let n = loop {
        let n = a.cq.poll_into(&mut wc).unwrap();
        if n > 0 || Instant::now() > deadline {
            break n;
        }
    };
    assert_eq!(n, 1);
    let err = wc[0].ok().unwrap_err();
    assert_eq!(
        (err.status, err.wr_id, err.qpn),
        (WcStatus::RemAccessErr, 42, a.qp.qpn())
    );
    assert!(
        err.to_string()
            .contains(&format!("QP {:#x} failed: remote access error", a.qp.qpn())),
        "{err}"
    );
}
