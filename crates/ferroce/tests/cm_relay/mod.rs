//! A UDP relay between two ferroce devices on their own RoCE ports
//! (`DeviceConfig { port, peer_port }`) that forwards every datagram from
//! its sender's address and drops one chosen MAD, for the rdma_cm loss
//! tests.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroce_io::{OutDatagram, UdpBackend, UdpConfig};

/// Which MAD a relay drops: the `nth` (from 1) of attribute `attribute`.
#[derive(Clone, Copy)]
pub(crate) struct Drop {
    pub(crate) attribute: u16,
    pub(crate) nth: u32,
}

/// Forwards every datagram between two devices on their own RoCE ports,
/// from each's address, dropping one chosen MAD; counts the MADs it saw by
/// attribute.
pub(crate) struct Relay {
    seen: Arc<Mutex<HashMap<u16, u32>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The ports: each device receives on its own, sends to the relay's.
pub(crate) const RELAY_PORT: u16 = 4800;
pub(crate) const PORT_A: u16 = 4801;
pub(crate) const PORT_B: u16 = 4802;

impl Relay {
    pub(crate) fn start(a: IpAddr, b: IpAddr, drop: Drop) -> Self {
        let bind = |local| {
            let mut cfg = UdpConfig::new(local);
            cfg.port = RELAY_PORT;
            cfg.gso = false;
            UdpBackend::bind(cfg).unwrap()
        };
        // `at_a` takes what B sends to A (and sends as A to B), `at_b` the
        // other way.
        let (mut at_a, mut at_b) = (bind(a), bind(b));
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, st2) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !st2.load(Ordering::Relaxed) {
                let mut moved = forward(&mut at_b, &mut at_a, b, PORT_B, drop, &s2);
                moved += forward(&mut at_a, &mut at_b, a, PORT_A, drop, &s2);
                if moved == 0 {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
        });
        Self {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn seen(&self, attribute: u16) -> u32 {
        self.seen
            .lock()
            .unwrap()
            .get(&attribute)
            .copied()
            .unwrap_or(0)
    }
}

impl std::ops::Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Moves what `from` received to `to_ip:to_port`, sent from `via`'s
/// address (the sender's); drops the chosen MAD. Returns how many moved.
fn forward(
    from: &mut UdpBackend,
    via: &mut UdpBackend,
    to_ip: IpAddr,
    to_port: u16,
    drop: Drop,
    seen: &Mutex<HashMap<u16, u32>>,
) -> usize {
    let mut got: Vec<(u16, Vec<u8>)> = Vec::new();
    let _ = from.recv(|_, src_port, transport| {
        if let Some(attribute) = mad_attribute(transport) {
            let mut seen = seen.lock().unwrap();
            let n = seen.entry(attribute).or_insert(0);
            *n += 1;
            if attribute == drop.attribute && *n == drop.nth {
                return;
            }
        }
        got.push((src_port, transport.to_vec()));
    });
    for (src_port, mut transport) in got.iter_mut().map(|(p, t)| (*p, std::mem::take(t))) {
        let mut d = [OutDatagram {
            remote: to_ip,
            remote_port: to_port,
            src_port,
            tos: 0,
            transport: &mut transport,
        }];
        let _ = via.send(&mut d);
    }
    got.len()
}

/// The CM attribute of a MAD to QP1 (BTH dest QP 1; the MAD after BTH and
/// DETH, its attribute ID at bytes 16-17).
fn mad_attribute(transport: &[u8]) -> Option<u16> {
    let dest_qp = u32::from_be_bytes([0, transport[5], transport[6], transport[7]]);
    let id = transport.get(20 + 16..20 + 18)?;
    (dest_qp == 1).then(|| u16::from_be_bytes([id[0], id[1]]))
}
