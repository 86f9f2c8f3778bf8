//! `ferroce cmatose`: rdma-core's `ucmatose` (librdmacm/examples/cmatose.c),
//! RC connections set up through rdma_cm, with its options, its protocol
//! and its output, so that either side can be the real tool.
//!
//! The protocol: the client (`-s SERVER`) opens `-c` connections to the
//! server's port (`-p`, 7471); each side posts `-C` receives of `-S` bytes
//! on each connection before connecting (or accepting). Once all are
//! ESTABLISHED, the server sends `-C` messages on each and waits for their
//! send completions, then for the client's `-C` replies; the client waits
//! for the server's messages, then replies. The server then disconnects
//! every connection and waits for DISCONNECTED; the client, on
//! DISCONNECTED, disconnects too (its DREP). The server serves one test
//! (`-c` connections) and exits.
//!
//! Where this differs from ucmatose: a failed completion or a wait of
//! [`cmtest::STALL`] without progress ends the run with a message (ucmatose
//! counts failed completions as done and waits forever); `-m` (migrate to a
//! new event channel) and `-P ib` are refused.

use std::net::{IpAddr, SocketAddr};

use clap::Args;
use ferroce::cm::{CmEvent, CmEventKind, CmId, ConnParam, Depth, EventChannel, PortSpace};
use ferroce::{
    Access, CompletionQueue, MemoryRegion, ProtectionDomain, QpInitAttr, QpType, QueuePair, RecvWr,
    SendWr,
};

use super::limits;
use super::rdma_cm::cmtest::{self, Failed, call_failed};
use super::rdma_cm::{self, CmToolArgs, PortSpaceName, RESOLVE_TIMEOUT};
use crate::error::Error;

const TOOL: &str = "cmatose";

/// Arguments of `ferroce cmatose` (ucmatose's options).
#[derive(Debug, Args)]
pub(crate) struct CmatoseArgs {
    #[command(flatten)]
    cm: CmToolArgs,
    /// Messages each way on each connection (0: connect and disconnect only).
    #[arg(short = 'C', value_name = "message_count", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(limits::MAX_DEPTH)))]
    count: u32,
    /// Message size in bytes (0: no messages).
    #[arg(short = 'S', value_name = "message_size", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(0..=limits::MAX_SIZE as i64))]
    size: u32,
    /// IP type of service of the connections (client; decimal, 0x hex, 0 octal).
    #[arg(short = 't', value_name = "type_of_service", value_parser = rdma_cm::parse_byte)]
    tos: Option<u8>,
    /// The server's rdma_cm port.
    #[arg(short = 'p', value_name = "port_number", default_value_t = 7471)]
    port: u16,
    /// Migrate the IDs to a new event channel (refused: ferroce::cm has no
    /// rdma_migrate_id).
    #[arg(short = 'm')]
    migrate: bool,
    /// The QPs' local ACK timeout (5 bits: 4.096 us x 2^N).
    #[arg(short = 'a', value_name = "ack_timeout", value_parser = rdma_cm::parse_byte)]
    ack_timeout: Option<u8>,
    #[command(flatten)]
    raw: rdma_cm::RawArgs,
}

/// Work request IDs (the C tool uses the node's address for both).
const SEND_WRID: u64 = 1;
const RECV_WRID: u64 = 2;

pub(crate) fn run(args: &CmatoseArgs) -> Result<bool, Error> {
    args.cm.check(&PortSpaceName {
        ours: "tcp",
        refused: "ib",
        why: "-P ib (the native IB port space, AF_IB addresses) needs an InfiniBand subnet: \
              leave -P out, or give -P tcp",
    })?;
    if args.migrate {
        return Err(Error::Usage(
            "-m: ferroce::cm has no rdma_migrate_id (an ID stays on the channel it was \
             created on): run without -m"
                .into(),
        ));
    }
    let (dst, src) = args.cm.addresses(args.port)?;
    let _raw_device = args.raw.open(src, "-b", dst.map(|d| d.ip()))?;
    let ch = EventChannel::new()?;
    let mut test = Test {
        args,
        // ucmatose: a message size of 0 means no messages.
        count: if args.size == 0 { 0 } else { args.count },
        ch,
        nodes: Vec::new(),
        connects_left: args.cm.connections as usize,
        disconnects_left: 0,
    };
    let result = match dst {
        Some(dst) => test.run_client(src, dst),
        None => test.run_server(src),
    };
    println!("test complete");
    drop(test);
    cmtest::finish(cmtest::status(result))
}

/// One connection (`struct cmatest_node`). Fields drop in order: the QP
/// and its resources before the ID, as the C tool destroys them.
struct Node {
    res: Option<Resources>,
    id: CmId,
    connected: bool,
}

/// A connection's PD, CQs, QP and buffer (sends from its first half,
/// receives into its second).
struct Resources {
    qp: QueuePair,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    mr: Option<MemoryRegion>,
    _pd: ProtectionDomain,
}

/// The run's state (`struct cmatest`).
struct Test<'a> {
    args: &'a CmatoseArgs,
    count: u32,
    nodes: Vec<Node>,
    connects_left: usize,
    disconnects_left: usize,
    // Dropped after the nodes: their events hold IDs.
    ch: EventChannel,
}

impl Test<'_> {
    fn run_client(&mut self, src: Option<IpAddr>, dst: SocketAddr) -> Result<(), Failed> {
        println!("cmatose: starting client");
        println!("cmatose: connecting");
        for _ in 0..self.args.cm.connections {
            let id = self
                .ch
                .create_id(PortSpace::Tcp)
                .map_err(|e| call_failed(TOOL, "unable to create an rdma_cm ID", e))?;
            let from = src.map(|ip| SocketAddr::new(ip, 0));
            id.resolve_addr(from, dst, RESOLVE_TIMEOUT)
                .map_err(|e| call_failed(TOOL, "failure getting addr", e))?;
            self.nodes.push(Node {
                res: None,
                id,
                connected: false,
            });
        }
        let mut result = self.connect_events(false);
        if result.is_ok() && self.count > 0 {
            result = self.client_transfers();
        }
        // As ucmatose: the connections that were made wait for the
        // server's disconnect, whatever happened.
        let disc = self.disconnect_events();
        result.and(disc)
    }

    fn client_transfers(&mut self) -> Result<(), Failed> {
        println!("receiving data transfers");
        self.poll_cqs(Cq::Recv)?;
        println!("sending replies");
        for node in &self.nodes {
            self.post_sends(node)?;
        }
        println!("data transfers complete");
        Ok(())
    }

    fn run_server(&mut self, bind: Option<IpAddr>) -> Result<(), Failed> {
        println!("cmatose: starting server");
        let listener = cmtest::listen(TOOL, &self.ch, PortSpace::Tcp, bind, self.args.port)?;
        let result = self.serve();
        drop(listener);
        result
    }

    fn serve(&mut self) -> Result<(), Failed> {
        self.connect_events(true)?;
        if self.count > 0 {
            println!("initiating data transfers");
            for node in &self.nodes {
                self.post_sends(node)?;
            }
            println!("completing sends");
            self.poll_cqs(Cq::Send)?;
            println!("receiving data transfers");
            self.poll_cqs(Cq::Recv)?;
            println!("data transfers complete");
        }
        println!("cmatose: disconnecting");
        for node in self.nodes.iter_mut().filter(|n| n.connected) {
            node.connected = false;
            // A failure here (the peer already gone) shows in the events.
            let _ = node.id.disconnect();
        }
        let result = self.disconnect_events();
        println!("disconnected");
        result
    }

    /// One connection less to wait for: made, or failed (the C tools'
    /// `connect_error`). A late event for one already counted changes
    /// nothing.
    fn connect_done(&mut self) {
        self.connects_left = self.connects_left.saturating_sub(1);
    }

    /// Handles events until every connection is made or failed; a server
    /// waits for its clients without a limit.
    fn connect_events(&mut self, server: bool) -> Result<(), Failed> {
        while self.connects_left > 0 {
            let event = cmtest::next_event(TOOL, &self.ch, server, "the connections")?;
            self.cma_handler(event)?;
        }
        Ok(())
    }

    fn disconnect_events(&mut self) -> Result<(), Failed> {
        while self.disconnects_left > 0 {
            let event = cmtest::next_event(TOOL, &self.ch, false, "the disconnects")?;
            self.cma_handler(event)?;
        }
        Ok(())
    }

    fn node(&mut self, id: &CmId) -> Option<&mut Node> {
        self.nodes.iter_mut().find(|n| n.id == *id)
    }

    fn cma_handler(&mut self, event: CmEvent) -> Result<(), Failed> {
        match &event.kind {
            CmEventKind::AddrResolved => self.addr_handler(&event.id),
            CmEventKind::RouteResolved => self.route_handler(&event.id),
            CmEventKind::ConnectRequest { .. } => self.connect_handler(event.id),
            CmEventKind::Established { .. } => {
                if let Some(node) = self.node(&event.id) {
                    node.connected = true;
                    self.connect_done();
                    self.disconnects_left += 1;
                }
                Ok(())
            }
            CmEventKind::ConnectError { .. }
            | CmEventKind::Unreachable { .. }
            | CmEventKind::Rejected { .. } => {
                println!(
                    "cmatose: event: {}, error: {}",
                    event.kind.name(),
                    event.kind.status()
                );
                eprintln!("cmatose: {event}");
                self.connect_done();
                Err(Failed(event.kind.status()))
            }
            CmEventKind::Disconnected => {
                let _ = event.id.disconnect();
                self.disconnects_left = self.disconnects_left.saturating_sub(1);
                Ok(())
            }
            CmEventKind::ConnectResponse { .. }
            | CmEventKind::TimewaitExit
            | CmEventKind::MulticastJoin { .. } => Ok(()),
        }
    }

    fn addr_handler(&mut self, id: &CmId) -> Result<(), Failed> {
        if let Some(tos) = self.args.tos {
            id.set_tos(tos);
        }
        if let Some(t) = self.args.ack_timeout {
            id.set_ack_timeout(t);
        }
        id.resolve_route(RESOLVE_TIMEOUT).map_err(|e| {
            self.connect_done();
            call_failed(TOOL, "resolve route failed", e)
        })
    }

    fn route_handler(&mut self, id: &CmId) -> Result<(), Failed> {
        let res = self.init_node(id).and_then(|res| {
            self.post_recvs(&res)?;
            // ucmatose's parameters: one read each way, 5 transport
            // retries, no RNR retry (its receives are posted first).
            let param = ConnParam {
                responder_resources: Depth::Exactly(1),
                initiator_depth: Depth::Exactly(1),
                retry_count: 5,
                rnr_retry_count: 0,
                ..ConnParam::default()
            };
            id.connect(&param)
                .map_err(|e| call_failed(TOOL, "failure connecting", e))?;
            Ok(res)
        });
        match res {
            Ok(res) => {
                if let Some(node) = self.node(id) {
                    node.res = Some(res);
                }
                Ok(())
            }
            Err(f) => {
                self.connect_done();
                Err(f)
            }
        }
    }

    /// A connect request: accepted while the test has room for it (with
    /// its QP and receives ready first), rejected beyond `-c`.
    fn connect_handler(&mut self, id: CmId) -> Result<(), Failed> {
        if self.nodes.len() == self.args.cm.connections as usize {
            println!("cmatose: failing connection request");
            let _ = id.reject(&[]);
            return Err(Failed(cmtest::NO_ROOM));
        }
        let ready = self.init_node(&id).and_then(|res| {
            if let Some(t) = self.args.ack_timeout {
                id.set_ack_timeout(t);
            }
            self.post_recvs(&res)?;
            id.accept(&ConnParam::default())
                .map_err(|e| call_failed(TOOL, "failure accepting", e))?;
            Ok(res)
        });
        match ready {
            Ok(res) => {
                self.nodes.push(Node {
                    res: Some(res),
                    id,
                    connected: false,
                });
                Ok(())
            }
            Err(f) => {
                self.connect_done();
                println!("cmatose: failing connection request");
                let _ = id.reject(&[]);
                Err(f)
            }
        }
    }

    /// The PD, CQs, QP and buffer of a connection (`init_node`).
    fn init_node(&self, id: &CmId) -> Result<Resources, Failed> {
        let Some(ctx) = id.verbs() else {
            return Err(call_failed(
                TOOL,
                "unable to allocate PD",
                "the ID has no device",
            ));
        };
        let pd = ctx.alloc_pd();
        let cqe = self.count.max(1);
        let cq = || {
            ctx.create_cq(cqe)
                .map_err(|e| call_failed(TOOL, "unable to create CQ", e))
        };
        let (send_cq, recv_cq) = (cq()?, cq()?);
        let mut attr = QpInitAttr::new(QpType::Rc, &send_cq, &recv_cq);
        attr.max_send_wr = cqe;
        attr.max_recv_wr = cqe;
        attr.sq_sig_all = true;
        let qp = id
            .create_qp(&pd, &attr)
            .map_err(|e| call_failed(TOOL, "unable to create QP", e))?;
        let mr = if self.count > 0 {
            let len = 2 * self.args.size as usize;
            let mr = pd
                .reg_mr(len, Access::LOCAL_WRITE)
                .map_err(|e| call_failed(TOOL, "failed to create messages", e))?;
            Some(mr)
        } else {
            None
        };
        Ok(Resources {
            qp,
            send_cq,
            recv_cq,
            mr,
            _pd: pd,
        })
    }

    fn post_recvs(&self, res: &Resources) -> Result<(), Failed> {
        let Some(mr) = &res.mr else { return Ok(()) };
        let size = self.args.size;
        let sge = [mr.sge(u64::from(size), size)];
        for _ in 0..self.count {
            res.qp
                .post_recv(RecvWr::new(RECV_WRID, &sge))
                .map_err(|e| call_failed(TOOL, "failed to post receives", e))?;
        }
        Ok(())
    }

    fn post_sends(&self, node: &Node) -> Result<(), Failed> {
        let (true, Some(res)) = (node.connected, &node.res) else {
            return Ok(());
        };
        let Some(mr) = &res.mr else { return Ok(()) };
        let sge = [mr.sge(0, self.args.size)];
        for _ in 0..self.count {
            res.qp
                .post_send(SendWr::send(SEND_WRID, &sge))
                .map_err(|e| call_failed(TOOL, "failed to post sends", e))?;
        }
        Ok(())
    }

    /// `-C` completions of one kind on every connected node.
    fn poll_cqs(&self, which: Cq) -> Result<(), Failed> {
        for (i, node) in self.nodes.iter().enumerate() {
            let (true, Some(res)) = (node.connected, &node.res) else {
                continue;
            };
            let cq = match which {
                Cq::Send => &res.send_cq,
                Cq::Recv => &res.recv_cq,
            };
            cmtest::take_completions(TOOL, i, cq, self.count, |_| Ok(()))?;
        }
        Ok(())
    }
}

/// Which of a node's CQs (`enum CQ_INDEX`).
#[derive(Clone, Copy)]
enum Cq {
    Send,
    Recv,
}
