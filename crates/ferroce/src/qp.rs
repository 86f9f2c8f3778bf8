//! Queue pairs: creation attributes, posting work, and connecting RC/UC
//! QPs to a peer.

use std::net::IpAddr;
use std::sync::Arc;

use crate::driver::Shared;
use crate::srq::SrqHandle;
use crate::{
    Access, CompletionQueue, Mtu, Path, Psn, QpAttr, QpState, QpType, RecvWr, Result, SendWr,
    SharedReceiveQueue,
};

/// What `create_qp` takes (`ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy)]
pub struct QpInitAttr<'a> {
    pub qp_type: QpType,
    pub send_cq: &'a CompletionQueue,
    pub recv_cq: &'a CompletionQueue,
    pub max_send_wr: u32,
    /// Ignored when the QP takes its receives from an SRQ.
    pub max_recv_wr: u32,
    pub sq_sig_all: bool,
    /// Take receive work requests from this shared receive queue instead
    /// of a receive queue of the QP's own (`post_recv` is then refused).
    pub srq: Option<&'a SharedReceiveQueue>,
}

impl<'a> QpInitAttr<'a> {
    /// Queues of 256 entries; only signaled send requests complete.
    pub fn new(
        qp_type: QpType,
        send_cq: &'a CompletionQueue,
        recv_cq: &'a CompletionQueue,
    ) -> Self {
        Self {
            qp_type,
            send_cq,
            recv_cq,
            max_send_wr: 256,
            max_recv_wr: 256,
            sq_sig_all: false,
            srq: None,
        }
    }
}

/// A queue pair.
#[derive(Debug)]
pub struct QueuePair {
    pub(crate) shared: Arc<Shared>,
    pub(crate) qpn: u32,
    /// Keeps the SRQ it takes receives from until the QP is destroyed.
    pub(crate) srq: Option<Arc<SrqHandle>>,
}

impl QueuePair {
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    pub fn state(&self) -> Result<QpState> {
        Ok(self.shared.engine().qp_state(self.qpn)?)
    }

    /// `ibv_modify_qp`.
    pub fn modify(&self, attr: &QpAttr) -> Result<()> {
        let _device = self.shared.span.enter();
        self.shared.engine().modify_qp(self.qpn, attr)?;
        self.shared.kick();
        Ok(())
    }

    /// `ibv_post_send`. Only queues the request: the driver thread, or
    /// the next [`CompletionQueue::poll`], sends it, so that a burst of
    /// posts goes out in batches rather than one system call each.
    pub fn post_send(&self, wr: SendWr) -> Result<()> {
        self.shared.engine().post_send(self.qpn, wr)?;
        self.shared.kick();
        Ok(())
    }

    /// `ibv_post_recv`; refused on a QP created with an SRQ (post to the
    /// [`SharedReceiveQueue`] instead).
    pub fn post_recv(&self, wr: RecvWr) -> Result<()> {
        self.shared.engine().post_recv(self.qpn, wr)?;
        self.shared.kick();
        Ok(())
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // What the QP owes its peer (the ACK of the last request received)
        // goes out before it is destroyed.
        self.shared.flush();
        let _ = self.shared.engine().destroy_qp(self.qpn);
        // Then the SRQ, if this QP was the last thing holding it.
        self.srq.take();
    }
}

/// A connected QP's path to `remote`, with the RoCE v2 UDP source port
/// derived from the two QP numbers as rdma-core derives it.
pub fn path_to(remote: IpAddr, local_qpn: u32, remote_qpn: u32) -> Path {
    use ferroce_wire::udp::{flow_label_from_qpns, source_port_from_flow_label};
    Path {
        remote,
        udp_src_port: source_port_from_flow_label(flow_label_from_qpns(local_qpn, remote_qpn)),
        traffic_class: 0,
        hop_limit: 64,
    }
}

/// Brings an RC or UC QP from RESET to RTS against a peer, as rdma-core's
/// pingpong examples do: `local_psn` is this side's first send PSN,
/// `remote_psn` the peer's.
pub fn connect_qp(
    qp: &QueuePair,
    qp_type: QpType,
    remote: IpAddr,
    remote_qpn: u32,
    local_psn: Psn,
    remote_psn: Psn,
    mtu: Mtu,
) -> Result<()> {
    let rc = qp_type == QpType::Rc;
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    qp.modify(&QpAttr {
        state: Some(QpState::Init),
        pkey_index: Some(0),
        port: Some(1),
        access: Some(access),
        ..QpAttr::default()
    })?;
    qp.modify(&QpAttr {
        state: Some(QpState::Rtr),
        path: Some(path_to(remote, qp.qpn(), remote_qpn)),
        path_mtu: Some(mtu),
        dest_qpn: Some(remote_qpn),
        rq_psn: Some(remote_psn),
        max_dest_rd_atomic: rc.then_some(16),
        min_rnr_timer: rc.then_some(12),
        ..QpAttr::default()
    })?;
    qp.modify(&QpAttr {
        state: Some(QpState::Rts),
        sq_psn: Some(local_psn),
        timeout: rc.then_some(14),
        retry_cnt: rc.then_some(7),
        rnr_retry: rc.then_some(7),
        max_rd_atomic: rc.then_some(16),
        ..QpAttr::default()
    })
}
