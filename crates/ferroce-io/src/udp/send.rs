//! The UDP backend's sending side: the send sockets (one per UDP source
//! port, up to [`super::UdpConfig::max_tx_sockets`]), each datagram's ICRC
//! for the header it will carry, and the batching (`sendmmsg`, GSO trains
//! cut where the destination, size or TOS changes). See [`super`] for the
//! contract.

use std::io;
use std::mem::take;
use std::net::SocketAddr;
use std::ops::Range;
use std::os::fd::AsRawFd;

use socket2::Socket;

use ferroce_wire::transport::ICRC_LEN;

use super::{MAX_SEGMENTS, MAX_TRAIN, OutDatagram, UdpBackend, new_socket, set_buffers};
use crate::icrc::Flow;
use crate::sys;

impl UdpBackend {
    fn tx_socket(&mut self, port: u16) -> io::Result<&Socket> {
        if !self.tx.contains_key(&port) {
            let s = new_socket(self.cfg.local, self.mc_if)?;
            set_buffers(&s)?;
            s.set_reuse_address(true)?;
            s.bind(&SocketAddr::new(self.cfg.local, port).into())?;
            self.tx.insert(port, s);
            self.tx_ports.push(port);
        }
        Ok(&self.tx[&port])
    }

    /// The source port datagrams asking for `port` leave from: `port`
    /// itself while sockets may still be opened (or it has one), else one
    /// of the open ports, chosen once and kept.
    fn wire_port(&mut self, port: u16) -> io::Result<u16> {
        if self.tx.contains_key(&port) {
            return Ok(port);
        }
        if let Some(&p) = self.shared_port.get(&port) {
            return Ok(p);
        }
        if self.tx_ports.len() < self.cfg.max_tx_sockets.max(1) {
            match self.tx_socket(port) {
                Ok(_) => return Ok(port),
                // Taken by another program: share one of ours instead.
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                    if self.tx_ports.is_empty() {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let p = self.tx_ports[usize::from(port) % self.tx_ports.len()];
        self.shared_port.insert(port, p);
        Ok(p)
    }

    /// How many send sockets are open.
    pub fn tx_sockets(&self) -> usize {
        self.tx.len()
    }

    /// Fills in each datagram's ICRC and sends them, batched per source
    /// port, runs of equal-size datagrams as GSO trains. Returns how many
    /// went out; the rest found the socket buffer full.
    pub fn send(&mut self, batch: &mut [OutDatagram<'_>]) -> io::Result<usize> {
        // The two lists are kept between calls (a round that sends must not
        // allocate); taken out here so that `self` stays free to borrow.
        let (mut trains, mut msgs) = (take(&mut self.trains), take(&mut self.msgs));
        let result = self.send_with(batch, &mut trains, &mut msgs);
        (self.trains, self.msgs) = (trains, msgs);
        result
    }

    fn send_with(
        &mut self,
        batch: &mut [OutDatagram<'_>],
        trains: &mut Vec<Range<usize>>,
        msgs: &mut Vec<sys::OutMsg>,
    ) -> io::Result<usize> {
        for d in batch.iter_mut() {
            d.src_port = self.wire_port(d.src_port)?;
        }
        self.plan_trains(batch, trains);
        let local = self.cfg.local;
        for t in trains.iter() {
            for (k, d) in batch[t.clone()].iter_mut().enumerate() {
                // Segment k of a GSO train carries Identification k.
                let ident = if t.len() > 1 { k as u16 } else { 0 };
                let len = d.transport.len();
                let flow = Flow::of(local, d.remote, d.src_port, d.remote_port, d.transport);
                if let Some(c) = self.headers.for_send(&flow, ident, d.transport) {
                    d.transport[len - ICRC_LEN..].copy_from_slice(&c.to_le_bytes());
                }
            }
        }
        let mut sent = 0;
        let mut first = 0;
        while first < trains.len() {
            let port = batch[trains[first].start].src_port;
            let last = first
                + trains[first..]
                    .iter()
                    .take_while(|t| batch[t.start].src_port == port)
                    .count();
            let mut at = 0;
            msgs.clear();
            msgs.extend(trains[first..last].iter().map(|t| {
                let d = &batch[t.start];
                let m = sys::OutMsg {
                    to: SocketAddr::new(d.remote, d.remote_port),
                    parts: at..at + t.len(),
                    segment: if t.len() > 1 {
                        d.transport.len() as u16
                    } else {
                        0
                    },
                    tos: d.tos,
                };
                at += t.len();
                m
            }));
            let parts = trains[first..last]
                .iter()
                .flat_map(|t| batch[t.clone()].iter().map(|d| &d.transport[..]));
            let fd = self.tx_socket(port)?.as_raw_fd();
            let n = match sys::send_batch(fd, msgs, parts, &mut self.scratch) {
                Ok(n) => n,
                Err(e) if msgs[0].segment != 0 && gso_refused(&e) => {
                    // Resend the rest one by one, with the ICRCs of
                    // unsegmented datagrams.
                    self.cfg.gso = false;
                    tracing::debug!(error = %e, "UDP GSO refused on this path: sending datagrams one by one");
                    let rest = trains[first].start;
                    return Ok(sent + self.send_with(&mut batch[rest..], trains, msgs)?);
                }
                Err(e) => return Err(e),
            };
            let datagrams: usize = trains[first..first + n].iter().map(|t| t.len()).sum();
            let gso: usize = trains[first..first + n]
                .iter()
                .filter(|t| t.len() > 1)
                .map(|t| t.len())
                .sum();
            sent += datagrams;
            self.stats.tx_datagrams += datagrams as u64;
            self.stats.tx_gso_datagrams += gso as u64;
            if first + n < last {
                self.stats.tx_buffer_full += (batch.len() - sent) as u64;
                return Ok(sent);
            }
            first = last;
        }
        Ok(sent)
    }

    /// Cuts `batch` into `trains`: runs of datagrams with the same source
    /// port, destination and TOS (one send gives every segment of a train
    /// the same IP header), all as long as the first but the last (which
    /// may be shorter), at most [`MAX_SEGMENTS`] and [`MAX_TRAIN`] bytes.
    /// Without GSO every datagram is its own train.
    fn plan_trains(&self, batch: &[OutDatagram<'_>], trains: &mut Vec<Range<usize>>) {
        trains.clear();
        let mut i = 0;
        while i < batch.len() {
            let head = &batch[i];
            let seg = head.transport.len();
            let gso = self.cfg.gso && head.remote.is_ipv4() && self.cfg.local.is_ipv4();
            let mut end = i + 1;
            if gso {
                let mut bytes = seg;
                while end < batch.len() && end - i < MAX_SEGMENTS {
                    let d = &batch[end];
                    let len = d.transport.len();
                    if d.src_port != head.src_port
                        || d.remote != head.remote
                        || d.remote_port != head.remote_port
                        || d.tos != head.tos
                        || len > seg
                        || bytes + len > MAX_TRAIN
                    {
                        break;
                    }
                    bytes += len;
                    end += 1;
                    if len < seg {
                        break; // a shorter datagram ends a train
                    }
                }
            }
            trains.push(i..end);
            i = end;
        }
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
        let msgs: Vec<sys::OutMsg> = (0..batch.len())
            .map(|i| sys::OutMsg {
                to: remote,
                parts: i..i + 1,
                segment: 0,
                tos: 0,
            })
            .collect();
        let fd = self.tx_socket(src_port)?.as_raw_fd();
        sys::send_batch(fd, &msgs, batch.iter().copied(), &mut self.scratch)
    }

    /// Baseline for benchmarks: sends `batch` (equal-size datagrams) as GSO
    /// trains of `per_train`, with no RoCE processing. Returns how many
    /// datagrams went out.
    pub fn send_raw_gso(
        &mut self,
        remote: SocketAddr,
        src_port: u16,
        batch: &[&[u8]],
        per_train: usize,
    ) -> io::Result<usize> {
        let per_train = per_train.clamp(1, MAX_SEGMENTS);
        let lens: Vec<usize> = (0..batch.len())
            .step_by(per_train)
            .map(|i| per_train.min(batch.len() - i))
            .collect();
        self.send_raw_trains(remote, src_port, batch, &lens)
    }

    /// Baseline for benchmarks: sends `batch` in one `sendmmsg` as
    /// messages of `trains[i]` datagrams each (a GSO train when more than
    /// one: its datagrams as long as its first, but the last, which may be
    /// shorter), with no RoCE processing. Returns how many datagrams went
    /// out.
    pub fn send_raw_trains(
        &mut self,
        remote: SocketAddr,
        src_port: u16,
        batch: &[&[u8]],
        trains: &[usize],
    ) -> io::Result<usize> {
        let mut at = 0;
        let mut msgs = Vec::with_capacity(trains.len());
        for &n in trains {
            let n = n.clamp(1, MAX_SEGMENTS).min(batch.len() - at);
            if n == 0 {
                break;
            }
            msgs.push(sys::OutMsg {
                to: remote,
                parts: at..at + n,
                segment: if n > 1 { batch[at].len() as u16 } else { 0 },
                tos: 0,
            });
            at += n;
        }
        let fd = self.tx_socket(src_port)?.as_raw_fd();
        let n = sys::send_batch(fd, &msgs, batch[..at].iter().copied(), &mut self.scratch)?;
        Ok(msgs[..n].iter().map(|m| m.parts.len()).sum())
    }
}

/// Whether a send error means this path cannot do UDP GSO (no checksum
/// offload, an old kernel, a tunnel), rather than a real failure.
fn gso_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO | libc::EINVAL | libc::ENOPROTOOPT | libc::EOPNOTSUPP)
    )
}
