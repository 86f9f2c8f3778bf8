//! The exported symbols and their versions. Each C name is bound with
//! `.symver` to the rdma-core 44 version node the Debian binaries import
//! it from (`objdump -T /usr/bin/ibv_rc_pingpong | grep IBVERBS`), e.g.
//! `ibv_reg_mr@@IBVERBS_1.1`. rustc's own export list (an anonymous
//! version) cannot carry versions, so the functions themselves are not
//! `#[no_mangle]`: an assembler stub names each, and the version script
//! (`libibverbs.map`) defines the nodes.

use super::{
    compat, cq, device, events, memory, misc, path_rec, private, qp, qp_ex, rates, rdmacm,
    rdmacm_addr, rdmacm_conn, rdmacm_event, rdmacm_mcast, rdmacm_qp, rdmacm_stubs, rsocket,
    rsocket_io, rsocket_listen, rsocket_poll, srq_ah, unsupported,
};

/// The tail jump from the versioned name to the Rust function.
#[cfg(target_arch = "x86_64")]
macro_rules! jump {
    () => {
        "jmp {f}"
    };
}
#[cfg(target_arch = "aarch64")]
macro_rules! jump {
    () => {
        "b {f}"
    };
}

// A `.symver` default version (`@@`) must name a symbol defined in the same
// object, and the Rust function may sit in another codegen unit: each name
// is a one-instruction stub that jumps to it.
macro_rules! export {
    ($($name:ident = $f:path, $ver:literal;)*) => {$(
        core::arch::global_asm!(
            concat!(".pushsection .text.", stringify!($name), ",\"ax\",@progbits"),
            concat!(".globl ", stringify!($name), "_ferroce"),
            concat!(".type ", stringify!($name), "_ferroce,@function"),
            concat!(stringify!($name), "_ferroce:"),
            jump!(),
            concat!(".size ", stringify!($name), "_ferroce, .-", stringify!($name), "_ferroce"),
            ".popsection",
            concat!(".symver ", stringify!($name), "_ferroce, ", stringify!($name), "@@", $ver),
            f = sym $f,
        );
    )*};
}

export! {
    ibv_create_comp_channel = cq::ibv_create_comp_channel, "IBVERBS_1.0";
    ibv_destroy_comp_channel = cq::ibv_destroy_comp_channel, "IBVERBS_1.0";
    ibv_read_sysfs_file = misc::ibv_read_sysfs_file, "IBVERBS_1.0";
    ibv_get_sysfs_path = misc::ibv_get_sysfs_path, "IBVERBS_1.0";
    ibv_copy_qp_attr_from_kern = misc::ibv_copy_qp_attr_from_kern, "IBVERBS_1.0";
    ibv_rate_to_mult = rates::ibv_rate_to_mult, "IBVERBS_1.0";
    mult_to_ibv_rate = rates::mult_to_ibv_rate, "IBVERBS_1.0";
    ibv_rate_to_mbps = rates::ibv_rate_to_mbps, "IBVERBS_1.1";
    mbps_to_ibv_rate = rates::mbps_to_ibv_rate, "IBVERBS_1.1";
    ibv_copy_path_rec_from_kern = path_rec::ibv_copy_path_rec_from_kern, "IBVERBS_1.0";
    ibv_copy_path_rec_to_kern = path_rec::ibv_copy_path_rec_to_kern, "IBVERBS_1.0";

    ibv_get_device_list = device::ibv_get_device_list, "IBVERBS_1.1";
    ibv_free_device_list = device::ibv_free_device_list, "IBVERBS_1.1";
    ibv_get_device_name = device::ibv_get_device_name, "IBVERBS_1.1";
    ibv_get_device_guid = device::ibv_get_device_guid, "IBVERBS_1.1";
    ibv_open_device = device::ibv_open_device, "IBVERBS_1.1";
    ibv_close_device = device::ibv_close_device, "IBVERBS_1.1";
    ibv_query_device = device::ibv_query_device, "IBVERBS_1.1";
    ibv_query_port = device::ibv_query_port, "IBVERBS_1.1";
    ibv_query_gid = device::ibv_query_gid, "IBVERBS_1.1";
    ibv_query_pkey = device::ibv_query_pkey, "IBVERBS_1.1";
    ibv_alloc_pd = memory::ibv_alloc_pd, "IBVERBS_1.1";
    ibv_dealloc_pd = memory::ibv_dealloc_pd, "IBVERBS_1.1";
    ibv_reg_mr = memory::ibv_reg_mr, "IBVERBS_1.1";
    ibv_dereg_mr = memory::ibv_dereg_mr, "IBVERBS_1.1";
    ibv_rereg_mr = memory::ibv_rereg_mr, "IBVERBS_1.1";
    ibv_create_cq = cq::ibv_create_cq, "IBVERBS_1.1";
    ibv_destroy_cq = cq::ibv_destroy_cq, "IBVERBS_1.1";
    ibv_resize_cq = cq::ibv_resize_cq, "IBVERBS_1.1";
    ibv_get_cq_event = cq::ibv_get_cq_event, "IBVERBS_1.1";
    ibv_ack_cq_events = cq::ibv_ack_cq_events, "IBVERBS_1.1";
    ibv_create_qp = qp::ibv_create_qp, "IBVERBS_1.1";
    ibv_modify_qp = qp::ibv_modify_qp, "IBVERBS_1.1";
    ibv_query_qp = qp::ibv_query_qp, "IBVERBS_1.1";
    ibv_destroy_qp = qp::ibv_destroy_qp, "IBVERBS_1.1";
    ibv_create_srq = srq_ah::ibv_create_srq, "IBVERBS_1.1";
    ibv_modify_srq = srq_ah::ibv_modify_srq, "IBVERBS_1.1";
    ibv_query_srq = srq_ah::ibv_query_srq, "IBVERBS_1.1";
    ibv_destroy_srq = srq_ah::ibv_destroy_srq, "IBVERBS_1.1";
    ibv_create_ah = srq_ah::ibv_create_ah, "IBVERBS_1.1";
    ibv_destroy_ah = srq_ah::ibv_destroy_ah, "IBVERBS_1.1";
    ibv_init_ah_from_wc = srq_ah::ibv_init_ah_from_wc, "IBVERBS_1.1";
    ibv_create_ah_from_wc = srq_ah::ibv_create_ah_from_wc, "IBVERBS_1.1";
    ibv_attach_mcast = misc::ibv_attach_mcast, "IBVERBS_1.1";
    ibv_detach_mcast = misc::ibv_detach_mcast, "IBVERBS_1.1";
    ibv_get_async_event = events::ibv_get_async_event, "IBVERBS_1.1";
    ibv_ack_async_event = events::ibv_ack_async_event, "IBVERBS_1.1";
    ibv_fork_init = misc::ibv_fork_init, "IBVERBS_1.1";
    ibv_dontfork_range = misc::ibv_dontfork_range, "IBVERBS_1.1";
    ibv_dofork_range = misc::ibv_dofork_range, "IBVERBS_1.1";
    ibv_wc_status_str = misc::ibv_wc_status_str, "IBVERBS_1.1";
    ibv_event_type_str = misc::ibv_event_type_str, "IBVERBS_1.1";
    ibv_node_type_str = misc::ibv_node_type_str, "IBVERBS_1.1";
    ibv_port_state_str = misc::ibv_port_state_str, "IBVERBS_1.1";

    ibv_copy_ah_attr_from_kern = misc::ibv_copy_ah_attr_from_kern, "IBVERBS_1.1";

    ibv_get_pkey_index = misc::ibv_get_pkey_index, "IBVERBS_1.5";
    ibv_qp_to_qp_ex = qp_ex::ibv_qp_to_qp_ex, "IBVERBS_1.6";
    ibv_reg_mr_iova = memory::ibv_reg_mr_iova, "IBVERBS_1.7";
    ibv_reg_mr_iova2 = memory::ibv_reg_mr_iova2, "IBVERBS_1.8";
    ibv_get_device_index = device::ibv_get_device_index, "IBVERBS_1.9";
    ibv_import_device = unsupported::ibv_import_device, "IBVERBS_1.10";
    ibv_import_pd = unsupported::ibv_import_pd, "IBVERBS_1.10";
    ibv_import_mr = unsupported::ibv_import_mr, "IBVERBS_1.10";
    ibv_unimport_pd = unsupported::ibv_unimport_pd, "IBVERBS_1.10";
    ibv_unimport_mr = unsupported::ibv_unimport_mr, "IBVERBS_1.10";
    ibv_query_ece = misc::ibv_query_ece, "IBVERBS_1.10";
    ibv_set_ece = misc::ibv_set_ece, "IBVERBS_1.10";
    _ibv_query_gid_ex = device::_ibv_query_gid_ex, "IBVERBS_1.11";
    _ibv_query_gid_table = device::_ibv_query_gid_table, "IBVERBS_1.11";
    ibv_reg_dmabuf_mr = unsupported::ibv_reg_dmabuf_mr, "IBVERBS_1.12";
    ibv_import_dm = unsupported::ibv_import_dm, "IBVERBS_1.13";
    ibv_unimport_dm = unsupported::ibv_unimport_dm, "IBVERBS_1.13";
    ibv_is_fork_initialized = misc::ibv_is_fork_initialized, "IBVERBS_1.13";
    ibv_query_qp_data_in_order = qp::ibv_query_qp_data_in_order, "IBVERBS_1.14";

    ibv_query_gid_type = device::ibv_query_gid_type, "IBVERBS_PRIVATE_34";

    // The provider interface (see private.rs).
    ibv_cmd_advise_mr = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_alloc_dm = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_alloc_mw = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_alloc_pd = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_attach_mcast = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_close_xrcd = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_ah = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_counters = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_cq = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_cq_ex = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_flow = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_flow_action_esp = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_qp = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_qp_ex = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_qp_ex2 = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_rwq_ind_table = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_srq = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_srq_ex = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_create_wq = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_dealloc_mw = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_dealloc_pd = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_dereg_mr = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_destroy_ah = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_destroy_counters = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_destroy_cq = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_destroy_flow = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_destroy_flow_action = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_destroy_qp = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_destroy_rwq_ind_table = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_destroy_srq = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_destroy_wq = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_detach_mcast = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_free_dm = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_get_context = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_modify_cq = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_modify_flow_action_esp = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_modify_qp = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_modify_qp_ex = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_modify_srq = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_modify_wq = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_open_qp = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_open_xrcd = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_poll_cq = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_post_recv = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_post_send = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_post_srq_recv = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_query_context = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_query_device_any = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_query_mr = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_query_port = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_query_qp = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_query_srq = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_read_counters = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_reg_dm_mr = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_reg_dmabuf_mr = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_reg_mr = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_req_notify_cq = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_rereg_mr = private::no_kernel, "IBVERBS_PRIVATE_34";
    ibv_cmd_resize_cq = private::no_kernel, "IBVERBS_PRIVATE_34";
    execute_ioctl = private::no_kernel, "IBVERBS_PRIVATE_34";
    __ioctl_final_num_attrs = private::no_provider, "IBVERBS_PRIVATE_34";
    ibv_read_ibdev_sysfs_file = unsupported::ibv_read_ibdev_sysfs_file, "IBVERBS_PRIVATE_34";
    __verbs_log = private::no_provider, "IBVERBS_PRIVATE_34";
    _verbs_init_and_alloc_context = private::no_provider, "IBVERBS_PRIVATE_34";
    verbs_init_cq = private::no_provider, "IBVERBS_PRIVATE_34";
    verbs_open_device = private::no_provider, "IBVERBS_PRIVATE_34";
    verbs_register_driver_34 = private::no_provider, "IBVERBS_PRIVATE_34";
    verbs_set_ops = private::no_provider, "IBVERBS_PRIVATE_34";
    verbs_uninit_context = private::no_provider, "IBVERBS_PRIVATE_34";
    ibv_resolve_eth_l2_from_gid = private::no_kernel, "IBVERBS_1.1";
}

// The old versions kept for binaries linked against them (`@`, not the
// default `@@`: a new link never picks them), under a second stub name.
macro_rules! export_compat {
    ($($name:ident = $f:path, $ver:literal;)*) => {$(
        core::arch::global_asm!(
            concat!(".pushsection .text.", stringify!($name), "_compat,\"ax\",@progbits"),
            concat!(".globl ", stringify!($name), "_ferroce_compat"),
            concat!(".type ", stringify!($name), "_ferroce_compat,@function"),
            concat!(stringify!($name), "_ferroce_compat:"),
            jump!(),
            concat!(".size ", stringify!($name), "_ferroce_compat, .-", stringify!($name), "_ferroce_compat"),
            ".popsection",
            concat!(".symver ", stringify!($name), "_ferroce_compat, ", stringify!($name), "@", $ver),
            f = sym $f,
        );
    )*};
}

// The libibverbs 1.0 ABI (see compat.rs) and the 1.1 driver registration.
export_compat! {
    ibv_get_device_list = compat::ibv_get_device_list, "IBVERBS_1.0";
    ibv_free_device_list = compat::ibv_free_device_list, "IBVERBS_1.0";
    ibv_get_device_name = compat::ibv_get_device_name, "IBVERBS_1.0";
    ibv_get_device_guid = compat::ibv_get_device_guid, "IBVERBS_1.0";
    ibv_open_device = compat::ibv_open_device, "IBVERBS_1.0";
    ibv_close_device = compat::ibv_close_device, "IBVERBS_1.0";
    ibv_get_async_event = compat::ibv_get_async_event, "IBVERBS_1.0";
    ibv_ack_async_event = compat::ibv_ack_async_event, "IBVERBS_1.0";
    ibv_query_device = compat::ibv_query_device, "IBVERBS_1.0";
    ibv_query_port = compat::ibv_query_port, "IBVERBS_1.0";
    ibv_query_gid = compat::ibv_query_gid, "IBVERBS_1.0";
    ibv_query_pkey = compat::ibv_query_pkey, "IBVERBS_1.0";
    ibv_alloc_pd = compat::ibv_alloc_pd, "IBVERBS_1.0";
    ibv_dealloc_pd = compat::ibv_dealloc_pd, "IBVERBS_1.0";
    ibv_reg_mr = compat::ibv_reg_mr, "IBVERBS_1.0";
    ibv_dereg_mr = compat::ibv_dereg_mr, "IBVERBS_1.0";
    ibv_create_cq = compat::ibv_create_cq, "IBVERBS_1.0";
    ibv_resize_cq = compat::ibv_resize_cq, "IBVERBS_1.0";
    ibv_destroy_cq = compat::ibv_destroy_cq, "IBVERBS_1.0";
    ibv_get_cq_event = compat::ibv_get_cq_event, "IBVERBS_1.0";
    ibv_ack_cq_events = compat::ibv_ack_cq_events, "IBVERBS_1.0";
    ibv_create_srq = compat::ibv_create_srq, "IBVERBS_1.0";
    ibv_modify_srq = compat::ibv_modify_srq, "IBVERBS_1.0";
    ibv_query_srq = compat::ibv_query_srq, "IBVERBS_1.0";
    ibv_destroy_srq = compat::ibv_destroy_srq, "IBVERBS_1.0";
    ibv_create_qp = compat::ibv_create_qp, "IBVERBS_1.0";
    ibv_query_qp = compat::ibv_query_qp, "IBVERBS_1.0";
    ibv_modify_qp = compat::ibv_modify_qp, "IBVERBS_1.0";
    ibv_destroy_qp = compat::ibv_destroy_qp, "IBVERBS_1.0";
    ibv_create_ah = compat::ibv_create_ah, "IBVERBS_1.0";
    ibv_destroy_ah = compat::ibv_destroy_ah, "IBVERBS_1.0";
    ibv_attach_mcast = compat::ibv_attach_mcast, "IBVERBS_1.0";
    ibv_detach_mcast = compat::ibv_detach_mcast, "IBVERBS_1.0";
    ibv_register_driver = unsupported::ibv_register_driver, "IBVERBS_1.1";
}

include!("rdmacm_export.rs");
