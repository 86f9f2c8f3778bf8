//! `ferroce mckey`: rdma-core's `mckey` (librdmacm/examples/mckey.c, as
//! rdma-core 44 has it), UD multicast through rdma_cm, with its options,
//! protocol and output.
//!
//! Each of `-c` IDs (UDP port space) binds to `-b` if given, resolves the
//! group `-m`, creates a UD QP, posts `-C` receives (a receiver), and
//! joins the group (`-o`: as a send-only member). MULTICAST_JOIN gives
//! the group's destination (QPN 0xFFFFFF, rdma_cm's Q_Key), printed as
//! mckey prints it (`mckey: joined dgid: ::ffff:239.1.2.3 mlid 0x0 sl 0`).
//! After mckey's 3 s pause, a sender (`-s`) sends `-C` messages of `-S`
//! bytes per ID as SEND with immediate (its QPN); a receiver waits for
//! `-C` completions per ID. Then every ID leaves the group.
//!
//! Where this differs from mckey: the sender's last message is signaled
//! and waited for, so that the messages are on the wire before the QP is
//! destroyed (mckey sends all unsignaled and exits at once); a receiver
//! waiting [`cmtest::STALL`] without a message, or a failed completion,
//! ends the run with a message (mckey waits forever and counts failures
//! as messages); `-M` (AF_IB addresses) and `-p 0x2` (IPoIB) are refused
//! with the reason. `-l` creates the QPs with mlx5's
//! `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`, as mckey does.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Args;
use ferroce::cm::{CmEvent, CmEventKind, CmId, EventChannel, PortSpace};
use ferroce::{
    Access, CompletionQueue, MemoryRegion, ProtectionDomain, QpInitAttr, QpType, QueuePair, RecvWr,
    SendOp, SendWr, UdDest,
};

use super::limits;
use super::rdma_cm::cmtest::{self, Failed, call_failed};
use super::rdma_cm::{self, RESOLVE_TIMEOUT};
use crate::error::Error;

const TOOL: &str = "mckey";
/// The GRH ibverbs puts in front of every UD receive.
const GRH: u32 = 40;
/// mckey's pause between the joins and the transfers ("to give SM chance
/// to configure switches").
const PAUSE: Duration = Duration::from_secs(3);

/// Arguments of `ferroce mckey` (mckey's options).
#[derive(Debug, Args)]
pub(crate) struct MckeyArgs {
    /// The multicast group (address or name).
    #[arg(short = 'm', value_name = "multicast_address")]
    group: Option<String>,
    /// An unmapped (AF_IB) multicast GID: refused (no InfiniBand subnet).
    #[arg(short = 'M', value_name = "unmapped_multicast_address")]
    unmapped: Option<String>,
    /// Send (without it, receive).
    #[arg(short = 's')]
    sender: bool,
    /// The local address to bind to (the device's).
    #[arg(short = 'b', value_name = "bind_address")]
    bind: Option<String>,
    /// IDs (each with its own QP) joining the group.
    #[arg(short = 'c', value_name = "connections", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=56))]
    connections: u32,
    /// Messages per ID (0: join only).
    #[arg(short = 'C', value_name = "message_count", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(limits::MAX_DEPTH)))]
    count: u32,
    /// Message size in bytes, at most the active MTU.
    #[arg(short = 'S', value_name = "message_size", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(0..=4096))]
    size: u32,
    /// The port space as a number: 0x111 (UDP), the default and only one.
    #[arg(short = 'p', value_name = "port_space", value_parser = rdma_cm::parse_port_space)]
    port_space: Option<PortSpace>,
    /// Join as a send-only full member (no attach, no IP group join).
    #[arg(short = 'o')]
    send_only: bool,
    /// Join without multicast loopback: the QPs do not get their own sends
    /// back (`IBV_QP_CREATE_BLOCK_SELF_MCAST_LB`).
    #[arg(short = 'l')]
    no_loopback: bool,
    #[command(flatten)]
    raw: rdma_cm::RawArgs,
}

pub(crate) fn run(args: &MckeyArgs) -> Result<bool, Error> {
    if args.unmapped.is_some() {
        return Err(Error::Usage(
            "-M takes an AF_IB multicast GID, which needs an InfiniBand subnet: give the \
             group's IP address with -m"
                .into(),
        ));
    }
    let Some(group) = &args.group else {
        return Err(Error::Usage("mckey needs -m multicast_address".into()));
    };
    let dst = rdma_cm::resolve("-m", group, 0)?;
    let src = match &args.bind {
        Some(b) => Some(rdma_cm::resolve("-b", b, 0)?.ip()),
        None => None,
    };
    let _raw_device = args.raw.open(src, "-b", Some(dst.ip()))?;
    let mut test = Test {
        args,
        ps: args.port_space.unwrap_or(PortSpace::Udp),
        count: if args.size == 0 { 0 } else { args.count },
        nodes: Vec::new(),
        connects_left: args.connections as usize,
        ch: EventChannel::new()?,
        group: dst.ip(),
    };
    let result = test.run(src, dst);
    println!("test complete");
    drop(test);
    cmtest::finish(cmtest::status(result))
}

/// One ID (`struct cmatest_node`); its resources drop before it.
struct Node {
    res: Option<Resources>,
    id: CmId,
    /// Where to send: the group (mckey's AH, remote QPN and Q_Key).
    dest: Option<UdDest>,
}

struct Resources {
    qp: QueuePair,
    cq: CompletionQueue,
    mr: Option<MemoryRegion>,
    _pd: ProtectionDomain,
}

struct Test<'a> {
    args: &'a MckeyArgs,
    ps: PortSpace,
    count: u32,
    nodes: Vec<Node>,
    connects_left: usize,
    ch: EventChannel,
    group: IpAddr,
}

impl Test<'_> {
    fn run(&mut self, src: Option<IpAddr>, dst: SocketAddr) -> Result<(), Failed> {
        let role = if self.args.sender { "client" } else { "server" };
        println!("mckey: starting {role}");
        println!("mckey: joining");
        for _ in 0..self.args.connections {
            let id = self
                .ch
                .create_id(self.ps)
                .map_err(|e| call_failed(TOOL, "unable to create an rdma_cm ID", e))?;
            if let Some(ip) = src {
                id.bind_addr(SocketAddr::new(ip, 0))
                    .map_err(|e| call_failed(TOOL, "addr bind failure", e))?;
            }
            id.resolve_addr(src.map(|ip| SocketAddr::new(ip, 0)), dst, RESOLVE_TIMEOUT)
                .map_err(|e| call_failed(TOOL, "resolve addr failure", e))?;
            self.nodes.push(Node {
                res: None,
                id,
                dest: None,
            });
        }
        let result = self.transfer();
        for node in &self.nodes {
            if let Err(e) = node.id.leave_multicast(self.group) {
                eprintln!("mckey: failure leaving: {e}");
            }
        }
        result
    }

    fn transfer(&mut self) -> Result<(), Failed> {
        while self.connects_left > 0 {
            let event = cmtest::next_event(TOOL, &self.ch, false, "the joins")?;
            self.cma_handler(event)?;
        }
        std::thread::sleep(PAUSE);
        if self.count == 0 {
            return Ok(());
        }
        if self.args.sender {
            println!("initiating data transfers");
            for node in &self.nodes {
                self.post_sends(node)?;
            }
        } else {
            println!("receiving data transfers");
            for (i, node) in self.nodes.iter().enumerate() {
                if let (Some(_), Some(res)) = (node.dest, &node.res) {
                    cmtest::take_completions(TOOL, i, &res.cq, self.count, |_| Ok(()))?;
                }
            }
        }
        println!("data transfers complete");
        Ok(())
    }

    fn cma_handler(&mut self, event: CmEvent) -> Result<(), Failed> {
        match &event.kind {
            CmEventKind::AddrResolved => {
                let res = self.addr_handler(&event.id);
                match res {
                    Ok(res) => {
                        if let Some(node) = self.nodes.iter_mut().find(|n| n.id == event.id) {
                            node.res = Some(res);
                        }
                        Ok(())
                    }
                    Err(f) => {
                        self.connects_left -= 1;
                        Err(f)
                    }
                }
            }
            CmEventKind::MulticastJoin { ud, .. } => {
                let dgid = match ud.dest.path.remote {
                    IpAddr::V4(a) => a.to_ipv6_mapped(),
                    IpAddr::V6(a) => a,
                };
                // RoCE has no LIDs or SLs: 0, as the kernel reports them.
                println!("mckey: joined dgid: {dgid} mlid 0x0 sl 0");
                if let Some(node) = self.nodes.iter_mut().find(|n| n.id == event.id) {
                    node.dest = Some(ud.dest);
                }
                self.connects_left -= 1;
                Ok(())
            }
            CmEventKind::Unreachable { .. } | CmEventKind::ConnectError { .. } => {
                println!(
                    "mckey: event: {}, error: {}",
                    event.kind.name(),
                    event.kind.status()
                );
                self.connects_left -= 1;
                Err(Failed(event.kind.status()))
            }
            _ => Ok(()),
        }
    }

    /// ADDR_RESOLVED: the QP, the receives (a receiver), then the join.
    fn addr_handler(&self, id: &CmId) -> Result<Resources, Failed> {
        let Some(ctx) = id.verbs() else {
            return Err(call_failed(TOOL, "unable to allocate PD", "no device"));
        };
        let port = ctx
            .query_port()
            .map_err(|e| call_failed(TOOL, "querying the port", e))?;
        let mtu = port.active_mtu.bytes();
        if self.count > 0 && self.args.size as usize > mtu {
            println!(
                "mckey: message_size {} is larger than active mtu {mtu}",
                self.args.size
            );
            return Err(Failed(cmtest::INVALID));
        }
        let pd = ctx.alloc_pd();
        let depth = self.count.max(1);
        let cq = ctx
            .create_cq(2 * depth)
            .map_err(|e| call_failed(TOOL, "unable to create CQ", e))?;
        let mut attr = QpInitAttr::new(QpType::Ud, &cq, &cq);
        attr.max_send_wr = depth;
        attr.max_recv_wr = depth;
        let qp = id
            .create_qp(&pd, &attr)
            .map_err(|e| call_failed(TOOL, "unable to create QP", e))?;
        if self.args.no_loopback {
            qp.block_self_mcast_loopback(true)
                .map_err(|e| call_failed(TOOL, "unable to create QP", e))?;
        }
        let mr = if self.count > 0 {
            let mr = pd
                .reg_mr((GRH + self.args.size) as usize, Access::LOCAL_WRITE)
                .map_err(|e| call_failed(TOOL, "failed to create messages", e))?;
            Some(mr)
        } else {
            None
        };
        let res = Resources {
            qp,
            cq,
            mr,
            _pd: pd,
        };
        if !self.args.sender
            && let Some(mr) = &res.mr
        {
            let sge = [mr.sge(0, GRH + self.args.size)];
            for _ in 0..self.count {
                res.qp
                    .post_recv(RecvWr::new(0, &sge))
                    .map_err(|e| call_failed(TOOL, "failed to post receives", e))?;
            }
        }
        let joined = if self.args.send_only {
            id.join_multicast_send_only(self.group)
        } else {
            id.join_multicast(self.group)
        };
        joined.map_err(|e| call_failed(TOOL, "failure joining", e))?;
        Ok(res)
    }

    /// `-C` SENDs with the QPN as immediate to the group; the last one
    /// signaled and waited for (see the module docs).
    fn post_sends(&self, node: &Node) -> Result<(), Failed> {
        let (Some(res), Some(dest)) = (&node.res, node.dest) else {
            return Ok(());
        };
        let Some(mr) = &res.mr else { return Ok(()) };
        let sge = [mr.sge(0, self.args.size)];
        for i in 0..self.count {
            let wr = SendWr {
                signaled: i + 1 == self.count,
                ud: Some(dest),
                ..SendWr::new(1, SendOp::SendWithImm(res.qp.qpn()), &sge)
            };
            res.qp
                .post_send(wr)
                .map_err(|e| call_failed(TOOL, "failed to post sends", e))?;
        }
        cmtest::take_completions(TOOL, 0, &res.cq, 1, |_| Ok(()))
    }
}
