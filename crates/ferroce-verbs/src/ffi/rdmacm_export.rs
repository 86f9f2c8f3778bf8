// rdma_cm's entry points under private names, for `librdmacm.so.1`
// (crate `ferroce-rdmacm`), whose public names (`rdma_create_id@@RDMACM_1.0`,
// ...) jump here. Included by `export.rs`; the node is defined in
// `libibverbs.map`. `crates/ferroce-rdmacm/tests/symbols.rs` checks that
// every target of its `symbols.txt` is exported here.
export! {
    ferroce_rdma_create_event_channel = rdmacm::ferroce_rdma_create_event_channel, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_destroy_event_channel = rdmacm::ferroce_rdma_destroy_event_channel, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_create_id = rdmacm::ferroce_rdma_create_id, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_destroy_id = rdmacm::ferroce_rdma_destroy_id, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_get_cm_event = rdmacm_event::ferroce_rdma_get_cm_event, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_ack_cm_event = rdmacm_event::ferroce_rdma_ack_cm_event, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_event_str = rdmacm_event::ferroce_rdma_event_str, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_get_devices = rdmacm::ferroce_rdma_get_devices, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_free_devices = rdmacm::ferroce_rdma_free_devices, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_bind_addr = rdmacm_conn::ferroce_rdma_bind_addr, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_resolve_addr = rdmacm_conn::ferroce_rdma_resolve_addr, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_resolve_route = rdmacm_conn::ferroce_rdma_resolve_route, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_connect = rdmacm_conn::ferroce_rdma_connect, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_listen = rdmacm_conn::ferroce_rdma_listen, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_get_request = rdmacm_conn::ferroce_rdma_get_request, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_accept = rdmacm_conn::ferroce_rdma_accept, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_reject = rdmacm_conn::ferroce_rdma_reject, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_establish = rdmacm_conn::ferroce_rdma_establish, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_disconnect = rdmacm_conn::ferroce_rdma_disconnect, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_notify = rdmacm_conn::ferroce_rdma_notify, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_set_option = rdmacm_conn::ferroce_rdma_set_option, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_migrate_id = rdmacm_conn::ferroce_rdma_migrate_id, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_init_qp_attr = rdmacm_conn::ferroce_rdma_init_qp_attr, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_get_src_port = rdmacm_conn::ferroce_rdma_get_src_port, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_get_dst_port = rdmacm_conn::ferroce_rdma_get_dst_port, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_create_qp = rdmacm_qp::ferroce_rdma_create_qp, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_create_qp_ex = rdmacm_qp::ferroce_rdma_create_qp_ex, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_destroy_qp = rdmacm_qp::ferroce_rdma_destroy_qp, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_create_ep = rdmacm_qp::ferroce_rdma_create_ep, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_destroy_ep = rdmacm_qp::ferroce_rdma_destroy_ep, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_getaddrinfo = rdmacm_addr::ferroce_rdma_getaddrinfo, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_freeaddrinfo = rdmacm_addr::ferroce_rdma_freeaddrinfo, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_join_multicast = rdmacm_mcast::ferroce_rdma_join_multicast, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_join_multicast_ex = rdmacm_mcast::ferroce_rdma_join_multicast_ex, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_leave_multicast = rdmacm_mcast::ferroce_rdma_leave_multicast, "FERROCE_RDMACM_PRIVATE";
    ferroce_rdma_not_supported = rdmacm_stubs::not_supported, "FERROCE_RDMACM_PRIVATE";
    ferroce_rsocket = rsocket::rsocket, "FERROCE_RDMACM_PRIVATE";
    ferroce_rbind = rsocket::rbind, "FERROCE_RDMACM_PRIVATE";
    ferroce_rlisten = rsocket_listen::rlisten, "FERROCE_RDMACM_PRIVATE";
    ferroce_raccept = rsocket_listen::raccept, "FERROCE_RDMACM_PRIVATE";
    ferroce_rconnect = rsocket::rconnect, "FERROCE_RDMACM_PRIVATE";
    ferroce_rshutdown = rsocket::rshutdown, "FERROCE_RDMACM_PRIVATE";
    ferroce_rclose = rsocket::rclose, "FERROCE_RDMACM_PRIVATE";
    ferroce_rgetpeername = rsocket::rgetpeername, "FERROCE_RDMACM_PRIVATE";
    ferroce_rgetsockname = rsocket::rgetsockname, "FERROCE_RDMACM_PRIVATE";
    ferroce_rrecv = rsocket_io::rrecv, "FERROCE_RDMACM_PRIVATE";
    ferroce_rrecvfrom = rsocket_io::rrecvfrom, "FERROCE_RDMACM_PRIVATE";
    ferroce_rrecvmsg = rsocket_io::rrecvmsg, "FERROCE_RDMACM_PRIVATE";
    ferroce_rsend = rsocket_io::rsend, "FERROCE_RDMACM_PRIVATE";
    ferroce_rsendto = rsocket_io::rsendto, "FERROCE_RDMACM_PRIVATE";
    ferroce_rsendmsg = rsocket_io::rsendmsg, "FERROCE_RDMACM_PRIVATE";
    ferroce_rread = rsocket_io::rread, "FERROCE_RDMACM_PRIVATE";
    ferroce_rreadv = rsocket_io::rreadv, "FERROCE_RDMACM_PRIVATE";
    ferroce_rwrite = rsocket_io::rwrite, "FERROCE_RDMACM_PRIVATE";
    ferroce_rwritev = rsocket_io::rwritev, "FERROCE_RDMACM_PRIVATE";
    ferroce_riomap = rsocket_io::riomap, "FERROCE_RDMACM_PRIVATE";
    ferroce_riounmap = rsocket_io::riounmap, "FERROCE_RDMACM_PRIVATE";
    ferroce_riowrite = rsocket_io::riowrite, "FERROCE_RDMACM_PRIVATE";
    ferroce_rpoll = rsocket_poll::rpoll, "FERROCE_RDMACM_PRIVATE";
    ferroce_rselect = rsocket_poll::rselect, "FERROCE_RDMACM_PRIVATE";
    ferroce_rsetsockopt = rsocket_poll::rsetsockopt, "FERROCE_RDMACM_PRIVATE";
    ferroce_rgetsockopt = rsocket_poll::rgetsockopt, "FERROCE_RDMACM_PRIVATE";
    ferroce_rfcntl = rsocket_poll::rfcntl, "FERROCE_RDMACM_PRIVATE";
}
