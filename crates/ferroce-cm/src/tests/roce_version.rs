//! A communication's MADs all go in the RoCE version its first one came
//! in or was sent in: `PeerAddr::roce`, from the request (passive side) or
//! the caller (active side), on every MAD both sides send.

use std::net::{IpAddr, Ipv4Addr};

use ferroce_core::Instant;
use ferroce_core::verbs::RoceMode;
use ferroce_wire::Psn;

use super::sim::SERVICE;
use crate::{Cm, CmConfig, CmEvent, ConnectParams, PeerAddr, RepParams};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 10));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 11));

fn cm(seed: u64) -> Cm {
    Cm::new(CmConfig {
        seed,
        ..CmConfig::default()
    })
}

/// Moves every MAD `from` queued to `to`, as sent from `from_addr`;
/// returns the versions they were sent in.
fn deliver(now: Instant, from: &mut Cm, from_addr: IpAddr, to: &mut Cm) -> Vec<RoceMode> {
    let mut sent = Vec::new();
    while let Some((dest, bytes)) = from.poll_transmit() {
        sent.push(dest.roce);
        to.handle_mad(now, PeerAddr::gsi_via(dest.roce, from_addr), &bytes);
    }
    sent
}

#[test]
fn every_mad_of_a_connection_goes_in_its_version() {
    for roce in [RoceMode::V1, RoceMode::V2] {
        let now = Instant::from_nanos(1_000_000_000);
        let (mut a, mut b) = (cm(1), cm(2));
        b.listen(SERVICE);
        let params = ConnectParams::new(PeerAddr::gsi_via(roce, B), SERVICE, 0x11, Psn::new(7));
        let id = a.connect(now, &params).unwrap();
        assert_eq!(deliver(now, &mut a, A, &mut b), [roce], "REQ");
        let Some(CmEvent::ReqReceived { id: sid, peer, .. }) = b.poll_event() else {
            panic!("no REQ at the server");
        };
        assert_eq!(
            peer.roce, roce,
            "the REQ's version reaches the passive side"
        );
        let rep = RepParams {
            qpn: 0x12,
            starting_psn: Psn::new(9),
            ..RepParams::default()
        };
        b.accept(now, sid, &rep).unwrap();
        assert_eq!(deliver(now, &mut b, B, &mut a), [roce], "REP");
        a.rtu(id, &[]).unwrap();
        a.disconnect(now, id, &[]).unwrap();
        assert_eq!(deliver(now, &mut a, A, &mut b), [roce; 2], "RTU, DREQ");
        while b.poll_event().is_some() {}
        b.disconnect(now, sid, &[]).unwrap();
        assert_eq!(deliver(now, &mut b, B, &mut a), [roce], "DREP");
    }
}
