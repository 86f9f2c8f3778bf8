//! `ibv_copy_path_rec_from_kern` / `ibv_copy_path_rec_to_kern`
//! (`IBVERBS_1.0`): the field-by-field translation between librdmacm's
//! `struct ibv_sa_path_rec` and the kernel ABI's `struct
//! ib_user_path_rec` (`<rdma/ib_user_sa.h>`). Both keep the
//! network-order fields as they are, as rdma-core does.
//!
//! Safety: per the module contract, a non-NULL `dst` / `src` points to a
//! valid struct of the declared C type; NULL is ignored.

use crate::abi::ibv_gid;
use crate::rdmacm::abi::ibv_sa_path_rec;

/// `struct ib_user_path_rec`: 64 bytes, the kernel's layout.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(super) struct ib_user_path_rec {
    dgid: [u8; 16],
    sgid: [u8; 16],
    dlid: u16,
    slid: u16,
    raw_traffic: u32,
    flow_label: u32,
    reversible: u32,
    mtu: u32,
    pkey: u16,
    hop_limit: u8,
    traffic_class: u8,
    numb_path: u8,
    sl: u8,
    mtu_selector: u8,
    rate_selector: u8,
    rate: u8,
    packet_life_time_selector: u8,
    packet_life_time: u8,
    preference: u8,
}

fn from_kern(k: &ib_user_path_rec) -> ibv_sa_path_rec {
    // The int fields hold the kernel's u32 bit for bit, as C's assignment.
    ibv_sa_path_rec {
        dgid: ibv_gid { raw: k.dgid },
        sgid: ibv_gid { raw: k.sgid },
        dlid: k.dlid,
        slid: k.slid,
        raw_traffic: k.raw_traffic as i32,
        flow_label: k.flow_label,
        hop_limit: k.hop_limit,
        traffic_class: k.traffic_class,
        reversible: k.reversible as i32,
        numb_path: k.numb_path,
        pkey: k.pkey,
        sl: k.sl,
        mtu_selector: k.mtu_selector,
        // The kernel's u32 holds an `enum ibv_mtu` (1..=5): C truncates.
        mtu: k.mtu as u8,
        rate_selector: k.rate_selector,
        rate: k.rate,
        packet_life_time_selector: k.packet_life_time_selector,
        packet_life_time: k.packet_life_time,
        preference: k.preference,
    }
}

fn to_kern(u: &ibv_sa_path_rec) -> ib_user_path_rec {
    ib_user_path_rec {
        dgid: u.dgid.raw,
        sgid: u.sgid.raw,
        dlid: u.dlid,
        slid: u.slid,
        raw_traffic: u.raw_traffic as u32,
        flow_label: u.flow_label,
        reversible: u.reversible as u32,
        mtu: u32::from(u.mtu),
        pkey: u.pkey,
        hop_limit: u.hop_limit,
        traffic_class: u.traffic_class,
        numb_path: u.numb_path,
        sl: u.sl,
        mtu_selector: u.mtu_selector,
        rate_selector: u.rate_selector,
        rate: u.rate,
        packet_life_time_selector: u.packet_life_time_selector,
        packet_life_time: u.packet_life_time,
        preference: u.preference,
    }
}

pub(super) unsafe extern "C" fn ibv_copy_path_rec_from_kern(
    dst: *mut ibv_sa_path_rec,
    src: *const ib_user_path_rec,
) {
    if dst.is_null() || src.is_null() {
        return;
    }
    // SAFETY: both non-NULL and valid (module contract); `src` is read
    // whole before `dst` is written, so an overlap cannot tear it.
    unsafe { dst.write(from_kern(&src.read())) };
}

pub(super) unsafe extern "C" fn ibv_copy_path_rec_to_kern(
    dst: *mut ib_user_path_rec,
    src: *const ibv_sa_path_rec,
) {
    if dst.is_null() || src.is_null() {
        return;
    }
    // SAFETY: as in `ibv_copy_path_rec_from_kern`.
    unsafe { dst.write(to_kern(&src.read())) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_layout_is_64_bytes() {
        assert_eq!(std::mem::size_of::<ib_user_path_rec>(), 64);
        assert_eq!(std::mem::offset_of!(ib_user_path_rec, mtu), 48);
        assert_eq!(std::mem::offset_of!(ib_user_path_rec, preference), 63);
    }

    #[test]
    fn round_trip_keeps_every_field() {
        let k = ib_user_path_rec {
            dgid: [1; 16],
            sgid: [2; 16],
            dlid: 0x0300,
            slid: 0x0400,
            raw_traffic: 1,
            flow_label: 0x0500_0000,
            reversible: 1,
            mtu: 3,
            pkey: 0xffff,
            hop_limit: 64,
            traffic_class: 7,
            numb_path: 1,
            sl: 2,
            mtu_selector: 2,
            rate_selector: 2,
            rate: 16,
            packet_life_time_selector: 2,
            packet_life_time: 18,
            preference: 9,
        };
        let mut u = ibv_sa_path_rec::default();
        let mut back = ib_user_path_rec::default();
        // SAFETY: valid locals.
        unsafe {
            ibv_copy_path_rec_from_kern(&mut u, &k);
            ibv_copy_path_rec_to_kern(&mut back, &u);
        }
        assert_eq!(u.mtu, 3);
        assert_eq!(u.packet_life_time, 18);
        assert_eq!(back, k);
    }
}
