//! `ferroce pingpong`: rdma-core's `ibv_rc_pingpong`, `ibv_uc_pingpong` and
//! `ibv_ud_pingpong`, same exchange (TCP port 18515, one 52-byte record each
//! way), same traffic (each side answers every message with one of its
//! own) and the same report.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use ferroce::{
    Access, Context, Mtu, Psn, QpAttr, QpInitAttr, QpState, QpType, RecvWr, SendOp, SendWr, UdDest,
    WcStatus, path_to,
};

use super::exchange::{self, Dest};

/// UD Q_Key used by ibv_ud_pingpong.
const UD_QKEY: u32 = 0x1111_1111;
/// ibverbs puts a 40-byte GRH in front of UD receive data.
const GRH: usize = 40;
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// Give up when nothing completes for this long.
const STALL: Duration = Duration::from_secs(20);
/// RC: how long the device stays up after the last completion, to answer
/// the peer's retransmissions of a message whose ACK was lost.
const LINGER: Duration = Duration::from_millis(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Transport {
    Rc,
    Uc,
    Ud,
}

/// Arguments of `ferroce pingpong` (the ibv_*_pingpong options).
#[derive(Debug, Args)]
pub(crate) struct PingpongArgs {
    /// Connect to this server (its TCP address); without it, be the server.
    server: Option<String>,
    /// Transport service.
    #[arg(long, short = 't', value_enum, default_value = "rc")]
    transport: Transport,
    /// This device's address (its RoCE v2 GID).
    #[arg(long, short = 'L', default_value = "127.0.0.1")]
    local: IpAddr,
    /// TCP port of the exchange.
    #[arg(long, short = 'p', default_value_t = 18515)]
    port: u16,
    /// Message size (default 4096; 1024 for UD).
    #[arg(long, short = 's')]
    size: Option<usize>,
    /// Number of exchanges.
    #[arg(long, short = 'n', default_value_t = 1000)]
    iters: u32,
    /// Receives kept posted.
    #[arg(long, short = 'r', default_value_t = 500)]
    rx_depth: u32,
    /// Path MTU in bytes (256 .. 4096).
    #[arg(long, short = 'm', default_value_t = 1024)]
    mtu: usize,
    /// Check the received data (as ibv_*_pingpong -c).
    #[arg(long, short = 'c')]
    check: bool,
    /// UDP port this device receives RoCE on (4791; change only to run
    /// two devices on one address, such as ::1).
    #[arg(long, default_value_t = 4791)]
    roce_port: u16,
    /// UDP port the peer receives RoCE on.
    #[arg(long, default_value_t = 4791)]
    peer_roce_port: u16,
}

fn mtu_of(bytes: usize) -> Result<Mtu, String> {
    Ok(match bytes {
        256 => Mtu::Mtu256,
        512 => Mtu::Mtu512,
        1024 => Mtu::Mtu1024,
        2048 => Mtu::Mtu2048,
        4096 => Mtu::Mtu4096,
        _ => {
            return Err(format!(
                "MTU {bytes} is not one of 256, 512, 1024, 2048, 4096"
            ));
        }
    })
}

fn random_psn() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (t.subsec_nanos() ^ std::process::id().rotate_left(13)) & 0xff_ffff
}

fn print_dest(label: &str, d: &Dest) {
    println!(
        "  {label} address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        d.lid,
        d.qpn,
        d.psn,
        std::net::Ipv6Addr::from(d.gid)
    );
}

pub(crate) fn run(args: &PingpongArgs) -> Result<bool, String> {
    let qp_type = match args.transport {
        Transport::Rc => QpType::Rc,
        Transport::Uc => QpType::Uc,
        Transport::Ud => QpType::Ud,
    };
    let ud = qp_type == QpType::Ud;
    let mtu = mtu_of(args.mtu)?;
    let size = args.size.unwrap_or(if ud { 1024 } else { 4096 });
    if ud && size > args.mtu {
        return Err(format!(
            "UD message size {size} exceeds the MTU {}",
            args.mtu
        ));
    }
    let e = |e: ferroce::Error| e.to_string();
    let mut dev = ferroce::DeviceConfig::new(args.local);
    dev.port = args.roce_port;
    dev.peer_port = args.peer_roce_port;
    let ctx =
        Context::open_with(dev).map_err(|e| format!("opening a device on {}: {e}", args.local))?;
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(args.rx_depth + 1).map_err(e)?;
    let buf_len = size + if ud { GRH } else { 0 };
    let mr = pd.reg_mr(2 * buf_len, Access::LOCAL_WRITE).map_err(e)?;
    let mut attr = QpInitAttr::new(qp_type, &cq, &cq);
    attr.max_send_wr = 1;
    attr.max_recv_wr = args.rx_depth;
    let qp = pd.create_qp(&attr).map_err(e)?;
    let recv_sge = || vec![mr.sge(buf_len as u64, buf_len as u32)];
    let psn = random_psn();
    qp.modify(&QpAttr {
        state: Some(QpState::Init),
        pkey_index: Some(0),
        port: Some(1),
        qkey: ud.then_some(UD_QKEY),
        access: (!ud).then_some(Access::LOCAL_WRITE),
        ..QpAttr::default()
    })
    .map_err(e)?;
    // Receives go up before the exchange, as the examples do, so the
    // peer's first message never meets an empty receive queue.
    for _ in 0..args.rx_depth {
        qp.post_recv(RecvWr {
            wr_id: RECV_WRID,
            sg: recv_sge(),
        })
        .map_err(e)?;
    }
    let ours = Dest {
        lid: 0,
        qpn: qp.qpn(),
        psn,
        gid: exchange::gid_of(args.local),
    };
    let theirs = match &args.server {
        Some(server) => {
            let addr = resolve(server, args.port)?;
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
                .map_err(|e| format!("connecting to {addr}: {e}"))?;
            exchange::client(&mut s, &ours).map_err(|e| format!("exchange with {addr}: {e}"))?
        }
        None => {
            let listener = TcpListener::bind((args.local, args.port))
                .map_err(|e| format!("listening on {}:{}: {e}", args.local, args.port))?;
            let (mut s, _) = listener.accept().map_err(|e| e.to_string())?;
            let theirs = exchange::server_read(&mut s).map_err(|e| e.to_string())?;
            connect(&qp, qp_type, &ours, &theirs, mtu).map_err(e)?;
            exchange::server_reply(&mut s, &ours).map_err(|e| e.to_string())?;
            theirs
        }
    };
    if args.server.is_some() {
        connect(&qp, qp_type, &ours, &theirs, mtu).map_err(e)?;
    }
    print_dest("local", &ours);
    print_dest("remote", &theirs);
    // The message: a pattern the receiver can check. Interop with rdma-core
    // (found against rxe): ibv_*_pingpong -c has its server check, after the
    // run, that the first byte of every page (4096) of the message is 0, and
    // it receives into and sends from one buffer (it echoes). So the pattern
    // is 0 there (for UD too: rdma-core 44 zeroes data offsets, as captured).
    let pattern: Vec<u8> = (0..size)
        .map(|i| {
            if i % RDMA_CORE_PAGE == 0 {
                0
            } else {
                (i % 251) as u8
            }
        })
        .collect();
    mr.write(0, &pattern).map_err(e)?;
    let remote = exchange::addr_of(theirs.gid);
    let send = || {
        let mut wr = SendWr {
            wr_id: SEND_WRID,
            op: SendOp::Send,
            sg: vec![mr.sge(0, size as u32)],
            signaled: true,
            fence: false,
            solicited: false,
            inline: None,
            ud: None,
        };
        if ud {
            wr.ud = Some(UdDest {
                path: ferroce::Path {
                    udp_src_port: ferroce_wire::udp::ud_source_port(ours.qpn),
                    ..path_to(remote, 0, 0)
                },
                qpn: theirs.qpn,
                qkey: UD_QKEY,
            });
        }
        qp.post_send(wr)
    };

    let start = Instant::now();
    let mut pending = RECV_WRID;
    if args.server.is_some() {
        send().map_err(e)?;
        pending |= SEND_WRID;
    }
    let (mut rcnt, mut scnt) = (0u32, 0u32);
    let mut last_progress = Instant::now();
    while rcnt < args.iters || scnt < args.iters {
        let wcs = cq.poll(2).map_err(e)?;
        if wcs.is_empty() {
            if last_progress.elapsed() > STALL {
                return Err(format!(
                    "no completion for {} s (sent {scnt}, received {rcnt} of {})",
                    STALL.as_secs(),
                    args.iters
                ));
            }
            std::hint::spin_loop();
            continue;
        }
        last_progress = Instant::now();
        for wc in wcs {
            if wc.status != WcStatus::Success {
                return Err(format!(
                    "failed status {:?} for wr_id {}",
                    wc.status, wc.wr_id
                ));
            }
            match wc.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    rcnt += 1;
                    if args.check {
                        let skip = if ud { GRH } else { 0 };
                        let mut got = vec![0u8; size];
                        mr.read(buf_len + skip, &mut got).map_err(e)?;
                        if got != pattern && !is_rdma_core_buffer(&got) {
                            return Err(format!("received data differs at exchange {rcnt}"));
                        }
                    }
                    qp.post_recv(RecvWr {
                        wr_id: RECV_WRID,
                        sg: recv_sge(),
                    })
                    .map_err(e)?;
                }
                other => return Err(format!("completion for unknown wr_id {other}")),
            }
            pending &= !wc.wr_id;
            if scnt < args.iters && pending == 0 {
                send().map_err(e)?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if qp_type == QpType::Rc {
        // Nothing marks the end of the run on the wire: if our ACK of the
        // peer's last message is lost, the peer resends it, and with this
        // process gone it waits for that ACK forever (found against rxe
        // with netem loss). Stay a few of its retransmit timeouts (67 ms
        // at the tools' timeout 14) for the driver thread to answer.
        std::thread::sleep(LINGER);
    }
    let bytes = size as u64 * u64::from(args.iters) * 2;
    println!(
        "{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
        bytes as f64 * 8.0 / secs / 1e6
    );
    println!(
        "{} iters in {secs:.2} seconds = {:.2} usec/iter",
        args.iters,
        secs * 1e6 / f64::from(args.iters)
    );
    Ok(true)
}

/// The page size ibv_*_pingpong's `-c` works in (`sysconf(_SC_PAGESIZE)`
/// on x86-64 Linux, the guests' and this host's).
const RDMA_CORE_PAGE: usize = 4096;

/// What an ibv_*_pingpong client sends (found against rxe): its buffer is
/// memset to 0x7b, and with `-c` the first byte of every page of the
/// message is set to 0 (UD included, as captured from rdma-core 44). That is
/// not ferroce's pattern, so a ferroce server accepts exactly this too (an
/// ibv_*_pingpong server checks less: only the zero bytes).
fn is_rdma_core_buffer(data: &[u8]) -> bool {
    data.iter()
        .enumerate()
        .all(|(i, &b)| b == 0x7b || (b == 0 && i % RDMA_CORE_PAGE == 0))
}

fn resolve(server: &str, port: u16) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    (server, port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {server}: {e}"))?
        .next()
        .ok_or_else(|| format!("{server} has no address"))
}

/// INIT -> RTR -> RTS with the peer's parameters, as the examples'
/// `pp_connect_ctx` does.
fn connect(
    qp: &ferroce::QueuePair,
    qp_type: QpType,
    ours: &Dest,
    theirs: &Dest,
    mtu: Mtu,
) -> ferroce::Result<()> {
    let rc = qp_type == QpType::Rc;
    let ud = qp_type == QpType::Ud;
    let remote = exchange::addr_of(theirs.gid);
    qp.modify(&QpAttr {
        state: Some(QpState::Rtr),
        path: (!ud).then_some(path_to(remote, ours.qpn, theirs.qpn)),
        path_mtu: (!ud).then_some(mtu),
        dest_qpn: (!ud).then_some(theirs.qpn),
        rq_psn: (!ud).then_some(Psn::new(theirs.psn)),
        max_dest_rd_atomic: rc.then_some(1),
        min_rnr_timer: rc.then_some(12),
        ..QpAttr::default()
    })?;
    qp.modify(&QpAttr {
        state: Some(QpState::Rts),
        sq_psn: Some(Psn::new(ours.psn)),
        timeout: rc.then_some(14),
        retry_cnt: rc.then_some(7),
        rnr_retry: rc.then_some(7),
        max_rd_atomic: rc.then_some(1),
        ..QpAttr::default()
    })
}
