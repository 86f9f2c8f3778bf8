//! rping's client: resolve, connect with one read each way, ping `-C`
//! times (advertise the start buffer, then the sink, each answered by the
//! server's "go ahead"), check and print, disconnect.

use std::net::SocketAddr;

use ferroce::MemoryRegion;
use ferroce::cm::{CmEventKind, ConnParam, Depth, EventChannel, PortSpace};

use super::conn::{Conn, Step};
use super::{DISCONNECT_WAIT, Info, Print, RpingArgs, address, c_string, fill_ping, open};
use crate::cmd::rdma_cm::RESOLVE_TIMEOUT;
use crate::cmd::rdma_cm::device::source_towards;
use crate::cmd::rdma_cm::events::wait_event;
use crate::error::Error;

/// rping's `rping_init_conn_param`: one read each way, 7 and 7 retries.
pub(super) fn conn_param() -> ConnParam {
    ConnParam {
        responder_resources: Depth::Exactly(1),
        initiator_depth: Depth::Exactly(1),
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    }
}

/// How the ping loop ended.
enum Ended {
    /// Every ping done.
    Done,
    /// The server disconnected after this many.
    ByPeer(u32),
}

pub(super) fn run(args: &RpingArgs, print: Print) -> Result<bool, Error> {
    let Some(server) = &args.addr else {
        return Err(Error::Usage(
            "the client needs the server's address: -a ADDRESS".into(),
        ));
    };
    let dst = address("-a", server, args.port)?;
    let src = match &args.source {
        Some(s) => address("-I", s, 0)?.ip(),
        None if args.custom_ports() => {
            return Err(Error::Usage(
                "--roce-port/--peer-roce-port need the source address: add -I ADDRESS".into(),
            ));
        }
        None => source_towards(dst.ip(), "-I")?,
    };
    if src.is_ipv6() != dst.is_ipv6() {
        return Err(Error::Usage(format!(
            "-I {src} and -a {} are of different families: use two IPv4 or two IPv6 addresses",
            dst.ip()
        )));
    }
    // The device first, so that a taken address is said plainly; the CM
    // finds it by its address.
    let _device = open(args, src)?;
    let ch = EventChannel::new()?;
    let id = ch.create_id(PortSpace::Tcp)?;
    id.resolve_addr(Some(SocketAddr::new(src, 0)), dst, RESOLVE_TIMEOUT)?;
    expect(&ch, print, "RDMA_CM_EVENT_ADDR_RESOLVED")?;
    id.resolve_route(RESOLVE_TIMEOUT)?;
    expect(&ch, print, "RDMA_CM_EVENT_ROUTE_RESOLVED")?;
    print.debug(format_args!(
        "rdma_resolve_addr - rdma_resolve_route successful"
    ));

    let events = Box::new(move || ch.try_get_event());
    let own_qp = args.self_create_qp;
    let mut conn = Conn::new(id, args.size, true, own_qp, events, print)?;
    if own_qp {
        // rping -q: the REQ names our QP; at CONNECT_RESPONSE we move it
        // and send the RTU ourselves (no ESTABLISHED follows).
        conn.id.connect(&ConnParam {
            qp_num: Some(conn.qp.qpn()),
            ..conn_param()
        })?;
        conn.wait_event("RDMA_CM_EVENT_CONNECT_RESPONSE", None)?;
        conn.move_own_qp()?;
        conn.id.establish()?;
    } else {
        conn.id.connect(&conn_param())?;
        conn.wait_event("RDMA_CM_EVENT_ESTABLISHED", None)?;
    }
    print.debug(format_args!("rdma_connect successful"));

    let result = ping(&mut conn, args);
    let by_peer = matches!(result, Ok(Ended::ByPeer(_)));
    // rping_disconnect: the DREQ (or, after the server's, the DREP).
    let _ = conn.id.disconnect();
    if !by_peer && !conn.wait_event("RDMA_CM_EVENT_DISCONNECTED", Some(DISCONNECT_WAIT))? {
        tracing::warn!(
            "no answer to our disconnect request within {} s (the server may be gone)",
            DISCONNECT_WAIT.as_secs()
        );
    }
    match result? {
        Ended::ByPeer(done) if args.count != 0 => Err(Error::Run(format!(
            "the server disconnected after {done} of {} pings",
            args.count
        ))),
        _ => Ok(true),
    }
}

/// The next event on `ch`, which must be `want` (resolution is immediate).
fn expect(ch: &EventChannel, print: Print, want: &str) -> Result<(), Error> {
    let event = wait_event(ch, None, Some(RESOLVE_TIMEOUT))?
        .ok_or_else(|| Error::Run(format!("no {want} within 2 s")))?;
    print.debug(format_args!(
        "cma_event type {} cma_id (parent)",
        event.kind.name()
    ));
    if event.kind.name() != want {
        return Err(super::conn::cm_failure(&event));
    }
    debug_assert!(!matches!(event.kind, CmEventKind::Rejected { .. }));
    Ok(())
}

/// rping_test_client.
fn ping(conn: &mut Conn, args: &RpingArgs) -> Result<Ended, Error> {
    // Out of the connection for the loop, back in when it ends.
    let start = conn.start.take().ok_or("the client has a start buffer")?;
    let ended = ping_with(conn, args, &start);
    conn.start = Some(start);
    ended
}

fn ping_with(conn: &mut Conn, args: &RpingArgs, start: &MemoryRegion) -> Result<Ended, Error> {
    let size = args.size as usize;
    let start_info = Info {
        buf: start.addr(),
        rkey: start.rkey(),
        size: args.size,
    };
    let sink_info = Info {
        buf: conn.rdma.addr(),
        rkey: conn.rdma.rkey(),
        size: args.size,
    };
    let mut data = vec![0u8; size];
    let mut back = vec![0u8; size];
    let mut first = b'A';
    let mut n = 0u32;
    while args.count == 0 || n < args.count {
        first = fill_ping(&mut data, n, first);
        start.write(0, &data)?;
        conn.send_info(start_info)?;
        if !go_ahead(conn)? {
            return Ok(Ended::ByPeer(n));
        }
        conn.send_info(sink_info)?;
        if !go_ahead(conn)? {
            return Ok(Ended::ByPeer(n));
        }
        conn.rdma.read(0, &mut back)?;
        if args.validate && back != data {
            eprintln!("data mismatch!");
            let at = back
                .iter()
                .zip(&data)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Err(Error::Run(format!(
                "ping {n}: the data the server wrote back differs from what it read, first at \
                 byte {at} (0x{:02x}, sent 0x{:02x})",
                back[at], data[at]
            )));
        }
        if args.verbose {
            println!("ping data: {}", c_string(&back));
        }
        n = n.wrapping_add(1);
    }
    Ok(Ended::Done)
}

/// Waits for the server's "go ahead" (any 16-byte SEND, as rping's client
/// takes it); false if the server disconnected instead.
fn go_ahead(conn: &mut Conn) -> Result<bool, Error> {
    match conn.next()? {
        Step::Recv(_) => Ok(true),
        Step::Disconnected => Ok(false),
        other => Err(Error::Run(format!(
            "{other:?} on the client, which posts no READ or WRITE (a bug)"
        ))),
    }
}
