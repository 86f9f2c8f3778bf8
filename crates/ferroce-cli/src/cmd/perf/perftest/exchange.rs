//! perftest's TCP exchange (see the parent module's docs for the steps):
//! the version, the agreed cycle buffer, cache line and MTU, the key
//! records, the bandwidth report, and the closing handshake.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use ferroce::Mtu;

use super::rdma_cm::Comm;
use crate::cmd::{limits, tcp};
use crate::error::Error;

pub(super) const VERSION: &str = "6.06";
pub(super) const VERSION_LEN: usize = 16;
pub(super) const KEY_LEN: usize = 108;
/// The binary record of the rdma_cm exchange (`struct pingpong_dest`).
pub(super) const KEY_BIN_LEN: usize = 56;
/// perftest's defaults, sent in step 2.
pub(super) const CYCLE_BUFFER: u32 = 4096;
pub(super) const CACHE_LINE: u32 = 64;
/// The largest cycle buffer and cache line a peer may announce (they size
/// our region): a message's largest size, and a page.
const MAX_CYCLE_BUFFER: u32 = ferroce::MAX_MSG_SIZE as u32;
const MAX_CACHE_LINE: u32 = 4096;
/// What we accept as a responder (ferroce's max_dest_rd_atomic).
pub(super) const OUT_READS: u32 = 16;

/// One side's key record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Key {
    pub(super) lid: u32,
    pub(super) out_reads: u32,
    pub(super) qpn: u32,
    pub(super) psn: u32,
    pub(super) rkey: u32,
    pub(super) vaddr: u64,
    pub(super) gid: [u8; 16],
    pub(super) srqn: u32,
}

impl Key {
    pub(super) fn encode(&self) -> [u8; KEY_LEN] {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid, self.out_reads, self.qpn, self.psn, self.rkey, self.vaddr
        );
        for b in self.gid {
            s.push_str(&format!("{b:02x}:"));
        }
        s.push_str(&format!("{:08x}:", self.srqn));
        let mut out = [0u8; KEY_LEN];
        let n = s.len().min(KEY_LEN - 1);
        out[..n].copy_from_slice(&s.as_bytes()[..n]);
        out
    }

    pub(super) fn decode(msg: &[u8]) -> Result<Self, String> {
        let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        let text = std::str::from_utf8(&msg[..end])
            .map_err(|_| "perftest exchange: key record is not text".to_string())?;
        let bad = || format!("perftest exchange: cannot parse key record {text:?}");
        let f: Vec<&str> = text.split(':').collect();
        if f.len() < 23 {
            return Err(bad());
        }
        let h32 = |s: &str| u32::from_str_radix(s, 16).map_err(|_| bad());
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = u8::from_str_radix(f[6 + i], 16).map_err(|_| bad())?;
        }
        Ok(Self {
            lid: h32(f[0])?,
            out_reads: h32(f[1])?,
            qpn: h32(f[2])?,
            psn: h32(f[3])?,
            rkey: h32(f[4])?,
            vaddr: u64::from_str_radix(f[5], 16).map_err(|_| bad())?,
            gid,
            srqn: h32(f[22])?,
        })
    }
}

impl Key {
    /// The record as perftest's `-R` exchange sends it: its `struct
    /// pingpong_dest` with each integer big-endian: lid, out_reads, qpn,
    /// psn, rkey (4 bytes each), 4 bytes of padding, vaddr (8), the GID
    /// (16), srqn, gid_index (4 each; we send 0).
    pub(super) fn encode_bin(&self) -> [u8; KEY_BIN_LEN] {
        let mut m = [0u8; KEY_BIN_LEN];
        for (i, v) in [self.lid, self.out_reads, self.qpn, self.psn, self.rkey]
            .into_iter()
            .enumerate()
        {
            m[4 * i..4 * i + 4].copy_from_slice(&v.to_be_bytes());
        }
        m[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        m[32..48].copy_from_slice(&self.gid);
        m[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        m
    }

    /// Parses [`encode_bin`](Self::encode_bin)'s layout (any 56 bytes are a
    /// record; perftest reads neither srqn nor gid_index back).
    pub(super) fn decode_bin(m: &[u8]) -> Result<Self, String> {
        let m: &[u8; KEY_BIN_LEN] = m.try_into().map_err(|_| {
            format!(
                "perftest -R exchange: a key record has {} bytes, not {KEY_BIN_LEN}",
                m.len()
            )
        })?;
        let word = |i: usize| u32::from_be_bytes(m[4 * i..4 * i + 4].try_into().unwrap());
        Ok(Self {
            lid: word(0),
            out_reads: word(1),
            qpn: word(2),
            psn: word(3),
            rkey: word(4),
            vaddr: u64::from_be_bytes(m[24..32].try_into().unwrap()),
            gid: m[32..48].try_into().unwrap(),
            srqn: word(12),
        })
    }
}

/// What carries the exchange: TCP, or with `-R` the rdma_cm connection
/// of [`super::rdma_cm`].
pub(super) enum Link {
    Tcp(TcpStream),
    Rdma(Box<Comm>),
}

/// The exchange's side of one run.
pub(super) struct Wire {
    pub(super) link: Link,
    pub(super) client: bool,
}

impl Wire {
    pub(super) fn send(&mut self, m: &[u8]) -> Result<(), Error> {
        let r = match &mut self.link {
            Link::Tcp(s) => s.write_all(m).map_err(|e| e.to_string()),
            Link::Rdma(c) => c.send(m),
        };
        r.map_err(|e| Error::Exchange {
            peer: self.peer(),
            what: format!("perftest exchange: {e}"),
        })
    }

    pub(super) fn recv(&mut self, n: usize) -> Result<Vec<u8>, Error> {
        let r = match &mut self.link {
            Link::Tcp(s) => {
                let mut b = vec![0u8; n];
                s.read_exact(&mut b).map(|()| b).map_err(|e| {
                    format!(
                        "reading {n} bytes: {} (do both sides run the same test and -s, and is \
                         the peer a perftest tool or `ferroce perf --perftest`?)",
                        if tcp::is_timeout(&e) {
                            "nothing arrived in time".to_string()
                        } else {
                            e.to_string()
                        }
                    )
                })
            }
            Link::Rdma(c) => c.recv(n),
        };
        r.map_err(|e| Error::Exchange {
            peer: self.peer(),
            what: format!("perftest exchange: {e}"),
        })
    }

    /// One symmetric exchange: the client writes first.
    pub(super) fn xchg(&mut self, mine: &[u8]) -> Result<Vec<u8>, Error> {
        if self.client {
            self.send(mine)?;
            self.recv(mine.len())
        } else {
            let r = self.recv(mine.len())?;
            self.send(mine)?;
            Ok(r)
        }
    }

    /// One key record each way: text over TCP, binary over rdma_cm.
    pub(super) fn hand_shake(&mut self, mine: &Key) -> Result<Key, Error> {
        let got = match self.link {
            Link::Tcp(_) => Key::decode(&self.xchg(&mine.encode())?),
            Link::Rdma(_) => Key::decode_bin(&self.xchg(&mine.encode_bin())?),
        };
        got.map_err(|what| Error::Exchange {
            peer: self.peer(),
            what,
        })
    }

    /// No time limit from now on: the traffic may take any time.
    pub(super) fn clear_timeouts(&mut self) -> Result<(), Error> {
        match &mut self.link {
            Link::Tcp(s) => tcp::clear_timeouts(s),
            Link::Rdma(c) => {
                c.timeout = None;
                Ok(())
            }
        }
    }

    pub(super) fn peer(&self) -> String {
        match &self.link {
            Link::Tcp(s) => tcp::peer_name(s),
            Link::Rdma(c) => c.peer(),
        }
    }
}

/// What steps 1-3 agreed on.
pub(super) struct Agreed {
    pub(super) rem_version: f64,
    pub(super) cycle_buffer: u32,
    pub(super) cache_line: u32,
    pub(super) mtu: Mtu,
}

pub(super) fn mtu_enum(m: Mtu) -> u32 {
    m as u32
}

pub(super) fn mtu_from_enum(v: u32) -> Option<Mtu> {
    Mtu::from_code(u8::try_from(v).ok()?)
}

/// atof() of the leading number in a NUL-padded version string.
pub(super) fn parse_version(b: &[u8]) -> f64 {
    let s: String = b
        .iter()
        .take_while(|&&c| c.is_ascii_digit() || c == b'.')
        .map(|&c| c as char)
        .collect();
    s.parse().unwrap_or(0.0)
}

pub(super) fn agree(w: &mut Wire, mtu: Mtu) -> Result<Agreed, Error> {
    let mut v = [0u8; VERSION_LEN];
    v[..VERSION.len()].copy_from_slice(VERSION.as_bytes());
    let rv = w.xchg(&v)?;
    let rem_version = parse_version(&rv);
    let (mut cycle_buffer, mut cache_line) = (CYCLE_BUFFER, CACHE_LINE);
    if rem_version >= 5.32 {
        let be = |c: Vec<u8>| u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        cycle_buffer = cycle_buffer.max(be(w.xchg(&CYCLE_BUFFER.to_be_bytes())?));
        // perftest spaces small messages (and atomics) by the cache line.
        cache_line = cache_line.max(be(w.xchg(&CACHE_LINE.to_be_bytes())?));
    }
    // Both size our region: a peer's value is checked before it is used.
    for (what, v, max) in [
        ("cycle buffer", cycle_buffer, MAX_CYCLE_BUFFER),
        ("cache line", cache_line, MAX_CACHE_LINE),
    ] {
        limits::check(&format!("the peer's {what}"), v.into(), max.into()).map_err(|what| {
            Error::Exchange {
                peer: w.peer(),
                what,
            }
        })?;
    }
    let mut mtu = mtu;
    if rem_version >= 5.1 {
        let len = if rem_version >= 5.31 { 2 } else { 4 };
        let mut m = vec![0u8; len];
        let t = mtu_enum(mtu).to_string();
        m[..t.len()].copy_from_slice(t.as_bytes());
        let r = w.xchg(&m)?;
        let text: String = r
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .map(|&c| c as char)
            .collect();
        if let Some(rm) = text.parse().ok().and_then(mtu_from_enum)
            && rm.bytes() < mtu.bytes()
        {
            mtu = rm;
        }
    }
    Ok(Agreed {
        rem_version,
        cycle_buffer,
        cache_line,
        mtu,
    })
}

/// The client's results, as perftest exchanges them.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Report {
    pub(super) size: u64,
    pub(super) iters: u64,
    pub(super) bw_peak: f64,
    pub(super) bw_avg: f64,
    pub(super) msg_rate: f64,
}

pub(super) fn xchg_reports(w: &mut Wire, mine: &Report, rem_version: f64) -> Result<Report, Error> {
    let u64w = |w: &mut Wire, v: u64| -> Result<u64, Error> {
        let r = w.xchg(&v.to_be_bytes())?;
        Ok(u64::from_be_bytes(r[..8].try_into().unwrap()))
    };
    let size = u64w(w, mine.size)?;
    let iters = if rem_version >= 5.33 {
        u64w(w, mine.iters)?
    } else {
        let r = w.xchg(&(mine.iters as u32).to_be_bytes())?;
        u64::from(u32::from_be_bytes(r[..4].try_into().unwrap()))
    };
    let bw_peak = f64::from_bits(u64w(w, mine.bw_peak.to_bits())?);
    let bw_avg = f64::from_bits(u64w(w, mine.bw_avg.to_bits())?);
    let msg_rate = f64::from_bits(u64w(w, mine.msg_rate.to_bits())?);
    Ok(Report {
        size,
        iters,
        bw_peak,
        bw_avg,
        msg_rate,
    })
}

pub(super) fn print_report(r: &Report) {
    super::super::bw::print_table(r.size, r.iters, r.bw_peak, r.bw_avg, r.msg_rate);
}

/// Closes as perftest does: a key record, then over TCP `done`.
pub(super) fn close(w: &mut Wire, key: &Key) -> Result<(), Error> {
    w.hand_shake(key)?;
    let Link::Tcp(s) = &mut w.link else {
        return Ok(());
    };
    s.write_all(b"done\0").map_err(|e| Error::Exchange {
        peer: tcp::peer_name(s),
        what: format!("perftest exchange: {e}"),
    })?;
    // The peer sends its own `done` and closes; neither side waits on it.
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut b = [0u8; 5];
    let _ = s.read_exact(&mut b);
    Ok(())
}
