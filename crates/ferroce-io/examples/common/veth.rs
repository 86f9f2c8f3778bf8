//! The raw-backend examples' network: two namespaces `fraw19-TAG-PID-{a,b}`
//! joined by a veth pair (`eth0`, MTU 9000, 10.19.9.1 and .2), removed on
//! drop, and the halves of a measurement run in them as child processes
//! (`ip netns exec`).

use std::net::Ipv4Addr;
use std::process::Command;

pub(crate) const A4: Ipv4Addr = Ipv4Addr::new(10, 19, 9, 1);
pub(crate) const B4: Ipv4Addr = Ipv4Addr::new(10, 19, 9, 2);
pub(crate) const IFACE: &str = "eth0";
const MTU: &str = "9000";

pub(crate) type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Namespaces joined by a veth; removed on drop.
pub(crate) struct Namespaces(pub(crate) String, pub(crate) String);

fn ip(args: &[&str]) -> Res<()> {
    let out = Command::new("ip").args(args).output()?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("ip {}: {err}", args.join(" ")).into());
    }
    Ok(())
}

impl Namespaces {
    pub(crate) fn new(tag: &str) -> Res<Self> {
        let pid = std::process::id();
        let ns = Self(
            format!("fraw19-{tag}-{pid}-a"),
            format!("fraw19-{tag}-{pid}-b"),
        );
        ip(&["netns", "add", &ns.0])?;
        ip(&["netns", "add", &ns.1])?;
        let (a, b) = (ns.0.as_str(), ns.1.as_str());
        ip(&[
            "-n", a, "link", "add", IFACE, "type", "veth", "peer", "name", IFACE, "netns", b,
        ])?;
        for (n, addr) in [(a, A4), (b, B4)] {
            ip(&["-n", n, "addr", "add", &format!("{addr}/24"), "dev", IFACE])?;
            ip(&["-n", n, "link", "set", IFACE, "mtu", MTU, "up"])?;
            ip(&["-n", n, "link", "set", "lo", "up"])?;
        }
        Ok(ns)
    }

    /// The MAC address of `eth0` in namespace `ns`, as `aa:bb:..`.
    pub(crate) fn mac(ns: &str) -> Res<String> {
        let out = Command::new("ip")
            .args(["-n", ns, "-br", "link", "show", IFACE])
            .output()?;
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        let mac = line.split_whitespace().nth(2).ok_or("no MAC for eth0")?;
        Ok(mac.to_owned())
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in [&self.0, &self.1] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

pub(crate) fn parse_mac(s: &str) -> Res<[u8; 6]> {
    let v: Vec<u8> = s
        .split(':')
        .map(|h| u8::from_str_radix(h, 16))
        .collect::<Result<_, _>>()?;
    v.try_into().map_err(|_| format!("{s} is not a MAC").into())
}
