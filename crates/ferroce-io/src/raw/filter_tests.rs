use super::*;
use crate::raw::frame::{FrameBuilder, FrameSpec, L3};
use ferroce_wire::pfc::{self, MacControlRepr};
use ferroce_wire::{Opcode, samples};

/// Runs `prog` on `pkt` as the kernel's classic BPF interpreter would for
/// the instructions the program uses; a load past the end rejects.
fn run(prog: &[BpfInsn], pkt: &[u8]) -> u32 {
    let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
    let byte = |at: u32| pkt.get(at as usize).copied().map(u32::from);
    let half = |at: u32| Some((byte(at)? << 8) | byte(at + 1)?);
    loop {
        let i = prog[pc];
        pc += 1;
        let jump = |cond: bool| usize::from(if cond { i.jt } else { i.jf });
        match i.code {
            LD_H_ABS => match half(i.k) {
                Some(v) => a = v,
                None => return 0,
            },
            LD_B_ABS => match byte(i.k) {
                Some(v) => a = v,
                None => return 0,
            },
            LD_H_IND => match half(x + i.k) {
                Some(v) => a = v,
                None => return 0,
            },
            LDX_B_MSH => match byte(i.k) {
                Some(v) => x = (v & 0xf) * 4,
                None => return 0,
            },
            JEQ_K => pc += jump(a == i.k),
            JSET_K => pc += jump(a & i.k != 0),
            RET_K => return i.k,
            c => panic!("instruction {c:#x} not in the test interpreter"),
        }
    }
}

fn roce(l3: L3) -> Vec<u8> {
    let t = samples::transport(Opcode::RC_SEND_ONLY, 1, 32);
    let mut tb = vec![0; t.buffer_len()];
    let n = t.emit(&mut tb, &[7; 32]).unwrap();
    let spec = FrameSpec {
        dst_mac: [2; 6],
        src_mac: [4; 6],
        vlan: None,
        l3,
    };
    let mut out = vec![0; 256];
    let len = FrameBuilder::default()
        .build(&spec, &tb[..n], &mut out)
        .unwrap();
    out.truncate(len);
    out
}

fn v4() -> L3 {
    L3::V2Ipv4 {
        src: "10.0.0.1".parse().unwrap(),
        dst: "10.0.0.2".parse().unwrap(),
        tos: 0,
        ttl: 64,
        src_port: 0xc000,
    }
}

#[test]
fn roce_and_mac_control_pass() {
    let p = program();
    let v6 = L3::V2Ipv6 {
        src: "fd00::1".parse().unwrap(),
        dst: "fd00::2".parse().unwrap(),
        traffic_class: 0,
        flow_label: 1,
        hop_limit: 64,
        src_port: 0xc000,
    };
    let v1 = L3::V1 {
        sgid: "fe80::1".parse().unwrap(),
        dgid: "fe80::2".parse().unwrap(),
        traffic_class: 0,
        flow_label: 0,
        hop_limit: 1,
    };
    for l3 in [v4(), v6, v1] {
        assert_eq!(run(&p, &roce(l3)), ACCEPT_LEN, "{l3:?}");
    }
    let pfc = pfc::frame([2; 6], &MacControlRepr::Pause { quanta: 1 });
    assert_eq!(run(&p, &pfc), ACCEPT_LEN);
}

#[test]
fn other_traffic_is_refused() {
    let p = program();
    let base = roce(v4());
    // Another UDP port (DNS), ICMP (ping), a fragment, an ARP frame.
    let mut dns = base.clone();
    dns[36..38].copy_from_slice(&53u16.to_be_bytes());
    let mut icmp = base.clone();
    icmp[23] = 1;
    let mut frag = base.clone();
    frag[20] |= 0x20;
    let mut arp = base.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    for (what, f) in [
        ("dns", dns),
        ("icmp", icmp),
        ("fragment", frag),
        ("arp", arp),
    ] {
        assert_eq!(run(&p, &f), 0, "{what} accepted");
    }
    // An IPv4 header with options moves the port: 4791 there passes.
    let mut opts = base[..34].to_vec();
    opts[14] = 0x46;
    opts.extend_from_slice(&[1, 1, 1, 0]);
    opts.extend_from_slice(&base[34..]);
    assert_eq!(run(&p, &opts), ACCEPT_LEN);
    // Truncated frames are refused, not read past.
    for len in 0..base.len().min(38) {
        assert_eq!(run(&p, &base[..len]), 0, "{len} bytes accepted");
    }
    assert_eq!(run(&reject_all(), &base), 0);
}
