//! A stream rsocket's flow control, as rdma-core 44's librdmacm keeps it,
//! in offsets and counters only: the caller owns the buffers and the QP,
//! and does what the plans say (copy into the send ring, post the WRITE,
//! copy out of the receive ring).
//!
//! * The receive buffer is a ring of `rbuf_size` bytes the peer writes into
//!   with RDMA WRITE with immediate, half a ring at a time: the connection's
//!   private data lends the first half, each credit update ([`Op::Sgl`])
//!   the next free half, written into the peer's two-entry target SGL.
//! * Messages are counted in 16-bit sequence numbers: the peer may send up
//!   to the sequence number the last credit update carried, so that its
//!   messages never outrun our posted receives and message queue.
//! * The send ring of `sbuf_size` bytes holds what is in flight; a
//!   completion gives its bytes back. Control messages (credits, shutdown)
//!   have their own four slots ([`CTRL_SLOTS`]) of the send queue.

use std::collections::VecDeque;

use super::wire::{Ctrl, Msg, Op, Sge};

/// The first transfer of a send; each next one doubles, up to [`MAX_TRANSFER`].
pub const FIRST_TRANSFER: u32 = 2048;
/// The largest single WRITE of a send.
pub const MAX_TRANSFER: u32 = 65536;
/// A send waits until this much of the send ring is free.
pub const SEND_LOW_WATER: u32 = 2048;
/// Send queue slots kept for control messages.
pub const CTRL_SLOTS: u32 = 4;
/// Entries of the target SGL array.
pub const SGL_ENTRIES: usize = 2;

/// The sizes of one connection (rdma-core's defaults: [`Config::default`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub sbuf_size: u32,
    pub rbuf_size: u32,
    pub sq_size: u16,
    pub rq_size: u16,
    pub sq_inline: u16,
    /// Entries of our iomap table (the peer's `riomap` targets).
    pub iomap_size: u16,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            sbuf_size: 1 << 17,
            rbuf_size: 1 << 17,
            sq_size: 384,
            rq_size: 384,
            sq_inline: 64,
            iomap_size: 0,
        }
    }
}

/// The target SGL array, which the peer rewrites by RDMA WRITE (so the
/// caller reads and writes it in place).
pub trait TargetSgl {
    fn get(&self, i: usize) -> Sge;
    fn set(&mut self, i: usize, sge: Sge);
}

/// One WRITE with immediate of a send: `len` bytes, staged in the send
/// ring at `pieces` (the second is empty unless the ring wraps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub pieces: [(u32, u32); 2],
    pub remote_addr: u64,
    pub rkey: u32,
    pub msg: Msg,
    pub inline: bool,
}

impl Chunk {
    pub fn bytes(&self) -> u32 {
        self.pieces[0].1 + self.pieces[1].1
    }
}

/// A message with no data to post (`write`: an [`Sge`] to write first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtrlPost {
    pub msg: Msg,
    pub write: Option<(Sge, u64, u32)>,
}

/// What a receive completion meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// Data, credits or nothing the application sees at once.
    Progress,
    /// The peer closed the connection.
    Disconnected,
}

/// Connection state bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    pub connected: bool,
    pub readable: bool,
    pub writable: bool,
    pub error: Option<i32>,
}

/// One connection's counters.
#[derive(Debug)]
pub struct Stream {
    pub cfg: Config,
    pub flags: Flags,
    sseq_no: u16,
    sseq_comp: u16,
    sqe_avail: u32,
    sbuf_bytes_avail: u32,
    sbuf_head: u32,
    target_sge: usize,
    ctrl_seqno: u32,
    ctrl_max_seqno: u32,
    rseq_no: u16,
    rseq_comp: u16,
    rmsg: VecDeque<u32>,
    rbuf_offset: u32,
    rbuf_bytes_avail: u32,
    rbuf_free_offset: u32,
    remote_sgl: Sge,
    remote_sge: u32,
    /// The peer's iomap table (address, key, entries).
    pub remote_iomap: Sge,
    /// The peer reads our SGL and iomap entries byte-swapped.
    pub swap: bool,
    /// Our receive ring's address and rkey, for credit updates.
    rbuf: (u64, u32),
}

impl Stream {
    /// A stream whose receive ring is at `rbuf` (address, rkey); the
    /// first half is lent by the private data.
    pub fn new(cfg: Config, rbuf: (u64, u32)) -> Self {
        let half = cfg.rbuf_size / 2;
        Self {
            cfg,
            flags: Flags::default(),
            sseq_no: 0,
            sseq_comp: 0,
            sqe_avail: u32::from(cfg.sq_size).saturating_sub(CTRL_SLOTS),
            sbuf_bytes_avail: cfg.sbuf_size,
            sbuf_head: 0,
            target_sge: 0,
            ctrl_seqno: 0,
            ctrl_max_seqno: CTRL_SLOTS,
            rseq_no: 0,
            rseq_comp: cfg.rq_size / 2,
            rmsg: VecDeque::with_capacity(usize::from(cfg.rq_size) + 1),
            rbuf_offset: 0,
            rbuf_bytes_avail: half,
            rbuf_free_offset: half,
            remote_sgl: Sge::default(),
            remote_sge: 1,
            remote_iomap: Sge::default(),
            swap: false,
            rbuf,
        }
    }

    /// The first half of the receive ring, as the private data lends it.
    pub fn first_half(&self) -> Sge {
        Sge {
            addr: self.rbuf.0,
            key: self.rbuf.1,
            length: self.cfg.rbuf_size / 2,
        }
    }

    /// Takes in the peer's private data: its SGL array, iomap table,
    /// first lent half (into `sgl[0]`) and credits. Then connected.
    ///
    /// `sgl[1]` is left as it is: it starts zeroed, and an accepting peer
    /// lends its second half there as soon as it is connected, which can
    /// land before the connecting side gets here.
    pub fn accept_peer(&mut self, peer: &super::wire::ConnData, sgl: &mut impl TargetSgl) {
        self.remote_sgl = peer.target_sgl;
        self.remote_sge = 1;
        self.swap = peer.peer_swapped();
        if peer.flags & super::wire::CONN_FLAG_IOMAP != 0 {
            self.remote_iomap = Sge {
                addr: peer.target_sgl.addr + Sge::LEN as u64 * u64::from(peer.target_sgl.length),
                key: peer.target_sgl.key,
                length: super::wire::scale_to_value(u32::from(peer.target_iomap_size), 8),
            };
        }
        sgl.set(0, peer.data_buf);
        self.sseq_comp = peer.credits;
        self.flags = Flags {
            connected: true,
            readable: true,
            writable: true,
            error: None,
        };
    }

    /// Room for one more data WRITE (credits, queue slot, ring, target).
    pub fn can_send(&self, sgl: &impl TargetSgl) -> bool {
        self.sqe_avail > 0
            && self.sbuf_bytes_avail >= SEND_LOW_WATER
            && self.sseq_no != self.sseq_comp
            && sgl.get(self.target_sge).length != 0
    }

    /// Room for a direct write (as for data, no target needed).
    pub fn can_write_direct(&self) -> bool {
        self.sqe_avail > 0
            && self.sbuf_bytes_avail >= SEND_LOW_WATER
            && self.sseq_no != self.sseq_comp
    }

    /// Whether every request posted has completed.
    pub fn all_sends_done(&self) -> bool {
        self.ctrl_max_seqno - self.ctrl_seqno + self.sqe_avail == u32::from(self.cfg.sq_size)
            || !self.flags.connected
    }

    /// How much of `left` the next WRITE carries (`olen` grows per chunk).
    fn chunk_len(&self, left: usize, olen: &mut u32, limit: u32) -> u32 {
        let mut x = if (*olen as usize) < left {
            let x = *olen;
            if *olen < MAX_TRANSFER {
                *olen <<= 1;
            }
            x
        } else {
            left as u32
        };
        x = x.min(self.sbuf_bytes_avail).min(limit);
        x
    }

    /// Stages `len` bytes in the send ring: where they go.
    fn stage(&mut self, len: u32) -> [(u32, u32); 2] {
        let room = self.cfg.sbuf_size - self.sbuf_head;
        let pieces = if len <= room {
            [(self.sbuf_head, len), (0, 0)]
        } else {
            [(self.sbuf_head, room), (0, len - room)]
        };
        self.sbuf_head = (self.sbuf_head + len) % self.cfg.sbuf_size;
        self.sbuf_bytes_avail -= len;
        self.sqe_avail -= 1;
        pieces
    }

    /// Plans the next data WRITE of a send with `left` bytes to go (the
    /// caller checked [`Self::can_send`]).
    pub fn next_chunk(&mut self, left: usize, olen: &mut u32, sgl: &mut impl TargetSgl) -> Chunk {
        let mut target = sgl.get(self.target_sge);
        let len = self.chunk_len(left, olen, target.length);
        let pieces = self.stage(len);
        self.sseq_no = self.sseq_no.wrapping_add(1);
        let (remote_addr, rkey) = (target.addr, target.key);
        target.addr += u64::from(len);
        target.length -= len;
        sgl.set(self.target_sge, target);
        if target.length == 0 {
            self.target_sge = (self.target_sge + 1) % SGL_ENTRIES;
        }
        Chunk {
            pieces,
            remote_addr,
            rkey,
            msg: Msg::new(Op::Data, len),
            inline: len <= u32::from(self.cfg.sq_inline),
        }
    }

    /// Plans a direct WRITE (no immediate) of up to `left` bytes to
    /// `remote` (address, rkey, bytes left there).
    pub fn next_direct(&mut self, left: usize, olen: &mut u32, remote: (u64, u32, u32)) -> Chunk {
        let len = self.chunk_len(left, olen, remote.2);
        let pieces = self.stage(len);
        Chunk {
            pieces,
            remote_addr: remote.0,
            rkey: remote.1,
            msg: Msg::new(Op::Write, len),
            inline: len <= u32::from(self.cfg.sq_inline),
        }
    }

    /// Plans the WRITE of iomap entry `index` (its bytes inline).
    pub fn iomap_write(&mut self, index: u32) -> (Msg, u64, u32) {
        self.sseq_no = self.sseq_no.wrapping_add(1);
        self.sqe_avail -= 1;
        self.sbuf_bytes_avail -= super::wire::IoMapEntry::LEN as u32;
        let addr = self.remote_iomap.addr + u64::from(index) * super::wire::IoMapEntry::LEN as u64;
        (Msg::new(Op::IoMapSgl, index), addr, self.remote_iomap.key)
    }

    /// A send request completed (`msg` is its `wr_id`).
    pub fn send_done(&mut self, msg: Msg, ok: bool) {
        match msg.op {
            Op::Sgl => self.ctrl_max_seqno += 1,
            Op::Ctrl => {
                self.ctrl_max_seqno += 1;
                if msg.data == Ctrl::Disconnect.code() {
                    self.disconnected();
                }
            }
            Op::IoMapSgl => {
                self.sqe_avail += 1;
                self.sbuf_bytes_avail += super::wire::IoMapEntry::LEN as u32;
            }
            _ => {
                self.sqe_avail += 1;
                self.sbuf_bytes_avail += msg.data;
            }
        }
        if !ok && self.flags.connected {
            self.fail(libc::EIO);
        }
    }

    /// A receive completed with immediate `imm` (None: it failed).
    pub fn received(&mut self, imm: Option<u32>) -> Received {
        let Some(imm) = imm else {
            return Received::Progress;
        };
        let msg = Msg::decode(imm);
        match msg.op {
            Op::Sgl => self.sseq_comp = msg.data as u16,
            Op::Ctrl => match Ctrl::from_code(msg.data) {
                Some(Ctrl::Disconnect) => {
                    self.disconnected();
                    return Received::Disconnected;
                }
                Some(Ctrl::Shutdown) => {
                    if self.flags.writable {
                        self.flags.readable = false;
                    } else {
                        self.disconnected();
                        return Received::Disconnected;
                    }
                }
                _ => {}
            },
            Op::Data | Op::Reserved(_) => {
                if self.rmsg.len() <= usize::from(self.cfg.rq_size) {
                    self.rmsg.push_back(msg.data);
                }
            }
            Op::IoMapSgl | Op::Write => {}
        }
        Received::Progress
    }

    fn disconnected(&mut self) {
        self.flags.connected = false;
        self.flags.readable = false;
        self.flags.writable = false;
    }

    /// The connection failed with `errno`.
    pub fn fail(&mut self, errno: i32) {
        self.disconnected();
        self.flags.error = Some(errno);
    }

    pub fn have_data(&self) -> bool {
        !self.rmsg.is_empty()
    }

    /// Plans a receive of up to `len` bytes: the ring pieces to copy, in
    /// order. Unless `peek`, they are consumed.
    pub fn take(&mut self, len: usize, peek: bool) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let mut left = len as u64;
        let mut offset = self.rbuf_offset;
        let mut i = 0;
        while left > 0 && i < self.rmsg.len() {
            let avail = u64::from(self.rmsg[i]);
            let n = avail.min(left) as u32;
            if !peek {
                if u64::from(n) < avail {
                    self.rmsg[i] -= n;
                } else {
                    self.rseq_no = self.rseq_no.wrapping_add(1);
                    i += 1;
                }
            } else {
                i += 1;
            }
            let end = self.cfg.rbuf_size - offset;
            if n > end {
                out.push((offset, end));
                out.push((0, n - end));
                offset = n - end;
            } else {
                out.push((offset, n));
                offset = (offset + n) % self.cfg.rbuf_size;
            }
            left -= u64::from(n);
        }
        if !peek {
            self.rmsg.drain(..i);
            let taken = len as u64 - left;
            self.rbuf_offset = offset;
            self.rbuf_bytes_avail += taken as u32;
        }
        out
    }

    fn ctrl_avail(&self) -> bool {
        self.ctrl_seqno != self.ctrl_max_seqno
    }

    /// A credit update, if one is due and a control slot is free.
    pub fn credits(&mut self) -> Option<CtrlPost> {
        let half = self.cfg.rbuf_size / 2;
        let due = self.rbuf_bytes_avail >= half
            || (self.rseq_no.wrapping_sub(self.rseq_comp) as i16) >= 0;
        if !due || !self.ctrl_avail() || !self.flags.connected {
            return None;
        }
        self.ctrl_seqno += 1;
        self.rseq_comp = self.rseq_no.wrapping_add(self.cfg.rq_size / 2);
        let msg = Msg::new(
            Op::Sgl,
            u32::from(self.rseq_no.wrapping_add(self.cfg.rq_size)),
        );
        if self.rbuf_bytes_avail < half {
            return Some(CtrlPost { msg, write: None });
        }
        let sge = Sge {
            addr: self.rbuf.0 + u64::from(self.rbuf_free_offset),
            key: self.rbuf.1,
            length: half,
        };
        let at = self.remote_sgl.addr + u64::from(self.remote_sge) * Sge::LEN as u64;
        self.rbuf_bytes_avail -= half;
        self.rbuf_free_offset = (self.rbuf_free_offset + half) % self.cfg.rbuf_size;
        self.remote_sge = (self.remote_sge + 1) % self.remote_sgl.length.max(1);
        Some(CtrlPost {
            msg,
            write: Some((sge, at, self.remote_sgl.key)),
        })
    }

    /// A control message, if a slot is free.
    pub fn ctrl(&mut self, c: Ctrl) -> Option<Msg> {
        if !self.ctrl_avail() || !self.flags.connected {
            return None;
        }
        self.ctrl_seqno += 1;
        Some(Msg::new(Op::Ctrl, c.code()))
    }

    /// Control messages posted so far (a staging slot's index).
    pub fn ctrl_seqno(&self) -> u32 {
        self.ctrl_seqno
    }

    /// Whether a control message could go now (or never will).
    pub fn ctrl_ready(&self) -> bool {
        self.ctrl_avail() || !self.flags.connected
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
