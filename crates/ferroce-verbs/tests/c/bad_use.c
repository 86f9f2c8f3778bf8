/* What a C program gets from ferroce's libibverbs.so.1 when it misuses the
 * verbs: an errno (or NULL / -1 with errno), never a crash or a hang.
 * Built against rdma-core's <infiniband/verbs.h> and run by bad_use.rs;
 * prints one line per check and exits 1 at the first that fails. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static int failed;

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

#define CHECK(cond, what)                                                   \
	do {                                                                \
		if (cond) {                                                 \
			printf("ok   %s\n", what);                          \
		} else {                                                    \
			printf("FAIL %s (errno %d)\n", what, errno);        \
			failed = 1;                                         \
		}                                                           \
	} while (0)

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

	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_RTS };
	CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE) != 0, "modify_qp RESET -> RTS refused");
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

	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0 && gid.global.interface_id == 0, "gid 1: empty");
	CHECK(ibv_query_gid(ctx, 1, 100000, &gid) == -1, "gid past the table: -1");
	CHECK(ibv_query_gid(ctx, 2, 0, &gid) == -1, "port 2: -1");
	struct ibv_port_attr port;
	CHECK(ibv_query_port(ctx, 1, &port) == 0 && port.state == IBV_PORT_ACTIVE &&
	      port.link_layer == IBV_LINK_LAYER_ETHERNET, "query_port");

	errno = 0;
	CHECK(ibv_alloc_mw(pd, IBV_MW_TYPE_1) == NULL && errno == EOPNOTSUPP, "alloc_mw: EOPNOTSUPP");
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
