//! RoCE v2 over the kernel's UDP sockets.
//!
//! One socket bound to `local:4791` receives (with `recvmmsg`). Sending goes
//! through one socket per UDP source port, bound to `local:port` and never
//! connected, so that every flow keeps its RoCE source port (0xC000 | flow
//! hash, for ECMP) and the kernel writes a predictable IP header (DF, IPv4
//! Identification 0), which the ICRC covers. Sends are batched per source
//! port with `sendmmsg`. See [`crate::icrc`] for what is verified on receive.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;

use ferroce_wire::udp::ROCE_V2_PORT;
use socket2::{Domain, Protocol, Socket, Type};

use crate::icrc::{self, RxVerifier, Verdict};
use crate::sys;

/// Backend settings.
#[derive(Debug, Clone, Copy)]
pub struct UdpConfig {
    /// The local address (the RoCE v2 GID of this endpoint).
    pub local: IpAddr,
    /// The UDP port to receive on; 4791 unless two endpoints share an
    /// address (tests).
    pub port: u16,
    /// Datagrams per `recvmmsg`.
    pub batch: usize,
    /// Largest datagram accepted (MTU 4096 + headers fits in 4200).
    pub max_datagram: usize,
}

impl UdpConfig {
    pub fn new(local: IpAddr) -> Self {
        Self {
            local,
            port: ROCE_V2_PORT,
            batch: 64,
            max_datagram: 4200,
        }
    }
}

/// A datagram to send: the transport bytes (BTH through ICRC; the ICRC is
/// filled in here) and where to.
#[derive(Debug)]
pub struct OutDatagram<'a> {
    pub remote: IpAddr,
    /// The peer's RoCE port (4791).
    pub remote_port: u16,
    pub src_port: u16,
    pub transport: &'a mut [u8],
}

/// Receive counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpStats {
    pub rx_datagrams: u64,
    pub rx_bad_icrc: u64,
    pub rx_truncated: u64,
    pub rx_too_short: u64,
    pub tx_datagrams: u64,
    pub tx_dropped: u64,
}

/// The UDP backend.
#[derive(Debug)]
pub struct UdpBackend {
    cfg: UdpConfig,
    rx: Socket,
    tx: HashMap<u16, Socket>,
    bufs: Vec<Vec<u8>>,
    received: Vec<sys::Received>,
    verifier: RxVerifier,
    stats: UdpStats,
}

fn new_socket(local: IpAddr) -> io::Result<Socket> {
    let domain = match local {
        IpAddr::V4(_) => Domain::IPV4,
        IpAddr::V6(_) => Domain::IPV6,
    };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    let fd = s.as_raw_fd();
    match local {
        IpAddr::V4(_) => {
            sys::set_dont_fragment(fd)?;
            s.set_ttl_v4(64)?;
        }
        IpAddr::V6(_) => {
            s.set_only_v6(true)?;
            sys::set_dont_fragment_v6(fd)?;
            sys::set_udp_no_check6(fd)?;
            s.set_unicast_hops_v6(64)?;
        }
    }
    Ok(s)
}

/// 8 MiB socket buffers: forced if the process may (root in CI), else as
/// large as `net.core.rmem_max`/`wmem_max` allow.
fn set_buffers(s: &Socket) -> io::Result<()> {
    const SIZE: usize = 8 << 20;
    if sys::force_buffers(s.as_raw_fd(), SIZE as libc::c_int).is_err() {
        s.set_recv_buffer_size(SIZE)?;
        s.set_send_buffer_size(SIZE)?;
    }
    Ok(())
}

impl UdpBackend {
    /// Binds the receive socket. Fails if the port is taken (for instance by
    /// the kernel's rdma_rxe on the same address).
    pub fn bind(cfg: UdpConfig) -> io::Result<Self> {
        let rx = new_socket(cfg.local)?;
        set_buffers(&rx)?;
        rx.bind(&SocketAddr::new(cfg.local, cfg.port).into())?;
        Ok(Self {
            cfg,
            rx,
            tx: HashMap::new(),
            bufs: vec![vec![0u8; cfg.max_datagram]; cfg.batch.max(1)],
            received: Vec::with_capacity(cfg.batch),
            verifier: RxVerifier::default(),
            stats: UdpStats::default(),
        })
    }

    pub fn local(&self) -> IpAddr {
        self.cfg.local
    }

    pub fn stats(&self) -> UdpStats {
        self.stats
    }

    /// The raw receive socket, for waiting on readiness (poll/epoll).
    pub fn rx_fd(&self) -> std::os::fd::RawFd {
        self.rx.as_raw_fd()
    }

    fn tx_socket(&mut self, port: u16) -> io::Result<&Socket> {
        if !self.tx.contains_key(&port) {
            let s = new_socket(self.cfg.local)?;
            set_buffers(&s)?;
            s.set_reuse_address(true)?;
            s.bind(&SocketAddr::new(self.cfg.local, port).into())?;
            self.tx.insert(port, s);
        }
        Ok(&self.tx[&port])
    }

    /// Fills in each datagram's ICRC and sends them, batched per source
    /// port. Returns how many went out; the rest found the socket buffer full.
    pub fn send(&mut self, batch: &mut [OutDatagram<'_>]) -> io::Result<usize> {
        let local = self.cfg.local;
        for d in batch.iter_mut() {
            let len = d.transport.len();
            if let Some(c) = icrc::for_send(local, d.remote, d.src_port, d.remote_port, d.transport)
            {
                d.transport[len - 4..].copy_from_slice(&c.to_le_bytes());
            }
        }
        let mut sent = 0;
        let mut start = 0;
        while start < batch.len() {
            let port = batch[start].src_port;
            let end = start
                + batch[start..]
                    .iter()
                    .take_while(|d| d.src_port == port)
                    .count();
            let msgs: Vec<(SocketAddr, &[u8])> = batch[start..end]
                .iter()
                .map(|d| (SocketAddr::new(d.remote, d.remote_port), &d.transport[..]))
                .collect();
            let fd = self.tx_socket(port)?.as_raw_fd();
            let n = sys::send_batch(fd, &msgs)?;
            sent += n;
            self.stats.tx_datagrams += n as u64;
            if n < msgs.len() {
                self.stats.tx_dropped += (batch.len() - sent) as u64;
                return Ok(sent);
            }
            start = end;
        }
        Ok(sent)
    }

    /// Baseline for benchmarks: sends `batch` as plain datagrams through the
    /// same sockets and `sendmmsg` batching, with no RoCE processing (no
    /// ICRC). Returns how many went out.
    pub fn send_raw(
        &mut self,
        remote: SocketAddr,
        src_port: u16,
        batch: &[&[u8]],
    ) -> io::Result<usize> {
        let msgs: Vec<(SocketAddr, &[u8])> = batch.iter().map(|b| (remote, *b)).collect();
        let fd = self.tx_socket(src_port)?.as_raw_fd();
        sys::send_batch(fd, &msgs)
    }

    /// Baseline for benchmarks: receives what is waiting with the same
    /// `recvmmsg` batching and hands each datagram to `f` unchecked.
    pub fn recv_raw(&mut self, mut f: impl FnMut(SocketAddr, &[u8])) -> io::Result<usize> {
        let n = sys::recv_batch(self.rx.as_raw_fd(), &mut self.bufs, &mut self.received)?;
        for r in &self.received {
            f(r.from, &self.bufs[r.index][..r.len]);
        }
        Ok(n)
    }

    /// Receives what is waiting (one `recvmmsg`), verifies each ICRC, and
    /// hands every good datagram to `f(from, src_port, transport)`.
    /// Returns the number of datagrams read (good or not).
    pub fn recv(&mut self, mut f: impl FnMut(IpAddr, u16, &[u8])) -> io::Result<usize> {
        let n = sys::recv_batch(self.rx.as_raw_fd(), &mut self.bufs, &mut self.received)?;
        for r in &self.received {
            self.stats.rx_datagrams += 1;
            if r.truncated {
                self.stats.rx_truncated += 1;
                continue;
            }
            let data = &self.bufs[r.index][..r.len];
            if data.len() < 16 {
                self.stats.rx_too_short += 1;
                continue;
            }
            let (ip, port) = (r.from.ip(), r.from.port());
            match self
                .verifier
                .verify(ip, self.cfg.local, port, self.cfg.port, data)
            {
                Verdict::Good | Verdict::GoodWithIdent(_) => f(ip, port, data),
                Verdict::Bad => self.stats.rx_bad_icrc += 1,
            }
        }
        Ok(n)
    }
}
