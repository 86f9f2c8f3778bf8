//! `ferroce ibstat`: the device and its port in the layout of
//! infiniband-diags' `ibstat` (rdma-core), as it prints a RoCE port: `-l`
//! the CA names, `-p` the port GUIDs, `-s` the CA without its ports,
//! `ibstat <ca> [port]` one CA or one port. Every value comes from the
//! attributes `ferroce devinfo` prints (`ferroce::query_device`,
//! `query_port`, `gid_table`), read the way libibumad reads rxe's from
//! sysfs; the layout was checked against rdma-core 44's ibstat on the
//! kernel's rxe (the rig). Query only: binds no socket, needs no
//! privileges.

use std::fmt::Write;
use std::net::IpAddr;

use clap::Args;
use ferroce::{DEVICE_NAME, DeviceAttr, Gid, Guid, LinkLayer, PhysState, PortAttr, PortState};

use crate::cmd::devinfo::default_local;
use crate::error::Error;

#[derive(Debug, Args)]
pub(crate) struct IbstatArgs {
    /// List the CA names only.
    #[arg(short = 'l', long = "list_of_cas")]
    list: bool,
    /// Short output: each CA without its ports.
    #[arg(short = 's', long = "short")]
    short: bool,
    /// List the port GUIDs only.
    #[arg(short = 'p', long = "port_list")]
    port_list: bool,
    /// Address the device is bound to (as `devinfo -L`; default: the first
    /// non-loopback IPv4 address of an interface that is up, else
    /// 127.0.0.1). Not an option of ibstat's.
    #[arg(long)]
    local: Option<IpAddr>,
    /// The CA to show (ferroce's is `ferroce0`).
    ca: Option<String>,
    /// The port of that CA to show alone.
    port: Option<String>,
}

/// What ibstat shows of one device.
#[derive(Debug, Clone)]
pub(crate) struct Ca {
    pub(crate) name: String,
    pub(crate) dev: DeviceAttr,
    pub(crate) port: PortAttr,
    /// The interface ID of GID 0, as libibumad takes the port GUID.
    pub(crate) port_guid: Guid,
}

pub(crate) fn run(args: &IbstatArgs) -> Result<bool, Error> {
    let local = args.local.unwrap_or_else(default_local);
    let query = |e: std::io::Error| format!("device on {local}: {e}");
    let gids = ferroce::gid_table(local).map_err(query)?;
    let ca = Ca {
        name: DEVICE_NAME.to_owned(),
        dev: ferroce::query_device(local).map_err(query)?,
        port: ferroce::query_port(local).map_err(query)?,
        port_guid: port_guid(&gids),
    };
    if let Some(name) = &args.ca
        && *name != ca.name
    {
        return Err(Error::Usage(format!(
            "'{name}' IB device can't be found: ferroce's device is {} (`ferroce ibstat -l`)",
            ca.name
        )));
    }
    let out = if args.port_list {
        format!("{:#018x}\n", ca.port_guid.0)
    } else if args.list {
        format!("{}\n", ca.name)
    } else if let Some(port) = args.port.as_ref().filter(|_| !args.short) {
        one_port(&ca, port)?
    } else {
        render(&ca, args.short)
    };
    print!("{out}");
    Ok(true)
}

/// The interface ID (last 8 bytes) of GID 0, libibumad's port GUID: for a
/// port with a MAC, the EUI-64 of it (the node GUID); 0 with no GID.
pub(crate) fn port_guid(gids: &[Gid]) -> Guid {
    gids.first().map_or(Guid(0), |g| {
        let mut id = [0u8; 8];
        id.copy_from_slice(&g.raw[8..]);
        Guid(u64::from_be_bytes(id))
    })
}

/// `ibstat <ca> <port>`: the port alone, as `ibstat` parses the number
/// (`strtol`, base 0).
fn one_port(ca: &Ca, port: &str) -> Result<String, Error> {
    let n = parse_c_long(port);
    if n != Some(1) {
        return Err(Error::Usage(format!(
            "CA: '{}' has no port number {port} - max ({})",
            ca.name, ca.dev.phys_port_cnt
        )));
    }
    let mut o = format!("CA: '{}'\n", ca.name);
    port_block(&mut o, ca, "", "");
    Ok(o)
}

/// A number as C's `strtol(s, NULL, 0)` reads a whole argument: decimal,
/// `0x` hex or `0` octal.
fn parse_c_long(s: &str) -> Option<i64> {
    if let Some(hex) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        i64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// `ibstat [-s]` for one CA: its header, then (not `short`) its port.
pub(crate) fn render(ca: &Ca, short: bool) -> String {
    let d = &ca.dev;
    let mut o = String::new();
    // ferroce's device is a channel adapter (node type 1, "CA").
    let _ = writeln!(o, "CA '{}'", ca.name);
    // Empty, as rxe's: neither has a board type (sysfs `hca_type`).
    let _ = writeln!(o, "\tCA type: ");
    let _ = writeln!(o, "\tNumber of ports: {}", d.phys_port_cnt);
    let _ = writeln!(o, "\tFirmware version: {}", d.fw_ver);
    let _ = writeln!(o, "\tHardware version: {}", d.hw_ver);
    let _ = writeln!(o, "\tNode GUID: {:#018x}", d.node_guid.0);
    let _ = writeln!(o, "\tSystem image GUID: {:#018x}", d.sys_image_guid.0);
    if !short {
        port_block(&mut o, ca, "\t", "\t\t");
    }
    o
}

/// ibstat's port lines, the header indented by `head`, the fields by
/// `field`.
fn port_block(o: &mut String, ca: &Ca, head: &str, field: &str) {
    let p = &ca.port;
    let _ = writeln!(o, "{head}Port 1:");
    let _ = writeln!(o, "{field}State: {}", state_name(p.state));
    let _ = writeln!(
        o,
        "{field}Physical state: {}",
        phys_state_name(p.phys_state)
    );
    let _ = writeln!(o, "{field}Rate: {}", rate(p.active_speed, p.active_width));
    let _ = writeln!(o, "{field}Base lid: {}", p.lid);
    let _ = writeln!(o, "{field}LMC: {}", p.lmc);
    let _ = writeln!(o, "{field}SM lid: {}", p.sm_lid);
    let _ = writeln!(o, "{field}Capability mask: {:#010x}", p.port_cap_flags);
    let _ = writeln!(o, "{field}Port GUID: {:#018x}", ca.port_guid.0);
    let link = match p.link_layer {
        LinkLayer::Ethernet => "Ethernet",
        LinkLayer::InfiniBand | LinkLayer::Unspecified => "InfiniBand",
    };
    let _ = writeln!(o, "{field}Link layer: {link}");
}

fn state_name(s: PortState) -> &'static str {
    match s {
        PortState::Down => "Down",
        PortState::Init => "Initializing",
        PortState::Armed => "Armed",
        PortState::Active => "Active",
    }
}

fn phys_state_name(s: PhysState) -> &'static str {
    match s {
        PhysState::Sleep => "Sleep",
        PhysState::Polling => "Polling",
        PhysState::Disabled => "Disabled",
        PhysState::PortConfigurationTraining => "PortConfigurationTraining",
        PhysState::LinkUp => "LinkUp",
        PhysState::LinkErrorRecovery => "LinkErrorRecovery",
        PhysState::PhyTest => "PhyTest",
    }
}

/// ibstat's `Rate:`: the port's rate in Gb/s as the kernel's sysfs `rate`
/// gives it (lane speed times width), read as an integer by libibumad;
/// ibstat prints 1X SDR's 2 as `2.5` and marks FDR10.
pub(crate) fn rate(speed: u8, width: u8) -> String {
    use ferroce::{speed as s, width as w};
    // Tenths of Gb/s per lane, as the kernel's `rate_show`.
    let lane = match speed {
        s::SDR => 25,
        s::DDR => 50,
        s::QDR | s::FDR10 => 100,
        s::FDR => 140,
        s::EDR => 250,
        s::HDR => 500,
        s::NDR => 1000,
        _ => 0,
    };
    let lanes = match width {
        w::X1 => 1,
        w::X2 => 2,
        w::X4 => 4,
        w::X8 => 8,
        w::X12 => 12,
        _ => 0,
    };
    let gbps = lane * lanes / 10;
    match (speed, gbps) {
        (s::FDR10, _) => format!("{gbps} (FDR10)"),
        (_, 2) => "2.5".to_owned(),
        _ => gbps.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroce::{Interface, speed, width};

    /// The rig guest's eth0 (shared/rig/README.md §3), through ferroce.
    fn rig_eth0() -> Ca {
        let eth0 = Interface {
            name: "eth0".into(),
            mac: Some([0x52, 0x54, 0x00, 0x52, 0x00, 0x0a]),
            mtu: 1500,
            addrs: ["198.18.0.11", "fd52:6f43:4500::11", "fe80::5054:ff:fe52:a"]
                .iter()
                .map(|a| a.parse().unwrap())
                .collect(),
            up: true,
            running: true,
            loopback: false,
            speed_mbps: None,
        };
        let local: IpAddr = "198.18.0.11".parse().unwrap();
        Ca {
            name: DEVICE_NAME.into(),
            dev: ferroce::device_attr_for(&eth0, local),
            port: ferroce::port_attr_for(&eth0),
            port_guid: port_guid(&ferroce::gid_table_for(&eth0)),
        }
    }

    /// What rdma-core 44's `ibstat` printed for the kernel's rxe on that
    /// guest (Linux 6.1, `shared/rig`), less what ferroce reports
    /// otherwise: its name, a firmware version (rxe's is empty) and a
    /// hardware version (rxe has no `hw_rev`). The capability mask is
    /// rxe's, CM_SUP: ferroce answers CM MADs.
    #[test]
    fn ibstat_of_the_rig_device_is_rxes_but_for_what_ferroce_reports() {
        let rxe = "CA 'rxe0'\n\tCA type: \n\tNumber of ports: 1\n\tFirmware version: \n\t\
                   Hardware version: \n\tNode GUID: 0x505400fffe52000a\n\t\
                   System image GUID: 0x505400fffe52000a\n\tPort 1:\n\t\tState: Active\n\t\t\
                   Physical state: LinkUp\n\t\tRate: 2.5\n\t\tBase lid: 0\n\t\tLMC: 0\n\t\t\
                   SM lid: 0\n\t\tCapability mask: 0x00010000\n\t\t\
                   Port GUID: 0x505400fffe52000a\n\t\tLink layer: Ethernet\n";
        let want = rxe
            .replace("rxe0", DEVICE_NAME)
            .replace(
                "Firmware version: ",
                &format!("Firmware version: {}", env!("CARGO_PKG_VERSION")),
            )
            .replace("Hardware version: ", "Hardware version: 0");
        let ca = rig_eth0();
        assert_eq!(render(&ca, false), want);
        // -s: the CA lines alone.
        let short: String = want.split_inclusive('\n').take(7).collect();
        assert_eq!(render(&ca, true), short);
    }

    #[test]
    fn one_port_is_unindented_and_only_port_1_exists() {
        let ca = rig_eth0();
        let one = one_port(&ca, "1").unwrap();
        let lines: Vec<&str> = one.lines().collect();
        assert_eq!(lines[..3], ["CA: 'ferroce0'", "Port 1:", "State: Active"]);
        assert_eq!(lines.last(), Some(&"Link layer: Ethernet"));
        assert_eq!(one_port(&ca, "0x1").unwrap(), one);
        for bad in ["2", "0", "x"] {
            let err = one_port(&ca, bad).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("CA: 'ferroce0' has no port number {bad} - max (1)")
            );
        }
    }

    /// The kernel's link speed mapping (`ib_get_eth_speed`) through the
    /// sysfs rate to ibstat's number.
    #[test]
    fn rate_as_ibstat_prints_it() {
        let cases = [
            (None, "2.5"),
            (Some(1_000), "2.5"),
            (Some(10_000), "10 (FDR10)"),
            (Some(20_000), "20"),
            (Some(25_000), "25"),
            (Some(40_000), "40 (FDR10)"),
            (Some(50_000), "50"),
            (Some(100_000), "100"),
            (Some(200_000), "200"),
            (Some(400_000), "400"),
        ];
        for (mbps, want) in cases {
            let (s, w) = ferroce::eth_speed_to_ib(mbps);
            assert_eq!(rate(s, w), want, "{mbps:?} Mb/s");
        }
        assert_eq!(rate(speed::FDR, width::X4), "56");
        assert_eq!(rate(speed::SDR, width::X4), "10");
        assert_eq!(rate(0, width::X1), "0");
    }

    #[test]
    fn port_guid_is_gid_0s_interface_id() {
        let ca = rig_eth0();
        assert_eq!(ca.port_guid, ca.dev.node_guid);
        // Loopback has no MAC: GID 0 is ::ffff:127.0.0.1.
        let lo = [ferroce::Gid::from_ip("127.0.0.1".parse().unwrap(), "lo")];
        assert_eq!(port_guid(&lo), Guid(0x0000_ffff_7f00_0001));
        assert_eq!(port_guid(&[]), Guid(0));
    }
}
