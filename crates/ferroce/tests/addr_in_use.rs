//! Opening a device on an address whose RoCE port is already bound fails
//! naming the address, the port and what to do, on both backends; the
//! error keeps the kind `AddrInUse`. Addresses 127.0.77.30 and .31.

#[path = "../../ferroce-verbs/tests/shared/skip.rs"]
mod skip;

use std::io::ErrorKind;
use std::net::IpAddr;

use ferroce::{BackendKind, Context, DeviceConfig, Error};

fn refusal(cfg: DeviceConfig) -> std::io::Error {
    match Context::open_with(cfg) {
        Err(Error::Io(e)) => e,
        Err(e) => panic!("not an I/O error: {e}"),
        Ok(_) => panic!("a second device opened on {}", cfg.local),
    }
}

fn assert_named(e: &std::io::Error, addr: &str, backend: &str) {
    assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
    let text = e.to_string();
    for words in [
        format!("UDP port 4791 on {addr} is taken"),
        format!("{backend} backend"),
        "address of its own".to_string(),
    ] {
        assert!(text.contains(&words), "{words:?} missing: {text}");
    }
}

#[test]
fn a_second_udp_device_on_one_address_names_it() {
    let addr = "127.0.77.30";
    let ip: IpAddr = addr.parse().unwrap();
    let _first = Context::open(ip).unwrap();
    assert_named(&refusal(DeviceConfig::new(ip)), addr, "UDP");
    // Through `Context::open` the error reads the same, behind "network: ".
    let e = Context::open(ip).unwrap_err();
    assert!(e.to_string().starts_with("network: UDP port 4791"), "{e}");
}

#[test]
fn a_raw_device_on_a_taken_address_names_it() {
    if !is_root() {
        skip::skip("needs root (raw sockets)");
        return;
    }
    let addr = "127.0.77.31";
    let ip: IpAddr = addr.parse().unwrap();
    let _first = Context::open(ip).unwrap();
    let mut cfg = DeviceConfig::new(ip);
    cfg.backend = BackendKind::Raw;
    assert_named(&refusal(cfg), addr, "raw");
}

fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0")
}
