//! Forging CM MADs over real UDP: a bare UDP backend on an address of its
//! own that sends RoCE v2 packets (BTH + DETH + MAD, the backend adds the
//! ICRC) to a device's QP1, and reads what the device's CM answers.
//! Shared by the rdma_cm hostile-input tests.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ferroce_cm::rdma_cm::{CmaHeader, PortSpace, RdmaService, req_private_data};
use ferroce_io::{OutDatagram, UdpBackend, UdpConfig};
use ferroce_wire::deth::DethRepr;
use ferroce_wire::mad::{
    BASE_VERSION, CM_CLASS, CM_CLASS_VERSION, CM_DATA_LEN, CmMessage, CmRej, CmReq, GSI_QKEY,
    MAD_LEN, Mad, MadHeader, TRANSPORT_RC, attr, method,
};
use ferroce_wire::udp::ROCE_V2_PORT;
use ferroce_wire::{Opcode, Psn, TransportRepr};

/// QP1's UDP source port as rxe derives it (and as every CM MAD leaves).
pub(crate) const GSI_SRC_PORT: u16 = 55410;
/// IBA's MTU code for 1024 bytes.
pub(crate) const MTU_1024: u8 = 3;

/// A bare UDP backend at `local:port` that sends to `to`'s RoCE port.
pub(crate) struct MadForger {
    udp: UdpBackend,
    to: IpAddr,
}

impl MadForger {
    /// `port` 4791 receives the CM's answers (the CM sends to 4791);
    /// another port leaves them unread.
    pub(crate) fn new(local: IpAddr, port: u16, to: IpAddr) -> Self {
        let mut cfg = UdpConfig::new(local);
        cfg.port = port;
        let udp = UdpBackend::bind(cfg)
            .unwrap_or_else(|e| panic!("bind {local}:{port} (run in a netns with lo up): {e}"));
        Self { udp, to }
    }

    /// Sends each payload as a UD SEND_ONLY to QP1 from QP `src_qp` with
    /// Q_Key `qkey`; returns how many went out (equal sizes go as one GSO
    /// train).
    pub(crate) fn send(&mut self, payloads: &[Vec<u8>], qkey: u32, src_qp: u32) -> usize {
        let mut bufs: Vec<Vec<u8>> = payloads
            .iter()
            .map(|p| {
                let t = qp1_packet(p.len(), qkey, src_qp);
                let mut b = vec![0; t.buffer_len()];
                let n = t.emit(&mut b, p).unwrap();
                b.truncate(n);
                b
            })
            .collect();
        let mut batch: Vec<OutDatagram<'_>> = bufs
            .iter_mut()
            .map(|b| OutDatagram {
                remote: self.to,
                remote_port: ROCE_V2_PORT,
                src_port: GSI_SRC_PORT,
                tos: 0,
                transport: b,
            })
            .collect();
        let mut sent = 0;
        while sent < batch.len() {
            let n = self.udp.send(&mut batch[sent..]).unwrap();
            if n == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
            sent += n;
        }
        sent
    }

    /// The REJs received, until `want` of them or `wait` has passed.
    pub(crate) fn rejs(&mut self, want: usize, wait: Duration) -> Vec<CmRej> {
        let deadline = Instant::now() + wait;
        let mut out = Vec::new();
        while out.len() < want && Instant::now() < deadline {
            let n = self
                .udp
                .recv(|_, _, transport| {
                    // BTH (12) + DETH (8), then the MAD, then the ICRC.
                    let Some(mad) = transport.get(20..20 + MAD_LEN) else {
                        return;
                    };
                    if let Ok(Mad {
                        cm: Some(CmMessage::Rej(rej)),
                        ..
                    }) = Mad::parse(mad)
                    {
                        out.push(rej);
                    }
                })
                .unwrap_or(0);
            if n == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        out
    }
}

/// A UD SEND_ONLY to QP1 carrying `len` bytes.
fn qp1_packet(len: usize, qkey: u32, src_qp: u32) -> TransportRepr {
    let mut t = ferroce_wire::samples::transport(Opcode::UD_SEND_ONLY, 0, len);
    t.bth.dest_qp = 1;
    t.bth.ack_req = true;
    t.deth = Some(DethRepr { qkey, src_qp });
    t
}

/// What a forged REQ says.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReqFields {
    pub(crate) comm_id: u32,
    pub(crate) guid: u64,
    pub(crate) qpn: u32,
    /// The rdma_cm TCP-space port it asks for.
    pub(crate) port: u16,
    pub(crate) transport: u8,
    pub(crate) mtu: u8,
    /// The addresses in rdma_cm's header.
    pub(crate) from: IpAddr,
    pub(crate) to: IpAddr,
}

impl ReqFields {
    /// An RC REQ at MTU 1024, as rdma_cm sends one.
    pub(crate) fn new(
        comm_id: u32,
        guid: u64,
        qpn: u32,
        port: u16,
        from: IpAddr,
        to: IpAddr,
    ) -> Self {
        Self {
            comm_id,
            guid,
            qpn,
            port,
            transport: TRANSPORT_RC,
            mtu: MTU_1024,
            from,
            to,
        }
    }

    /// The 256-byte MAD.
    pub(crate) fn mad(&self) -> Vec<u8> {
        let mut req = CmReq::parse(&[0u8; CM_DATA_LEN]).unwrap();
        req.local_comm_id = self.comm_id;
        req.service_id = RdmaService::new(PortSpace::Tcp, self.port).service_id();
        req.local_ca_guid = self.guid;
        req.local_qpn = self.qpn;
        req.starting_psn = Psn::new(1);
        req.local_cm_response_timeout = 20;
        req.remote_cm_response_timeout = 20;
        req.max_cm_retries = 15;
        req.retry_count = 7;
        req.rnr_retry_count = 7;
        req.responder_resources = 1;
        req.initiator_depth = 1;
        req.partition_key = 0xffff;
        req.transport_service_type = self.transport;
        req.path_packet_mtu = self.mtu;
        req.primary_path.local_ack_timeout = 19;
        req.primary_path.hop_limit = 64;
        let header = CmaHeader {
            source_port: 40000,
            source: self.from,
            destination: self.to,
        };
        req.private_data = req_private_data(&header, &[]).unwrap();
        emit(
            cm_header(u64::from(self.comm_id), attr::REQ),
            Some(CmMessage::Req(req)),
        )
    }
}

/// A CM MAD header as a peer's CM writes it.
pub(crate) fn cm_header(tid: u64, attribute_id: u16) -> MadHeader {
    MadHeader {
        base_version: BASE_VERSION,
        mgmt_class: CM_CLASS,
        class_version: CM_CLASS_VERSION,
        method: method::SEND,
        status: 0,
        class_specific: 0,
        transaction_id: tid,
        attribute_id,
        attribute_modifier: 0,
    }
}

/// The 256 bytes of a MAD.
pub(crate) fn emit(header: MadHeader, cm: Option<CmMessage>) -> Vec<u8> {
    let mut out = vec![0u8; MAD_LEN];
    Mad { header, cm }.emit(&mut out).unwrap();
    out
}

/// The GSI Q_Key every CM MAD carries.
pub(crate) const QKEY: u32 = GSI_QKEY;

/// A small deterministic generator for made-up comm IDs, GUIDs and QPNs
/// (splitmix64).
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Waits up to `wait` for `f` to hold, polling every few ms; returns
/// whether it did.
pub(crate) fn eventually(wait: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + wait;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
