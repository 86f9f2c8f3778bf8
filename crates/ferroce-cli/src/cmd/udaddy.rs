//! `ferroce udaddy`: rdma-core's `udaddy` (librdmacm/examples/udaddy.c), UD
//! QPs whose peers are resolved through rdma_cm's SIDR exchange (the UDP
//! port space, port 7174), with its options, protocol and output.
//!
//! The protocol: the client (`-s SERVER`) resolves `-c` UD peers at the
//! server, which answers each SIDR request with a QP of its own (receives
//! posted first). The client sends `-C` messages of `-S` bytes to each, as
//! SEND with immediate carrying its own QPN, unsignaled, and waits for as
//! many replies. The server, once it has received a connection's messages,
//! replies to the sender it learns from the first one: the source address
//! in the GRH in front of the data, and the QPN in the immediate (udaddy's
//! `ibv_create_ah_from_wc` and `be32toh(wc->imm_data)`; without an
//! immediate, the completion's source QPN), with rdma_cm's UD Q_Key. No
//! disconnect: UD has no connection to close. Messages are limited to the
//! port's active MTU (one packet).
//!
//! `-p` is udaddy's: the port *space* (0x111, UDP), kept for backwards
//! compatibility by udaddy; the port itself is fixed at 7174. Where this
//! differs from udaddy: a failed completion, a first message without a
//! GRH source, or a wait of [`cmtest::STALL`] without progress ends the
//! run with a message; `-P ipoib` is refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use clap::Args;
use ferroce::cm::{CmEvent, CmEventKind, CmId, ConnParam, EventChannel, PortSpace};
use ferroce::{
    Access, CompletionQueue, MemoryRegion, ProtectionDomain, QpInitAttr, QpType, QueuePair, RecvWr,
    SendOp, SendWr, UdDest, WorkCompletion, path_to,
};

use super::limits;
use super::rdma_cm::cmtest::{self, Failed, call_failed};
use super::rdma_cm::{self, CmToolArgs, PortSpaceName, RESOLVE_TIMEOUT};
use crate::error::Error;

const TOOL: &str = "udaddy";

/// udaddy's rdma_cm port (not an option of udaddy's).
const PORT: u16 = 7174;
/// The GRH ibverbs puts in front of every UD receive.
const GRH: u32 = 40;

/// Arguments of `ferroce udaddy` (udaddy's options): ucmatose's shared
/// ones ([`CmToolArgs`]) in udaddy's words.
#[derive(Debug, Args)]
#[command(
    mut_arg("server", |a| a.help(
        "Resolve peers at this server (address or name); without it, be the server")),
    mut_arg("bind", |a| a.help(
        "The local address: the server listens on it (without it, on every IPv4 address of \
         every interface that is up), the client sends from it")),
    mut_arg("port_space", |a| a.help("Port space: udp (ipoib is refused)")),
    mut_arg("connections", |a| a.help("Connections (UD peers)")),
)]
pub(crate) struct UdaddyArgs {
    #[command(flatten)]
    cm: CmToolArgs,
    /// Messages each way on each connection (0: resolve only).
    #[arg(short = 'C', value_name = "message_count", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(limits::MAX_DEPTH)))]
    count: u32,
    /// Message size in bytes, at most the active MTU (0: no messages).
    #[arg(short = 'S', value_name = "message_size", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(0..=4096))]
    size: u32,
    /// IP type of service (client; decimal, 0x hex, 0 octal).
    #[arg(short = 't', value_name = "type_of_service", value_parser = rdma_cm::parse_byte)]
    tos: Option<u8>,
    /// The port space as a number (udaddy's backwards-compatible -p): 0x111
    /// for UDP, the default and only one ferroce has.
    #[arg(short = 'p', value_name = "port_space_number", value_parser = rdma_cm::parse_port_space)]
    port_space_number: Option<PortSpace>,
    #[command(flatten)]
    raw: rdma_cm::RawArgs,
}

const SEND_WRID: u64 = 1;
const RECV_WRID: u64 = 2;

pub(crate) fn run(args: &UdaddyArgs) -> Result<bool, Error> {
    args.cm.check(&PortSpaceName {
        ours: "udp",
        refused: "ipoib",
        why: "-P ipoib needs an InfiniBand subnet (its Q_Key is the broadcast group's): \
              leave -P out, or give -P udp",
    })?;
    let (dst, src) = args.cm.addresses(PORT)?;
    let _raw_device = args.raw.open(src, "-b", dst.map(|d| d.ip()))?;
    let mut test = Test {
        args,
        ps: args.port_space_number.unwrap_or(PortSpace::Udp),
        count: if args.size == 0 { 0 } else { args.count },
        nodes: Vec::new(),
        connects_left: args.cm.connections as usize,
        ch: EventChannel::new()?,
    };
    let result = match dst {
        Some(dst) => test.run_client(src, dst),
        None => test.run_server(src),
    };
    println!("test complete");
    drop(test);
    cmtest::finish(cmtest::status(result))
}

/// One UD peer (`struct cmatest_node`); the QP and its resources drop
/// before the ID.
struct Node {
    res: Option<Resources>,
    id: CmId,
    connected: bool,
    /// Where to send (udaddy's AH, remote QPN and Q_Key).
    dest: Option<UdDest>,
}

/// A peer's PD, CQ, QP and buffer: receives (GRH and message) at its
/// start, sends from after that.
struct Resources {
    qp: QueuePair,
    cq: CompletionQueue,
    mr: Option<MemoryRegion>,
    _pd: ProtectionDomain,
}

struct Test<'a> {
    args: &'a UdaddyArgs,
    /// UDP (`-p 0x111`, the default).
    ps: PortSpace,
    count: u32,
    nodes: Vec<Node>,
    connects_left: usize,
    ch: EventChannel,
}

impl Test<'_> {
    fn run_client(&mut self, src: Option<IpAddr>, dst: SocketAddr) -> Result<(), Failed> {
        println!("udaddy: starting client");
        println!("udaddy: connecting");
        for _ in 0..self.args.cm.connections {
            let id = self
                .ch
                .create_id(self.ps)
                .map_err(|e| call_failed(TOOL, "unable to create an rdma_cm ID", e))?;
            id.resolve_addr(src.map(|ip| SocketAddr::new(ip, 0)), dst, RESOLVE_TIMEOUT)
                .map_err(|e| call_failed(TOOL, "failure getting addr", e))?;
            self.nodes.push(Node {
                res: None,
                id,
                connected: false,
                dest: None,
            });
        }
        self.connect_events(false)?;
        if self.count > 0 {
            println!("initiating data transfers");
            for node in &self.nodes {
                self.post_sends(node, false)?;
            }
            println!("receiving data transfers");
            self.poll_cqs()?;
            println!("data transfers complete");
        }
        Ok(())
    }

    fn run_server(&mut self, bind: Option<IpAddr>) -> Result<(), Failed> {
        println!("udaddy: starting server");
        let listener = cmtest::listen(TOOL, &self.ch, self.ps, bind, PORT)?;
        // udaddy goes on to the transfers whatever the requests came to
        // (a refused one was reported as it happened).
        let _ = self.connect_events(true);
        let result = self.serve();
        drop(listener);
        result
    }

    fn serve(&mut self) -> Result<(), Failed> {
        if self.count == 0 {
            return Ok(());
        }
        println!("receiving data transfers");
        self.poll_cqs()?;
        println!("sending replies");
        for node in &self.nodes {
            self.post_sends(node, true)?;
        }
        self.poll_cqs()?;
        println!("data transfers complete");
        Ok(())
    }

    /// One connection less to wait for: made, or failed (the C tools'
    /// `connect_error`). A late event for one already counted changes
    /// nothing.
    fn connect_done(&mut self) {
        self.connects_left = self.connects_left.saturating_sub(1);
    }

    fn connect_events(&mut self, server: bool) -> Result<(), Failed> {
        while self.connects_left > 0 {
            let event = cmtest::next_event(TOOL, &self.ch, server, "the peers")?;
            self.cma_handler(event)?;
        }
        Ok(())
    }

    fn cma_handler(&mut self, event: CmEvent) -> Result<(), Failed> {
        match &event.kind {
            CmEventKind::AddrResolved => {
                if let Some(tos) = self.args.tos {
                    event.id.set_tos(tos);
                }
                event.id.resolve_route(RESOLVE_TIMEOUT).map_err(|e| {
                    self.connect_done();
                    call_failed(TOOL, "resolve route failed", e)
                })
            }
            CmEventKind::RouteResolved => self.route_handler(&event.id),
            CmEventKind::ConnectRequest { .. } => self.connect_handler(event.id),
            CmEventKind::Established { ud, .. } => {
                let dest = ud.as_ref().map(|u| u.dest);
                if let Some(node) = self.nodes.iter_mut().find(|n| n.id == event.id) {
                    node.dest = dest;
                    node.connected = dest.is_some();
                }
                self.connect_done();
                if dest.is_none() {
                    println!("udaddy: failure creating address handle");
                    return Err(Failed(cmtest::CALL_FAILED));
                }
                Ok(())
            }
            CmEventKind::ConnectError { .. }
            | CmEventKind::Unreachable { .. }
            | CmEventKind::Rejected { .. } => {
                println!(
                    "udaddy: event: {}, error: {}",
                    event.kind.name(),
                    event.kind.status()
                );
                eprintln!("udaddy: {event}");
                self.connect_done();
                Err(Failed(event.kind.status()))
            }
            _ => Ok(()),
        }
    }

    fn route_handler(&mut self, id: &CmId) -> Result<(), Failed> {
        let res = self.verify_test_params(id).and_then(|()| {
            let res = self.init_node(id)?;
            self.post_recvs(&res)?;
            id.connect(&ConnParam::default())
                .map_err(|e| call_failed(TOOL, "failure connecting", e))?;
            Ok(res)
        });
        match res {
            Ok(res) => {
                if let Some(node) = self.nodes.iter_mut().find(|n| n.id == *id) {
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

    /// A SIDR request: answered with a QP whose receives are posted, while
    /// the test has room for it; rejected beyond `-c`.
    fn connect_handler(&mut self, id: CmId) -> Result<(), Failed> {
        if self.nodes.len() == self.args.cm.connections as usize {
            println!("udaddy: failing connection request");
            let _ = id.reject(&[]);
            return Err(Failed(cmtest::NO_ROOM));
        }
        let ready = self.verify_test_params(&id).and_then(|()| {
            let res = self.init_node(&id)?;
            self.post_recvs(&res)?;
            let param = ConnParam {
                qp_num: Some(res.qp.qpn()),
                ..ConnParam::default()
            };
            id.accept(&param)
                .map_err(|e| call_failed(TOOL, "failure accepting", e))?;
            Ok(res)
        });
        self.connect_done();
        match ready {
            Ok(res) => {
                self.nodes.push(Node {
                    res: Some(res),
                    id,
                    connected: true,
                    dest: None,
                });
                Ok(())
            }
            Err(f) => {
                println!("udaddy: failing connection request");
                let _ = id.reject(&[]);
                Err(f)
            }
        }
    }

    /// A UD message is one packet: at most the port's active MTU.
    fn verify_test_params(&self, id: &CmId) -> Result<(), Failed> {
        let Some(ctx) = id.verbs() else {
            return Err(call_failed(
                TOOL,
                "querying the port",
                "the ID has no device",
            ));
        };
        let port = ctx
            .query_port()
            .map_err(|e| call_failed(TOOL, "querying the port", e))?;
        let mtu = port.active_mtu.bytes();
        if self.count > 0 && self.args.size as usize > mtu {
            println!(
                "udaddy: message_size {} is larger than active mtu {mtu}",
                self.args.size
            );
            return Err(Failed(cmtest::INVALID));
        }
        Ok(())
    }

    fn init_node(&self, id: &CmId) -> Result<Resources, Failed> {
        let Some(ctx) = id.verbs() else {
            return Err(call_failed(
                TOOL,
                "unable to allocate PD",
                "the ID has no device",
            ));
        };
        let pd = ctx.alloc_pd();
        let depth = self.count.max(1);
        let cq = ctx
            .create_cq(2 * depth)
            .map_err(|e| call_failed(TOOL, "unable to create CQ", e))?;
        let mut attr = QpInitAttr::new(QpType::Ud, &cq, &cq);
        attr.max_send_wr = depth;
        attr.max_recv_wr = depth;
        attr.sq_sig_all = false;
        let qp = id
            .create_qp(&pd, &attr)
            .map_err(|e| call_failed(TOOL, "unable to create QP", e))?;
        let mr = if self.count > 0 {
            let len = (GRH + 2 * self.args.size) as usize;
            let mr = pd
                .reg_mr(len, Access::LOCAL_WRITE)
                .map_err(|e| call_failed(TOOL, "failed to create messages", e))?;
            Some(mr)
        } else {
            None
        };
        Ok(Resources {
            qp,
            cq,
            mr,
            _pd: pd,
        })
    }

    fn post_recvs(&self, res: &Resources) -> Result<(), Failed> {
        let Some(mr) = &res.mr else { return Ok(()) };
        let sge = [mr.sge(0, GRH + self.args.size)];
        for _ in 0..self.count {
            res.qp
                .post_recv(RecvWr::new(RECV_WRID, &sge))
                .map_err(|e| call_failed(TOOL, "failed to post receives", e))?;
        }
        Ok(())
    }

    /// `-C` SENDs with our QPN as immediate (the server learns it so).
    fn post_sends(&self, node: &Node, signaled: bool) -> Result<(), Failed> {
        let (true, Some(res), Some(dest)) = (node.connected, &node.res, node.dest) else {
            return Ok(());
        };
        let Some(mr) = &res.mr else { return Ok(()) };
        let sge = [mr.sge(u64::from(GRH + self.args.size), self.args.size)];
        for _ in 0..self.count {
            let wr = SendWr {
                signaled,
                ud: Some(dest),
                ..SendWr::new(SEND_WRID, SendOp::SendWithImm(res.qp.qpn()), &sge)
            };
            res.qp
                .post_send(wr)
                .map_err(|e| call_failed(TOOL, "failed to post sends", e))?;
        }
        Ok(())
    }

    /// `-C` completions on every connected peer; a server learns where to
    /// reply from a peer's first.
    fn poll_cqs(&mut self) -> Result<(), Failed> {
        let count = self.count;
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let (true, Some(res)) = (node.connected, &node.res) else {
                continue;
            };
            let dest = &mut node.dest;
            cmtest::take_completions(TOOL, i, &res.cq, count, |wc| {
                if dest.is_none() {
                    *dest = Some(reply_dest(i, res, wc)?);
                }
                Ok(())
            })?;
        }
        Ok(())
    }
}

/// Where to answer the sender of `wc` (`create_reply_ah`): its address from
/// the GRH in front of the data, its QPN from the immediate, the Q_Key
/// rdma_cm gives our QP.
fn reply_dest(conn: usize, res: &Resources, wc: &WorkCompletion) -> Result<UdDest, Failed> {
    let Some(mr) = &res.mr else {
        return Err(call_failed(TOOL, "failed to create reply AH", "no buffer"));
    };
    let mut grh = [0u8; GRH as usize];
    mr.read(0, &mut grh)
        .map_err(|e| call_failed(TOOL, "failed to create reply AH", e))?;
    let Some(from) = grh_source(&grh) else {
        eprintln!("udaddy: connection {conn}: the first message has no source address in its GRH");
        println!("udaddy: failed to create reply AH");
        return Err(Failed(cmtest::CALL_FAILED));
    };
    let qpn = wc.imm.unwrap_or(wc.src_qp) & 0x00ff_ffff;
    let local = res.qp.qpn();
    let mut path = path_to(from, local, qpn);
    path.udp_src_port = ferroce_wire::udp::ud_source_port(local);
    path.roce = grh_roce(&grh);
    let qkey = PortSpace::Udp.default_qkey().unwrap_or_default();
    Ok(UdDest { path, qpn, qkey })
}

/// The sender's address in a received GRH: RoCE v2 over IPv4 puts the
/// IPv4 header in the GRH's last 20 bytes, over IPv6 the IPv6 header
/// fills it.
fn grh_source(grh: &[u8; GRH as usize]) -> Option<IpAddr> {
    const IPV4_AT: usize = 20;
    const IPV4_SRC: usize = IPV4_AT + 12;
    const IPV6_SRC: usize = 8;
    if grh[IPV4_AT] >> 4 == 4 {
        let src: [u8; 4] = grh[IPV4_SRC..IPV4_SRC + 4].try_into().ok()?;
        return Some(Ipv4Addr::from(src).into());
    }
    if grh[0] >> 4 == 6 {
        let src: [u8; 16] = grh[IPV6_SRC..IPV6_SRC + 16].try_into().ok()?;
        return Some(Ipv6Addr::from(src).to_canonical());
    }
    None
}

/// The RoCE version of a received GRH: a RoCE v1 packet's own GRH names
/// the next header 0x1B (IBA's BTH), where RoCE v2 has an IPv4 header or an
/// IPv6 one naming UDP. The reply goes in the same version, as the
/// kernel's `ib_init_ah_attr_from_wc` answers in the request's GID type.
fn grh_roce(grh: &[u8; GRH as usize]) -> ferroce::RoceMode {
    const NEXT_HEADER: usize = 6;
    const BTH: u8 = 0x1b;
    if grh[0] >> 4 == 6 && grh[NEXT_HEADER] == BTH {
        ferroce::RoceMode::V1
    } else {
        ferroce::RoceMode::V2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grh_tells_roce_v1_from_v2() {
        let mut v1 = [0u8; 40];
        v1[0] = 0x60;
        v1[6] = 0x1b;
        assert_eq!(grh_roce(&v1), ferroce::RoceMode::V1);
        let mut v2 = v1;
        v2[6] = 17; // UDP
        assert_eq!(grh_roce(&v2), ferroce::RoceMode::V2);
        let mut v4 = [0u8; 40];
        v4[20] = 0x45;
        assert_eq!(grh_roce(&v4), ferroce::RoceMode::V2);
    }

    #[test]
    fn the_grh_gives_the_source_of_either_family() {
        let mut v4 = [0u8; 40];
        v4[20] = 0x45;
        v4[32..36].copy_from_slice(&[10, 0, 0, 7]);
        assert_eq!(grh_source(&v4), Some("10.0.0.7".parse().unwrap()));
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[8..24].copy_from_slice(&"fe80::1".parse::<Ipv6Addr>().unwrap().octets());
        assert_eq!(grh_source(&v6), Some("fe80::1".parse().unwrap()));
        assert_eq!(grh_source(&[0u8; 40]), None);
    }
}
