/* What a C program gets from ferroce's libibverbs.so.1 when it misuses the
 * verbs: an errno (or NULL / -1 with errno), never a crash or a hang:
 * NULL and out-of-range arguments, sizes past the device's limits, posts
 * to a QP in RESET, INIT and RTR, modify_qp with transitions, masks and
 * values the kernel's table refuses, destroying objects still in use.
 * Built against rdma-core's <infiniband/verbs.h> and run by bad_use.rs;
 * prints one line per check and exits 1 at the first that fails. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "check.h"

/* The process's thread count, from /proc/self/status. */
static int threads(void)
{
	char line[256];
	int n = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n == 1, "one device");
	if (!list || n < 1)
		return 1;
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx != NULL, "open");
	if (!ctx)
		return 1;

	errno = 0;
	CHECK(ibv_alloc_pd(NULL) == NULL && errno == EINVAL, "alloc_pd(NULL): EINVAL");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd != NULL, "alloc_pd");

	static char buf[8192];
	errno = 0;
	CHECK(ibv_reg_mr(NULL, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL,
	      "reg_mr(NULL pd): EINVAL");
	errno = 0;
	CHECK(ibv_reg_mr(pd, NULL, sizeof buf, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL,
	      "reg_mr(NULL addr): EINVAL");
	errno = 0;
	CHECK(ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_ON_DEMAND) == NULL && errno == EOPNOTSUPP,
	      "reg_mr(ON_DEMAND): EOPNOTSUPP");
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr && mr->addr == buf && mr->length == sizeof buf, "reg_mr on the caller's buffer");
	CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd with an MR: EBUSY");

	errno = 0;
	CHECK(ibv_create_cq(ctx, 0, NULL, NULL, 0) == NULL && errno == EINVAL, "create_cq(0): EINVAL");
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq != NULL, "create_cq");
	CHECK(ibv_req_notify_cq(cq, 0) == 0, "req_notify_cq without a channel: accepted, as rdma-core");

	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_device_attr dev;
	CHECK(ibv_query_device(ctx, &dev) == 0 && dev.max_qp_wr > 0, "query_device");
	init.cap.max_send_wr = dev.max_qp_wr + 1;
	errno = 0;
	CHECK(ibv_create_qp(pd, &init) == NULL && errno == EINVAL, "create_qp, max_send_wr past max_qp_wr: EINVAL");
	init.cap.max_send_wr = 4;
	init.cap.max_recv_wr = dev.max_qp_wr + 1;
	errno = 0;
	CHECK(ibv_create_qp(pd, &init) == NULL && errno == EINVAL, "create_qp, max_recv_wr past max_qp_wr: EINVAL");
	init.cap.max_recv_wr = 4;
	init.cap.max_inline_data = 1 << 20;
	errno = 0;
	CHECK(ibv_create_qp(pd, &init) == NULL && errno == EINVAL, "create_qp, max_inline_data 1 MiB: EINVAL");
	init.cap.max_inline_data = 0;
	init.qp_type = IBV_QPT_RAW_PACKET;
	errno = 0;
	CHECK(ibv_create_qp(pd, &init) == NULL && errno == EOPNOTSUPP, "create_qp, RAW_PACKET: EOPNOTSUPP");
	init.qp_type = IBV_QPT_XRC_RECV;
	errno = 0;
	CHECK(ibv_create_qp(pd, &init) == NULL && errno == EOPNOTSUPP,
	      "create_qp, XRC_RECV without an XRC domain (ibv_create_qp_ex's): EOPNOTSUPP");
	init.qp_type = IBV_QPT_XRC_SEND;
	struct ibv_qp *ini = ibv_create_qp(pd, &init);
	CHECK(ini && ini->qp_type == IBV_QPT_XRC_SEND && init.cap.max_recv_wr == 0,
	      "create_qp, XRC_SEND: an initiator with no receive queue");
	struct ibv_recv_wr xrc_rwr = { .wr_id = 1 }, *xrc_bad;
	CHECK(ini && ibv_post_recv(ini, &xrc_rwr, &xrc_bad) == EINVAL, "post_recv on an XRC initiator: EINVAL");
	CHECK(ini && ibv_destroy_qp(ini) == 0, "destroy an XRC initiator");
	init.qp_type = IBV_QPT_RC;
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	CHECK(qp && qp->state == IBV_QPS_RESET, "create_qp: RESET");
	CHECK(ibv_destroy_cq(cq) == EBUSY, "destroy_cq with a QP: EBUSY");

	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad = NULL;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr, "post_send in RESET: EINVAL, bad_wr");
	wr.opcode = 42;
	bad = NULL;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr, "post_send, unknown opcode: EINVAL");

	struct ibv_sge rsge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 8, .sg_list = &rsge, .num_sge = 1 }, *rbad = NULL;
	CHECK(ibv_post_recv(qp, &rwr, &rbad) == EINVAL && rbad == &rwr,
	      "post_recv in RESET: EINVAL, bad_wr (IBA; rxe's provider queues it)");
	wr.opcode = IBV_WR_SEND;

	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_RTS };
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE) == EINVAL, "modify_qp RESET -> RTS: EINVAL");
	attr.qp_state = IBV_QPS_ERR;
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE) == EINVAL, "modify_qp RESET -> ERR: EINVAL");
	attr.qp_state = 99;
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE) == EINVAL, "modify_qp to state 99: EINVAL");
	attr = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1, .sq_psn = 5 };
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS | IBV_QP_SQ_PSN) == EINVAL,
	      "modify_qp RESET -> INIT with SQ_PSN (not allowed there): EINVAL");
	attr.port_num = 2;
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS) == EINVAL,
	      "modify_qp RESET -> INIT on port 2: EINVAL");
	attr.port_num = 1;
	attr.pkey_index = 3;
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS) == EINVAL,
	      "modify_qp RESET -> INIT with P_Key index 3: EINVAL");
	CHECK(qp->state == IBV_QPS_RESET, "still in RESET after the refusals");
	attr = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS };
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS) == 0 && qp->state == IBV_QPS_INIT,
	      "modify_qp RESET -> INIT");
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_ALT_PATH) == EOPNOTSUPP, "alternate path: EOPNOTSUPP");
	struct ibv_qp_attr got;
	struct ibv_qp_init_attr got_init;
	CHECK(ibv_query_qp(qp, &got, IBV_QP_STATE, &got_init) == 0 && got.qp_state == IBV_QPS_INIT &&
	      got.qp_access_flags == IBV_ACCESS_REMOTE_WRITE && got_init.cap.max_send_wr == 4,
	      "query_qp");
	bad = NULL;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr, "post_send in INIT: EINVAL, bad_wr");
	attr = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024 };
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PATH_MTU) == EINVAL,
	      "modify_qp INIT -> RTR without AV, DEST_QPN, RQ_PSN: EINVAL");
	union ibv_gid own;
	ibv_query_gid(ctx, 1, 0, &own);
	attr = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .path_mtu = 9, .dest_qp_num = 0x99,
				     .rq_psn = 1, .max_dest_rd_atomic = 1, .min_rnr_timer = 1 };
	attr.ah_attr.is_global = 1;
	attr.ah_attr.grh.dgid = own;
	attr.ah_attr.port_num = 1;
	int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	CHECK(ibv_modify_qp(qp, &attr, rtr) == EINVAL, "modify_qp INIT -> RTR with path MTU 9: EINVAL");
	attr.path_mtu = IBV_MTU_1024;
	CHECK(ibv_modify_qp(qp, &attr, rtr) == 0 && qp->state == IBV_QPS_RTR, "modify_qp INIT -> RTR");
	bad = NULL;
	CHECK(ibv_post_send(qp, &wr, &bad) == EINVAL && bad == &wr, "post_send in RTR: EINVAL, bad_wr");

	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0 && gid.global.interface_id == 0, "gid 1: empty");
	CHECK(ibv_query_gid(ctx, 1, 100000, &gid) == -1, "gid past the table: -1");
	CHECK(ibv_query_gid(ctx, 2, 0, &gid) == -1, "port 2: -1");
	struct ibv_port_attr port;
	CHECK(ibv_query_port(ctx, 1, &port) == 0 && port.state == IBV_PORT_ACTIVE &&
	      port.link_layer == IBV_LINK_LAYER_ETHERNET, "query_port");

	errno = 0;
	CHECK(ibv_alloc_mw(pd, 3) == NULL && errno == EINVAL, "alloc_mw of no such type: EINVAL");
	struct ibv_td_init_attr td = { 0 };
	errno = 0;
	CHECK(ibv_alloc_td(ctx, &td) == NULL && errno == EOPNOTSUPP, "alloc_td: EOPNOTSUPP");
	CHECK(strcmp(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error") == 0,
	      "wc_status_str");
	CHECK(strcmp(ibv_wc_status_str(1000), "unknown") == 0, "wc_status_str out of range");
	CHECK(ibv_fork_init() == 0, "fork_init");

	CHECK(ibv_destroy_qp(qp) == 0, "destroy_qp");
	CHECK(ibv_destroy_cq(cq) == 0, "destroy_cq");
	CHECK(ibv_dereg_mr(mr) == 0, "dereg_mr");
	CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd");
	CHECK(threads() > 1, "a driver thread while the device is open");
	CHECK(ibv_close_device(ctx) == 0, "close_device");
	CHECK(threads() == 1, "no thread of ferroce's after the last close");
	ibv_free_device_list(list);
	return failed;
}
