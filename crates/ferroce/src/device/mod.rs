//! Device and port attributes and the GID table: what `ibv_query_device`,
//! `ibv_query_port` and `ibv_query_gid` report, shaped as the kernel's
//! Soft-RoCE (`rdma_rxe`) reports them, with values that are true for
//! ferroce.
//!
//! A ferroce device is one address of the host (the one [`Context::open`]
//! binds). Its attributes come from the interface that owns that address:
//!
//! * **node GUID** (and system image GUID): the EUI-64 of the interface's
//!   MAC, ff:fe inserted and the universal/local bit flipped, as rxe does
//!   (`52:54:00:52:00:0a` -> `5054:00ff:fe52:000a`). An interface without a
//!   MAC (`lo`) has none to derive it from; ferroce then takes the EUI-64 of
//!   a locally administered pseudo-MAC `02:00:xx:xx:xx:xx` whose last four
//!   bytes are the IPv4 address (or a 32-bit FNV-1a hash of the IPv6
//!   address): stable for the address, and marked local by the U/L bit.
//! * **active MTU**: the largest IB MTU that fits the interface MTU less the
//!   RoCE v2 headers ([`active_mtu`]), as rxe's `rxe_set_mtu`.
//! * **GID table**: built as the kernel's `roce_gid_mgmt.c` fills rxe's
//!   ([`gid_table_for`]): the default GID (`fe80::` + EUI-64 of the MAC)
//!   first, then each IPv4 address as `::ffff:a.b.c.d`, then the IPv6
//!   addresses, all RoCE v2.
//! * **port state**: ACTIVE while the interface is up with carrier, as rxe's
//!   `ib_get_curr_port_state`; speed and width from its link speed, as
//!   `ib_get_eth_speed`.
//!
//! Everything here reads the host's interface list and `/sys`; nothing binds
//! a socket or needs root.
//!
//! # Where ferroce differs from rxe
//!
//! The values rxe reports are from `drivers/infiniband/sw/rxe/rxe_param.h`
//! (Linux 6.x) and, for the observed ones, from a 6.1 guest's
//! `ibv_devinfo -v` (`shared/rig/README.md` §3). ferroce reports what its
//! engine enforces; every field that differs says so on its constant below.
//! In short: no memory windows, APM or port events (so those
//! counts and flags are 0), one completion vector (completion channels are
//! served by the one driver thread; rxe: one per CPU), a per-QP RDMA READ/atomic
//! depth of 16 (rxe: 128), larger queue limits (QP and SRQ 32768 WRs, CQ
//! 1048576 CQEs), no limit of its own on QPs, CQs, SRQs, MRs, PDs, AHs or
//! SGEs (reported as `i32::MAX`), `port_cap_flags` CM_SUP only, as rxe,
//! `fw_ver` the crate version, and a header budget 4 bytes larger than rxe's
//! when deriving the active MTU.

use std::io;
use std::net::IpAddr;

pub use ferroce_io::netif::{self, Interface};

use crate::{Context, Result};

mod attr;
mod derive;
mod gid;
#[cfg(test)]
mod tests;

pub use attr::*;
pub use derive::*;
pub use gid::*;

/// A ferroce device's name, as `ferroce devinfo` (`hca_id`), `ferroce
/// ibstat` (`CA`) and the rdma_cm settings ([`crate::roce_config`]) name it
/// (rxe's are `rxe0`, ...). Every ferroce device goes by it: a device is
/// the address a [`Context`] binds, and the tools show one at a time.
pub const DEVICE_NAME: &str = "ferroce0";

/// The interface `local` belongs to, or a NotFound error.
pub(crate) fn bound_interface(local: IpAddr) -> io::Result<Interface> {
    netif::interface_of(local)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{local} is not an address of this host"),
        )
    })
}

/// `ibv_query_device` for a ferroce device on `local` (one of this host's
/// addresses).
pub fn query_device(local: IpAddr) -> io::Result<DeviceAttr> {
    Ok(device_attr_for(&bound_interface(local)?, local))
}

/// `ibv_query_port` (port 1) for a ferroce device on `local`.
pub fn query_port(local: IpAddr) -> io::Result<PortAttr> {
    Ok(port_attr_for(&bound_interface(local)?))
}

/// The GID table of a ferroce device on `local`: [`gid_table_for`] of its
/// interface, plus `local` itself at the end if the interface does not list
/// it (an address of 127.0.0.0/8 other than 127.0.0.1, which Linux routes to
/// `lo` without listing it).
pub fn gid_table(local: IpAddr) -> io::Result<Vec<Gid>> {
    let iface = bound_interface(local)?;
    let mut table = gid_table_for(&iface);
    if gid_index(&table, local).is_none() && table.len() < GID_TABLE_LEN as usize {
        table.push(Gid::from_ip(local.to_canonical(), &iface.name));
    }
    Ok(table)
}

/// The GID table of a device on `local` on the raw-Ethernet backend:
/// [`gid_table`] with each entry as RoCE v1 and as RoCE v2
/// ([`with_both_types`]).
pub fn gid_table_raw(local: IpAddr) -> io::Result<Vec<Gid>> {
    Ok(with_both_types(gid_table(local)?))
}

/// The GID type of a path's RoCE version.
fn gid_type_of(roce: crate::RoceMode) -> GidType {
    match roce {
        crate::RoceMode::V1 => GidType::RoceV1,
        crate::RoceMode::V2 => GidType::RoceV2,
    }
}

/// Device queries on an open device (`ibv_query_device`, `ibv_query_port`,
/// `ibv_query_gid`), for the address it is bound to. The device can send
/// from that address only: the other GIDs of the table belong to the same
/// interface but to no open ferroce device.
impl Context {
    /// `ibv_query_device` (with the `_ex` fields `ibv_devinfo -v` prints).
    pub fn query_device(&self) -> Result<DeviceAttr> {
        Ok(query_device(self.local())?)
    }

    /// Port 1, with the P_Key and Q_Key violation counters of this
    /// device's engine.
    pub fn query_port(&self) -> Result<PortAttr> {
        let mut port = query_port(self.local())?;
        let stats = self.stats();
        port.bad_pkey_cntr = u32::try_from(stats.rx_bad_pkey).unwrap_or(u32::MAX);
        port.qkey_viol_cntr = u32::try_from(stats.rx_bad_qkey).unwrap_or(u32::MAX);
        Ok(port)
    }

    /// The GID table of the device's interface, in rxe's order; on the
    /// raw backend each entry in both types, as a ConnectX port
    /// ([`gid_table_raw`]).
    pub fn gid_table(&self) -> Result<Vec<Gid>> {
        match self.backend() {
            crate::BackendKind::Udp => Ok(gid_table(self.local())?),
            crate::BackendKind::Raw => Ok(gid_table_raw(self.local())?),
        }
    }

    /// The index of the device's own RoCE v2 GID in [`Context::gid_table`].
    pub fn gid_index(&self) -> Result<usize> {
        self.gid_index_of(crate::RoceMode::V2)
    }

    /// The index of the device's own GID of RoCE version `roce` in
    /// [`Context::gid_table`] (RoCE v1 only on the raw backend).
    pub fn gid_index_of(&self, roce: crate::RoceMode) -> Result<usize> {
        let kind = gid_type_of(roce);
        let raw = Gid::from_ip(self.local().to_canonical(), "").raw;
        let table = self.gid_table()?;
        let found = table.iter().position(|g| g.raw == raw && g.kind == kind);
        found.ok_or_else(|| {
            crate::Error::Io(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "the device's address has no {} GID (RoCE v1 GIDs are on the raw backend only)",
                    kind.name()
                ),
            ))
        })
    }

    /// The RoCE version GID index `index` stands for, to set a path from
    /// (`ibv_rc_pingpong -g`, perftest `-x`). The device sends from its own
    /// address only, so the entry must be one of that address's; the error
    /// lists them otherwise.
    pub fn gid_type(&self, index: usize) -> Result<crate::RoceMode> {
        let table = self.gid_table()?;
        let local = Gid::from_ip(self.local().to_canonical(), "").raw;
        match table.get(index) {
            Some(g) if g.raw == local => Ok(match g.kind {
                GidType::RoceV1 => crate::RoceMode::V1,
                GidType::RoceV2 => crate::RoceMode::V2,
            }),
            other => {
                let own: Vec<String> = table
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| g.raw == local)
                    .map(|(i, g)| format!("{i} ({})", g.kind.name()))
                    .collect();
                let what = match other {
                    Some(g) => format!("is {g}, not this device's address"),
                    None => format!("is past the table's {} entries", table.len()),
                };
                Err(crate::Error::Io(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "GID index {index} {what}; the device on {} has GID indices {}",
                        self.local(),
                        own.join(", ")
                    ),
                )))
            }
        }
    }
}
