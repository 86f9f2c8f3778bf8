//! The engine's share of a WRITE packet, with no I/O: two endpoints in one
//! thread, a requester and a responder, each packet handed from one's
//! `poll_transmit` to the other's `handle_datagram` as the driver does
//! minus the sockets (as ferroce-core's `engine_bench` example does).
//!
//! Messages of one packet each (`len` ≤ MTU 4096: a WRITE ONLY) go in
//! batches of [`BATCH`], the depth a driver round typically sees; the
//! responder's ACKs coalesce within a batch as they do behind a
//! `recvmmsg` batch. Each stretch of a round is timed on its own:
//!
//! * requester: `post_send`, then (after the responder) the ACKs'
//!   `handle_datagram`, the completions' `poll_cq_into` and the packet
//!   buffers' `recycle`;
//! * emit: `poll_transmit` of the posted WRITEs (headers, and the payload
//!   copied out of the region);
//! * responder: `handle_datagram` of each WRITE (parsing, checks, the
//!   payload placed in the region) and `poll_transmit` of the ACKs.
//!
//! A clock read costs about 20 ns, under 2 ns a packet at this batch.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant as Clock};

use ferroce_core::verbs::{
    Access, Mtu, Path, QpAttr, QpState, QpType, RemoteSlice, RoceMode, SendOp, SendWr, Sge,
    WcStatus, WorkCompletion,
};
use ferroce_core::{Endpoint, EndpointConfig, Instant, MrInfo, QpInit};
use ferroce_wire::Psn;

use crate::error::Error;

/// WRITEs posted per round, and completions polled at once.
pub(super) const BATCH: usize = 16;

/// Each side's region: a ring of message slots the WRITEs cycle through.
const REGION: usize = 64 << 10;

/// One endpoint with one connected RC QP and a region.
pub(super) struct Side {
    pub(super) ep: Endpoint,
    pub(super) addr: IpAddr,
    qpn: u32,
    cq: u32,
    pub(super) mr: MrInfo,
}

fn verbs(what: &str) -> impl Fn(ferroce_core::verbs::VerbsError) -> Error + '_ {
    move |e| Error::Run(format!("packet bench: {what}: {e:?}"))
}

fn side(seed: u64, addr: IpAddr) -> Result<Side, Error> {
    let mut ep = Endpoint::new(EndpointConfig { seed });
    let pd = ep.alloc_pd();
    let cq = ep.create_cq(4096).map_err(verbs("create_cq"))?;
    let init = QpInit {
        pd,
        qp_type: QpType::Rc,
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 256,
        max_recv_wr: 256,
        sq_sig_all: true,
        srq: None,
    };
    let qpn = ep.create_qp(init).map_err(verbs("create_qp"))?;
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let mr = ep.reg_mr(pd, REGION, access).map_err(verbs("reg_mr"))?;
    Ok(Side {
        ep,
        addr,
        qpn,
        cq,
        mr,
    })
}

/// Takes `a`'s QP to RTS towards `b`'s.
fn connect(a: &mut Side, b: &Side) -> Result<(), Error> {
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let init = QpAttr {
        state: Some(QpState::Init),
        pkey_index: Some(0),
        port: Some(1),
        access: Some(access),
        ..QpAttr::default()
    };
    let rtr = QpAttr {
        state: Some(QpState::Rtr),
        path: Some(Path {
            remote: b.addr,
            udp_src_port: 0xc000,
            traffic_class: 0,
            hop_limit: 64,
            roce: RoceMode::V2,
        }),
        path_mtu: Some(Mtu::Mtu4096),
        dest_qpn: Some(b.qpn),
        rq_psn: Some(Psn::new(100)),
        max_dest_rd_atomic: Some(16),
        min_rnr_timer: Some(1),
        ..QpAttr::default()
    };
    let rts = QpAttr {
        state: Some(QpState::Rts),
        sq_psn: Some(Psn::new(100)),
        timeout: Some(14),
        retry_cnt: Some(7),
        rnr_retry: Some(7),
        max_rd_atomic: Some(16),
        ..QpAttr::default()
    };
    for attr in [init, rtr, rts] {
        a.ep.modify_qp(a.qpn, &attr).map_err(verbs("modify_qp"))?;
    }
    Ok(())
}

/// A requester and a responder, connected (10.0.0.1 and 10.0.0.2: no
/// socket is opened, the addresses only name the peers).
pub(super) fn pair() -> Result<(Side, Side), Error> {
    let mut a = side(1, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)))?;
    let mut b = side(2, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)))?;
    connect(&mut a, &b)?;
    connect(&mut b, &a)?;
    Ok((a, b))
}

/// Posts a `len`-byte WRITE from `a`'s region slot `slot` to the same
/// slot of `peer`'s.
fn post_write(a: &mut Side, peer: &MrInfo, len: u32, slot: usize) -> Result<(), Error> {
    let offset = (slot * len as usize % REGION) as u64;
    let sg = [Sge {
        lkey: a.mr.lkey,
        offset,
        len,
    }];
    let remote = RemoteSlice::new(peer.addr + offset, peer.rkey, u64::from(len));
    a.ep.post_send(a.qpn, SendWr::new(0, SendOp::Write { remote }, &sg))
        .map_err(verbs("post_send"))
}

/// Takes `want` successful completions from `a`'s CQ.
fn complete(a: &mut Side, want: usize) -> Result<(), Error> {
    let mut wcs = [WorkCompletion::default(); BATCH];
    let n =
        a.ep.poll_cq_into(a.cq, &mut wcs)
            .map_err(verbs("poll_cq"))?;
    let wcs = &wcs[..n];
    if n != want || wcs.iter().any(|w| w.status != WcStatus::Success) {
        return Err(format!("packet bench: {want} completions expected, got {wcs:?}").into());
    }
    Ok(())
}

/// Nanoseconds per packet of each stretch of a round, and of the rounds
/// run whole.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Split {
    pub(super) requester: f64,
    pub(super) emit: f64,
    pub(super) responder: f64,
}

/// A round's packet buffers, kept between rounds.
#[derive(Default)]
struct Round {
    writes: Vec<Vec<u8>>,
    acks: Vec<Vec<u8>>,
}

/// One round of [`BATCH`] WRITEs of `len` bytes; `lap` is called between
/// the stretches with their index (0 requester, 1 emit, 2 responder, 3
/// requester again).
fn round(
    (a, b): (&mut Side, &mut Side),
    len: u32,
    r: &mut Round,
    mut lap: impl FnMut(usize),
) -> Result<(), Error> {
    let now = Instant::from_nanos(1);
    let peer = b.mr;
    for slot in 0..BATCH {
        post_write(a, &peer, len, slot)?;
    }
    lap(0);
    while let Some(t) = a.ep.poll_transmit(now) {
        r.writes.push(t.data);
    }
    lap(1);
    for d in &r.writes {
        b.ep.handle_datagram(now, a.addr, d);
    }
    while let Some(t) = b.ep.poll_transmit(now) {
        r.acks.push(t.data);
    }
    lap(2);
    for d in r.acks.drain(..) {
        a.ep.handle_datagram(now, b.addr, &d);
        b.ep.recycle(d);
    }
    complete(a, BATCH)?;
    for d in r.writes.drain(..) {
        a.ep.recycle(d);
    }
    lap(3);
    Ok(())
}

/// `packets` WRITEs of `len` bytes, each stretch timed apart.
pub(super) fn split(len: u32, packets: u64) -> Result<Split, Error> {
    let (mut a, mut b) = pair()?;
    let mut r = Round::default();
    let mut spent = [Duration::ZERO; 4];
    let rounds = packets.div_ceil(BATCH as u64).max(1);
    for _ in 0..rounds {
        let mut last = Clock::now();
        round((&mut a, &mut b), len, &mut r, |k| {
            let t = Clock::now();
            spent[k] += t - last;
            last = t;
        })?;
    }
    let per = |d: Duration| d.as_nanos() as f64 / (rounds * BATCH as u64) as f64;
    Ok(Split {
        requester: per(spent[0] + spent[3]),
        emit: per(spent[1]),
        responder: per(spent[2]),
    })
}

/// Nanoseconds per packet of `packets` WRITEs of `len` bytes, the rounds
/// timed whole (no clock read inside).
pub(super) fn whole(len: u32, packets: u64) -> Result<f64, Error> {
    let (mut a, mut b) = pair()?;
    let mut r = Round::default();
    let rounds = packets.div_ceil(BATCH as u64).max(1);
    let start = Clock::now();
    for _ in 0..rounds {
        round((&mut a, &mut b), len, &mut r, |k| {
            black_box(k);
        })?;
    }
    Ok(start.elapsed().as_nanos() as f64 / (rounds * BATCH as u64) as f64)
}

/// A `len`-byte WRITE ONLY packet as the requester emits it (ICRC bytes
/// zero), and the pair it came from (the responder has not seen it).
pub(super) fn sample_packet(len: u32) -> Result<(Vec<u8>, Side, Side), Error> {
    let (mut a, b) = pair()?;
    let peer = b.mr;
    post_write(&mut a, &peer, len, 0)?;
    let t =
        a.ep.poll_transmit(Instant::from_nanos(1))
            .ok_or("packet bench: the WRITE was not emitted")?;
    Ok((t.data, a, b))
}
