//! IBA's rules against crafted traffic over real UDP sockets on loopback:
//! two contexts in one process and a forger, a bare UDP backend bound to
//! the client's address (another port), sending packets the client's QP
//! never sent (each test uses its own 127.0.0.x pair).
//!
//! `FERROCE_FORGE_MIB` sets the size of the WRITE stream under forged
//! READs (default 64), `FERROCE_FORGE=0` runs it without the forger, for a
//! measurement; the test prints its figures with `--nocapture`.

use std::net::IpAddr;
use std::thread::sleep;
use std::time::{Duration, Instant};

use ferroce::{
    Access, CompletionQueue, ConnectOptions, Context, DeviceConfig, MemoryRegion, Mtu, Psn,
    QpInitAttr, QpState, QpType, QueuePair, RemoteSlice, SendOp, SendWr, Stats, WcStatus,
    WorkCompletion,
};
use ferroce_io::{OutDatagram, UdpBackend, UdpConfig};
use ferroce_wire::reth::RethRepr;
use ferroce_wire::udp::ROCE_V2_PORT;
use ferroce_wire::{Opcode, TransportRepr};

/// The client's first PSN: the server expects it from the start.
const CLIENT_PSN: u32 = 0x00_1000;
const SERVER_PSN: u32 = 0x00_2000;
/// The forger's receive port and source port (the client holds 4791).
const FORGER_PORT: u16 = 4799;
const FORGER_SRC_PORT: u16 = 0xc0de;
/// An R_Key and address that name no region of the server.
const NO_SUCH_RKEY: u32 = 0x0bad_0bad;
const NO_SUCH_VA: u64 = 0xdead_0000_0000;

pub struct End {
    pub ctx: Context,
    pub cq: CompletionQueue,
    pub mr: MemoryRegion,
    pub qp: QueuePair,
}

/// A connected RC pair: the client at `ips[0]`, the server at `ips[1]`.
pub fn rc_pair(ips: [IpAddr; 2], len: usize) -> [End; 2] {
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let ends = [(ips[0], CLIENT_PSN), (ips[1], SERVER_PSN)].map(|(ip, psn)| {
        let ctx = Context::open_with(DeviceConfig::new(ip)).unwrap();
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(4096).unwrap();
        let mr = pd.reg_mr(len, access).unwrap();
        let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq);
        attr.max_send_wr = 1024;
        attr.max_recv_wr = 1024;
        attr.psn = Some(Psn::new(psn));
        let qp = pd.create_qp(&attr).unwrap();
        End { ctx, cq, mr, qp }
    });
    let [c, s] = &ends;
    let opts = ConnectOptions {
        mtu: Some(Mtu::Mtu4096),
        ..ConnectOptions::default()
    };
    c.qp.connect(&s.qp.endpoint(), &opts).unwrap();
    s.qp.connect(&c.qp.endpoint(), &opts).unwrap();
    ends
}

/// A bare UDP backend at `local`, sending to `to`'s RoCE port.
pub struct Forger {
    udp: UdpBackend,
    to: IpAddr,
}

impl Forger {
    pub fn new(local: IpAddr, to: IpAddr) -> Self {
        let mut cfg = UdpConfig::new(local);
        cfg.port = FORGER_PORT;
        cfg.gso = false;
        Self {
            udp: UdpBackend::bind(cfg).unwrap(),
            to,
        }
    }

    /// Sends `t` with `payload` (the backend fills in the ICRC).
    pub fn send(&mut self, t: &TransportRepr, payload: &[u8]) {
        let mut b = vec![0; t.buffer_len()];
        let n = t.emit(&mut b, payload).unwrap();
        let mut d = [OutDatagram {
            remote: self.to,
            remote_port: ROCE_V2_PORT,
            src_port: FORGER_SRC_PORT,
            tos: 0,
            transport: &mut b[..n],
        }];
        assert_eq!(self.udp.send(&mut d).unwrap(), 1);
    }
}

/// `op` at `psn` to QP `dest`, with a RETH, AckReq set.
fn request(op: Opcode, psn: u32, dest: u32, reth: RethRepr, payload_len: usize) -> TransportRepr {
    let mut t = ferroce_wire::samples::transport(op, psn, payload_len);
    t.bth.dest_qp = dest;
    t.bth.ack_req = true;
    t.reth = Some(reth);
    t
}

/// Waits until `f` holds of the server's counters (or 10 s).
fn wait_stats(ctx: &Context, f: impl Fn(&Stats) -> bool) -> Stats {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = ctx.stats();
        if f(&s) || Instant::now() > deadline {
            return s;
        }
        sleep(Duration::from_millis(5));
    }
}

fn wait(cq: &CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut v = Vec::new();
    while v.len() < n && Instant::now() < deadline {
        v.extend(cq.poll(n - v.len()).unwrap());
    }
    v
}

#[test]
fn zero_length_write_with_no_valid_key_is_acknowledged() {
    let ips: [IpAddr; 2] = ["127.0.0.41".parse().unwrap(), "127.0.0.42".parse().unwrap()];
    let [c, s] = rc_pair(ips, 4096);
    // Bare numbers on purpose: no region of the server has them.
    let bogus = RemoteSlice::new(NO_SUCH_VA, NO_SUCH_RKEY, 0);
    c.qp.post_send(SendWr::write(1, &[], bogus)).unwrap();
    // Then a real one, which must still find the QPs working.
    c.mr.write(0, &[0x5a; 64]).unwrap();
    let real = s.mr.remote().at(0, 64).unwrap();
    c.qp.post_send(SendWr::write(2, &[c.mr.sge(0, 64)], real))
        .unwrap();
    let wcs = wait(&c.cq, 2);
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, [(1, WcStatus::Success), (2, WcStatus::Success)]);
    assert_eq!(s.qp.state().unwrap(), QpState::Rts);
    let mut back = [0u8; 64];
    s.mr.read(0, &mut back).unwrap();
    assert_eq!(back, [0x5a; 64]);
}

#[test]
fn a_write_of_another_partition_is_dropped() {
    let ips: [IpAddr; 2] = ["127.0.0.43".parse().unwrap(), "127.0.0.44".parse().unwrap()];
    let [_c, s] = rc_pair(ips, 4096);
    let mut forger = Forger::new(ips[0], ips[1]);
    let reth = RethRepr {
        va: s.mr.addr(),
        rkey: s.mr.rkey(),
        dma_len: 8,
    };
    let mut t = request(Opcode::RC_RDMA_WRITE_ONLY, CLIENT_PSN, s.qp.qpn(), reth, 8);
    t.bth.pkey = 0x1234;
    forger.send(&t, &[0xee; 8]);
    let st = wait_stats(&s.ctx, |st| st.rx_bad_pkey > 0);
    assert_eq!(st.rx_bad_pkey, 1, "{st:?}");
    let port = s.ctx.query_port().unwrap();
    assert_eq!(port.bad_pkey_cntr, 1, "ibv_query_port's bad_pkey_cntr");
    let mut back = [0u8; 8];
    s.mr.read(0, &mut back).unwrap();
    assert_eq!(back, [0; 8], "the WRITE landed");
    // The same packet in the default partition lands: the forger's
    // packets do reach the server's QP.
    t.bth.pkey = 0xffff;
    forger.send(&t, &[0xee; 8]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while back != [0xee; 8] && Instant::now() < deadline {
        sleep(Duration::from_millis(5));
        s.mr.read(0, &mut back).unwrap();
    }
    assert_eq!(back, [0xee; 8], "{:?}", s.ctx.stats());
}

/// The size of each forged READ: 32 response packets at MTU 4096.
const FORGED_LEN: u32 = 128 << 10;
/// The forger's pause between two forged READs.
const FORGE_PAUSE: Duration = Duration::from_micros(20);
const WRITE_LEN: usize = 1 << 20;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Forged duplicate READs (right R_Key and address, PSNs behind
/// the expected one) while a WRITE stream runs. They match no READ the
/// server served, so they are dropped and counted instead of each being
/// answered with 32 packets, and the stream completes.
#[test]
fn forged_duplicate_reads_do_not_stall_a_write_stream() {
    let ips: [IpAddr; 2] = ["127.0.0.45".parse().unwrap(), "127.0.0.46".parse().unwrap()];
    let mib = env_or("FERROCE_FORGE_MIB", 64);
    let forge = env_or("FERROCE_FORGE", 1) != 0;
    let [c, s] = rc_pair(ips, WRITE_LEN);
    let reth = RethRepr {
        va: s.mr.addr(),
        rkey: s.mr.rkey(),
        dma_len: FORGED_LEN,
    };
    let qpn = s.qp.qpn();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let forger = forge.then(|| {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut forger = Forger::new(ips[0], ips[1]);
            let mut n = 0u32;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let psn = CLIENT_PSN.wrapping_sub(1 + n.wrapping_mul(7919) % 5000) & 0xff_ffff;
                let t = request(Opcode::RC_RDMA_READ_REQUEST, psn, qpn, reth, 0);
                forger.send(&t, &[]);
                n += 1;
                sleep(FORGE_PAUSE);
            }
            n
        })
    });
    let started = Instant::now();
    let write = SendOp::Write {
        remote: s.mr.remote().at(0, WRITE_LEN as u64).unwrap(),
    };
    let (mut posted, mut wcs) = (0, Vec::new());
    while wcs.len() < mib && started.elapsed() < Duration::from_secs(60) {
        while posted < mib && posted - wcs.len() < 16 {
            let sg = [c.mr.sge(0, WRITE_LEN as u32)];
            let wr = SendWr::new(posted as u64, write, &sg);
            c.qp.post_send(wr).unwrap();
            posted += 1;
        }
        wcs.extend(c.cq.poll(16).unwrap());
        if wcs.iter().any(|w| w.status != WcStatus::Success) {
            break;
        }
    }
    let took = started.elapsed();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let forged = forger.map_or(0, |f| f.join().unwrap());
    let st = s.ctx.stats();
    println!(
        "{mib} MiB WRITE in {took:?} ({:.0} MB/s) under {forged} forged 128 KiB READs: \
         server dropped {} as unserved duplicates, sent {} packets",
        (mib * WRITE_LEN) as f64 / took.as_secs_f64() / 1e6,
        st.rx_duplicate_unserved,
        st.tx_packets
    );
    assert_eq!(
        wcs.len(),
        mib,
        "{wcs:?}\nclient {:?}\nserver {st:?}",
        c.ctx.stats()
    );
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    if forge {
        assert!(st.rx_duplicate_unserved > 0, "{st:?}");
    }
    // Without the record each forged READ was answered with 32 packets.
    assert!(st.tx_packets < (mib * WRITE_LEN / 4096) as u64, "{st:?}");
}
