//! One connected stream rsocket's verbs resources and how the protocol's
//! plans ([`crate::rsocket::stream`]) become work requests: the CQ and its
//! completion channel, the RC QP on the rdma_cm ID, and four registered
//! regions (send ring, receive ring, target SGL + iomap table, control
//! staging).
//!
//! Safety contract: an [`Endpoint`] owns every pointer in it; it is made
//! by [`Endpoint::new`] on a live ID whose QP it creates, used only under
//! its socket's lock, and torn down once by `Drop` (QP, CQ, channel, MRs,
//! memory, then the ID). The regions are only read or written through raw
//! pointers (the peer writes the receive ring and the target table by
//! RDMA WRITE at any time).

use std::alloc::Layout;
use std::ffi::c_int;

use super::{cq, memory, post, rdmacm, rdmacm_qp};
use crate::abi::*;
use crate::rdmacm::abi::rdma_cm_id;
use crate::rsocket::stream::{CTRL_SLOTS, Chunk, Config, CtrlPost, SGL_ENTRIES, Stream, TargetSgl};
use crate::rsocket::wire::{
    CONN_FLAG_IOMAP, CONN_VERSION, ConnData, IoMapEntry, Msg, Op, Sge, value_to_scale,
};

/// Marks a receive's `wr_id`.
const RECV_FLAG: u64 = 1 << 63;

/// Memory registered with the ID's PD.
pub(super) struct Region {
    pub(super) mem: *mut u8,
    pub(super) len: usize,
    pub(super) mr: *mut ibv_mr,
}

impl Region {
    fn new(pd: *mut ibv_pd, len: usize, access: u32) -> Result<Self, c_int> {
        let layout = Layout::from_size_align(len.max(64), 4096).map_err(|_| libc::ENOMEM)?;
        // SAFETY: a non-zero layout.
        let mem = unsafe { std::alloc::alloc_zeroed(layout) };
        if mem.is_null() {
            return Err(libc::ENOMEM);
        }
        // SAFETY: `mem` holds `len` bytes until Drop deregisters it first.
        let mr = unsafe { memory::ibv_reg_mr(pd, mem.cast(), len, access as c_int) };
        if mr.is_null() {
            // SAFETY: allocated above with this layout.
            unsafe { std::alloc::dealloc(mem, layout) };
            return Err(errno_now());
        }
        Ok(Self { mem, len, mr })
    }

    pub(super) fn addr(&self) -> u64 {
        self.mem as u64
    }

    fn lkey(&self) -> u32 {
        // SAFETY: a live MR of this library.
        unsafe { (*self.mr).lkey }
    }

    fn rkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.mr).rkey }
    }

    /// Copies `src` in at `off` (the caller keeps it in bounds).
    pub(super) fn write(&self, off: usize, src: &[u8]) {
        assert!(off + src.len() <= self.len);
        // SAFETY: in bounds; no Rust reference to the region exists.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.mem.add(off), src.len()) };
    }

    /// Copies out `dst.len()` bytes at `off`.
    pub(super) fn read(&self, off: usize, dst: &mut [u8]) {
        assert!(off + dst.len() <= self.len);
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(self.mem.add(off), dst.as_mut_ptr(), dst.len()) };
    }

    fn read_volatile<const N: usize>(&self, off: usize) -> [u8; N] {
        assert!(off + N <= self.len);
        // SAFETY: in bounds; the peer may write it at any time.
        unsafe { std::ptr::read_volatile(self.mem.add(off).cast::<[u8; N]>()) }
    }

    fn write_volatile<const N: usize>(&self, off: usize, b: [u8; N]) {
        assert!(off + N <= self.len);
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(self.mem.add(off).cast::<[u8; N]>(), b) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: registered by `new`, deregistered once.
        unsafe { memory::ibv_dereg_mr(self.mr) };
        let layout = Layout::from_size_align(self.len.max(64), 4096).expect("made in new");
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.mem, layout) };
    }
}

/// The target table (SGL entries, then iomap entries) as the protocol sees it.
pub(super) struct Table<'a>(pub(super) &'a Region);

impl TargetSgl for Table<'_> {
    fn get(&self, i: usize) -> Sge {
        Sge::from_bytes(&self.0.read_volatile(i * Sge::LEN))
    }
    fn set(&mut self, i: usize, sge: Sge) {
        self.0.write_volatile(i * Sge::LEN, sge.to_bytes(false));
    }
}

impl Table<'_> {
    /// Our iomap table's entry `i` (the peer's `riomap`s).
    pub(super) fn iomap(&self, i: usize) -> IoMapEntry {
        IoMapEntry::from_bytes(
            &self
                .0
                .read_volatile(SGL_ENTRIES * Sge::LEN + i * IoMapEntry::LEN),
        )
    }
}

/// A connected (or connecting) stream's resources.
pub(super) struct Endpoint {
    pub(super) id: *mut rdma_cm_id,
    chan: *mut ibv_comp_channel,
    cq: *mut ibv_cq,
    pub(super) sbuf: Region,
    pub(super) rbuf: Region,
    pub(super) table: Region,
    ctrl: Region,
    pub(super) stream: Stream,
    armed: bool,
    pub(super) iomaps: Vec<super::rsocket_io::IoMap>,
}

// SAFETY: the pointers are owned (module contract) and used under a lock.
unsafe impl Send for Endpoint {}

pub(super) fn errno_now() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

impl Endpoint {
    /// Creates the CQ, QP and regions on `id` (address and route resolved,
    /// or a request's ID) and posts the receives. The ID becomes the
    /// endpoint's even on failure (it is destroyed then).
    pub(super) fn new(id: *mut rdma_cm_id, mut cfg: Config) -> Result<Self, c_int> {
        // SAFETY: a live ID (module contract); rdma_cm set its device.
        let verbs = unsafe { (*id).verbs };
        if verbs.is_null() {
            destroy_id(id);
            return Err(libc::ENODEV);
        }
        // SAFETY: a live context.
        let chan = unsafe { cq::ibv_create_comp_channel(verbs) };
        if chan.is_null() {
            destroy_id(id);
            return Err(errno_now());
        }
        // Waits are in poll(2); the channel is only drained.
        // SAFETY: the channel's descriptor.
        unsafe { libc::fcntl((*chan).fd, libc::F_SETFL, libc::O_NONBLOCK) };
        let depth = c_int::from(cfg.sq_size) + c_int::from(cfg.rq_size);
        // SAFETY: live context and channel.
        let cq = unsafe { cq::ibv_create_cq(verbs, depth, std::ptr::null_mut(), chan, 0) };
        if cq.is_null() {
            let e = errno_now();
            // SAFETY: made above, unused.
            unsafe { cq::ibv_destroy_comp_channel(chan) };
            destroy_id(id);
            return Err(e);
        }
        let mut attr = ibv_qp_init_attr {
            qp_context: std::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: std::ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: cfg.sq_size.into(),
                max_recv_wr: cfg.rq_size.into(),
                max_send_sge: 2,
                max_recv_sge: 1,
                max_inline_data: cfg.sq_inline.into(),
            },
            qp_type: QPT_RC,
            sq_sig_all: 1,
        };
        // SAFETY: a live ID; the attributes are valid.
        if unsafe { rdmacm_qp::ferroce_rdma_create_qp(id, std::ptr::null_mut(), &mut attr) } != 0 {
            let e = errno_now();
            // SAFETY: made above, unused.
            unsafe {
                cq::ibv_destroy_cq(cq);
                cq::ibv_destroy_comp_channel(chan);
            }
            destroy_id(id);
            return Err(e);
        }
        cfg.sq_inline = attr.cap.max_inline_data.min(u32::from(u16::MAX)) as u16;
        let parts = Parts { id, chan, cq };
        let (sbuf, rbuf, table, ctrl) = parts.regions(cfg)?;
        std::mem::forget(parts);
        let stream = Stream::new(cfg, (rbuf.addr(), rbuf.rkey()));
        let mut ep = Self {
            id,
            chan,
            cq,
            sbuf,
            rbuf,
            table,
            ctrl,
            stream,
            armed: false,
            iomaps: Vec::new(),
        };
        for _ in 0..cfg.rq_size {
            ep.post_recv()?;
        }
        Ok(ep)
    }

    /// Our private data.
    pub(super) fn conn_data(&self) -> ConnData {
        ConnData {
            version: CONN_VERSION,
            flags: CONN_FLAG_IOMAP | if cfg!(target_endian = "big") { 1 } else { 0 },
            credits: self.stream.cfg.rq_size,
            target_iomap_size: value_to_scale(self.stream.cfg.iomap_size.into(), 8) as u8,
            target_sgl: Sge {
                addr: self.table.addr(),
                key: self.table.rkey(),
                length: SGL_ENTRIES as u32,
            },
            data_buf: self.stream.first_half(),
        }
    }

    /// Takes in the peer's private data.
    pub(super) fn accept_peer(&mut self, peer: &ConnData) {
        let mut t = Table(&self.table);
        self.stream.accept_peer(peer, &mut t);
    }

    fn qp(&self) -> *mut ibv_qp {
        // SAFETY: a live ID.
        unsafe { (*self.id).qp }
    }

    fn post_recv(&mut self) -> Result<(), c_int> {
        let mut wr = ibv_recv_wr {
            wr_id: RECV_FLAG,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live QP and a valid request.
        match unsafe { post::post_recv(self.qp(), &mut wr, &mut bad) } {
            0 => Ok(()),
            e => Err(e),
        }
    }

    fn post_write(
        &self,
        sges: &mut [ibv_sge],
        msg: Msg,
        with_imm: bool,
        remote: (u64, u32),
        inline: bool,
    ) -> Result<(), c_int> {
        let mut wr = ibv_send_wr {
            wr_id: u64::from(msg.encode()),
            next: std::ptr::null_mut(),
            sg_list: sges.as_mut_ptr(),
            num_sge: sges.len() as c_int,
            opcode: if with_imm {
                WR_RDMA_WRITE_WITH_IMM
            } else {
                WR_RDMA_WRITE
            },
            send_flags: if inline { SEND_INLINE } else { 0 },
            imm_data: msg.encode().to_be(),
            wr: ibv_send_wr_wr {
                rdma: wr_rdma {
                    remote_addr: remote.0,
                    rkey: remote.1,
                },
            },
            qp_type: 0,
            bind_mw: wr_bind_mw::NONE,
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live QP; the SGEs name registered memory.
        match unsafe { post::post_send(self.qp(), &mut wr, &mut bad) } {
            0 => Ok(()),
            e => Err(e),
        }
    }

    /// Posts a planned chunk whose bytes are staged in the send ring.
    pub(super) fn post_chunk(&self, c: &Chunk) -> Result<(), c_int> {
        let mut sges: Vec<ibv_sge> = c
            .pieces
            .iter()
            .filter(|p| p.1 > 0)
            .map(|&(off, len)| ibv_sge {
                addr: self.sbuf.addr() + u64::from(off),
                length: len,
                lkey: self.sbuf.lkey(),
            })
            .collect();
        let imm = c.msg.op != Op::Write;
        self.post_write(&mut sges, c.msg, imm, (c.remote_addr, c.rkey), c.inline)
    }

    /// Posts a control message (a credit update's SGL staged in its slot).
    pub(super) fn post_ctrl(&self, p: &CtrlPost, slot: usize) -> Result<(), c_int> {
        match p.write {
            None => self.post_write(&mut [], p.msg, true, (0, 0), false),
            Some((sge, at, key)) => {
                let off = (slot % CTRL_SLOTS as usize) * Sge::LEN;
                self.ctrl.write(off, &sge.to_bytes(self.stream.swap));
                let mut s = [ibv_sge {
                    addr: self.ctrl.addr() + off as u64,
                    length: Sge::LEN as u32,
                    lkey: self.ctrl.lkey(),
                }];
                self.post_write(&mut s, p.msg, true, (at, key), false)
            }
        }
    }

    /// Posts an iomap entry's WRITE (bytes staged at the end of the control region).
    pub(super) fn post_iomap(
        &self,
        e: IoMapEntry,
        msg: Msg,
        at: u64,
        key: u32,
    ) -> Result<(), c_int> {
        let off = CTRL_SLOTS as usize * Sge::LEN
            + (msg.data as usize % CTRL_SLOTS as usize) * IoMapEntry::LEN;
        self.ctrl.write(off, &e.to_bytes(self.stream.swap));
        let mut s = [ibv_sge {
            addr: self.ctrl.addr() + off as u64,
            length: IoMapEntry::LEN as u32,
            lkey: self.ctrl.lkey(),
        }];
        let inline = IoMapEntry::LEN <= usize::from(self.stream.cfg.sq_inline);
        self.post_write(&mut s, msg, true, (at, key), inline)
    }

    /// Polls the CQ and gives the credits due: the protocol's progress.
    pub(super) fn progress(&mut self) {
        self.drain_events();
        let mut wcs = [ibv_wc::default(); 16];
        let mut reposts = 0;
        loop {
            // SAFETY: a live CQ and room for 16 completions.
            let n = unsafe { cq::poll_cq(self.cq, wcs.len() as c_int, wcs.as_mut_ptr()) };
            if n <= 0 {
                break;
            }
            for wc in &wcs[..n as usize] {
                let ok = wc.status == 0;
                if !ok {
                    tracing::debug!(
                        status = wc.status,
                        wr_id = wc.wr_id,
                        "rsocket: a request failed"
                    );
                }
                if wc.wr_id & RECV_FLAG != 0 {
                    if ok {
                        reposts += 1;
                        let imm =
                            (wc.wc_flags & WC_WITH_IMM != 0).then(|| u32::from_be(wc.imm_data));
                        self.stream.received(imm);
                    }
                } else {
                    self.stream.send_done(Msg::decode(wc.wr_id as u32), ok);
                }
            }
        }
        if self.stream.flags.connected {
            for _ in 0..reposts {
                if let Err(e) = self.post_recv() {
                    self.stream.fail(e);
                    break;
                }
            }
        }
        self.give_credits();
    }

    /// Sends the credit updates due.
    pub(super) fn give_credits(&mut self) {
        while let Some(p) = self.stream.credits() {
            let slot = self.ctrl_slot();
            if let Err(e) = self.post_ctrl(&p, slot) {
                self.stream.fail(e);
                return;
            }
        }
    }

    fn ctrl_slot(&self) -> usize {
        self.stream.ctrl_seqno() as usize
    }

    /// Asks for the next completion's event (then [`Self::progress`] once
    /// more before waiting: one may have come meanwhile).
    pub(super) fn arm(&mut self) {
        if !self.armed {
            // SAFETY: a live CQ.
            unsafe { cq::req_notify_cq(self.cq, 0) };
            self.armed = true;
        }
    }

    pub(super) fn armed(&self) -> bool {
        self.armed
    }

    /// The descriptor that turns readable when an armed CQ completes.
    pub(super) fn wait_fd(&self) -> c_int {
        // SAFETY: a live channel.
        unsafe { (*self.chan).fd }
    }

    fn drain_events(&mut self) {
        let mut cq_out = std::ptr::null_mut();
        let mut ctx = std::ptr::null_mut();
        // SAFETY: a live, nonblocking channel.
        while unsafe { cq::ibv_get_cq_event(self.chan, &mut cq_out, &mut ctx) } == 0 {
            self.armed = false;
        }
    }
}

/// What `new` made before the regions: undone if they fail.
struct Parts {
    id: *mut rdma_cm_id,
    chan: *mut ibv_comp_channel,
    cq: *mut ibv_cq,
}

impl Parts {
    fn regions(&self, cfg: Config) -> Result<(Region, Region, Region, Region), c_int> {
        // SAFETY: rdma_create_qp set the ID's PD.
        let pd = unsafe { (*self.id).pd };
        let remote = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE;
        let table_len = SGL_ENTRIES * Sge::LEN + usize::from(cfg.iomap_size) * IoMapEntry::LEN;
        let ctrl_len = CTRL_SLOTS as usize * (Sge::LEN + IoMapEntry::LEN);
        Ok((
            Region::new(pd, cfg.sbuf_size as usize, ACCESS_LOCAL_WRITE)?,
            Region::new(pd, cfg.rbuf_size as usize, remote)?,
            Region::new(pd, table_len, remote)?,
            Region::new(pd, ctrl_len, ACCESS_LOCAL_WRITE)?,
        ))
    }
}

impl Drop for Parts {
    fn drop(&mut self) {
        teardown(self.id, self.cq, self.chan);
    }
}

fn teardown(id: *mut rdma_cm_id, cq: *mut ibv_cq, chan: *mut ibv_comp_channel) {
    // SAFETY: owned and live (module contract); each destroyed once.
    unsafe {
        rdmacm_qp::ferroce_rdma_destroy_qp(id);
        cq::ibv_destroy_cq(cq);
        cq::ibv_destroy_comp_channel(chan);
    }
    destroy_id(id);
}

/// Destroys an rdma_cm ID this module owns.
pub(super) fn destroy_id(id: *mut rdma_cm_id) {
    // SAFETY: owned and live (module contract).
    unsafe { rdmacm::ferroce_rdma_destroy_id(id) };
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // The QP goes before the memory it targets; the regions drop after
        // this body, so take the QP and CQ down first by hand.
        // SAFETY: owned and live (module contract).
        unsafe {
            rdmacm_qp::ferroce_rdma_destroy_qp(self.id);
        }
        self.iomaps.clear();
        // SAFETY: as above.
        unsafe {
            cq::ibv_destroy_cq(self.cq);
            cq::ibv_destroy_comp_channel(self.chan);
        }
        destroy_id(self.id);
    }
}
