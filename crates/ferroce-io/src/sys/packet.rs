//! AF_PACKET sockets with memory-mapped rings (packet(7)): the raw
//! backend's only `unsafe`.
//!
//! Safety contract. A ring is one `mmap` of the socket's ring buffer, owned
//! by [`Ring`] and unmapped on drop (after which the socket, closed after
//! it, frees the kernel's side). The kernel and this process share it; they
//! hand each part over through its status word, never both at once:
//!
//! * receive (TPACKET_V3): a block belongs to the kernel while its
//!   `block_status` lacks `TP_STATUS_USER`. [`RxRing::with_block`] loads
//!   that word with Acquire ordering (so the kernel's writes to the block
//!   are seen), lends the block as a `&mut [u8]` only while it is ours
//!   (the kernel neither reads nor writes it then), and
//!   gives it back by storing `TP_STATUS_KERNEL` with Release ordering after
//!   the borrow ends. `&mut self` makes the lending exclusive. The
//!   frame-by-frame receive ring (TPACKET_V2, [`RxFrameRing::with_frame`])
//!   does the same per frame slot with its `tp_status`;
//! * send (TPACKET_V2): a frame belongs to us while its `tp_status` is
//!   `TP_STATUS_AVAILABLE` (or `WRONG_FORMAT`, a frame the kernel refused).
//!   [`TxRing::fill`] lends its data area as `&mut [u8]` only then, writes
//!   `tp_len` and hands it over by storing `TP_STATUS_SEND_REQUEST` with
//!   Release ordering; [`TxRing::kick`] asks the kernel to send them.
//!
//! With `PACKET_VNET_HDR` (set before the ring), the first 10 bytes of a
//! send frame's data, and the 10 bytes before a received frame's MAC
//! header, are a virtio-net header: plain bytes in the same lent areas,
//! no change to who owns what. The kernel checks a sent one (a frame with
//! a bad one is marked `TP_STATUS_WRONG_FORMAT`); a received one is
//! parsed by the caller as untrusted bytes like the rest.
//!
//! All other accesses are to the block or frame headers, by offset within
//! the mapping, with bounds checked against its length. What the kernel
//! writes inside a block (packet offsets and lengths) is parsed by the
//! caller from the lent slice as untrusted bytes.

use std::io;
use std::mem::size_of;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// `ETH_P_ALL` in network byte order, as `socket` and `bind` take it.
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// Offset of `block_status` in `struct tpacket_block_desc` (version,
/// offset_to_priv, then the `tpacket_hdr_v1` whose first word it is).
const BLOCK_STATUS: usize = 8;
/// Offset of `tp_status` and `tp_len` in `struct tpacket2_hdr` (send and
/// frame-by-frame receive rings).
const TX_STATUS: usize = 0;
const TX_LEN: usize = 4;
/// Where a V2 send frame's data starts: the aligned header (the kernel's
/// `tp_hdrlen - sizeof(struct sockaddr_ll)` without PACKET_TX_HAS_OFF).
pub(crate) const TX_DATA_OFFSET: usize = libc::TPACKET2_HDRLEN - size_of::<libc::sockaddr_ll>();

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BpfInsn {
    pub(crate) code: u16,
    pub(crate) jt: u8,
    pub(crate) jf: u8,
    pub(crate) k: u32,
}

/// A packet socket, opened with protocol 0 so that it receives nothing
/// until [`bind`] (after its filter and ring are in place).
pub(crate) fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with constant arguments; on success the
    // returned descriptor is new and ours alone.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket() and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds a packet socket to interface `ifindex`; with `receive`, for every
/// protocol (the filter chooses), else for none (a send-only socket).
pub(crate) fn bind(fd: RawFd, ifindex: u32, receive: bool) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = if receive { ETH_P_ALL_BE } else { 0 };
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a live sockaddr_ll and the length passed is its size.
    let rc = unsafe {
        libc::bind(
            fd,
            (&raw const sll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `setsockopt` of a plain value `T`.
fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live `T` and the length passed is its size; the
    // kernel reads that many bytes. Every `T` used here is a C struct or
    // integer the option expects.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// An integer packet-socket option (`PACKET_VERSION`, `PACKET_QDISC_BYPASS`,
/// `PACKET_IGNORE_OUTGOING`, `PACKET_LOSS`, `PACKET_VNET_HDR`).
pub(crate) fn set_packet_option(
    fd: RawFd,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    setsockopt(fd, libc::SOL_PACKET, name, &value)
}

/// Attaches a classic BPF program (`SO_ATTACH_FILTER`) to any socket.
pub(crate) fn attach_filter(fd: RawFd, program: &[BpfInsn]) -> io::Result<()> {
    let insns: Vec<libc::sock_filter> = program
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    let len = u16::try_from(insns.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "BPF program too long"))?;
    let prog = libc::sock_fprog {
        len,
        filter: insns.as_ptr().cast_mut(),
    };
    // The kernel copies the program during the call; `insns` outlives it.
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
}

/// Frames the kernel dropped for want of room in the receive ring since
/// the last call (`PACKET_STATISTICS` reads and resets the counters).
pub(crate) fn ring_drops(fd: RawFd) -> io::Result<u32> {
    // SAFETY: tpacket_stats_v3 is plain data; all-zero is a valid value.
    let mut st: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: `st` and `len` are live locals; the kernel writes at most
    // `len` bytes into `st` and the length it wrote into `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&raw mut st).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.tp_drops)
}

/// An mmap'd ring: `blocks` blocks of `block_size` bytes.
#[derive(Debug)]
struct Ring {
    base: NonNull<u8>,
    len: usize,
    block_size: usize,
    blocks: usize,
}

// SAFETY: the mapping is plain memory owned by this value; moving it to
// another thread moves that ownership (the kernel's side is unaffected).
unsafe impl Send for Ring {}

impl Ring {
    fn map(fd: RawFd, block_size: usize, blocks: usize) -> io::Result<Self> {
        let len = block_size * blocks;
        // SAFETY: maps the ring just configured on `fd` (PACKET_RX_RING or
        // PACKET_TX_RING, of exactly `len` bytes), shared with the kernel;
        // the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Self {
            base,
            len,
            block_size,
            blocks,
        })
    }

    /// The status word at `offset` into block `i`.
    fn status(&self, i: usize, offset: usize) -> &AtomicU32 {
        let at = i * self.block_size + offset;
        assert!(i < self.blocks && offset + 4 <= self.block_size && at.is_multiple_of(4));
        // SAFETY: `at + 4 <= len` (checked above), the mapping is page
        // aligned so `at` is 4-aligned, and the kernel accesses this word
        // atomically too; the reference lives no longer than `&self`.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(at).cast()) }
    }

    fn write_u32(&mut self, i: usize, offset: usize, v: u32) {
        self.status(i, offset).store(v, Ordering::Relaxed);
    }

    /// If part `i` is ours (its status word at `status_at` has
    /// `TP_STATUS_USER`), lends it whole to `f` and then returns it to the
    /// kernel; `None` if it is still the kernel's.
    fn lend_received<R>(
        &mut self,
        i: usize,
        status_at: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Option<R> {
        let status = self.status(i, status_at).load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let start = i * self.block_size;
        // SAFETY: part `i` lies inside the mapping (checked by `status`),
        // and the kernel neither reads nor writes it while TP_STATUS_USER
        // is set (observed with Acquire above), so it is this process's
        // alone (`&mut self`: one lending at a time) and may be written
        // (the raw backend rewrites headers in place to cut a
        // super-frame); the slice ends with this borrow, before the
        // status is handed back below.
        let part = unsafe {
            std::slice::from_raw_parts_mut(self.base.as_ptr().add(start), self.block_size)
        };
        let r = f(part);
        self.status(i, status_at)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        Some(r)
    }

    /// If part `i` is ours, lends it to `f` and leaves it ours (a look
    /// ahead, for the receive backlog); `None` if it is the kernel's.
    fn peek_received<R>(
        &self,
        i: usize,
        status_at: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        let status = self.status(i, status_at).load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        // SAFETY: as in `lend_received`: inside the mapping, and the kernel
        // does not write a part whose status is TP_STATUS_USER (observed
        // with Acquire above); only `lend_received`, which needs
        // `&mut self`, hands it back, so it stays ours for this borrow.
        let part = unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(i * self.block_size), self.block_size)
        };
        Some(f(part))
    }

    /// Makes `fd` a TPACKET_V2 socket with a ring (`which`:
    /// PACKET_RX_RING or PACKET_TX_RING) of `frames` frames of
    /// `frame_size` bytes, one frame a block, and maps it.
    fn setup_v2(fd: RawFd, which: libc::c_int, frame_size: u32, frames: u32) -> io::Result<Self> {
        set_packet_option(
            fd,
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V2 as libc::c_int,
        )?;
        let req = libc::tpacket_req {
            tp_block_size: frame_size,
            tp_block_nr: frames,
            tp_frame_size: frame_size,
            tp_frame_nr: frames,
        };
        setsockopt(fd, libc::SOL_PACKET, which, &req)?;
        Self::map(fd, frame_size as usize, frames as usize)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned; no slice into
        // the mapping outlives `&self`/`&mut self` borrows, so none is live.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// A TPACKET_V3 receive ring.
#[derive(Debug)]
pub(crate) struct RxRing {
    ring: Ring,
}

impl RxRing {
    /// Makes `fd` a TPACKET_V3 socket with a receive ring of `blocks`
    /// blocks of `block_size` bytes (a multiple of the page size), each
    /// handed over when full or after `timeout_ms`, and maps it.
    pub(crate) fn setup(
        fd: RawFd,
        block_size: u32,
        blocks: u32,
        timeout_ms: u32,
    ) -> io::Result<Self> {
        set_packet_option(
            fd,
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V3 as libc::c_int,
        )?;
        // Frames only bound the kernel's own bookkeeping in V3: any aligned
        // size that divides the block.
        const FRAME: u32 = 2048;
        let req = libc::tpacket_req3 {
            tp_block_size: block_size,
            tp_block_nr: blocks,
            tp_frame_size: FRAME,
            tp_frame_nr: block_size / FRAME * blocks,
            tp_retire_blk_tov: timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)?;
        let ring = Ring::map(fd, block_size as usize, blocks as usize)?;
        Ok(Self { ring })
    }

    pub(crate) fn blocks(&self) -> usize {
        self.ring.blocks
    }

    /// If block `i` is ours (the kernel has filled it), lends it whole to
    /// `f` and then returns it to the kernel; `None` if it is still the
    /// kernel's.
    pub(crate) fn with_block<R>(&mut self, i: usize, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        self.ring.lend_received(i, BLOCK_STATUS, f)
    }

    /// Block `i` lent to `f` if it is ours, and left ours.
    pub(crate) fn peek_block<R>(&self, i: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        self.ring.peek_received(i, BLOCK_STATUS, f)
    }
}

/// A TPACKET_V2 receive ring: one frame per slot, each handed over as soon
/// as the kernel has written it (no block timer: lower latency, a status
/// word per frame to read).
#[derive(Debug)]
pub(crate) struct RxFrameRing {
    ring: Ring,
}

impl RxFrameRing {
    /// Makes `fd` a TPACKET_V2 socket with a receive ring of `frames` slots
    /// of `frame_size` bytes (a power of two of at least the page size;
    /// larger frames are cut), and maps it.
    pub(crate) fn setup(fd: RawFd, frame_size: u32, frames: u32) -> io::Result<Self> {
        let ring = Ring::setup_v2(fd, libc::PACKET_RX_RING, frame_size, frames)?;
        Ok(Self { ring })
    }

    pub(crate) fn frames(&self) -> usize {
        self.ring.blocks
    }

    /// If slot `i` holds a frame the kernel has written, lends the slot
    /// (header and frame) to `f`, then returns it to the kernel; `None` if
    /// it is still the kernel's.
    pub(crate) fn with_frame<R>(&mut self, i: usize, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        self.ring.lend_received(i, TX_STATUS, f)
    }

    /// Slot `i` lent to `f` if it holds a frame, and left ours.
    pub(crate) fn peek_frame<R>(&self, i: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        self.ring.peek_received(i, TX_STATUS, f)
    }
}

/// A TPACKET_V2 send ring: `frames` frames of `frame_size` bytes.
#[derive(Debug)]
pub(crate) struct TxRing {
    ring: Ring,
    fd: RawFd,
}

/// What [`TxRing::fill`] found in a frame slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Filled and handed to the kernel; it had refused the previous frame
    /// of this slot (`TP_STATUS_WRONG_FORMAT`) when `refused` is set.
    Queued { refused: bool },
    /// The kernel still holds it (not sent yet): the ring is full.
    Busy,
    /// The frame did not fit; nothing was queued.
    TooLarge,
}

impl TxRing {
    /// Makes `fd` a TPACKET_V2 socket with a send ring and maps it.
    /// `frame_size` is a power of two of at least a page.
    pub(crate) fn setup(fd: RawFd, frame_size: u32, frames: u32) -> io::Result<Self> {
        let ring = Ring::setup_v2(fd, libc::PACKET_TX_RING, frame_size, frames)?;
        Ok(Self { ring, fd })
    }

    pub(crate) fn frames(&self) -> usize {
        self.ring.blocks
    }

    /// The most bytes of frame a slot holds.
    pub(crate) fn capacity(&self) -> usize {
        self.ring.block_size - TX_DATA_OFFSET
    }

    /// If slot `i` is free, lets `f` write a frame into it (returning its
    /// length) and queues it for [`kick`](Self::kick).
    pub(crate) fn fill(&mut self, i: usize, f: impl FnOnce(&mut [u8]) -> usize) -> Slot {
        let status = self.ring.status(i, TX_STATUS).load(Ordering::Acquire);
        let refused = status == libc::TP_STATUS_WRONG_FORMAT;
        if status != libc::TP_STATUS_AVAILABLE && !refused {
            return Slot::Busy;
        }
        let start = i * self.ring.block_size + TX_DATA_OFFSET;
        let cap = self.capacity();
        // SAFETY: the data area of slot `i` lies inside the mapping
        // (`status` checked the slot index), and the kernel neither reads
        // nor writes it while the status is AVAILABLE or WRONG_FORMAT
        // (observed with Acquire above); the slice ends with this call,
        // before the slot is handed over below.
        let data =
            unsafe { std::slice::from_raw_parts_mut(self.ring.base.as_ptr().add(start), cap) };
        let len = f(data);
        if len == 0 || len > cap {
            return Slot::TooLarge;
        }
        self.ring.write_u32(i, TX_LEN, len as u32);
        self.ring
            .status(i, TX_STATUS)
            .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        Slot::Queued { refused }
    }

    /// Asks the kernel to send every queued frame (one system call for the
    /// whole batch); does not wait for them to leave.
    pub(crate) fn kick(&self) -> io::Result<()> {
        // SAFETY: a zero-length send with a null buffer is how packet(7)
        // starts the send ring; the kernel reads only the ring.
        let rc = unsafe { libc::send(self.fd, std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if rc >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        // Nothing could be sent now (device queue full): the frames stay
        // queued and go with the next kick.
        if e.raw_os_error() == Some(libc::EAGAIN) || e.raw_os_error() == Some(libc::ENOBUFS) {
            return Ok(());
        }
        Err(e)
    }
}

/// Index, MAC and MTU of interface `name` in the socket's network
/// namespace (`SIOCGIFINDEX`, `SIOCGIFHWADDR`, `SIOCGIFMTU`).
pub(crate) fn interface_info(fd: RawFd, name: &str) -> io::Result<(u32, [u8; 6], u32)> {
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.is_empty() || name.len() >= req.ifr_name.len() || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not an interface name (1 to 15 bytes)"),
        ));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    let ioctl = |req: &mut libc::ifreq, op: libc::Ioctl| {
        // SAFETY: `req` is a live ifreq holding a NUL-terminated name; these
        // three requests read it and write one union member back.
        let rc = unsafe { libc::ioctl(fd, op, std::ptr::from_mut(req)) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    ioctl(&mut req, libc::SIOCGIFINDEX)?;
    // SAFETY: SIOCGIFINDEX wrote the index member.
    let index = unsafe { req.ifr_ifru.ifru_ifindex };
    ioctl(&mut req, libc::SIOCGIFHWADDR)?;
    // SAFETY: SIOCGIFHWADDR wrote the hardware-address member.
    let hw = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(hw.sa_data) {
        *d = s as u8;
    }
    ioctl(&mut req, libc::SIOCGIFMTU)?;
    // SAFETY: SIOCGIFMTU wrote the MTU member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok((index as u32, mac, mtu as u32))
}
