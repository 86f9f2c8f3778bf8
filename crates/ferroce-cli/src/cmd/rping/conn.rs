//! One rping connection's verbs objects (rping's control block): the RC QP
//! (the CM moves it, or with `-q` this side with the CM's attributes), one
//! CQ, the 16-byte receive and send buffers, the ping
//! buffer(s); and [`Conn::next`], which waits for the next thing that moves
//! the ping loop on (a receive, a READ or WRITE done, the disconnect).

use std::collections::VecDeque;
use std::time::Duration;

use ferroce::cm::{CmEvent, CmEventKind, CmId};
use ferroce::{
    Access, CompletionQueue, MemoryRegion, QpInitAttr, QpState, QpType, QueuePair, RecvWr,
    RemoteRegion, SendWr, WcOpcode, WcStatus, WorkCompletion,
};

use super::{Info, Print};
use crate::error::Error;

/// rping's send queue depth (`RPING_SQ_DEPTH`); its CQ holds twice that.
const SQ_DEPTH: u32 = 16;
/// rping keeps one receive posted and allows two.
const RQ_DEPTH: u32 = 2;
/// How long one wait for a completion lasts before the CM's events are
/// looked at again.
const SLICE: Duration = Duration::from_millis(5);

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
const RDMA_WRID: u64 = 3;

/// Where a connection's CM events come from: the event channel itself, or
/// (persistent server) the thread that reads it.
pub(crate) type Events = Box<dyn FnMut() -> Option<CmEvent> + Send>;

/// What moves the ping loop on.
#[derive(Debug)]
pub(crate) enum Step {
    /// The peer's SEND: a buffer advertisement (its contents on the
    /// server; rping's client only counts them).
    Recv(Info),
    ReadDone,
    WriteDone,
    /// The peer disconnected (DISCONNECTED).
    Disconnected,
}

/// An rping connection: its ID, QP, CQ and memory.
pub(crate) struct Conn {
    pub(crate) id: CmId,
    pub(crate) qp: QueuePair,
    cq: CompletionQueue,
    recv: MemoryRegion,
    send: MemoryRegion,
    /// The RDMA sink (the server reads into it and writes from it; the
    /// client's second buffer).
    pub(crate) rdma: MemoryRegion,
    /// The client's ping data, which the server reads.
    pub(crate) start: Option<MemoryRegion>,
    events: Events,
    pending: VecDeque<WorkCompletion>,
    pub(crate) print: Print,
    /// The client's connection (its ID is rping's "parent"; the server's
    /// connection is on a "child" of the listener).
    client: bool,
}

impl Conn {
    /// rping_setup_qp + rping_setup_buffers + the first receive: a PD, CQ
    /// and RC QP on the ID's device, the buffers registered (`start` for
    /// the client). With `own_qp` (`-q`) the QP is not the CM's: it is
    /// created on the PD and moved to INIT here, to RTR and RTS by
    /// [`move_own_qp`](Self::move_own_qp).
    pub(crate) fn new(
        id: CmId,
        size: u32,
        client: bool,
        own_qp: bool,
        events: Events,
        print: Print,
    ) -> Result<Self, Error> {
        let ctx = id
            .verbs()
            .ok_or("the rdma_cm ID has no device after resolution (a bug in ferroce::cm)")?;
        let pd = ctx.alloc_pd();
        print.debug(format_args!("created pd"));
        let cq = ctx.create_cq(SQ_DEPTH * 2)?;
        print.debug(format_args!("created cq"));
        let mut attr = QpInitAttr::new(QpType::Rc, &cq, &cq);
        attr.max_send_wr = SQ_DEPTH;
        attr.max_recv_wr = RQ_DEPTH;
        let qp = if own_qp {
            let qp = pd.create_qp(&attr)?;
            qp.modify(&id.qp_attr(QpState::Init)?)?;
            qp
        } else {
            id.create_qp(&pd, &attr)?
        };
        print.debug(format_args!("created qp {:#x}", qp.qpn()));
        let remote = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let recv = pd.reg_mr(Info::LEN, Access::LOCAL_WRITE)?;
        let send = pd.reg_mr(Info::LEN, Access::NONE)?;
        let rdma = pd.reg_mr(size as usize, remote)?;
        let start = if client {
            Some(pd.reg_mr(size as usize, remote)?)
        } else {
            None
        };
        print.debug(format_args!("allocated & registered buffers..."));
        let conn = Self {
            id,
            qp,
            cq,
            recv,
            send,
            rdma,
            start,
            events,
            pending: VecDeque::new(),
            print,
            client,
        };
        conn.post_recv()?;
        Ok(conn)
    }

    /// rping_self_modify_qp (`-q`): INIT, RTR and RTS with the attributes
    /// the CM gives for this connection (`rdma_init_qp_attr`).
    pub(crate) fn move_own_qp(&self) -> Result<(), Error> {
        for state in [QpState::Init, QpState::Rtr, QpState::Rts] {
            self.qp.modify(&self.id.qp_attr(state)?)?;
        }
        Ok(())
    }

    fn post_recv(&self) -> Result<(), Error> {
        let sg = [self.recv.sge(0, Info::LEN as u32)];
        self.qp.post_recv(RecvWr::new(RECV_WRID, &sg))?;
        Ok(())
    }

    /// SENDs `info` (rping_format_send, then the send WR).
    pub(crate) fn send_info(&self, info: Info) -> Result<(), Error> {
        self.print.debug(format_args!(
            "RDMA addr {:x} rkey {:x} len {}",
            info.buf, info.rkey, info.size
        ));
        self.send_bytes(&info.to_bytes())
    }

    /// SENDs the server's "go ahead": its never-filled 16-byte send buffer
    /// (zeros), as rping's server sends it.
    pub(crate) fn send_go_ahead(&self) -> Result<(), Error> {
        self.send_bytes(&[0; Info::LEN])
    }

    fn send_bytes(&self, bytes: &[u8; Info::LEN]) -> Result<(), Error> {
        self.send.write(0, bytes)?;
        let sg = [self.send.sge(0, Info::LEN as u32)];
        self.qp.post_send(SendWr::send(SEND_WRID, &sg))?;
        Ok(())
    }

    /// An RDMA READ of the peer's buffer into `rdma` (the server).
    pub(crate) fn read(&self, from: Info) -> Result<(), Error> {
        let remote = RemoteRegion::new(from.buf, from.rkey, u64::from(from.size))?;
        let sg = [self.rdma.sge(0, from.size)];
        self.qp
            .post_send(SendWr::read(RDMA_WRID, &sg, remote.whole()))?;
        Ok(())
    }

    /// An RDMA WRITE of the first `len` bytes of `rdma` to the peer's buffer.
    pub(crate) fn write(&self, to: Info, len: u32) -> Result<(), Error> {
        let remote = RemoteRegion::new(to.buf, to.rkey, u64::from(to.size))?;
        let sg = [self.rdma.sge(0, len)];
        self.print.debug(format_args!(
            "rdma write from lkey {:x} laddr {:x} len {len}",
            self.rdma.lkey(),
            self.rdma.addr()
        ));
        self.qp
            .post_send(SendWr::write(RDMA_WRID, &sg, remote.at(0, u64::from(len))?))?;
        Ok(())
    }

    /// Waits for the next step of the ping loop (rping's cq and cm event
    /// handlers in one): send completions and flushed requests pass, a
    /// receive is read and the receive posted again, a failed request or a
    /// CM failure ends the connection with its cause.
    pub(crate) fn next(&mut self) -> Result<Step, Error> {
        loop {
            if let Some(wc) = self.pending.pop_front() {
                if let Some(step) = self.completion(&wc)? {
                    return Ok(step);
                }
                continue;
            }
            if let Some(event) = (self.events)() {
                if let Some(step) = self.cm_event(event)? {
                    return Ok(step);
                }
                continue;
            }
            self.pending.extend(self.cq.wait(8, SLICE)?);
        }
    }

    fn completion(&self, wc: &WorkCompletion) -> Result<Option<Step>, Error> {
        if wc.status == WcStatus::WrFlushErr {
            // The QP went to the error state (a disconnect): DISCONNECTED
            // follows from the CM.
            return Ok(None);
        }
        if wc.status != WcStatus::Success {
            return Err(Error::Run(format!(
                "cq completion failed: {} (the {:?} request, wr_id {}): the connection is \
                 broken",
                wc.status, wc.opcode, wc.wr_id
            )));
        }
        match wc.opcode {
            WcOpcode::Send => {
                self.print.debug(format_args!("send completion"));
                Ok(None)
            }
            WcOpcode::RdmaRead => {
                self.print.debug(format_args!("rdma read completion"));
                Ok(Some(Step::ReadDone))
            }
            WcOpcode::RdmaWrite => {
                self.print.debug(format_args!("rdma write completion"));
                Ok(Some(Step::WriteDone))
            }
            WcOpcode::Recv => {
                self.print.debug(format_args!("recv completion"));
                if wc.byte_len as usize != Info::LEN {
                    return Err(Error::Run(format!(
                        "Received bogus data, size {}: rping's messages are {} bytes (is the \
                         peer an rping?)",
                        wc.byte_len,
                        Info::LEN
                    )));
                }
                let mut b = [0u8; Info::LEN];
                self.recv.read(0, &mut b)?;
                self.post_recv()?;
                Ok(Some(Step::Recv(Info::from_bytes(&b))))
            }
            other => Err(Error::Run(format!(
                "unexpected {other:?} completion: rping posts only SEND, READ, WRITE and RECV"
            ))),
        }
    }

    /// rping's word for this side.
    fn side(&self) -> &'static str {
        if self.client { "client" } else { "server" }
    }

    /// rping's word for this side's ID in debug lines.
    fn id_name(&self) -> &'static str {
        if self.client { "parent" } else { "child" }
    }

    fn cm_event(&mut self, event: CmEvent) -> Result<Option<Step>, Error> {
        if event.id != self.id {
            // A server's later CONNECT_REQUEST: dropping its ID rejects it
            // (this server serves one client).
            return Ok(None);
        }
        self.print.debug(format_args!(
            "cma_event type {} cma_id ({})",
            event.kind.name(),
            self.id_name()
        ));
        match &event.kind {
            CmEventKind::Disconnected => {
                eprintln!("{} DISCONNECT EVENT...", self.side());
                Ok(Some(Step::Disconnected))
            }
            CmEventKind::Rejected { .. }
            | CmEventKind::Unreachable { .. }
            | CmEventKind::ConnectError { .. } => Err(cm_failure(&event)),
            _ => Ok(None),
        }
    }

    /// Waits for the CM event that ends `call` (ESTABLISHED after connect,
    /// DISCONNECTED after disconnect), up to `timeout` (`None`: the CM's
    /// own retries bound it). A failure event is the error it names.
    pub(crate) fn wait_event(
        &mut self,
        want: &str,
        timeout: Option<Duration>,
    ) -> Result<bool, Error> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        loop {
            if let Some(event) = (self.events)() {
                if event.id != self.id {
                    continue;
                }
                self.print.debug(format_args!(
                    "cma_event type {} cma_id ({})",
                    event.kind.name(),
                    self.id_name()
                ));
                if event.kind.name() == want {
                    if matches!(event.kind, CmEventKind::Disconnected) {
                        eprintln!("{} DISCONNECT EVENT...", self.side());
                    }
                    return Ok(true);
                }
                if event.kind.status() != 0 {
                    return Err(cm_failure(&event));
                }
                continue;
            }
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                return Ok(false);
            }
            // Completions (flushes after a disconnect) wait for `next`.
            let wcs = self.cq.wait(8, SLICE)?;
            self.pending.extend(wcs);
        }
    }
}

/// rping's line for a failed connection (`cma event NAME, error STATUS` on
/// stderr), and the error that says why.
pub(crate) fn cm_failure(event: &CmEvent) -> Error {
    eprintln!(
        "cma event {}, error {}",
        event.kind.name(),
        event.kind.status()
    );
    let why = match &event.kind {
        CmEventKind::Rejected { message, .. } => message.clone(),
        CmEventKind::Unreachable { reason, .. } | CmEventKind::ConnectError { reason } => {
            reason.clone()
        }
        other => other.name().to_owned(),
    };
    Error::Run(format!("connection failed: {why}"))
}
