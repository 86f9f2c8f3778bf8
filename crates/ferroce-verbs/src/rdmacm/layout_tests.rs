//! The C layout test of [`super::abi`]: every size and offset against the
//! real `<rdma/rdma_cma.h>` (Debian's librdmacm-dev), as the verbs layout
//! test does for `<infiniband/verbs.h>`: a C program prints `sizeof` and
//! `offsetof` of each struct and field named here and the enum values,
//! and each is compared with Rust's. Without the header or a C compiler
//! it fails, naming what to install (`scripts/setup-test-deps.sh`).

use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::process::Command;

use super::abi::*;

type Check = (String, usize);

macro_rules! layout {
    ($out:ident, $t:ident, $c:literal, [$($f:ident $(. $g:ident)*),* $(,)?]) => {{
        $out.push((format!("sizeof({})", $c), size_of::<$t>()));
        $(
            $out.push((
                format!("offsetof({}, {})", $c, stringify!($f $(. $g)*).replace(' ', "")),
                offset_of!($t, $f $(. $g)*),
            ));
        )*
    }};
}

fn checks() -> Vec<Check> {
    let mut v: Vec<Check> = Vec::new();
    layout!(v, sockaddr_storage, "struct sockaddr_storage", []);
    layout!(v, rdma_ib_addr, "struct rdma_ib_addr", [sgid, dgid, pkey]);
    layout!(v, rdma_addr, "struct rdma_addr", [src_storage, dst_storage]);
    v.push((
        "offsetof(struct rdma_addr, addr.ibaddr)".into(),
        offset_of!(rdma_addr, ibaddr),
    ));
    layout!(
        v,
        ibv_sa_path_rec,
        "struct ibv_sa_path_rec",
        [
            dgid,
            sgid,
            dlid,
            slid,
            raw_traffic,
            flow_label,
            hop_limit,
            traffic_class,
            reversible,
            numb_path,
            pkey,
            sl,
            mtu_selector,
            mtu,
            rate_selector,
            rate,
            packet_life_time_selector,
            packet_life_time,
            preference
        ]
    );
    layout!(
        v,
        rdma_route,
        "struct rdma_route",
        [addr, path_rec, num_paths]
    );
    layout!(v, rdma_event_channel, "struct rdma_event_channel", [fd]);
    layout!(
        v,
        rdma_cm_id,
        "struct rdma_cm_id",
        [
            verbs,
            channel,
            context,
            qp,
            route,
            ps,
            port_num,
            event,
            send_cq_channel,
            send_cq,
            recv_cq_channel,
            recv_cq,
            srq,
            pd,
            qp_type
        ]
    );
    layout!(
        v,
        rdma_conn_param,
        "struct rdma_conn_param",
        [
            private_data,
            private_data_len,
            responder_resources,
            initiator_depth,
            flow_control,
            retry_count,
            rnr_retry_count,
            srq,
            qp_num
        ]
    );
    layout!(
        v,
        rdma_ud_param,
        "struct rdma_ud_param",
        [private_data, private_data_len, ah_attr, qp_num, qkey]
    );
    layout!(
        v,
        rdma_cm_event,
        "struct rdma_cm_event",
        [id, listen_id, event, status, param]
    );
    layout!(
        v,
        rdma_addrinfo,
        "struct rdma_addrinfo",
        [
            ai_flags,
            ai_family,
            ai_qp_type,
            ai_port_space,
            ai_src_len,
            ai_dst_len,
            ai_src_addr,
            ai_dst_addr,
            ai_src_canonname,
            ai_dst_canonname,
            ai_route_len,
            ai_route,
            ai_connect_len,
            ai_connect,
            ai_next
        ]
    );
    layout!(
        v,
        ibv_qp_init_attr_ex,
        "struct ibv_qp_init_attr_ex",
        [
            qp_context,
            send_cq,
            recv_cq,
            srq,
            cap,
            qp_type,
            sq_sig_all,
            comp_mask,
            pd,
            xrcd,
            create_flags,
            max_tso_header,
            rwq_ind_tbl,
            rx_hash_conf,
            source_qpn,
            send_ops_flags
        ]
    );
    v
}

fn constants() -> Vec<Check> {
    let c = |name: &str, v: i64| (name.to_owned(), v as usize);
    vec![
        c(
            "RDMA_CM_EVENT_ADDR_RESOLVED",
            RDMA_CM_EVENT_ADDR_RESOLVED.into(),
        ),
        c("RDMA_CM_EVENT_ADDR_ERROR", RDMA_CM_EVENT_ADDR_ERROR.into()),
        c(
            "RDMA_CM_EVENT_ROUTE_RESOLVED",
            RDMA_CM_EVENT_ROUTE_RESOLVED.into(),
        ),
        c(
            "RDMA_CM_EVENT_ROUTE_ERROR",
            RDMA_CM_EVENT_ROUTE_ERROR.into(),
        ),
        c(
            "RDMA_CM_EVENT_CONNECT_REQUEST",
            RDMA_CM_EVENT_CONNECT_REQUEST.into(),
        ),
        c(
            "RDMA_CM_EVENT_CONNECT_RESPONSE",
            RDMA_CM_EVENT_CONNECT_RESPONSE.into(),
        ),
        c(
            "RDMA_CM_EVENT_CONNECT_ERROR",
            RDMA_CM_EVENT_CONNECT_ERROR.into(),
        ),
        c(
            "RDMA_CM_EVENT_UNREACHABLE",
            RDMA_CM_EVENT_UNREACHABLE.into(),
        ),
        c("RDMA_CM_EVENT_REJECTED", RDMA_CM_EVENT_REJECTED.into()),
        c(
            "RDMA_CM_EVENT_ESTABLISHED",
            RDMA_CM_EVENT_ESTABLISHED.into(),
        ),
        c(
            "RDMA_CM_EVENT_DISCONNECTED",
            RDMA_CM_EVENT_DISCONNECTED.into(),
        ),
        c(
            "RDMA_CM_EVENT_DEVICE_REMOVAL",
            RDMA_CM_EVENT_DEVICE_REMOVAL.into(),
        ),
        c(
            "RDMA_CM_EVENT_MULTICAST_JOIN",
            RDMA_CM_EVENT_MULTICAST_JOIN.into(),
        ),
        c(
            "RDMA_CM_EVENT_MULTICAST_ERROR",
            RDMA_CM_EVENT_MULTICAST_ERROR.into(),
        ),
        c(
            "RDMA_CM_EVENT_ADDR_CHANGE",
            RDMA_CM_EVENT_ADDR_CHANGE.into(),
        ),
        c(
            "RDMA_CM_EVENT_TIMEWAIT_EXIT",
            RDMA_CM_EVENT_TIMEWAIT_EXIT.into(),
        ),
        c("RDMA_PS_IPOIB", RDMA_PS_IPOIB.into()),
        c("RDMA_PS_TCP", RDMA_PS_TCP.into()),
        c("RDMA_PS_UDP", RDMA_PS_UDP.into()),
        c("RDMA_PS_IB", RDMA_PS_IB.into()),
        c("RDMA_UDP_QKEY", RDMA_UDP_QKEY.into()),
        c("RAI_PASSIVE", RAI_PASSIVE.into()),
        c("RAI_NUMERICHOST", RAI_NUMERICHOST.into()),
        c("RAI_NOROUTE", RAI_NOROUTE.into()),
        c("RAI_FAMILY", RAI_FAMILY.into()),
        c("RDMA_OPTION_ID", RDMA_OPTION_ID.into()),
        c("RDMA_OPTION_IB", RDMA_OPTION_IB.into()),
        c("RDMA_OPTION_ID_TOS", RDMA_OPTION_ID_TOS.into()),
        c("RDMA_OPTION_ID_REUSEADDR", RDMA_OPTION_ID_REUSEADDR.into()),
        c("RDMA_OPTION_ID_AFONLY", RDMA_OPTION_ID_AFONLY.into()),
        c(
            "RDMA_OPTION_ID_ACK_TIMEOUT",
            RDMA_OPTION_ID_ACK_TIMEOUT.into(),
        ),
        c("RDMA_OPTION_IB_PATH", RDMA_OPTION_IB_PATH.into()),
        c("RDMA_MAX_RESP_RES", RDMA_MAX_RESP_RES.into()),
        c("RDMA_MAX_INIT_DEPTH", RDMA_MAX_INIT_DEPTH.into()),
        c("IBV_QP_INIT_ATTR_PD", IBV_QP_INIT_ATTR_PD.into()),
        c(
            "IBV_QP_INIT_ATTR_SEND_OPS_FLAGS",
            IBV_QP_INIT_ATTR_SEND_OPS_FLAGS.into(),
        ),
    ]
}

#[test]
fn layout_matches_rdma_cma_h() {
    let header = "/usr/include/rdma/rdma_cma.h";
    assert!(
        std::path::Path::new(header).exists(),
        "{header} is missing: install Debian's librdmacm-dev (scripts/setup-test-deps.sh)"
    );
    let all: Vec<Check> = checks().into_iter().chain(constants()).collect();
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n\
         #include <rdma/rdma_cma.h>\nint main(void) {\n",
    );
    for (expr, _) in &all {
        writeln!(src, "  printf(\"%zu\\n\", (size_t)({expr}));").unwrap();
    }
    src.push_str("  return 0;\n}\n");
    let dir = std::env::temp_dir().join(format!("ferroce-rdmacm-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (c_file, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&c_file, src).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg("-o")
        .arg(&exe)
        .arg(&c_file)
        .output()
        .unwrap_or_else(|e| panic!("running {cc}: {e}; install a C compiler (gcc)"));
    assert!(
        out.status.success(),
        "{cc} failed on the layout program:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe)
        .output()
        .expect("running the layout program");
    let c_values: Vec<usize> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| l.parse().expect("a number per line"))
        .collect();
    assert_eq!(c_values.len(), all.len(), "one C value per check");
    let wrong: Vec<String> = all
        .iter()
        .zip(&c_values)
        .filter(|((_, rust), c)| rust != *c)
        .map(|((expr, rust), c)| format!("{expr}: C {c}, Rust {rust}"))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        wrong.is_empty(),
        "layout differs from rdma_cma.h:\n{}",
        wrong.join("\n")
    );
}
