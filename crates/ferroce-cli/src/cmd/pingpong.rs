//! `ferroce pingpong`: rdma-core's `ibv_rc_pingpong`, `ibv_uc_pingpong` and
//! `ibv_ud_pingpong`, same exchange (TCP port 18515, one 52-byte record each
//! way), same traffic (each side answers every message with one of its
//! own) and the same report. The server, as rdma-core's, runs with one
//! client and exits; a connection that sends no record is refused and the
//! next one served (see [`super::tcp`]). The client retries its connection
//! while the server starts.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, MemoryRegion, Mtu, Psn, QpAttr, QpEndpoint,
    QpInitAttr, QpState, QpType, QueuePair, RecvWr, SendWr, UdDest, WcStatus, path_to,
};

use super::exchange::{self, Dest};
use super::{limits, tcp};
use crate::error::{Error, open_device};

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
    /// Connect to this server (a host name or address; the TCP port is
    /// -p); without it, be the server: serve one client, then exit.
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
    #[arg(long, short = 's',
          value_parser = clap::value_parser!(u32).range(1..=limits::MAX_SIZE as i64))]
    size: Option<u32>,
    /// Number of exchanges.
    #[arg(long, short = 'n', default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..))]
    iters: u32,
    /// Receives kept posted.
    #[arg(long, short = 'r', default_value_t = 500,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(limits::MAX_DEPTH)))]
    rx_depth: u32,
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096.
    #[arg(long, short = 'm', default_value = "1024", value_parser = limits::parse_mtu)]
    mtu: Mtu,
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
    #[command(flatten)]
    backend: super::backend::BackendArgs,
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

pub(crate) fn run(args: &PingpongArgs) -> Result<bool, Error> {
    if let Some(server) = &args.server {
        tcp::resolve(server, args.port)?; // a bad address, before the device
    }
    let local = Local::open(args)?;
    let theirs = match &args.server {
        Some(server) => {
            let mut s = tcp::connect_retry(server, args.port)?;
            let peer = tcp::peer_name(&s);
            let theirs = exchange::client(&mut s, &local.ours, &peer)?;
            local.connect(&theirs, args.mtu)?;
            theirs
        }
        None => {
            let listener = tcp::listen(SocketAddr::new(args.local, args.port))?;
            let (mut s, theirs) = tcp::serve_first(&listener, exchange::server_read)?;
            local.connect(&theirs, args.mtu)?;
            exchange::server_reply(&mut s, &local.ours)?;
            theirs
        }
    };
    print_dest("local", &local.ours);
    print_dest("remote", &theirs);
    let secs = local.ping_pong(args, &theirs)?;
    if local.qp_type == QpType::Rc {
        // Nothing marks the end of the run on the wire: if our ACK of the
        // peer's last message is lost, the peer resends it, and with this
        // process gone it waits for that ACK forever (found against rxe
        // with netem loss). Stay a few of its retransmit timeouts (67 ms
        // at the tools' timeout 14) for the driver thread to answer.
        std::thread::sleep(LINGER);
    }
    report(local.size, args.iters, secs);
    Ok(true)
}

/// The rdma-core examples' two lines.
fn report(size: usize, iters: u32, secs: f64) {
    let bytes = size as u64 * u64::from(iters) * 2;
    println!(
        "{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
        bytes as f64 * 8.0 / secs / 1e6
    );
    println!(
        "{iters} iters in {secs:.2} seconds = {:.2} usec/iter",
        secs * 1e6 / f64::from(iters)
    );
}

/// This side's device, QP (at INIT, receives posted) and buffer: the
/// message at 0, the receive buffer after it.
struct Local {
    qp_type: QpType,
    size: usize,
    /// Bytes of one buffer (UD: the GRH in front of the message).
    buf_len: usize,
    ours: Dest,
    qp: QueuePair,
    cq: CompletionQueue,
    mr: MemoryRegion,
    /// The RoCE version of -g.
    roce: ferroce::RoceMode,
    /// `--qp-timeout`, if given.
    qp_timeout: Option<u8>,
    // Dropped last: the objects above hold it open.
    _ctx: Context,
}

impl Local {
    fn open(args: &PingpongArgs) -> Result<Self, Error> {
        let qp_type = match args.transport {
            Transport::Rc => QpType::Rc,
            Transport::Uc => QpType::Uc,
            Transport::Ud => QpType::Ud,
        };
        let ud = qp_type == QpType::Ud;
        let size = args
            .size
            .map_or(if ud { 1024 } else { 4096 }, |s| s as usize);
        if ud && size > args.mtu.bytes() {
            return Err(Error::Usage(format!(
                "UD message size {size} exceeds the MTU {} (-m): a UD message is one packet",
                args.mtu.bytes()
            )));
        }
        let mut dev = args.backend.device(args.local);
        dev.port = args.roce_port;
        dev.peer_port = args.peer_roce_port;
        let ctx = open_device(dev)?;
        let roce = args.backend.roce(&ctx)?;
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(args.rx_depth + 1)?;
        let buf_len = size + if ud { GRH } else { 0 };
        let mr = pd.reg_mr(2 * buf_len, Access::LOCAL_WRITE)?;
        let mut attr = QpInitAttr::new(qp_type, &cq, &cq);
        attr.max_send_wr = 1;
        attr.max_recv_wr = args.rx_depth;
        let qp = pd.create_qp(&attr)?;
        qp.modify(&QpAttr {
            state: Some(QpState::Init),
            pkey_index: Some(0),
            port: Some(1),
            qkey: ud.then_some(UD_QKEY),
            access: (!ud).then_some(Access::LOCAL_WRITE),
            ..QpAttr::default()
        })?;
        let ours = Dest {
            lid: 0,
            qpn: qp.qpn(),
            psn: qp.psn().value(),
            gid: exchange::gid_of(args.local),
        };
        let local = Self {
            qp_type,
            size,
            buf_len,
            ours,
            qp,
            cq,
            mr,
            roce,
            qp_timeout: args.backend.qp_timeout,
            _ctx: ctx,
        };
        // Receives go up before the exchange, as the examples do, so the
        // peer's first message never meets an empty receive queue.
        for _ in 0..args.rx_depth {
            local.post_recv()?;
        }
        Ok(local)
    }

    fn post_recv(&self) -> ferroce::Result<()> {
        let sge = self.mr.sge(self.buf_len as u64, self.buf_len as u32);
        self.qp.post_recv(RecvWr::new(RECV_WRID, &[sge]))
    }

    /// INIT -> RTR -> RTS with the peer's parameters, as the examples'
    /// `pp_connect_ctx` does: one READ or atomic each way, local write
    /// only.
    fn connect(&self, theirs: &Dest, mtu: Mtu) -> ferroce::Result<()> {
        if self.qp_type == QpType::Ud {
            self.qp.modify(&QpAttr {
                state: Some(QpState::Rtr),
                ..QpAttr::default()
            })?;
            return self.qp.modify(&QpAttr {
                state: Some(QpState::Rts),
                sq_psn: Some(self.qp.psn()),
                ..QpAttr::default()
            });
        }
        let remote = QpEndpoint {
            gid: exchange::addr_of(theirs.gid),
            qp_type: self.qp_type,
            qpn: theirs.qpn,
            psn: Psn::new(theirs.psn),
            mtu: None,
        };
        let opts = ConnectOptions {
            mtu: Some(mtu),
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            access: Access::LOCAL_WRITE,
            roce: self.roce,
            timeout: self.qp_timeout.unwrap_or(ConnectOptions::default().timeout),
            ..ConnectOptions::default()
        };
        self.qp.connect(&remote, &opts)
    }

    /// Our message, to `theirs`.
    fn send(&self, theirs: &Dest) -> ferroce::Result<()> {
        let sg = [self.mr.sge(0, self.size as u32)];
        let mut wr = SendWr::send(SEND_WRID, &sg);
        if self.qp_type == QpType::Ud {
            wr.ud = Some(UdDest {
                path: ferroce::Path {
                    udp_src_port: ferroce_wire::udp::ud_source_port(self.ours.qpn),
                    roce: self.roce,
                    ..path_to(exchange::addr_of(theirs.gid), 0, 0)
                },
                qpn: theirs.qpn,
                qkey: UD_QKEY,
            });
        }
        self.qp.post_send(wr)
    }

    /// The message: a pattern the receiver can check. Interop with
    /// rdma-core (found against rxe): ibv_*_pingpong -c has its server
    /// check, after the run, that the first byte of every page (4096) of
    /// the message is 0, and it receives into and sends from one buffer
    /// (it echoes). So the pattern is 0 there (for UD too: rdma-core 44
    /// zeroes data offsets, as captured).
    fn pattern(&self) -> Vec<u8> {
        (0..self.size)
            .map(|i| {
                if i % RDMA_CORE_PAGE == 0 {
                    0
                } else {
                    (i % 251) as u8
                }
            })
            .collect()
    }

    /// The loop of the examples: the client sends first; each side sends
    /// its next message once its last send and a receive have completed.
    /// Returns the seconds it took.
    fn ping_pong(&self, args: &PingpongArgs, theirs: &Dest) -> Result<f64, Error> {
        let pattern = self.pattern();
        self.mr.write(0, &pattern)?;
        let start = Instant::now();
        let mut pending = RECV_WRID;
        if args.server.is_some() {
            self.send(theirs)?;
            pending |= SEND_WRID;
        }
        let (mut rcnt, mut scnt) = (0u32, 0u32);
        let mut last_progress = Instant::now();
        while rcnt < args.iters || scnt < args.iters {
            let wcs = self.cq.poll(2)?;
            if wcs.is_empty() {
                if last_progress.elapsed() > STALL {
                    return Err(Error::Run(format!(
                        "no completion for {} s (sent {scnt}, received {rcnt} of {})",
                        STALL.as_secs(),
                        args.iters
                    )));
                }
                std::hint::spin_loop();
                continue;
            }
            last_progress = Instant::now();
            for wc in wcs {
                if wc.status != WcStatus::Success {
                    return Err(Error::Run(format!(
                        "failed status {} ({}) for wr_id {}",
                        wc.status,
                        wc.status.code(),
                        wc.wr_id
                    )));
                }
                match wc.wr_id {
                    SEND_WRID => scnt += 1,
                    RECV_WRID => {
                        rcnt += 1;
                        if args.check {
                            self.check(&pattern, rcnt, theirs)?;
                        }
                        self.post_recv()?;
                    }
                    other => {
                        return Err(Error::Run(format!("completion for unknown wr_id {other}")));
                    }
                }
                pending &= !wc.wr_id;
                if scnt < args.iters && pending == 0 {
                    self.send(theirs)?;
                    pending = RECV_WRID | SEND_WRID;
                }
            }
        }
        Ok(start.elapsed().as_secs_f64())
    }

    /// `-c`: the message received is ours or an rdma-core client's.
    /// On UD, the GRH in front of it must name the peer as its source.
    fn check(&self, pattern: &[u8], n: u32, theirs: &Dest) -> Result<(), Error> {
        let skip = if self.qp_type == QpType::Ud { GRH } else { 0 };
        let mut got = vec![0u8; self.size];
        self.mr.read((self.buf_len + skip) as u64, &mut got)?;
        if got != pattern && !is_rdma_core_buffer(&got) {
            return Err(Error::Run(format!("received data differs at exchange {n}")));
        }
        if self.qp_type == QpType::Ud {
            let mut grh = [0u8; GRH];
            self.mr.read(self.buf_len as u64, &mut grh)?;
            check_grh(&grh, self.roce, theirs.gid)
                .map_err(|e| Error::Run(format!("exchange {n}: the receive's GRH {e}")))?;
        }
        Ok(())
    }
}

/// The GRH of a UD receive from `peer` (its GID), as ibverbs places it:
/// RoCE v1 the packet's GRH whole (IPv6 version, next header 0x1B, the
/// peer's SGID); RoCE v2 over IPv4 the IPv4 header in the last 20 bytes
/// with the peer's address; over IPv6 the IPv6 header.
fn check_grh(grh: &[u8; GRH], roce: ferroce::RoceMode, peer: [u8; 16]) -> Result<(), String> {
    const NEXT_HEADER_IBA: u8 = 0x1b;
    let mapped = peer[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
    let ok = match roce {
        ferroce::RoceMode::V1 => {
            grh[0] >> 4 == 6 && grh[6] == NEXT_HEADER_IBA && grh[8..24] == peer
        }
        ferroce::RoceMode::V2 if mapped => grh[20] == 0x45 && grh[32..36] == peer[12..],
        ferroce::RoceMode::V2 => grh[0] >> 4 == 6 && grh[8..24] == peer,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "does not name the peer {} ({roce:?}): {grh:02x?}",
            std::net::Ipv6Addr::from(peer)
        ))
    }
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
