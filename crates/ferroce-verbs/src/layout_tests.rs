//! The C layout test: every size and offset of [`crate::abi`] against the
//! real `<infiniband/verbs.h>` (Debian's libibverbs-dev). The test writes a
//! C file that prints `sizeof`/`offsetof` of each struct and field named
//! here, compiles it with `cc`, runs it, and compares line by line with
//! Rust's `size_of`/`offset_of!`: a field added, dropped or moved on either
//! side fails it. Without the header or a C compiler it fails too, naming
//! what to install (`scripts/setup-test-deps.sh`).

use std::fmt::Write as _;
use std::mem::{offset_of, size_of};
use std::process::Command;

use crate::abi::*;

/// One check: a C expression and the value Rust has for it.
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

mod ext;

fn checks() -> Vec<Check> {
    let mut v: Vec<Check> = Vec::new();
    layout!(v, ibv_gid, "union ibv_gid", [raw]);
    layout!(
        v,
        ibv_device,
        "struct ibv_device",
        [
            _ops,
            node_type,
            transport_type,
            name,
            dev_name,
            dev_path,
            ibdev_path
        ]
    );
    layout!(
        v,
        ibv_device_attr,
        "struct ibv_device_attr",
        [
            fw_ver,
            node_guid,
            sys_image_guid,
            max_mr_size,
            page_size_cap,
            vendor_id,
            vendor_part_id,
            hw_ver,
            max_qp,
            max_qp_wr,
            device_cap_flags,
            max_sge,
            max_sge_rd,
            max_cq,
            max_cqe,
            max_mr,
            max_pd,
            max_qp_rd_atom,
            max_ee_rd_atom,
            max_res_rd_atom,
            max_qp_init_rd_atom,
            max_ee_init_rd_atom,
            atomic_cap,
            max_ee,
            max_rdd,
            max_mw,
            max_raw_ipv6_qp,
            max_raw_ethy_qp,
            max_mcast_grp,
            max_mcast_qp_attach,
            max_total_mcast_qp_attach,
            max_ah,
            max_fmr,
            max_map_per_fmr,
            max_srq,
            max_srq_wr,
            max_srq_sge,
            max_pkeys,
            local_ca_ack_delay,
            phys_port_cnt
        ]
    );
    layout!(v, ibv_odp_caps, "struct ibv_odp_caps", [general_caps]);
    v.push((
        "offsetof(struct ibv_odp_caps, per_transport_caps.rc_odp_caps)".into(),
        offset_of!(ibv_odp_caps, rc_odp_caps),
    ));
    v.push((
        "offsetof(struct ibv_odp_caps, per_transport_caps.ud_odp_caps)".into(),
        offset_of!(ibv_odp_caps, ud_odp_caps),
    ));
    // Only the start of ibv_device_attr_ex is defined here: its offsets.
    v.extend([
        (
            "offsetof(struct ibv_device_attr_ex, comp_mask)".into(),
            offset_of!(ibv_device_attr_ex, comp_mask),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, odp_caps)".into(),
            offset_of!(ibv_device_attr_ex, odp_caps),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, completion_timestamp_mask)".into(),
            offset_of!(ibv_device_attr_ex, completion_timestamp_mask),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, hca_core_clock)".into(),
            offset_of!(ibv_device_attr_ex, hca_core_clock),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, device_cap_flags_ex)".into(),
            offset_of!(ibv_device_attr_ex, device_cap_flags_ex),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, tso_caps)".into(),
            size_of::<ibv_device_attr_ex>(),
        ),
    ]);
    layout!(
        v,
        ibv_port_attr,
        "struct ibv_port_attr",
        [
            state,
            max_mtu,
            active_mtu,
            gid_tbl_len,
            port_cap_flags,
            max_msg_sz,
            bad_pkey_cntr,
            qkey_viol_cntr,
            pkey_tbl_len,
            lid,
            sm_lid,
            lmc,
            max_vl_num,
            sm_sl,
            subnet_timeout,
            init_type_reply,
            active_width,
            active_speed,
            phys_state,
            link_layer,
            flags,
            port_cap_flags2
        ]
    );
    layout!(
        v,
        ibv_gid_entry,
        "struct ibv_gid_entry",
        [gid, gid_index, port_num, gid_type, ndev_ifindex]
    );
    layout!(
        v,
        ibv_context_ops,
        "struct ibv_context_ops",
        [
            _compat_query_device,
            _compat_query_port,
            _compat_alloc_pd,
            _compat_dealloc_pd,
            _compat_reg_mr,
            _compat_rereg_mr,
            _compat_dereg_mr,
            alloc_mw,
            bind_mw,
            dealloc_mw,
            _compat_create_cq,
            poll_cq,
            req_notify_cq,
            _compat_cq_event,
            _compat_resize_cq,
            _compat_destroy_cq,
            _compat_create_srq,
            _compat_modify_srq,
            _compat_query_srq,
            _compat_destroy_srq,
            post_srq_recv,
            _compat_create_qp,
            _compat_query_qp,
            _compat_modify_qp,
            _compat_destroy_qp,
            post_send,
            post_recv,
            _compat_create_ah,
            _compat_destroy_ah,
            _compat_attach_mcast,
            _compat_detach_mcast,
            _compat_async_event
        ]
    );
    layout!(
        v,
        ibv_context,
        "struct ibv_context",
        [
            device,
            ops,
            cmd_fd,
            async_fd,
            num_comp_vectors,
            mutex,
            abi_compat
        ]
    );
    layout!(
        v,
        verbs_context,
        "struct verbs_context",
        [
            query_port,
            advise_mr,
            alloc_null_mr,
            read_counters,
            attach_counters_point_flow,
            create_counters,
            destroy_counters,
            reg_dm_mr,
            alloc_dm,
            free_dm,
            modify_flow_action_esp,
            destroy_flow_action,
            create_flow_action_esp,
            modify_qp_rate_limit,
            alloc_parent_domain,
            dealloc_td,
            alloc_td,
            modify_cq,
            post_srq_ops,
            destroy_rwq_ind_table,
            create_rwq_ind_table,
            destroy_wq,
            modify_wq,
            create_wq,
            query_rt_values,
            create_cq_ex,
            query_device_ex,
            ibv_destroy_flow,
            ABI_placeholder2,
            ibv_create_flow,
            ABI_placeholder1,
            open_qp,
            create_qp_ex,
            get_srq_num,
            create_srq_ex,
            open_xrcd,
            close_xrcd,
            _ABI_placeholder3,
            sz,
            context
        ]
    );
    // `priv` is a Rust keyword.
    v.push((
        "offsetof(struct verbs_context, priv)".into(),
        offset_of!(verbs_context, priv_),
    ));
    layout!(v, ibv_pd, "struct ibv_pd", [context, handle]);
    layout!(
        v,
        ibv_mr,
        "struct ibv_mr",
        [context, pd, addr, length, handle, lkey, rkey]
    );
    layout!(v, ibv_mw, "struct ibv_mw", [context, pd, rkey, handle]);
    v.push((
        "offsetof(struct ibv_mw, type)".into(),
        offset_of!(ibv_mw, type_),
    ));
    layout!(
        v,
        ibv_mw_bind_info,
        "struct ibv_mw_bind_info",
        [mr, addr, length, mw_access_flags]
    );
    layout!(
        v,
        ibv_mw_bind,
        "struct ibv_mw_bind",
        [wr_id, send_flags, bind_info]
    );
    layout!(
        v,
        ibv_comp_channel,
        "struct ibv_comp_channel",
        [context, fd, refcnt]
    );
    layout!(
        v,
        ibv_cq,
        "struct ibv_cq",
        [
            context,
            channel,
            cq_context,
            handle,
            cqe,
            mutex,
            cond,
            comp_events_completed,
            async_events_completed
        ]
    );
    layout!(
        v,
        ibv_srq_attr,
        "struct ibv_srq_attr",
        [max_wr, max_sge, srq_limit]
    );
    layout!(
        v,
        ibv_srq_init_attr,
        "struct ibv_srq_init_attr",
        [srq_context, attr]
    );
    layout!(
        v,
        ibv_srq,
        "struct ibv_srq",
        [
            context,
            srq_context,
            pd,
            handle,
            mutex,
            cond,
            events_completed
        ]
    );
    layout!(
        v,
        ibv_qp_cap,
        "struct ibv_qp_cap",
        [
            max_send_wr,
            max_recv_wr,
            max_send_sge,
            max_recv_sge,
            max_inline_data
        ]
    );
    layout!(
        v,
        ibv_qp_init_attr,
        "struct ibv_qp_init_attr",
        [qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all]
    );
    layout!(
        v,
        ibv_qp,
        "struct ibv_qp",
        [
            context,
            qp_context,
            pd,
            send_cq,
            recv_cq,
            srq,
            handle,
            qp_num,
            state,
            qp_type,
            mutex,
            cond,
            events_completed
        ]
    );
    layout!(
        v,
        ibv_global_route,
        "struct ibv_global_route",
        [dgid, flow_label, sgid_index, hop_limit, traffic_class]
    );
    layout!(
        v,
        ibv_ah_attr,
        "struct ibv_ah_attr",
        [
            grh,
            dlid,
            sl,
            src_path_bits,
            static_rate,
            is_global,
            port_num
        ]
    );
    layout!(
        v,
        ibv_qp_attr,
        "struct ibv_qp_attr",
        [
            qp_state,
            cur_qp_state,
            path_mtu,
            path_mig_state,
            qkey,
            rq_psn,
            sq_psn,
            dest_qp_num,
            qp_access_flags,
            cap,
            ah_attr,
            alt_ah_attr,
            pkey_index,
            alt_pkey_index,
            en_sqd_async_notify,
            sq_draining,
            max_rd_atomic,
            max_dest_rd_atomic,
            min_rnr_timer,
            port_num,
            timeout,
            retry_cnt,
            rnr_retry,
            alt_port_num,
            alt_timeout,
            rate_limit
        ]
    );
    layout!(v, ibv_ah, "struct ibv_ah", [context, pd, handle]);
    layout!(v, ibv_sge, "struct ibv_sge", [addr, length, lkey]);
    layout!(
        v,
        ibv_send_wr,
        "struct ibv_send_wr",
        [
            wr_id,
            next,
            sg_list,
            num_sge,
            opcode,
            send_flags,
            imm_data,
            wr.rdma.remote_addr,
            wr.rdma.rkey,
            wr.atomic.remote_addr,
            wr.atomic.compare_add,
            wr.atomic.swap,
            wr.atomic.rkey,
            wr.ud.ah,
            wr.ud.remote_qpn,
            wr.ud.remote_qkey,
            qp_type,
            bind_mw,
            bind_mw.mw,
            bind_mw.rkey,
            bind_mw.bind_info
        ]
    );
    v.push((
        "offsetof(struct ibv_send_wr, invalidate_rkey)".into(),
        offset_of!(ibv_send_wr, imm_data),
    ));
    v.push((
        "sizeof(((struct ibv_send_wr *)0)->wr)".into(),
        size_of::<ibv_send_wr_wr>(),
    ));
    layout!(
        v,
        ibv_recv_wr,
        "struct ibv_recv_wr",
        [wr_id, next, sg_list, num_sge]
    );
    layout!(
        v,
        ibv_wc,
        "struct ibv_wc",
        [
            wr_id,
            status,
            opcode,
            vendor_err,
            byte_len,
            imm_data,
            qp_num,
            src_qp,
            wc_flags,
            pkey_index,
            slid,
            sl,
            dlid_path_bits
        ]
    );
    v.push((
        "offsetof(struct ibv_wc, invalidated_rkey)".into(),
        offset_of!(ibv_wc, imm_data),
    ));
    layout!(
        v,
        ibv_async_event,
        "struct ibv_async_event",
        [element, event_type]
    );
    layout!(
        v,
        ibv_grh,
        "struct ibv_grh",
        [version_tclass_flow, paylen, next_hdr, hop_limit, sgid, dgid]
    );
    ext::checks(&mut v);
    v
}

/// The enum values the library uses, against the header's.
fn constants() -> Vec<Check> {
    let c = |name: &str, v: i64| (name.to_owned(), v as usize);
    [
        c("IBV_NODE_CA", NODE_CA.into()),
        c("IBV_TRANSPORT_IB", TRANSPORT_IB.into()),
        c("IBV_QPT_RC", QPT_RC.into()),
        c("IBV_QPT_UC", QPT_UC.into()),
        c("IBV_QPT_UD", QPT_UD.into()),
        c("IBV_QPT_XRC_SEND", QPT_XRC_SEND.into()),
        c("IBV_QPT_XRC_RECV", QPT_XRC_RECV.into()),
        c("IBV_SRQT_BASIC", SRQT_BASIC.into()),
        c("IBV_SRQT_XRC", SRQT_XRC.into()),
        c("IBV_SRQ_INIT_ATTR_TYPE", SRQ_INIT_ATTR_TYPE.into()),
        c("IBV_SRQ_INIT_ATTR_PD", SRQ_INIT_ATTR_PD.into()),
        c("IBV_SRQ_INIT_ATTR_XRCD", SRQ_INIT_ATTR_XRCD.into()),
        c("IBV_SRQ_INIT_ATTR_CQ", SRQ_INIT_ATTR_CQ.into()),
        c("IBV_XRCD_INIT_ATTR_FD", XRCD_INIT_ATTR_FD.into()),
        c("IBV_XRCD_INIT_ATTR_OFLAGS", XRCD_INIT_ATTR_OFLAGS.into()),
        c("IBV_QPS_ERR", QPS_ERR.into()),
        c("IBV_QPS_SQE", QPS_SQE.into()),
        c("IBV_QP_DEST_QPN", QP_DEST_QPN.into()),
        c("IBV_QP_CAP", QP_CAP.into()),
        c("IBV_QP_MAX_DEST_RD_ATOMIC", QP_MAX_DEST_RD_ATOMIC.into()),
        c("IBV_QP_MIN_RNR_TIMER", QP_MIN_RNR_TIMER.into()),
        c("IBV_ACCESS_OPTIONAL_RANGE", ACCESS_OPTIONAL_RANGE.into()),
        c("IBV_ACCESS_HUGETLB", ACCESS_HUGETLB.into()),
        c("IBV_WR_SEND_WITH_INV", WR_SEND_WITH_INV.into()),
        c(
            "IBV_WR_ATOMIC_FETCH_AND_ADD",
            WR_ATOMIC_FETCH_AND_ADD.into(),
        ),
        c("IBV_SEND_INLINE", SEND_INLINE.into()),
        c("IBV_WC_RECV_RDMA_WITH_IMM", WC_RECV_RDMA_WITH_IMM.into()),
        c("IBV_WC_FETCH_ADD", WC_FETCH_ADD.into()),
        c("IBV_WC_WITH_INV", WC_WITH_INV.into()),
        c(
            "IBV_EVENT_SRQ_LIMIT_REACHED",
            EVENT_SRQ_LIMIT_REACHED.into(),
        ),
        c(
            "IBV_EVENT_QP_LAST_WQE_REACHED",
            EVENT_QP_LAST_WQE_REACHED.into(),
        ),
        c("IBV_GID_TYPE_ROCE_V2", GID_TYPE_ROCE_V2.into()),
        c("IBV_SRQ_LIMIT", SRQ_LIMIT.into()),
        // The extended verbs.
        c("IBV_WC_STANDARD_FLAGS", WC_STANDARD_FLAGS as i64),
        c("IBV_WC_EX_WITH_BYTE_LEN", WC_EX_WITH_BYTE_LEN as i64),
        c(
            "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP",
            WC_EX_WITH_COMPLETION_TIMESTAMP as i64,
        ),
        c(
            "IBV_CQ_INIT_ATTR_MASK_FLAGS",
            CQ_INIT_ATTR_MASK_FLAGS.into(),
        ),
        c("IBV_CQ_INIT_ATTR_MASK_PD", CQ_INIT_ATTR_MASK_PD.into()),
        c(
            "IBV_CREATE_CQ_ATTR_SINGLE_THREADED",
            CREATE_CQ_ATTR_SINGLE_THREADED.into(),
        ),
        c("IBV_QP_INIT_ATTR_PD", QP_INIT_ATTR_PD.into()),
        c("IBV_QP_INIT_ATTR_XRCD", QP_INIT_ATTR_XRCD.into()),
        c(
            "IBV_QP_INIT_ATTR_CREATE_FLAGS",
            QP_INIT_ATTR_CREATE_FLAGS.into(),
        ),
        c(
            "IBV_QP_INIT_ATTR_SEND_OPS_FLAGS",
            QP_INIT_ATTR_SEND_OPS_FLAGS.into(),
        ),
        c(
            "IBV_QP_CREATE_BLOCK_SELF_MCAST_LB",
            QP_CREATE_BLOCK_SELF_MCAST_LB.into(),
        ),
        c("IBV_QP_EX_WITH_RDMA_WRITE", QP_EX_WITH_RDMA_WRITE as i64),
        c(
            "IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM",
            QP_EX_WITH_RDMA_WRITE_WITH_IMM as i64,
        ),
        c("IBV_QP_EX_WITH_SEND", QP_EX_WITH_SEND as i64),
        c(
            "IBV_QP_EX_WITH_SEND_WITH_IMM",
            QP_EX_WITH_SEND_WITH_IMM as i64,
        ),
        c("IBV_QP_EX_WITH_RDMA_READ", QP_EX_WITH_RDMA_READ as i64),
        c(
            "IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP",
            QP_EX_WITH_ATOMIC_CMP_AND_SWP as i64,
        ),
        c(
            "IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD",
            QP_EX_WITH_ATOMIC_FETCH_AND_ADD as i64,
        ),
    ]
    .into_iter()
    .chain([(
        "(uintptr_t)__VERBS_ABI_IS_EXTENDED".to_owned(),
        VERBS_ABI_IS_EXTENDED,
    )])
    .collect()
}

#[test]
fn layout_matches_verbs_h() {
    let header = "/usr/include/infiniband/verbs.h";
    assert!(
        std::path::Path::new(header).exists(),
        "{header} is missing: install Debian's libibverbs-dev (scripts/setup-test-deps.sh)"
    );
    let all: Vec<Check> = checks().into_iter().chain(constants()).collect();
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n\
         #include <infiniband/verbs.h>\nint main(void) {\n",
    );
    for (expr, _) in &all {
        writeln!(src, "  printf(\"%zu\\n\", (size_t)({expr}));").unwrap();
    }
    src.push_str("  return 0;\n}\n");
    let dir = std::env::temp_dir().join(format!("ferroce-verbs-layout-{}", std::process::id()));
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
        "layout differs from verbs.h:\n{}",
        wrong.join("\n")
    );
}
