//! Memory per idle RC QP: the growth of this process's resident set while
//! it creates QPs and brings each to RTS (connected to a peer that is never
//! sent to), divided by their number. Resident pages include the
//! allocator's overhead, so this is what a QP really costs.

use std::net::IpAddr;

use crate::error::Error;
use ferroce::{ConnectOptions, Context, DeviceConfig, Mtu, Psn, QpEndpoint, QpInitAttr, QpType};

/// Resident bytes of this process (`/proc/self/statm`, second field).
fn resident() -> Result<u64, Error> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .ok_or("unreadable /proc/self/statm")?;
    Ok(pages * 4096)
}

/// Bytes per idle RC QP, measured over `count` QPs on a device at `local`
/// (on a spare RoCE port), connected to `remote`.
pub(super) fn per_idle_qp(local: IpAddr, remote: IpAddr, count: u32) -> Result<f64, Error> {
    let mut cfg = DeviceConfig::new(local);
    cfg.port = 4899;
    let ctx = Context::open_with(cfg)?;
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(1024)?;
    // One QP first, so that per-device and first-use costs are not counted.
    let attr = QpInitAttr::new(QpType::Rc, &cq, &cq);
    let mut qps = vec![pd.create_qp(&attr)?];
    let opts = ConnectOptions {
        mtu: Some(Mtu::Mtu4096),
        ..ConnectOptions::default()
    };
    let before = resident()?;
    for i in 0..count {
        let qp = pd.create_qp(&attr)?;
        let peer = QpEndpoint {
            gid: remote,
            qp_type: QpType::Rc,
            qpn: 0x100 + i,
            psn: Psn::new(i),
            mtu: None,
        };
        qp.connect(&peer, &opts)?;
        qps.push(qp);
    }
    let after = resident()?;
    drop(qps);
    Ok(after.saturating_sub(before) as f64 / f64::from(count.max(1)))
}
