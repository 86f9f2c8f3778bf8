//! `ferroce devinfo` on this machine's loopback: the lines `ibv_devinfo -v`
//! prints for rxe, with ferroce's values. Needs no root and binds nothing
//! (it runs beside the tests that hold 127.0.0.x:4791).

mod common;

fn devinfo(args: &[&str]) -> String {
    let out = common::ferroce(&[&["devinfo"], args].concat());
    assert!(
        out.status.success(),
        "ferroce devinfo {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn has(out: &str, line: &str) -> bool {
    out.lines().any(|l| l == line)
}

#[test]
fn verbose_on_loopback() {
    let out = devinfo(&["-v", "--local", "127.0.0.1"]);
    for want in [
        "hca_id:\tferroce0",
        "\ttransport:\t\t\tInfiniBand (0)",
        // lo has no MAC: EUI-64 of the pseudo-MAC 02:00:7f:00:00:01.
        "\tnode_guid:\t\t\t0000:7fff:fe00:0001",
        "\tsys_image_guid:\t\t\t0000:7fff:fe00:0001",
        "\tvendor_id:\t\t\t0xffffff",
        "\tvendor_part_id:\t\t\t0",
        "\thw_ver:\t\t\t\t0x0",
        "\tphys_port_cnt:\t\t\t1",
        "\tmax_qp_wr:\t\t\t32768",
        "\tdevice_cap_flags:\t\t0x01123804",
        "\t\t\t\t\tBAD_QKEY_CNTR",
        "\t\t\t\t\tSYS_IMAGE_GUID",
        "\t\t\t\t\tRC_RNR_NAK_GEN",
        "\t\t\t\t\tSRQ_RESIZE",
        "\t\t\t\t\tMEM_WINDOW",
        "\t\t\t\t\tXRC",
        "\t\t\t\t\tMEM_WINDOW_TYPE_2B",
        "\tmax_mw:\t\t\t\t65536",
        "\tmax_cqe:\t\t\t1048576",
        "\tmax_qp_rd_atom:\t\t\t16",
        "\tmax_qp_init_rd_atom:\t\t16",
        "\tatomic_cap:\t\t\tATOMIC_HCA (1)",
        "\tmax_srq:\t\t\t2147483647",
        "\tmax_srq_wr:\t\t\t32768",
        "\tmax_srq_sge:\t\t\t2147483647",
        "\tmax_pkeys:\t\t\t1",
        "\t\tport:\t1",
        "\t\t\tstate:\t\t\tPORT_ACTIVE (4)",
        "\t\t\tmax_mtu:\t\t4096 (5)",
        "\t\t\tsm_lid:\t\t\t0",
        "\t\t\tport_lid:\t\t0",
        "\t\t\tport_lmc:\t\t0x00",
        "\t\t\tlink_layer:\t\tEthernet",
        "\t\t\tmax_msg_sz:\t\t0x800000",
        "\t\t\tpkey_tbl_len:\t\t1",
        "\t\t\tgid_tbl_len:\t\t1024",
        "\t\t\tphys_state:\t\tLINK_UP (5)",
    ] {
        assert!(has(&out, want), "no line {want:?} in\n{out}");
    }
    // lo's MTU is 65536 on Linux; whatever it is, the active MTU is one of
    // the IB MTUs.
    assert!(
        out.lines().any(|l| l.starts_with("\t\t\tactive_mtu:\t\t")
            && ["256 (1)", "512 (2)", "1024 (3)", "2048 (4)", "4096 (5)"]
                .iter()
                .any(|m| l.ends_with(m))),
        "{out}"
    );
    // The bound address is in the GID table, IPv4-mapped, RoCE v2.
    let gids: Vec<&str> = out.lines().filter(|l| l.contains("GID[")).collect();
    assert!(
        gids.iter()
            .any(|l| l.starts_with("\t\t\tGID[") && l.ends_with("]:\t\t::ffff:127.0.0.1, RoCE v2")),
        "{out}"
    );
    assert!(gids.iter().all(|l| l.ends_with(", RoCE v2")), "{out}");
    assert!(out.ends_with("\n\n"), "{out:?}");
}

#[test]
fn short_form_and_default_address() {
    let out = devinfo(&["--local", "127.0.0.1"]);
    assert!(out.starts_with("hca_id:\tferroce0\n"), "{out}");
    assert!(has(&out, "\t\t\tlink_layer:\t\tEthernet"), "{out}");
    assert!(!out.contains("max_qp_wr"), "{out}");
    assert!(!out.contains("GID["), "{out}");
    // With no --local, some address of this host is picked.
    let out = devinfo(&[]);
    assert!(has(&out, "\t\tport:\t1"), "{out}");
}

#[test]
fn foreign_address_is_an_error() {
    let out = common::ferroce(&["devinfo", "--local", "0.0.0.0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("0.0.0.0"), "{err}");
}
