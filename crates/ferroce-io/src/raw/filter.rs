//! The classic BPF program the raw backend's receive socket runs in the
//! kernel, so that only RoCE and MAC control frames reach its ring (a busy
//! interface's other traffic costs a few instructions, not a ring slot):
//!
//! * ethertype 0x8915 (RoCE v1) and 0x8808 (MAC control: PFC, PAUSE);
//! * IPv4, protocol UDP, not a fragment, destination port 4791 (any IHL);
//! * IPv6, next header UDP, destination port 4791 (extension headers are
//!   not followed, as ferroce-wire does not follow them).
//!
//! Offsets are from the start of the Ethernet header with no 802.1Q tag:
//! Linux takes the tag off a received frame before packet sockets and
//! their filters see it (reported beside, in `tp_vlan_tci`), so tagged and
//! untagged frames match alike.

use ferroce_wire::ethernet::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_ROCE_V1};
use ferroce_wire::pfc::ETHERTYPE_MAC_CONTROL;
use ferroce_wire::udp::ROCE_V2_PORT;

use crate::sys::packet::BpfInsn;

/// Instruction classes and modes of classic BPF (linux/bpf_common.h).
const LD_H_ABS: u16 = 0x28;
const LD_B_ABS: u16 = 0x30;
const LD_H_IND: u16 = 0x48;
const LDX_B_MSH: u16 = 0xb1;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

/// Bytes of a frame to keep: all of it.
const ACCEPT_LEN: u32 = 0x4_0000;

const ETHERTYPE: u32 = 12;
const L3: u32 = 14;
/// IPv4 protocol, flags/fragment offset, and the UDP destination port
/// past the IHL (the `LDX_B_MSH` loads 4 x IHL into X).
const IPV4_PROTOCOL: u32 = L3 + 9;
const IPV4_FRAG: u32 = L3 + 6;
/// More Fragments and the fragment offset (not DF).
const IPV4_FRAG_BITS: u32 = 0x3fff;
const UDP_DST_PORT: u32 = 2;
const IPV6_NEXT_HEADER: u32 = L3 + 6;
const IPV6_UDP_DST_PORT: u32 = L3 + 40 + UDP_DST_PORT;
const PROTO_UDP: u32 = 17;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> BpfInsn {
    BpfInsn { code, jt, jf, k }
}

/// The program; jumps are relative (next instruction + jt/jf), and each
/// line names where it goes.
pub(crate) fn program() -> Vec<BpfInsn> {
    const REJECT: u8 = 16;
    const ACCEPT: u8 = 17;
    // `to(pc, target)`: the relative jump from instruction `pc`.
    let to = |pc: u8, target: u8| target - pc - 1;
    vec![
        insn(LD_H_ABS, 0, 0, ETHERTYPE),                                  // 0
        insn(JEQ_K, to(1, ACCEPT), 0, ETHERTYPE_ROCE_V1.into()),          // 1
        insn(JEQ_K, to(2, ACCEPT), 0, ETHERTYPE_MAC_CONTROL.into()),      // 2
        insn(JEQ_K, to(3, 5), 0, ETHERTYPE_IPV4.into()),                  // 3
        insn(JEQ_K, to(4, 12), to(4, REJECT), ETHERTYPE_IPV6.into()),     // 4
        insn(LD_B_ABS, 0, 0, IPV4_PROTOCOL),                              // 5 IPv4
        insn(JEQ_K, 0, to(6, REJECT), PROTO_UDP),                         // 6
        insn(LD_H_ABS, 0, 0, IPV4_FRAG),                                  // 7
        insn(JSET_K, to(8, REJECT), 0, IPV4_FRAG_BITS),                   // 8 MF or offset
        insn(LDX_B_MSH, 0, 0, L3),                                        // 9 X = IHL x 4
        insn(LD_H_IND, 0, 0, L3 + UDP_DST_PORT),                          // 10
        insn(JEQ_K, to(11, ACCEPT), to(11, REJECT), ROCE_V2_PORT.into()), // 11
        insn(LD_B_ABS, 0, 0, IPV6_NEXT_HEADER),                           // 12 IPv6
        insn(JEQ_K, 0, to(13, REJECT), PROTO_UDP),                        // 13
        insn(LD_H_ABS, 0, 0, IPV6_UDP_DST_PORT),                          // 14
        insn(JEQ_K, to(15, ACCEPT), to(15, REJECT), ROCE_V2_PORT.into()), // 15
        insn(RET_K, 0, 0, 0),                                             // 16 REJECT
        insn(RET_K, 0, 0, ACCEPT_LEN),                                    // 17 ACCEPT
    ]
}

/// A program that refuses everything: for the UDP socket that holds port
/// 4791 and must never queue what it receives.
pub(crate) fn reject_all() -> Vec<BpfInsn> {
    vec![insn(RET_K, 0, 0, 0)]
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;
