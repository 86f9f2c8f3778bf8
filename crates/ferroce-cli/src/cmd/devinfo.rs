//! `ferroce devinfo`: the device and port attributes in `ibv_devinfo`'s
//! layout (rdma-core 44, the version the rxe rig ran), `-v` with the
//! extended attributes and the GID table. Query only: binds no socket,
//! needs no privileges.

use std::net::{IpAddr, Ipv4Addr};

use crate::error::Error;
use clap::Args;
use ferroce::{DEVICE_NAME, DeviceAttr, Gid, GidType, Mtu, PhysState, PortAttr};

#[derive(Debug, Args)]
pub(crate) struct DevinfoArgs {
    /// Address the device is bound to (default: the first non-loopback
    /// IPv4 address of an interface that is up, else 127.0.0.1).
    #[arg(long, short = 'L')]
    local: Option<IpAddr>,
    /// Print all the attributes, the extended ones and the GID table, as
    /// `ibv_devinfo -v`.
    #[arg(long, short = 'v')]
    verbose: bool,
    /// Show the device as the raw-Ethernet backend opens it (`--raw` of
    /// pingpong and perf): each GID as RoCE v1 and RoCE v2, as a ConnectX
    /// port lists them. Still a query only: no root needed.
    #[arg(long)]
    raw: bool,
}

pub(crate) fn run(args: &DevinfoArgs) -> Result<bool, Error> {
    let local = match args.local {
        Some(a) => a,
        None => default_local(),
    };
    let query = |e: std::io::Error| format!("device on {local}: {e}");
    let dev = ferroce::query_device(local).map_err(query)?;
    let port = ferroce::query_port(local).map_err(query)?;
    let gids = if args.verbose && args.raw {
        ferroce::gid_table_raw(local).map_err(query)?
    } else if args.verbose {
        ferroce::gid_table(local).map_err(query)?
    } else {
        Vec::new()
    };
    print!("{}", render(&dev, &port, &gids, args.verbose));
    Ok(true)
}

/// The first non-loopback IPv4 address of an interface that is up, else
/// 127.0.0.1 (`ibstat`'s too).
pub(crate) fn default_local() -> IpAddr {
    ferroce::netif::interfaces()
        .unwrap_or_default()
        .into_iter()
        .filter(|i| i.up && !i.loopback)
        .flat_map(|i| i.addrs)
        .find(|a| a.is_ipv4() && !a.is_loopback())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// `ibv_devinfo [-v]` for one device with one port. `gids` is printed
/// with `verbose` only.
fn render(dev: &DeviceAttr, port: &PortAttr, gids: &[Gid], verbose: bool) -> String {
    let mut o = String::new();
    let mut line = |s: String| {
        o.push_str(&s);
        o.push('\n');
    };
    line(format!("hca_id:\t{DEVICE_NAME}"));
    // RoCE runs the InfiniBand transport (IBV_TRANSPORT_IB).
    line("\ttransport:\t\t\tInfiniBand (0)".into());
    if !dev.fw_ver.is_empty() {
        line(format!("\tfw_ver:\t\t\t\t{}", dev.fw_ver));
    }
    line(format!("\tnode_guid:\t\t\t{}", dev.node_guid));
    line(format!("\tsys_image_guid:\t\t\t{}", dev.sys_image_guid));
    line(format!("\tvendor_id:\t\t\t0x{:04x}", dev.vendor_id));
    line(format!("\tvendor_part_id:\t\t\t{}", dev.vendor_part_id));
    line(format!("\thw_ver:\t\t\t\t0x{:X}", dev.hw_ver));
    line(format!("\tphys_port_cnt:\t\t\t{}", dev.phys_port_cnt));
    if verbose {
        device_verbose(dev, &mut line);
    }
    line("\t\tport:\t1".into());
    line(format!(
        "\t\t\tstate:\t\t\t{} ({})",
        port.state.name(),
        port.state as u8
    ));
    line(format!("\t\t\tmax_mtu:\t\t{}", mtu(port.max_mtu)));
    line(format!("\t\t\tactive_mtu:\t\t{}", mtu(port.active_mtu)));
    line(format!("\t\t\tsm_lid:\t\t\t{}", port.sm_lid));
    line(format!("\t\t\tport_lid:\t\t{}", port.lid));
    line(format!("\t\t\tport_lmc:\t\t0x{:02x}", port.lmc));
    line(format!(
        "\t\t\tlink_layer:\t\t{}",
        match port.link_layer {
            ferroce::LinkLayer::Ethernet => "Ethernet",
            ferroce::LinkLayer::InfiniBand | ferroce::LinkLayer::Unspecified => "InfiniBand",
        }
    ));
    if verbose {
        port_verbose(port, &mut line);
        for (i, gid) in gids.iter().enumerate() {
            // ibv_devinfo skips GIDs whose interface ID (last 8 bytes) is 0.
            if gid.raw[8..] == [0; 8] {
                continue;
            }
            let text = match gid.kind {
                GidType::RoceV2 => gid.to_string(),
                GidType::RoceV1 => gid.long_form(),
            };
            line(format!("\t\t\tGID[{i:3}]:\t\t{text}, {}", gid.kind.name()));
        }
    }
    line(String::new());
    o
}

fn device_verbose(dev: &DeviceAttr, line: &mut impl FnMut(String)) {
    line(format!("\tmax_mr_size:\t\t\t0x{:x}", dev.max_mr_size));
    line(format!("\tpage_size_cap:\t\t\t0x{:x}", dev.page_size_cap));
    line(format!("\tmax_qp:\t\t\t\t{}", dev.max_qp));
    line(format!("\tmax_qp_wr:\t\t\t{}", dev.max_qp_wr));
    let flags = dev.device_cap_flags;
    line(format!("\tdevice_cap_flags:\t\t0x{:08x}", flags.bits()));
    for name in flags.names() {
        line(format!("\t\t\t\t\t{name}"));
    }
    if flags.unknown_bits() != 0 {
        line(format!(
            "\t\t\t\t\tUnknown flags: 0x{:X}",
            flags.unknown_bits()
        ));
    }
    line(format!("\tmax_sge:\t\t\t{}", dev.max_sge));
    line(format!("\tmax_sge_rd:\t\t\t{}", dev.max_sge_rd));
    line(format!("\tmax_cq:\t\t\t\t{}", dev.max_cq));
    line(format!("\tmax_cqe:\t\t\t{}", dev.max_cqe));
    line(format!("\tmax_mr:\t\t\t\t{}", dev.max_mr));
    line(format!("\tmax_pd:\t\t\t\t{}", dev.max_pd));
    line(format!("\tmax_qp_rd_atom:\t\t\t{}", dev.max_qp_rd_atom));
    line(format!("\tmax_ee_rd_atom:\t\t\t{}", dev.max_ee_rd_atom));
    line(format!("\tmax_res_rd_atom:\t\t{}", dev.max_res_rd_atom));
    line(format!(
        "\tmax_qp_init_rd_atom:\t\t{}",
        dev.max_qp_init_rd_atom
    ));
    line(format!(
        "\tmax_ee_init_rd_atom:\t\t{}",
        dev.max_ee_init_rd_atom
    ));
    line(format!(
        "\tatomic_cap:\t\t\t{} ({})",
        dev.atomic_cap.name(),
        dev.atomic_cap as u8
    ));
    line(format!("\tmax_ee:\t\t\t\t{}", dev.max_ee));
    line(format!("\tmax_rdd:\t\t\t{}", dev.max_rdd));
    line(format!("\tmax_mw:\t\t\t\t{}", dev.max_mw));
    line(format!("\tmax_raw_ipv6_qp:\t\t{}", dev.max_raw_ipv6_qp));
    line(format!("\tmax_raw_ethy_qp:\t\t{}", dev.max_raw_ethy_qp));
    line(format!("\tmax_mcast_grp:\t\t\t{}", dev.max_mcast_grp));
    line(format!(
        "\tmax_mcast_qp_attach:\t\t{}",
        dev.max_mcast_qp_attach
    ));
    line(format!(
        "\tmax_total_mcast_qp_attach:\t{}",
        dev.max_total_mcast_qp_attach
    ));
    line(format!("\tmax_ah:\t\t\t\t{}", dev.max_ah));
    line(format!("\tmax_fmr:\t\t\t{}", dev.max_fmr));
    if dev.max_fmr != 0 {
        line(format!("\tmax_map_per_fmr:\t\t{}", dev.max_map_per_fmr));
    }
    line(format!("\tmax_srq:\t\t\t{}", dev.max_srq));
    if dev.max_srq != 0 {
        line(format!("\tmax_srq_wr:\t\t\t{}", dev.max_srq_wr));
        line(format!("\tmax_srq_sge:\t\t\t{}", dev.max_srq_sge));
    }
    line(format!("\tmax_pkeys:\t\t\t{}", dev.max_pkeys));
    line(format!(
        "\tlocal_ca_ack_delay:\t\t{}",
        dev.local_ca_ack_delay
    ));
    // ibv_query_device_ex's part. ferroce has no on-demand paging,
    // completion timestamps, raw packet QPs (so no TSO, RSS or pacing),
    // work queues or tag matching.
    line("\tgeneral_odp_caps:".into());
    for transport in ["rc", "uc", "ud", "xrc"] {
        line(format!("\t{transport}_odp_caps:"));
        line("\t\t\t\t\tNO SUPPORT".into());
    }
    line("\tcompletion_timestamp_mask not supported".into());
    line("\tcore clock not supported".into());
    line(format!(
        "\tdevice_cap_flags_ex:\t\t0x{:X}",
        dev.device_cap_flags_ex
    ));
    let ex_flags = dev.device_cap_flags_ex & 0xffff_ffff_0000_0000;
    if ex_flags != 0 {
        line(format!("\t\t\t\t\tUnknown flags: 0x{ex_flags:X}"));
    }
    line("\ttso_caps:".into());
    line("\t\tmax_tso:\t\t\t0".into());
    line("\trss_caps:".into());
    line("\t\tmax_rwq_indirection_tables:\t\t\t0".into());
    line("\t\tmax_rwq_indirection_table_size:\t\t\t0".into());
    line("\t\trx_hash_function:\t\t\t\t0x0".into());
    line("\t\trx_hash_fields_mask:\t\t\t\t0x0".into());
    line("\tmax_wq_type_rq:\t\t\t0".into());
    line("\tpacket_pacing_caps:".into());
    line("\t\tqp_rate_limit_min:\t0kbps".into());
    line("\t\tqp_rate_limit_max:\t0kbps".into());
    line("\ttag matching not supported".into());
    line(format!("\tnum_comp_vectors:\t\t{}", dev.num_comp_vectors));
}

fn port_verbose(port: &PortAttr, line: &mut impl FnMut(String)) {
    line(format!("\t\t\tmax_msg_sz:\t\t0x{:x}", port.max_msg_sz));
    line(format!(
        "\t\t\tport_cap_flags:\t\t0x{:08x}",
        port.port_cap_flags
    ));
    line(format!(
        "\t\t\tport_cap_flags2:\t0x{:04x}",
        port.port_cap_flags2
    ));
    let vl = match port.max_vl_num {
        1 => "1",
        2 => "2",
        3 => "4",
        4 => "8",
        5 => "15",
        _ => "invalid value",
    };
    line(format!("\t\t\tmax_vl_num:\t\t{vl} ({})", port.max_vl_num));
    line(format!(
        "\t\t\tbad_pkey_cntr:\t\t0x{:x}",
        port.bad_pkey_cntr
    ));
    line(format!(
        "\t\t\tqkey_viol_cntr:\t\t0x{:x}",
        port.qkey_viol_cntr
    ));
    line(format!("\t\t\tsm_sl:\t\t\t{}", port.sm_sl));
    line(format!("\t\t\tpkey_tbl_len:\t\t{}", port.pkey_tbl_len));
    line(format!("\t\t\tgid_tbl_len:\t\t{}", port.gid_tbl_len));
    line(format!("\t\t\tsubnet_timeout:\t\t{}", port.subnet_timeout));
    line(format!("\t\t\tinit_type_reply:\t{}", port.init_type_reply));
    let width = match port.active_width {
        1 => "1",
        2 => "4",
        4 => "8",
        8 => "12",
        16 => "2",
        _ => "invalid width",
    };
    line(format!(
        "\t\t\tactive_width:\t\t{width}X ({})",
        port.active_width
    ));
    let speed = match port.active_speed {
        1 => "2.5 Gbps",
        2 => "5.0 Gbps",
        4 | 8 => "10.0 Gbps",
        16 => "14.0 Gbps",
        32 => "25.0 Gbps",
        64 => "50.0 Gbps",
        128 => "100.0 Gbps",
        _ => "invalid speed",
    };
    line(format!(
        "\t\t\tactive_speed:\t\t{speed} ({})",
        port.active_speed
    ));
    let phys = match port.phys_state {
        PhysState::Sleep => "SLEEP",
        PhysState::Polling => "POLLING",
        PhysState::Disabled => "DISABLED",
        // sic, as ibv_devinfo spells it
        PhysState::PortConfigurationTraining => "PORT_CONFIGURATION TRAINNING",
        PhysState::LinkUp => "LINK_UP",
        PhysState::LinkErrorRecovery => "LINK_ERROR_RECOVERY",
        PhysState::PhyTest => "PHY TEST",
    };
    line(format!(
        "\t\t\tphys_state:\t\t{phys} ({})",
        port.phys_state as u8
    ));
}

/// `4096 (5)`.
fn mtu(m: Mtu) -> String {
    format!("{} ({})", m.bytes(), m as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferroce::Interface;

    /// The rig guest's eth0 (shared/rig/README.md §3), through ferroce.
    #[test]
    fn rig_like_device() {
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
        let dev = ferroce::device_attr_for(&eth0, local);
        let port = ferroce::port_attr_for(&eth0);
        let gids = ferroce::gid_table_for(&eth0);
        let short = render(&dev, &port, &gids, false);
        let want_short = [
            "hca_id:\tferroce0",
            "\ttransport:\t\t\tInfiniBand (0)",
            &format!("\tfw_ver:\t\t\t\t{}", env!("CARGO_PKG_VERSION")),
            "\tnode_guid:\t\t\t5054:00ff:fe52:000a",
            "\tsys_image_guid:\t\t\t5054:00ff:fe52:000a",
            "\tvendor_id:\t\t\t0xffffff",
            "\tvendor_part_id:\t\t\t0",
            "\thw_ver:\t\t\t\t0x0",
            "\tphys_port_cnt:\t\t\t1",
            "\t\tport:\t1",
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)",
            "\t\t\tmax_mtu:\t\t4096 (5)",
            "\t\t\tactive_mtu:\t\t1024 (3)",
            "\t\t\tsm_lid:\t\t\t0",
            "\t\t\tport_lid:\t\t0",
            "\t\t\tport_lmc:\t\t0x00",
            "\t\t\tlink_layer:\t\tEthernet",
            "",
        ];
        assert_eq!(short.lines().collect::<Vec<_>>(), want_short);
        let long = render(&dev, &port, &gids, true);
        for want in [
            "\tdevice_cap_flags:\t\t0x01123804",
            "\t\t\t\t\tBAD_QKEY_CNTR",
            "\t\t\t\t\tSRQ_RESIZE",
            "\t\t\t\t\tXRC",
            "\t\t\t\t\tMEM_WINDOW_TYPE_2B",
            "\tatomic_cap:\t\t\tATOMIC_HCA (1)",
            "\tmax_qp_rd_atom:\t\t\t16",
            "\tmax_srq:\t\t\t2147483647",
            "\tmax_srq_wr:\t\t\t32768",
            "\tmax_srq_sge:\t\t\t2147483647",
            // FLUSH_GLOBAL (bit 38) and ATOMIC WRITE (bit 40), which
            // rdma-core 44's ibv_devinfo also lists as unknown.
            "\tdevice_cap_flags_ex:\t\t0x14001123804",
            "\t\t\t\t\tUnknown flags: 0x14000000000",
            "\t\t\tmax_msg_sz:\t\t0x800000",
            "\t\t\tport_cap_flags:\t\t0x00010000",
            "\t\t\tpkey_tbl_len:\t\t1",
            "\t\t\tgid_tbl_len:\t\t1024",
            "\t\t\tactive_width:\t\t1X (1)",
            "\t\t\tactive_speed:\t\t2.5 Gbps (1)",
            "\t\t\tphys_state:\t\tLINK_UP (5)",
            "\t\t\tGID[  0]:\t\tfe80::5054:ff:fe52:a, RoCE v2",
            "\t\t\tGID[  1]:\t\t::ffff:198.18.0.11, RoCE v2",
            "\t\t\tGID[  2]:\t\tfd52:6f43:4500::11, RoCE v2",
        ] {
            assert!(long.lines().any(|l| l == want), "no {want:?} in\n{long}");
        }
        assert!(long.ends_with("RoCE v2\n\n"), "{long}");
    }
}
