//! `ferroce perf ... --perftest`: the TCP exchange of perftest 4.5 ("Data
//! ex. method : Ethernet"), so that ferroce runs against unmodified
//! ib_write_bw, ib_send_bw, ib_read_bw, ib_atomic_bw and (with `--lat`)
//! ib_write_lat, ib_send_lat, ib_read_lat, ib_atomic_lat.
//!
//! Every step is a symmetric exchange of a fixed-size message: the client
//! writes first and then reads, the server reads first and then writes.
//! In order:
//!
//! 1. the version string, 16 bytes NUL-padded (we say `6.06`);
//! 2. if the peer's version is 5.32 or later: the cycle buffer and the cache
//!    line size, each a 4-byte big-endian integer (both sides keep the max);
//! 3. if the peer's version is 5.1 or later: the MTU as the decimal text of
//!    its verbs enum (1 = 256 .. 5 = 4096), 2 bytes (4 before 5.31); both
//!    sides use the smaller;
//! 4. key records, 108 bytes of text
//!    `LID:OUT_READS:QPN:PSN:RKEY:VADDR:G0:..:G15:SRQN:` + NUL. The latency
//!    tools except send_lat start with one extra record (QP 0's); then one
//!    per QP; then the QPs are connected; then more records as sync points:
//!    send: one, then one per QP and, once the receives are posted, one
//!    more; the others: one per QP and one more;
//! 5. the traffic;
//! 6. bandwidth write/read/atomic only: one key record, then the client's
//!    report as big-endian words (size u64, iterations u64 (u32 before
//!    5.33), BW peak, BW average, message rate as f64); the server sends
//!    its own (uninitialised in perftest) words back;
//! 7. one key record and `done` + NUL from both sides — except after
//!    ib_write_lat, which just exits, and ib_read_lat / ib_atomic_lat,
//!    whose server does this right after step 4 and so waits there for
//!    the client's end.
//!
//! perftest reads each message with a single `read()` of its exact size,
//! so every message here goes out in a single write.
//!
//! With `-R` (perftest's `--rdma_cm`) the same messages are SENDs on an
//! rdma_cm connection, key records are binary, and rdma_cm connects the
//! test's QPs between two extra records (see rdma_cm.rs).
//!
//! Memory: our key for QP i names `slot i` of the region (one slot is
//! max(size, cycle buffer) bytes, as perftest's); the slot after the last
//! QP's is where our own messages come from, and atomic results land
//! after that.

mod bandwidth;
mod exchange;
mod lat;
mod rdma_cm;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ferroce::{Mtu, Psn, QpEndpoint, QpType, RemoteRegion};

use super::setup::{Params, Side};
use super::{PerfArgs, Test};
use crate::cmd::tcp;
use crate::error::Error;
use bandwidth::{check_atomic_targets, perftest_rx_depth, serve_send, traffic};
use exchange::{
    Agreed, Key, Link, OUT_READS, Report, Wire, agree, close, print_report, xchg_reports,
};

fn gid_of(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

fn my_keys(side: &Side, lay: &Layout) -> Vec<Key> {
    side.qps
        .iter()
        .enumerate()
        .map(|(i, qp)| Key {
            lid: 0,
            out_reads: OUT_READS,
            qpn: qp.qpn(),
            psn: qp.psn().value(),
            rkey: side.mr.rkey(),
            vaddr: side.mr.addr() + lay.target(i),
            gid: gid_of(side.local),
            srqn: 0,
        })
        .collect()
}

/// Where things are in our region (see the module comment).
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Bytes per slot: max(size, cycle buffer), rounded up to 64.
    slot: u64,
    qps: u64,
    /// Distance between perftest's consecutive small messages and atomics
    /// (perftest's INC: the size rounded up to the cache line).
    inc: u64,
    /// How many of those fit in a cycle buffer before perftest wraps.
    per_cycle: u64,
}

impl Layout {
    fn new(p: &Params, a: &Agreed) -> Self {
        let cl = u64::from(a.cache_line.max(8));
        let inc = (p.size as u64).div_ceil(cl) * cl;
        let cycle = u64::from(a.cycle_buffer);
        Self {
            slot: (p.size as u64).max(cycle).div_ceil(64) * 64,
            qps: u64::from(p.qps),
            inc,
            per_cycle: (cycle / inc).max(1),
        }
    }

    /// Offset of QP `i`'s slot, the one its key names.
    fn target(&self, i: usize) -> u64 {
        i as u64 * self.slot
    }

    /// Offset our messages are sent (and READ into) from.
    fn source(&self) -> u64 {
        self.qps * self.slot
    }

    /// Offset of the 8-byte result of atomic number `k` (< `n`) of QP `i`.
    fn result(&self, i: usize, k: u64, n: u64) -> u64 {
        (self.qps + 1) * self.slot + (i as u64 * n + k) * 8
    }

    /// Region bytes for `results` atomic results per QP.
    fn len(&self, results: u64) -> u64 {
        (self.qps + 1) * self.slot + self.qps * results * 8 + 64
    }
}

pub(super) fn run(args: &PerfArgs) -> Result<bool, Error> {
    let mut p = Params::from_args(args);
    let (mut w, agreed, local) = open_exchange(args, p.mtu)?;
    p.mtu = agreed.mtu;

    // perftest addresses the peer's buffer within max(size, cycle buffer)
    // of the address in its key; our region must hold a slot per QP, our
    // own messages and the atomic results.
    let lay = Layout::new(&p, &agreed);
    if p.test == Test::Send && args.listen && !p.lat {
        p.rx_depth = perftest_rx_depth(p.iters);
    }
    let mut open = p;
    open.min_region = lay.len(u64::from(p.tx_depth)) as usize;
    let (side, conns) = match &w.link {
        Link::Rdma(comm) => {
            let ctx = comm.ctx.clone();
            let (side, conns) = rdma_cm::connect_test(&mut w, &ctx, &open, args)?;
            (side, Some(conns))
        }
        Link::Tcp(_) => (Side::open_with(local, &open, &args.backend)?, None),
    };
    let mine = my_keys(&side, &lay);
    let (rem, peer) = exchange_keys(&mut w, &side, &p, &mine, conns.is_none())?;
    if !args.quiet {
        // With rdma_cm the QPs' MTU is the route's, not the agreed one.
        let mtu = conns.is_none().then_some(p.mtu);
        say_peer(&agreed, mtu, &rem, peer[0].gid);
        print_header(args, &p, &mine, &rem, conns.is_some());
    }
    w.clear_timeouts()?;
    let ctx = Ctx {
        side: &side,
        rem: &rem,
        p: &p,
        lay,
        key: mine[0],
        server: args.listen,
    };
    let result = if p.lat {
        lat::run(&mut w, &ctx)
    } else if p.test == Test::Send && args.listen {
        serve_send(&mut w, &side, &p, &mine[0])
    } else {
        bandwidth(&mut w, &ctx, agreed.rem_version)
    };
    // rdma_cm: the test's connections, then the exchange's, end with a
    // DREQ (their QPs are dropped after).
    if let Some(conns) = conns {
        conns.close(args.listen);
    }
    if let Link::Rdma(comm) = w.link {
        comm.close(args.listen);
    }
    result
}

/// perftest's header block (see `super::header`) from both sides' key
/// records.
fn print_header(args: &PerfArgs, p: &Params, mine: &[Key], rem: &[Key], rdma_cm: bool) {
    let address = |k: &Key| super::header::Address {
        lid: k.lid,
        qpn: k.qpn,
        psn: k.psn,
        rkey: k.rkey,
        vaddr: k.vaddr,
        gid: k.gid,
    };
    let local: Vec<_> = mine.iter().map(address).collect();
    let remote: Vec<_> = rem.iter().map(address).collect();
    let exchange = if rdma_cm { "rdma_cm" } else { "Ethernet" };
    super::header::Header::of_test(args, p, exchange, &local, &remote).print();
}

/// One line on stderr about the peer.
fn say_peer(agreed: &Agreed, mtu: Option<Mtu>, rem: &[Key], gid: IpAddr) {
    let mtu = mtu.map_or_else(
        || "from the rdma_cm route".into(),
        |m| m.bytes().to_string(),
    );
    eprintln!(
        " perftest peer: version {:.2}, MTU {mtu}, {} QP(s), remote QPN 0x{:06x} at {gid}",
        agreed.rem_version,
        rem.len(),
        rem[0].qpn,
    );
}

/// The TCP connection (the server serves the first client that opens with
/// a version), or with `-R` the rdma_cm one, and steps 1-3; returns this
/// side's RoCE address too.
fn open_exchange(args: &PerfArgs, mtu: Mtu) -> Result<(Wire, Agreed, IpAddr), Error> {
    if !args.listen {
        let server = args
            .server
            .as_deref()
            .ok_or_else(|| Error::Usage("--perftest needs a server address or --listen".into()))?;
        let local = args.local.unwrap_or(Ipv4Addr::new(127, 0, 0, 2).into());
        let link = if args.rdma_cm {
            let device = args.backend.device(local);
            Link::Rdma(Box::new(rdma_cm::Comm::connect(device, server, args.port)?))
        } else {
            Link::Tcp(tcp::connect_retry(server, args.port)?)
        };
        let mut w = Wire { link, client: true };
        let agreed = agree(&mut w, mtu)?;
        return Ok((w, agreed, local));
    }
    let local = args.local.unwrap_or(Ipv4Addr::new(127, 0, 0, 1).into());
    if args.rdma_cm {
        let comm = rdma_cm::Comm::accept(args.backend.device(local), args.port)?;
        let mut w = Wire {
            link: Link::Rdma(Box::new(comm)),
            client: false,
        };
        let agreed = agree(&mut w, mtu)?;
        return Ok((w, agreed, local));
    }
    // As perftest: on every address. The exchange may come over IPv4
    // while RoCE runs over IPv6 (perftest 4.5's client cannot reach an
    // IPv6 server address); `::` takes both on Linux.
    let l = tcp::listen((Ipv6Addr::UNSPECIFIED, args.port).into())
        .or_else(|_| tcp::listen((Ipv4Addr::UNSPECIFIED, args.port).into()))?;
    let (s, agreed) = tcp::serve_first(&l, |s| {
        let mut w = Wire {
            link: Link::Tcp(s.try_clone()?),
            client: false,
        };
        // A client that does not open with a version is none of ours.
        agree(&mut w, mtu).map_err(|e| Error::Refused(e.to_string()))
    })?;
    let w = Wire {
        link: Link::Tcp(s),
        client: false,
    };
    Ok((w, agreed, local))
}

/// Step 4: the key records, the QPs connected between them (unless
/// rdma_cm has connected them: `connect` false); returns the peer's
/// records and its QPs' endpoints.
fn exchange_keys(
    w: &mut Wire,
    side: &Side,
    p: &Params,
    mine: &[Key],
    connect: bool,
) -> Result<(Vec<Key>, Vec<QpEndpoint>), Error> {
    if p.lat && p.test != Test::Send {
        w.hand_shake(&mine[0])?;
    }
    let mut rem = Vec::with_capacity(mine.len());
    for k in mine {
        rem.push(w.hand_shake(k)?);
    }
    let gid = Ipv6Addr::from(rem[0].gid);
    let peer: Vec<_> = rem
        .iter()
        .map(|k| QpEndpoint {
            gid: gid.to_ipv4_mapped().map_or(IpAddr::V6(gid), IpAddr::V4),
            qp_type: QpType::Rc,
            qpn: k.qpn,
            psn: Psn::new(k.psn),
            mtu: None,
        })
        .collect();
    if connect {
        side.connect(&peer, p)?;
    }
    if p.test == Test::Send {
        w.hand_shake(&mine[0])?;
    }
    for k in mine {
        w.hand_shake(k)?;
    }
    Ok((rem, peer))
}

/// Steps 5-7 of a bandwidth test but a SEND server's: the client's traffic
/// and report; the server waits for it.
fn bandwidth(w: &mut Wire, c: &Ctx<'_>, rem_version: f64) -> Result<bool, Error> {
    // send: the server has posted its receives; write/read/atomic: the
    // extra sync after RTR.
    w.hand_shake(&c.key)?;
    if c.server {
        // write/read/atomic: the client does it all; wait for its end.
        w.hand_shake(&c.key)?;
        let r = xchg_reports(w, &Report::default(), rem_version)?;
        print_report(&r);
        close(w, &c.key)?;
        if c.p.test == Test::Atomic {
            check_atomic_targets(c, r.iters / u64::from(c.p.qps))?;
        }
        return Ok(true);
    }
    let r = traffic(c)?;
    print_report(&r);
    if c.p.test != Test::Send {
        w.hand_shake(&c.key)?;
        xchg_reports(w, &r, rem_version)?;
    }
    close(w, &c.key)?;
    Ok(true)
}

/// What the traffic of one run needs.
struct Ctx<'a> {
    side: &'a Side,
    /// The peer's key records, one per QP.
    rem: &'a [Key],
    p: &'a Params,
    lay: Layout,
    /// Our first key record (the sync points send it).
    key: Key,
    server: bool,
}

impl Ctx<'_> {
    /// The slot of the peer's buffer that its key for QP `i` names:
    /// perftest sends no length, and addresses its peer within max(size,
    /// cycle buffer) of a key's address, so that is the slot's length.
    fn peer_slot(&self, i: usize) -> ferroce::Result<RemoteRegion> {
        RemoteRegion::new(self.rem[i].vaddr, self.rem[i].rkey, self.lay.slot)
    }

    /// At most this many READs or atomics outstanding per QP: the peer's
    /// out_reads.
    fn out_reads(&self) -> u32 {
        self.rem
            .iter()
            .map(|k| k.out_reads.max(1))
            .min()
            .unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use ferroce::{Mtu, SendOp};

    use super::super::AtomicType;
    use super::bandwidth::AtomicCheck;
    use super::exchange::{KEY_LEN, parse_version};
    use super::*;

    #[test]
    fn key_record_matches_perftest() {
        // The record ib_write_bw sent in the rig (README §5).
        let wire = "0000:0001:000018:3cc0c2:0000091e:0000560fcf52f000:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:0c:00000000:";
        let mut m = [0u8; KEY_LEN];
        m[..wire.len()].copy_from_slice(wire.as_bytes());
        let k = Key::decode(&m).unwrap();
        assert_eq!(k.qpn, 0x18);
        assert_eq!(k.psn, 0x3cc0c2);
        assert_eq!(k.rkey, 0x91e);
        assert_eq!(k.vaddr, 0x560f_cf52_f000);
        assert_eq!(k.gid[10..], [0xff, 0xff, 0xc6, 0x12, 0x00, 0x0c]);
        assert_eq!(k.encode(), m);
        assert_eq!(wire.len() + 1, KEY_LEN);
    }

    #[test]
    fn binary_key_record_is_perftests_struct() {
        // struct pingpong_dest on x86-64, each integer big-endian (perftest
        // built with HAVE_ENDIAN): lid, out_reads, qpn, psn, rkey, 4 bytes
        // of padding, vaddr, gid[16], srqn, gid_index.
        let k = Key {
            lid: 0x0102,
            out_reads: 16,
            qpn: 0x18,
            psn: 0x3c_c0c2,
            rkey: 0x91e,
            vaddr: 0x560f_cf52_f000,
            gid: Ipv4Addr::new(198, 18, 0, 12).to_ipv6_mapped().octets(),
            srqn: 7,
        };
        let mut want = vec![0, 0, 1, 2, 0, 0, 0, 16, 0, 0, 0, 0x18, 0, 0x3c, 0xc0, 0xc2];
        want.extend_from_slice(&[0, 0, 0x09, 0x1e, 0, 0, 0, 0]);
        want.extend_from_slice(&[0, 0, 0x56, 0x0f, 0xcf, 0x52, 0xf0, 0x00]);
        want.extend_from_slice(&[0; 10]);
        want.extend_from_slice(&[0xff, 0xff, 198, 18, 0, 12]);
        want.extend_from_slice(&[0, 0, 0, 7, 0, 0, 0, 0]);
        assert_eq!(k.encode_bin().to_vec(), want);
        assert_eq!(Key::decode_bin(&want).unwrap(), k);
        // A perftest record carries its gid_index and garbage padding.
        want[20..24].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        want[55] = 3;
        assert_eq!(Key::decode_bin(&want).unwrap(), k);
        assert!(Key::decode_bin(&want[..55]).is_err());
    }

    #[test]
    fn atomic_check_follows_each_address() {
        let mut c = AtomicCheck::new(AtomicType::FetchAndAdd, 1, 2);
        // perftest's buffer is random: the first result is only read.
        c.got(0, 0, 0xdead_beef).unwrap();
        c.got(0, 1, 7).unwrap();
        c.got(0, 0, 0xdead_bef0).unwrap();
        assert!(c.got(0, 1, 7).is_err(), "an add that did not happen");

        let mut c = AtomicCheck::new(AtomicType::CmpAndSwap, 1, 1);
        // First compare 0 / swap 0, then compare the known value, swap +1.
        assert!(matches!(
            c.op(0, 0, ferroce::RemoteSlice::new(64, 1, 8)),
            SendOp::CompareSwap {
                compare: 0,
                swap: 0,
                ..
            }
        ));
        c.got(0, 0, 41).unwrap();
        assert!(matches!(
            c.op(0, 0, ferroce::RemoteSlice::new(64, 1, 8)),
            SendOp::CompareSwap {
                compare: 41,
                swap: 42,
                ..
            }
        ));
        c.got(0, 0, 41).unwrap();
        assert!(c.got(0, 0, 41).is_err(), "a swap that did not happen");
    }

    #[test]
    fn layout_keeps_slots_apart() {
        let a = Agreed {
            rem_version: 6.06,
            cycle_buffer: 4096,
            cache_line: 64,
            mtu: Mtu::Mtu1024,
        };
        let mut p = Params {
            test: Test::Atomic,
            lat: false,
            size: 8,
            iters: 100,
            qps: 2,
            tx_depth: 16,
            mtu: Mtu::Mtu1024,
            atomic: AtomicType::FetchAndAdd,
            rx_depth: 0,
            min_region: 0,
        };
        let l = Layout::new(&p, &a);
        assert_eq!((l.inc, l.per_cycle, l.slot), (64, 64, 4096));
        assert_eq!(l.target(1), 4096);
        assert_eq!(l.source(), 8192);
        assert_eq!(l.result(1, 15, 16), 3 * 4096 + 31 * 8);
        assert!(l.len(16) >= l.result(1, 15, 16) + 8);
        // Messages over a cycle buffer: one per slot, no stepping.
        p.size = 10_000;
        let l = Layout::new(&p, &a);
        assert_eq!((l.slot, l.per_cycle), (10_048, 1));
    }

    #[test]
    fn send_server_rx_depth_is_perftests() {
        // ib_send_bw -n N prints "RX depth" min(512, N), made even.
        for (n, rx) in [
            (1, 2),
            (5, 6),
            (100, 100),
            (511, 512),
            (512, 512),
            (5000, 512),
        ] {
            assert_eq!(perftest_rx_depth(n), rx, "-n {n}");
        }
    }

    #[test]
    fn each_test_grants_only_its_remote_access() {
        use super::super::setup::{access, qp_access};
        use ferroce::Access;
        let remote = [
            Access::REMOTE_WRITE,
            Access::REMOTE_READ,
            Access::REMOTE_ATOMIC,
        ];
        for (t, grant) in [
            (Test::Write, Access::REMOTE_WRITE),
            (Test::Read, Access::REMOTE_READ),
            (Test::Atomic, Access::REMOTE_ATOMIC),
        ] {
            for r in remote {
                assert_eq!(access(t).contains(r), r == grant, "{t:?} region {r:?}");
                assert_eq!(qp_access(t).contains(r), r == grant, "{t:?} QP {r:?}");
            }
            assert!(access(t).contains(Access::LOCAL_WRITE));
        }
        // perftest's SEND QP: remote and local write; its region: local only.
        assert_eq!(
            qp_access(Test::Send),
            Access::REMOTE_WRITE | Access::LOCAL_WRITE
        );
        assert_eq!(access(Test::Send), Access::LOCAL_WRITE);
    }

    #[test]
    fn version_parse() {
        assert_eq!(parse_version(b"6.06\0\0\0\0"), 6.06);
        assert_eq!(parse_version(b"5.5\0"), 5.5);
    }
}
