//! rping's server: listen, accept, then for each ping READ the client's
//! buffer, "go ahead", WRITE it back into the client's sink, "go ahead",
//! until the client disconnects. One client and exit, or with `-P` every
//! client on a thread of its own.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use ferroce::Context;
use ferroce::cm::{CmEvent, CmEventKind, CmId, ConnParam, EventChannel, PortSpace};

use super::conn::{Conn, Events, Step};
use super::{Print, RpingArgs, address, c_string, open};
use crate::cmd::rdma_cm::device::open_wildcard;
use crate::cmd::rdma_cm::events::wait_request;
use crate::error::Error;

/// rping's listen backlog.
const BACKLOG: u32 = 3;
/// How often the persistent server looks for finished connections.
const REAP: Duration = Duration::from_millis(100);

pub(super) fn run(args: &RpingArgs, print: Print) -> Result<bool, Error> {
    let bind = match &args.addr {
        Some(a) => address("-a", a, args.port)?,
        None => SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), args.port),
    };
    // Held for the server's life: the CM listens on these devices.
    let _devices = if bind.ip().is_unspecified() {
        open_every(args, bind.is_ipv6(), print)?
    } else {
        vec![open(args, bind.ip())?]
    };
    let ch = EventChannel::new()?;
    let listen = ch.create_id(PortSpace::Tcp)?;
    listen.bind_addr(bind)?;
    print.debug(format_args!("rdma_bind_addr successful"));
    print.debug(format_args!("rdma_listen"));
    listen.listen(BACKLOG)?;
    if args.persistent {
        return persistent(args, print, &ch);
    }
    let req = wait_request(&listen, None)?;
    print.debug(format_args!(
        "cma_event type {} cma_id (parent)",
        req.kind.name()
    ));
    let id = req.id.clone();
    drop(req);
    serve(
        id,
        Box::new(move || ch.try_get_event()),
        args.size,
        args.self_create_qp,
        print,
    )?;
    Ok(true)
}

/// A device on every address of the family on an interface that is up,
/// but loopback and IPv6 link-local (which need a scope): what rping's
/// wildcard listen serves. An address another process holds is skipped
/// with a warning.
fn open_every(args: &RpingArgs, v6: bool, print: Print) -> Result<Vec<Context>, Error> {
    let family = if v6 { "IPv6" } else { "IPv4" };
    let all = open_wildcard(v6, false, |addr| open(args, addr)).map_err(|e| {
        Error::Run(format!(
            "listing the host's addresses: {e}; give one with -a"
        ))
    })?;
    for (addr, e) in &all.skipped {
        tracing::warn!("not listening on {addr}: {e}");
    }
    if all.opened.is_empty() {
        return Err(Error::Usage(format!(
            "no non-loopback {family} address of this host could take a ferroce device: \
             give the address to listen on with -a (e.g. -a 127.0.0.1)"
        )));
    }
    let devices = all.opened.into_iter().map(|(addr, ctx)| {
        print.debug(format_args!("listening on {addr}"));
        ctx
    });
    Ok(devices.collect())
}

/// One connection: QP and buffers, accept, the ping loop until the client
/// disconnects, then the DREP (or, on an error, the DREQ).
fn serve(id: CmId, events: Events, size: u32, own_qp: bool, print: Print) -> Result<(), Error> {
    let mut conn = Conn::new(id, size, false, own_qp, events, print)?;
    print.debug(format_args!("accepting client connection request"));
    if own_qp {
        // rping -q: our QP to RTS first, then the REP names it, with
        // rping's parameters.
        conn.move_own_qp()?;
        conn.id.accept(&ConnParam {
            qp_num: Some(conn.qp.qpn()),
            ..super::client::conn_param()
        })?;
    } else {
        // rping accepts with no parameters: the REQ's depths, 7 and 7
        // retries.
        conn.id.accept(&ConnParam::default())?;
    }
    let result = pings(&mut conn, size);
    let _ = conn.id.disconnect();
    result
}

/// rping_test_server: returns when the client disconnects.
fn pings(conn: &mut Conn, size: u32) -> Result<(), Error> {
    let mut data = vec![0u8; size as usize];
    loop {
        let Some(from) = advert(conn)? else {
            return Ok(());
        };
        if from.size > size {
            return Err(Error::Run(format!(
                "the client's ping buffer is {} bytes, more than this server's {size}: start \
                 the server with -S {} (rping's server fails the same way, with a local \
                 length error)",
                from.size, from.size
            )));
        }
        conn.read(from)?;
        conn.print
            .debug(format_args!("server posted rdma read req "));
        match conn.next()? {
            Step::ReadDone => {}
            Step::Disconnected => return Ok(()),
            other => return Err(out_of_order(&other, "the READ's completion")),
        }
        conn.print
            .debug(format_args!("server received read complete"));
        conn.rdma.read(0, &mut data)?;
        if conn.print.verbose {
            println!("server ping data: {}", c_string(&data));
        }
        conn.send_go_ahead()?;
        conn.print.debug(format_args!("server posted go ahead"));

        let Some(to) = advert(conn)? else {
            return Ok(());
        };
        // The string read, with its NUL (strlen + 1), as rping writes it.
        let len = data
            .iter()
            .position(|&b| b == 0)
            .map_or(data.len(), |n| n + 1) as u32;
        if len > to.size {
            return Err(Error::Run(format!(
                "the client's sink buffer is {} bytes, less than the {len} bytes of ping data \
                 to write back: run both sides with the same -S",
                to.size
            )));
        }
        conn.write(to, len)?;
        match conn.next()? {
            Step::WriteDone => {}
            Step::Disconnected => return Ok(()),
            other => return Err(out_of_order(&other, "the WRITE's completion")),
        }
        conn.print
            .debug(format_args!("server rdma write complete "));
        conn.send_go_ahead()?;
        conn.print.debug(format_args!("server posted go ahead"));
    }
}

/// The client's next buffer advertisement, or `None` if it disconnected.
fn advert(conn: &mut Conn) -> Result<Option<super::Info>, Error> {
    match conn.next()? {
        Step::Recv(info) => {
            conn.print.debug(format_args!(
                "Received rkey {:x} addr {:x} len {} from peer",
                info.rkey, info.buf, info.size
            ));
            Ok(Some(info))
        }
        Step::Disconnected => Ok(None),
        other => Err(out_of_order(&other, "the client's buffer advertisement")),
    }
}

fn out_of_order(got: &Step, wanted: &str) -> Error {
    Error::Run(format!("{got:?} while waiting for {wanted} (a bug)"))
}

/// A connection being served on its own thread.
struct Child {
    id: CmId,
    events: mpsc::Sender<CmEvent>,
    thread: JoinHandle<Result<(), Error>>,
    peer: String,
}

/// `-P`: every client on a thread of its own; the CM events of each go to
/// its thread. Ends after `--connections` connections have ended, if
/// given; fails if any of them failed.
fn persistent(args: &RpingArgs, print: Print, ch: &EventChannel) -> Result<bool, Error> {
    let mut children: Vec<Child> = Vec::new();
    let (mut started, mut failed) = (0u32, 0u32);
    loop {
        for child in children.extract_if(.., |c| c.thread.is_finished()) {
            let result = child
                .thread
                .join()
                .unwrap_or_else(|_| Err(Error::Run("the connection's thread panicked".into())));
            if let Err(e) = result {
                eprintln!("ferroce: connection from {}: {e}", child.peer);
                failed += 1;
            }
        }
        if args.connections.is_some_and(|n| started >= n) && children.is_empty() {
            break;
        }
        let Some(event) = ch.get_event_timeout(REAP)? else {
            continue;
        };
        if !matches!(event.kind, CmEventKind::ConnectRequest { .. }) {
            if let Some(child) = children.iter().find(|c| c.id == event.id) {
                let _ = child.events.send(event);
            }
            continue;
        }
        if args.connections.is_some_and(|n| started >= n) {
            continue; // dropping the request's ID rejects it
        }
        print.debug(format_args!(
            "cma_event type {} cma_id (parent)",
            event.kind.name()
        ));
        let id = event.id.clone();
        drop(event);
        let peer = id
            .peer_addr()
            .map_or_else(|| "the client".to_owned(), |a| a.ip().to_string());
        let (tx, rx) = mpsc::channel();
        let (size, own_qp) = (args.size, args.self_create_qp);
        let child_id = id.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rping {peer}"))
            .spawn(move || {
                let events = Box::new(move || rx.try_recv().ok());
                serve(child_id, events, size, own_qp, print)
            })?;
        children.push(Child {
            id,
            events: tx,
            thread,
            peer,
        });
        started += 1;
    }
    if failed > 0 {
        return Err(Error::Run(format!(
            "{failed} of {started} connections failed"
        )));
    }
    Ok(true)
}
