//! Trading endpoints and regions over a byte stream
//! (`QpEndpoint::exchange`, `RemoteRegion::exchange`, `send`, `recv`):
//! in memory, where a peer that stops short or sends garbage is easy to
//! play, and over a real TCP connection on loopback (127.0.77.20), where
//! both sides write first at once.

use std::io::{self, Cursor, Read, Write};
use std::net::{TcpListener, TcpStream};

use ferroce::{Mtu, Psn, QpEndpoint, QpType, RemoteRegion};

/// A stream whose peer has already written `input`; what this side
/// writes collects in `output`.
struct Peer {
    input: Cursor<Vec<u8>>,
    output: Vec<u8>,
}

impl Peer {
    fn sent(input: &[u8]) -> Self {
        Self {
            input: Cursor::new(input.to_vec()),
            output: Vec::new(),
        }
    }
}

impl Read for Peer {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // A byte at a time: the reader must gather a whole encoding.
        let one = buf.len().min(1);
        self.input.read(&mut buf[..one])
    }
}

impl Write for Peer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn endpoint(qpn: u32) -> QpEndpoint {
    QpEndpoint {
        mtu: Some(Mtu::Mtu4096),
        ..QpEndpoint::new("127.0.77.20".parse().unwrap(), QpType::Rc, qpn, Psn::new(5))
    }
}

#[test]
fn exchange_writes_ours_and_reads_theirs() {
    let (ours, theirs) = (endpoint(0x11), endpoint(0x12));
    let mut peer = Peer::sent(&theirs.to_bytes());
    assert_eq!(ours.exchange(&mut peer).unwrap(), theirs);
    assert_eq!(peer.output, ours.to_bytes());

    let (mine, region) = (
        RemoteRegion::new(0x1000, 7, 4096).unwrap(),
        RemoteRegion::new(0x2000, 8, 8192).unwrap(),
    );
    let mut peer = Peer::sent(&region.to_bytes());
    assert_eq!(mine.exchange(&mut peer).unwrap(), region);
    assert_eq!(peer.output.len(), RemoteRegion::ENCODED_LEN);

    let mut out = Vec::new();
    mine.send(&mut out).unwrap();
    assert_eq!(RemoteRegion::recv(&mut out.as_slice()).unwrap(), mine);
}

#[test]
fn a_short_or_garbled_peer_is_named() {
    let ours = endpoint(0x11);
    let cut = &endpoint(0x12).to_bytes()[..10];
    let err = ours.exchange(&mut Peer::sent(cut)).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    let text = err.to_string();
    assert!(
        text.contains("QP endpoint") && text.contains("10 of 28 bytes"),
        "{text}"
    );

    // A region where an endpoint belongs: the kind byte says so.
    let mut wrong = [0u8; QpEndpoint::ENCODED_LEN];
    wrong[..RemoteRegion::ENCODED_LEN]
        .copy_from_slice(&RemoteRegion::new(0, 1, 2).unwrap().to_bytes());
    let err = ours.exchange(&mut Peer::sent(&wrong)).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    let text = err.to_string();
    assert!(
        text.contains("no valid QP endpoint") && text.contains("kind byte 0x52"),
        "{text}"
    );

    let err = RemoteRegion::recv(&mut &[b'R', 1, 0][..]).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    assert!(err.to_string().contains("3 of 24 bytes"), "{err}");
}

#[test]
fn both_sides_of_a_tcp_connection_exchange_at_once() {
    let listener = TcpListener::bind("127.0.77.20:0").unwrap();
    let at = listener.local_addr().unwrap();
    let (a, b) = (endpoint(0x21), endpoint(0x22));
    std::thread::scope(|s| {
        let server = s.spawn(|| {
            let (mut tcp, _) = listener.accept().unwrap();
            tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            a.exchange(&mut tcp).unwrap()
        });
        let mut tcp = TcpStream::connect(at).unwrap();
        tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        assert_eq!(b.exchange(&mut tcp).unwrap(), a);
        assert_eq!(server.join().unwrap(), b);
    });
}
