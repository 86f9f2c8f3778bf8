//! ferroce's own TCP exchange for `perf` (not perftest's): one JSON line
//! each way per step, read byte by byte.
//!
//! 1. the client's hello: the protocol tag [`PROTOCOL`] and its [`Params`];
//! 2. the server's answer: `{"accept": true}`, or `{"refuse": WHY}` when the
//!    client asks for another test than the server's (test, `--lat`, `-s`,
//!    `-q`); both sides then exit non-zero;
//! 3. each side's description, client first: `{"qps": [...], "region":
//!    ...}`, each QP's [`QpEndpoint`] and the region's [`RemoteRegion`] in
//!    their byte encodings, as hex;
//! 4. one-word signals around the traffic (`ready`, `done`).
//!
//! Everything a peer sends is checked against [`limits`] before it sizes
//! anything: a hello that is not JSON, lacks the tag or asks for more than
//! the limits is refused (the server serves on).

use std::io::Read;
use std::io::Write;
use std::net::TcpStream;

use ferroce::{QpEndpoint, RemoteRegion};
use serde_json::{Value, json};

use super::setup::{Params, Peer, Side};
use super::{AtomicType, Test};
use crate::cmd::limits::{self, MAX_DEPTH, MAX_QPS, MAX_SIZE};
use crate::cmd::tcp;
use crate::error::Error;

/// The tag of the client's hello: another program's bytes do not carry it.
pub(super) const PROTOCOL: &str = "ferroce-perf/1";

/// Longest line accepted (a description of [`MAX_QPS`] QPs fits).
const MAX_LINE: usize = 1 << 20;

/// Why a line could not be read.
#[derive(Debug)]
pub(super) enum LineError {
    Closed,
    TimedOut,
    Io(std::io::Error),
    TooLong,
    /// Bytes that are not a text line (a NUL among them), as received.
    Binary(Vec<u8>),
    NotJson(String),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed => write!(f, "the connection closed"),
            Self::TimedOut => write!(f, "nothing arrived in time"),
            Self::Io(e) => write!(f, "{e}"),
            Self::TooLong => write!(f, "a line longer than {MAX_LINE} bytes"),
            Self::Binary(b) => write!(f, "binary data {:?}", String::from_utf8_lossy(b)),
            Self::NotJson(l) => write!(f, "{l:?}, not a line of JSON"),
        }
    }
}

pub(super) fn send_line(s: &mut TcpStream, v: &Value) -> Result<(), Error> {
    let mut line = v.to_string();
    line.push('\n');
    s.write_all(line.as_bytes()).map_err(|e| Error::Exchange {
        peer: peer_name(s),
        what: format!("sending: {e}"),
    })
}

use tcp::peer_name;

/// Reads one line byte by byte: a buffered reader could swallow the start
/// of the next message, which belongs to a later call.
pub(super) fn read_line(s: &mut TcpStream) -> Result<Value, LineError> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    loop {
        match s.read(&mut b) {
            Ok(0) => return Err(LineError::Closed),
            Ok(_) if b[0] == b'\n' => break,
            Ok(_) if b[0] == 0 => return Err(LineError::Binary(line)),
            Ok(_) if line.len() < MAX_LINE => line.push(b[0]),
            Ok(_) => return Err(LineError::TooLong),
            Err(e) if tcp::is_timeout(&e) => return Err(LineError::TimedOut),
            Err(e) => return Err(LineError::Io(e)),
        }
    }
    serde_json::from_slice(&line)
        .map_err(|_| LineError::NotJson(String::from_utf8_lossy(&line).into_owned()))
}

/// A later step's line; failures name the peer.
fn read_step(s: &mut TcpStream, what: &str) -> Result<Value, Error> {
    read_line(s).map_err(|e| Error::Exchange {
        peer: peer_name(s),
        what: format!("reading {what}: {e}"),
    })
}

/// Step 1, client side.
pub(super) fn write_hello(s: &mut TcpStream, p: &Params) -> Result<(), Error> {
    send_line(
        s,
        &json!({"protocol": PROTOCOL, "test": super::test_name(p.test), "lat": p.lat,
                "size": p.size, "iters": p.iters, "qps": p.qps, "tx_depth": p.tx_depth,
                "mtu": p.mtu.bytes()}),
    )
}

/// Step 1, server side: the client's parameters, or [`Error::Refused`].
pub(super) fn read_hello(s: &mut TcpStream) -> Result<Params, Error> {
    let v = read_line(s).map_err(|e| Error::Refused(format!("no hello: {e}")))?;
    parse_hello(&v).map_err(Error::Refused)
}

fn parse_hello(v: &Value) -> Result<Params, String> {
    if v["protocol"] != PROTOCOL {
        return Err(format!("not a ferroce perf client (hello {v})"));
    }
    let num = |k: &str, max: u64| {
        let n = v[k]
            .as_u64()
            .ok_or_else(|| format!("no number {k} in its hello {v}"))?;
        limits::check(k, n, max)
    };
    let test = match v["test"].as_str() {
        Some("send") => Test::Send,
        Some("write") => Test::Write,
        Some("read") => Test::Read,
        Some("atomic") => Test::Atomic,
        _ => return Err(format!("no known test in its hello {v}")),
    };
    let mtu = num("mtu", 4096)?;
    Ok(Params {
        test,
        lat: v["lat"].as_bool().unwrap_or(false),
        size: num("size", MAX_SIZE)? as usize,
        iters: num("iters", u32::MAX.into())? as u32,
        qps: num("qps", MAX_QPS.into())? as u32,
        tx_depth: num("tx_depth", MAX_DEPTH.into())? as u32,
        mtu: limits::mtu_of(mtu as usize).ok_or_else(|| format!("mtu {mtu} is not an MTU"))?,
        atomic: AtomicType::FetchAndAdd,
        rx_depth: 0,
        min_region: 0,
    })
}

/// What differs between the server's test and the client's, if anything.
pub(super) fn mismatch(server: &Params, client: &Params) -> Option<String> {
    let mut diff = Vec::new();
    if server.test != client.test {
        diff.push(format!(
            "test {} (client) vs {} (server)",
            super::test_name(client.test),
            super::test_name(server.test)
        ));
    }
    if server.lat != client.lat {
        let kind = |lat| if lat { "latency (--lat)" } else { "bandwidth" };
        diff.push(format!(
            "{} (client) vs {} (server)",
            kind(client.lat),
            kind(server.lat)
        ));
    }
    if server.size != client.size {
        diff.push(format!(
            "-s {} (client) vs -s {} (server)",
            client.size, server.size
        ));
    }
    if server.qps != client.qps {
        diff.push(format!(
            "-q {} (client) vs -q {} (server)",
            client.qps, server.qps
        ));
    }
    (!diff.is_empty()).then(|| {
        format!(
            "client and server were started for different tests: {}; start both with \
             the same test, --lat, -s and -q",
            diff.join(", ")
        )
    })
}

/// Step 2, server side: accept, or refuse with `why`.
pub(super) fn answer(s: &mut TcpStream, refusal: Option<&str>) -> Result<(), Error> {
    match refusal {
        None => send_line(s, &json!({"accept": true})),
        Some(why) => send_line(s, &json!({ "refuse": why })),
    }
}

/// Step 2, client side: the server's answer, or what the peer is instead.
pub(super) fn read_answer(s: &mut TcpStream, server: &str) -> Result<(), Error> {
    let not_ours = |what: String| Error::Exchange {
        peer: server.to_owned(),
        what: format!(
            "{what}: expected a ferroce perf server (`ferroce perf ... --listen`; \
             against perftest's ib_* tools, add --perftest)"
        ),
    };
    let v = match read_line(s) {
        Ok(v) => v,
        Err(LineError::TimedOut) => {
            return Err(not_ours(format!(
                "no answer within {} s",
                tcp::ANSWER_TIMEOUT.as_secs()
            )));
        }
        Err(e) => return Err(not_ours(format!("it answered {e}"))),
    };
    if v["accept"] == true {
        return Ok(());
    }
    match v["refuse"].as_str() {
        Some(why) => Err(Error::Mismatch(format!(
            "the server at {server} refused: {why}"
        ))),
        None => Err(not_ours(format!("it answered {v}"))),
    }
}

fn describe(side: &Side) -> Value {
    let endpoints = side.qps.iter().map(|q| hex(&q.endpoint().to_bytes()));
    json!({
        "qps": endpoints.collect::<Vec<_>>(),
        "region": hex(&side.mr.remote().to_bytes()),
    })
}

/// Bytes as lowercase hex, the JSON form of the encodings.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

fn parse_peer(v: &Value) -> Result<Peer, String> {
    let field = |f: &Value| f.as_str().and_then(unhex);
    let bad = |why: String| format!("bad peer description {v}: {why}");
    let qps = v["qps"]
        .as_array()
        .ok_or_else(|| bad("no QPs".into()))?
        .iter()
        .map(|q| {
            let bytes = field(q).ok_or_else(|| bad("a QP is not hex".into()))?;
            QpEndpoint::from_bytes(&bytes).map_err(|e| bad(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let region = field(&v["region"]).ok_or_else(|| bad("no region".into()))?;
    let region = RemoteRegion::from_bytes(&region).map_err(|e| bad(e.to_string()))?;
    Ok(Peer { qps, region })
}

/// Step 3, client side.
pub(super) fn exchange_client(s: &mut TcpStream, side: &Side) -> Result<Peer, Error> {
    send_line(s, &describe(side))?;
    let v = read_step(s, "the server's description")?;
    parse_peer(&v).map_err(|what| Error::Exchange {
        peer: peer_name(s),
        what,
    })
}

/// Step 3, server side.
pub(super) fn exchange_server(s: &mut TcpStream, side: &Side) -> Result<Peer, Error> {
    let v = read_step(s, "the client's description")?;
    let peer = parse_peer(&v).map_err(|what| Error::Exchange {
        peer: peer_name(s),
        what,
    })?;
    send_line(s, &describe(side))?;
    Ok(peer)
}

/// Waits for the other side's one-word signal (`done`, `ready`).
pub(super) fn wait_word(s: &mut TcpStream) -> Result<String, Error> {
    let v = read_step(s, "a signal")?;
    Ok(v.as_str().unwrap_or_default().to_string())
}

pub(super) fn send_word(s: &mut TcpStream, w: &str) -> Result<(), Error> {
    send_line(s, &json!(w))
}

#[cfg(test)]
mod tests {
    use ferroce::Mtu;

    use super::*;

    fn params() -> Params {
        Params {
            test: Test::Write,
            lat: false,
            size: 4096,
            iters: 10,
            qps: 1,
            tx_depth: 8,
            mtu: Mtu::Mtu1024,
            atomic: AtomicType::FetchAndAdd,
            rx_depth: 0,
            min_region: 0,
        }
    }

    #[test]
    fn hello_outside_the_limits_is_refused_before_use() {
        let ok = json!({"protocol": PROTOCOL, "test": "write", "size": 4096, "iters": 5,
                        "qps": 1, "tx_depth": 8, "mtu": 1024});
        assert_eq!(parse_hello(&ok).unwrap().size, 4096);
        for (k, v) in [
            ("size", json!(1u64 << 40)),
            ("size", json!(0)),
            ("qps", json!(0)),
            ("qps", json!(1_000_000)),
            ("tx_depth", json!(0)),
            ("iters", json!(0)),
            ("mtu", json!(1500)),
            ("protocol", json!("other")),
            ("test", json!("erase")),
        ] {
            let mut h = ok.clone();
            h[k] = v;
            assert!(parse_hello(&h).is_err(), "{h}");
        }
    }

    #[test]
    fn mismatches_are_named() {
        let s = params();
        assert_eq!(mismatch(&s, &s), None);
        let mut c = s;
        c.test = Test::Read;
        c.size = 8;
        let m = mismatch(&s, &c).unwrap();
        assert!(m.contains("test read (client) vs write (server)"), "{m}");
        assert!(m.contains("-s 8 (client) vs -s 4096 (server)"), "{m}");
    }
}
