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
    Access, AsyncChannel, ConnectOptions, Context, MemoryRegion, QpInitAttr, QpType, QueuePair,
    RecvWr, SendWr,
};

/// Any error, from this thread or the client's.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

const MESSAGES: u64 = 1000;
const SIZE: u32 = 256;

fn main() -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    rt.block_on(serve())
}

async fn serve() -> Result<(), BoxError> {
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

    // Each side connects to the other's endpoint (in two processes they
    // would exchange `endpoint().to_bytes()` first).
    let opts = ConnectOptions::default();
    qp.connect(&cqp.endpoint(), &opts)?;
    cqp.connect(&qp.endpoint(), &opts)?;
    for slot in 0..16 {
        post_slot(&qp, &mr, slot)?;
    }

    let sender = std::thread::spawn(move || -> Result<(), BoxError> {
        for i in 0..MESSAGES {
            cmr.write(0, &i.to_le_bytes())?;
            cqp.post_send(SendWr::send(i, &[cmr.sge(0, SIZE)]))?;
            // One in flight: wait for the send's completion (blocking).
            let wc = loop {
                if let Some(wc) = ccq.wait(1, Duration::from_secs(10))?.pop() {
                    break wc;
                }
            };
            wc.ok()?;
        }
        Ok(())
    });

    let t = Instant::now();
    for i in 0..MESSAGES {
        let wc = cq.next(&channel).await?;
        wc.ok()?;
        let mut got = [0u8; 8];
        mr.read(wc.wr_id * u64::from(SIZE), &mut got)?;
        if u64::from_le_bytes(got) != i {
            return Err(format!("message {i} arrived out of order").into());
        }
        post_slot(&qp, &mr, wc.wr_id)?;
    }
    sender.join().expect("the client thread panicked")?;
    println!(
        "received {MESSAGES} messages of {SIZE} bytes in {:?}, awaiting each",
        t.elapsed()
    );
    Ok(())
}

/// Posts a receive into slot `slot` of the server's region (its `wr_id`
/// is the slot, so the completion says where the message landed).
fn post_slot(qp: &QueuePair, mr: &MemoryRegion, slot: u64) -> ferroce::Result<()> {
    qp.post_recv(RecvWr::new(slot, &[mr.sge(slot * u64::from(SIZE), SIZE)]))
}
