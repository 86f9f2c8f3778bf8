//! An async server under tokio: it awaits its receive completions on a
//! completion channel ([`ferroce::AsyncChannel`]) instead of polling,
//! reposting each receive, while a client on another device (here a plain
//! thread, on 127.0.0.2) sends it messages. The task never spins: between
//! messages the runtime sleeps in epoll on the channel's descriptor, and
//! ferroce's driver thread acknowledges the client meanwhile.
//!
//! `cargo run -p ferroce --features tokio --example async_server`

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ferroce::{
    Access, AsyncChannel, Context, Mtu, Psn, QpInitAttr, QpType, RecvWr, SendOp, SendWr, WcStatus,
    connect_qp,
};

const MESSAGES: u64 = 1000;
const SIZE: u32 = 256;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    rt.block_on(serve())
}

async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let (server_ip, client_ip): (IpAddr, IpAddr) = ("127.0.0.1".parse()?, "127.0.0.2".parse()?);
    let access = Access::LOCAL_WRITE;

    // The server: its CQ reports to a channel the runtime watches.
    let server = Context::open(server_ip)?;
    let channel = AsyncChannel::new(server.create_comp_channel()?)?;
    let cq = server.create_cq_with_channel(64, channel.channel())?;
    let pd = server.alloc_pd();
    let mr = pd.reg_mr(16 * SIZE as usize, access)?;
    let qp = pd.create_qp(&QpInitAttr::new(QpType::Rc, &cq, &cq))?;

    // The client, on a device of its own.
    let client = Context::open(client_ip)?;
    let ccq = client.create_cq(64)?;
    let cpd = client.alloc_pd();
    let cmr = cpd.reg_mr(SIZE as usize, access)?;
    let cqp = cpd.create_qp(&QpInitAttr::new(QpType::Rc, &ccq, &ccq))?;

    let (spsn, cpsn) = (Psn::new(1), Psn::new(2));
    connect_qp(
        &qp,
        QpType::Rc,
        client_ip,
        cqp.qpn(),
        spsn,
        cpsn,
        Mtu::Mtu1024,
    )?;
    connect_qp(
        &cqp,
        QpType::Rc,
        server_ip,
        qp.qpn(),
        cpsn,
        spsn,
        Mtu::Mtu1024,
    )?;
    for slot in 0..16 {
        qp.post_recv(RecvWr {
            wr_id: slot,
            sg: vec![mr.sge(slot * u64::from(SIZE), SIZE)],
        })?;
    }

    let sender = std::thread::spawn(move || -> Result<(), ferroce::Error> {
        for i in 0..MESSAGES {
            cmr.write(0, &i.to_le_bytes())?;
            cqp.post_send(SendWr::new(i, SendOp::Send, vec![cmr.sge(0, SIZE)]))?;
            // One in flight: wait for the send's completion (blocking).
            let wc = loop {
                if let Some(wc) = ccq.wait(1, Duration::from_secs(10))?.pop() {
                    break wc;
                }
            };
            assert_eq!(wc.status, WcStatus::Success, "send {i}");
        }
        Ok(())
    });

    let t = Instant::now();
    for i in 0..MESSAGES {
        let wc = cq.next(&channel).await?;
        if wc.status != WcStatus::Success {
            return Err(format!("receive {i}: {:?}", wc.status).into());
        }
        let mut got = [0u8; 8];
        mr.read((wc.wr_id * u64::from(SIZE)) as usize, &mut got)?;
        if u64::from_le_bytes(got) != i {
            return Err(format!("message {i} arrived out of order").into());
        }
        qp.post_recv(RecvWr {
            wr_id: wc.wr_id,
            sg: vec![mr.sge(wc.wr_id * u64::from(SIZE), SIZE)],
        })?;
    }
    sender.join().expect("the client thread panicked")?;
    println!(
        "received {MESSAGES} messages of {SIZE} bytes in {:?}, awaiting each",
        t.elapsed()
    );
    Ok(())
}
