//! A long RC WRITE stream through 5% loss plus duplication and reordering,
//! which must arrive byte-identical.
//!
//! FERROCE_SOAK_BYTES sets the size (a byte count, or with a K, M or G
//! suffix); the default is 64 MiB in release builds and 8 MiB in debug
//! builds, to keep `cargo test` quick. The full soak:
//!
//! ```text
//! FERROCE_SOAK_BYTES=1G cargo test --release -p ferroce-core soak -- --nocapture
//! ```

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use super::util::{Faults, Opts, Pair, connect_with, rmem, send_wr, sge};
use crate::MAX_MSG_SIZE;
use crate::verbs::{Mtu, QpType, SendOp, WcStatus};

/// The soak size: FERROCE_SOAK_BYTES, or the default for this build.
fn soak_bytes() -> usize {
    let default = if cfg!(debug_assertions) {
        8 << 20
    } else {
        64 << 20
    };
    let Ok(v) = std::env::var("FERROCE_SOAK_BYTES") else {
        return default;
    };
    let v = v.trim();
    let (digits, shift) = match v.as_bytes().last() {
        Some(b'K' | b'k') => (&v[..v.len() - 1], 10),
        Some(b'M' | b'm') => (&v[..v.len() - 1], 20),
        Some(b'G' | b'g') => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    let n: usize = digits
        .parse()
        .unwrap_or_else(|_| panic!("FERROCE_SOAK_BYTES={v:?} is not a size"));
    n << shift
}

#[test]
fn rc_write_soak_arrives_byte_identical() {
    let total = soak_bytes();
    let started = std::time::Instant::now();
    let mut p = Pair::new(0x50a4);
    let [a, b] = connect_with(
        &mut p,
        Opts {
            timeout: 8, // 1 ms
            ..Opts::new(QpType::Rc, total, Mtu::Mtu4096)
        },
    );
    p.eps[0].write_mr(a.mr.lkey, |b| {
        ChaCha8Rng::seed_from_u64(total as u64).fill_bytes(b)
    });
    p.faults = Faults {
        loss: 0.05,
        duplicate: 0.02,
        reorder: 0.05,
        corrupt: 0.0,
        ecn_mark: 0.0,
        ce_mark: 0.0,
    };
    // Messages of the largest size the engine takes, one WR each.
    let msg = MAX_MSG_SIZE as usize;
    let mut wrs = 0;
    for off in (0..total).step_by(msg) {
        let len = msg.min(total - off) as u32;
        let op = SendOp::Write {
            remote: rmem(b.mr.addr + off as u64, b.mr.rkey),
        };
        p.eps[0]
            .post_send(a.qpn, send_wr(wrs, op, &sge(&a, off as u64, len)))
            .unwrap();
        wrs += 1;
    }
    let mut done = Vec::new();
    p.drive_until(usize::MAX, |p| {
        done.extend(p.completions(0, a.cq));
        done.len() as u64 == wrs
    });
    let ids: Vec<_> = done.iter().map(|w| (w.wr_id, w.status)).collect();
    let want: Vec<_> = (0..wrs).map(|i| (i, WcStatus::Success)).collect();
    assert_eq!(ids, want);
    let (sent, received) = (
        p.eps[0].mr_bytes(a.mr.lkey).unwrap(),
        p.eps[1].mr_bytes(b.mr.lkey).unwrap(),
    );
    if let Some(at) = sent.iter().zip(received).position(|(x, y)| *x != y) {
        panic!("byte {at} of {total} differs");
    }
    let (sa, sb) = (p.eps[0].stats(), p.eps[1].stats());
    eprintln!(
        "soak: {total} bytes in {:.2?} real, {:.3} s virtual; {} packets sent ({} retransmits, \
         {} lost), {} out of sequence and {} duplicates received",
        started.elapsed(),
        p.now.as_nanos() as f64 / 1e9,
        sa.tx_packets,
        sa.retransmits,
        p.dropped,
        sb.rx_out_of_sequence,
        sb.rx_duplicate,
    );
}
