//! The extended verbs' part of the C layout test (`src/abi/ext.rs`:
//! `ibv_cq_ex`, `ibv_qp_ex`, their init attributes and the `verbs_context`
//! slots they are reached through), checked as the parent module checks the
//! rest.

use std::mem::{offset_of, size_of};

use super::Check;
use crate::abi::*;

/// The extended verbs' structs (`src/abi/ext.rs`).
pub(super) fn checks(v: &mut Vec<Check>) {
    layout!(v, ibv_poll_cq_attr, "struct ibv_poll_cq_attr", [comp_mask]);
    layout!(
        v,
        ibv_cq_ex,
        "struct ibv_cq_ex",
        [
            context,
            channel,
            cq_context,
            handle,
            cqe,
            mutex,
            cond,
            comp_events_completed,
            async_events_completed,
            comp_mask,
            status,
            wr_id,
            start_poll,
            next_poll,
            end_poll,
            read_opcode,
            read_vendor_err,
            read_byte_len,
            read_imm_data,
            read_qp_num,
            read_src_qp,
            read_wc_flags,
            read_slid,
            read_sl,
            read_dlid_path_bits,
            read_completion_ts,
            read_cvlan,
            read_flow_tag,
            read_tm_info,
            read_completion_wallclock_ns
        ]
    );
    layout!(
        v,
        ibv_cq_init_attr_ex,
        "struct ibv_cq_init_attr_ex",
        [
            cqe,
            cq_context,
            channel,
            comp_vector,
            wc_flags,
            comp_mask,
            flags,
            parent_domain
        ]
    );
    layout!(
        v,
        ibv_rx_hash_conf,
        "struct ibv_rx_hash_conf",
        [
            rx_hash_function,
            rx_hash_key_len,
            rx_hash_key,
            rx_hash_fields_mask
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
    layout!(v, ibv_data_buf, "struct ibv_data_buf", [addr, length]);
    layout!(
        v,
        ibv_xrcd_init_attr,
        "struct ibv_xrcd_init_attr",
        [comp_mask, fd, oflags]
    );
    layout!(v, ibv_xrcd, "struct ibv_xrcd", [context]);
    layout!(v, ibv_tm_cap, "struct ibv_tm_cap", [max_num_tags, max_ops]);
    layout!(
        v,
        ibv_srq_init_attr_ex,
        "struct ibv_srq_init_attr_ex",
        [srq_context, attr, comp_mask, srq_type, pd, xrcd, cq, tm_cap]
    );
    layout!(
        v,
        ibv_qp_ex,
        "struct ibv_qp_ex",
        [
            qp_base,
            comp_mask,
            wr_id,
            wr_flags,
            wr_atomic_cmp_swp,
            wr_atomic_fetch_add,
            wr_bind_mw,
            wr_local_inv,
            wr_rdma_read,
            wr_rdma_write,
            wr_rdma_write_imm,
            wr_send,
            wr_send_imm,
            wr_send_inv,
            wr_send_tso,
            wr_set_ud_addr,
            wr_set_xrc_srqn,
            wr_set_inline_data,
            wr_set_inline_data_list,
            wr_set_sge,
            wr_set_sge_list,
            wr_start,
            wr_complete,
            wr_abort,
            wr_atomic_write
        ]
    );
    v.extend([
        (
            "offsetof(struct verbs_context, create_cq_ex)".into(),
            offset_of!(verbs_context, create_cq_ex),
        ),
        (
            "offsetof(struct verbs_context, create_qp_ex)".into(),
            offset_of!(verbs_context, create_qp_ex),
        ),
    ]);
}
