//! The block perftest prints before its result table (as ib_write_bw
//! does): what is measured (the test, device, QPs, connection type,
//! transport, MTU, message size, TX depth, how the keys were exchanged),
//! then each QP's local and remote address (LID, QPN, PSN, RKey, VAddr,
//! GID) in perftest's formats. `--quiet` leaves it out: the output is then
//! the table alone, which `ferroce bench` parses.

use std::net::IpAddr;

use ferroce::Mtu;

use super::{AtomicType, Test};

/// perftest's separator line.
const RULE_WIDTH: usize = 87;

/// What the block describes.
pub(super) struct Header<'a> {
    pub(super) test: Test,
    pub(super) lat: bool,
    pub(super) atomic: AtomicType,
    pub(super) qps: usize,
    pub(super) mtu: Mtu,
    pub(super) size: usize,
    pub(super) tx_depth: u32,
    pub(super) gid_index: usize,
    /// perftest's "Data ex. method" line.
    pub(super) exchange: &'a str,
    pub(super) local: &'a [Address],
    pub(super) remote: &'a [Address],
}

/// One QP's address record, as perftest prints it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Address {
    pub(super) lid: u32,
    pub(super) qpn: u32,
    pub(super) psn: u32,
    pub(super) rkey: u32,
    pub(super) vaddr: u64,
    pub(super) gid: [u8; 16],
}

/// A GID as the 16 bytes of an IPv6 address (IPv4: mapped).
pub(super) fn gid_bytes(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// perftest's name of the test ("RDMA_Write BW Test").
fn title(test: Test, atomic: AtomicType, lat: bool) -> String {
    let op = match (test, atomic) {
        (Test::Send, _) => "Send".to_string(),
        (Test::Write, _) => "RDMA_Write".to_string(),
        (Test::Read, _) => "RDMA_Read".to_string(),
        (Test::Atomic, AtomicType::FetchAndAdd) => "Atomic FETCH_AND_ADD".to_string(),
        (Test::Atomic, AtomicType::CmpAndSwap) => "Atomic CMP_AND_SWAP".to_string(),
    };
    format!("{op} {} Test", if lat { "Latency" } else { "BW" })
}

impl<'a> Header<'a> {
    /// The header of the test `p` describes, as `args` ran it, over
    /// `exchange`, with each side's QP records.
    pub(super) fn of_test(
        args: &super::PerfArgs,
        p: &super::setup::Params,
        exchange: &'a str,
        local: &'a [Address],
        remote: &'a [Address],
    ) -> Self {
        Header {
            test: p.test,
            lat: p.lat,
            atomic: p.atomic,
            qps: local.len(),
            mtu: p.mtu,
            size: p.size,
            // The latency tests have one request in flight.
            tx_depth: if p.lat { 1 } else { p.tx_depth },
            gid_index: args.backend.gid_index.unwrap_or(0),
            exchange,
            local,
            remote,
        }
    }
}

impl Header<'_> {
    /// The block's lines (the table's own first rule follows them).
    pub(super) fn lines(&self) -> Vec<String> {
        let rule = "-".repeat(RULE_WIDTH);
        let mut out = vec![
            rule.clone(),
            format!("{:>20}{}", "", title(self.test, self.atomic, self.lat)),
            format!(
                " Dual-port       : OFF\t\tDevice         : {}",
                ferroce::DEVICE_NAME
            ),
            format!(" Number of qps   : {}\t\tTransport type : IB", self.qps),
            " Connection type : RC\t\tUsing SRQ      : OFF".to_string(),
            format!(" TX depth        : {}", self.tx_depth),
            format!(" Mtu             : {}[B]", self.mtu.bytes()),
            format!(" Message size    : {}[B]", self.size),
            " Link type       : Ethernet".to_string(),
            format!(" GID index       : {}", self.gid_index),
            format!(" Data ex. method : {}", self.exchange),
            rule,
        ];
        let records = [("local", self.local), ("remote", self.remote)];
        for (side, addrs) in records {
            for a in addrs {
                out.push(format!(
                    " {side} address: LID {:04x} QPN {:#06x} PSN {:#06x} RKey {:#08x} VAddr {:#016x}",
                    a.lid, a.qpn, a.psn, a.rkey, a.vaddr
                ));
                out.push(format!(" GID: {}", gid_text(&a.gid)));
            }
        }
        out
    }

    /// Prints the block on stdout.
    pub(super) fn print(&self) {
        for line in self.lines() {
            println!("{line}");
        }
    }
}

/// A GID as perftest prints it: each byte in decimal, two digits at least.
fn gid_text(gid: &[u8; 16]) -> String {
    gid.iter()
        .map(|b| format!("{b:02}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_perftests() {
        let a = Address {
            lid: 0,
            qpn: 0xdf84,
            psn: 0x19fd49,
            rkey: 0xcf52fc5e,
            vaddr: 0x7f78771bf000,
            gid: gid_bytes("127.0.0.2".parse().unwrap()),
        };
        let h = Header {
            test: Test::Write,
            lat: false,
            atomic: AtomicType::FetchAndAdd,
            qps: 1,
            mtu: Mtu::Mtu4096,
            size: 65536,
            tx_depth: 128,
            gid_index: 0,
            exchange: "Ethernet",
            local: &[a],
            remote: &[a],
        };
        let lines = h.lines();
        assert_eq!(lines[1], "                    RDMA_Write BW Test");
        assert_eq!(
            lines[12],
            " local address: LID 0000 QPN 0xdf84 PSN 0x19fd49 RKey 0xcf52fc5e VAddr 0x007f78771bf000"
        );
        assert_eq!(
            lines[13],
            " GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:02"
        );
        assert!(lines[14].starts_with(" remote address: LID 0000 QPN 0xdf84"));
        assert_eq!(
            title(Test::Send, AtomicType::FetchAndAdd, true),
            "Send Latency Test"
        );
    }
}
