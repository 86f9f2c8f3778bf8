/* Two ibv_contexts of one device in one process, as UCX opens them: each
 * context's async_fd and ibv_get_async_event carry the events of its own
 * objects only, and an O_NONBLOCK set on one descriptor leaves the other
 * blocking. A QP of context A fails (a WRITE with an lkey of another PD:
 * LOC_PROT_ERR, the QP in ERR, QP_FATAL); B, asked first, must not take
 * that event, and A must get it. Plain C against rdma-core's header. */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <infiniband/verbs.h>
#include "check.h"

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 1, "a device");
	if (!list || n < 1)
		return 1;
	struct ibv_context *a = ibv_open_device(list[0]), *b = ibv_open_device(list[0]);
	CHECK(a && b && a->async_fd != b->async_fd, "two contexts, two async_fds");
	if (!a || !b)
		return 1;

	/* O_NONBLOCK is each descriptor's own. */
	int fa = fcntl(a->async_fd, F_GETFL), fb = fcntl(b->async_fd, F_GETFL);
	CHECK(!(fa & O_NONBLOCK) && !(fb & O_NONBLOCK), "both start blocking");
	fcntl(b->async_fd, F_SETFL, fb | O_NONBLOCK);
	CHECK(!(fcntl(a->async_fd, F_GETFL) & O_NONBLOCK), "O_NONBLOCK on B's leaves A's blocking");
	struct ibv_context *c = ibv_open_device(list[0]);
	CHECK(c && (fcntl(b->async_fd, F_GETFL) & O_NONBLOCK),
	      "opening a third context leaves B's O_NONBLOCK set");
	fcntl(a->async_fd, F_SETFL, fa | O_NONBLOCK);

	/* A QP of A goes to ERR by a bad lkey: QP_FATAL, A's. */
	struct ibv_pd *pd = ibv_alloc_pd(a), *other = ibv_alloc_pd(a);
	struct ibv_cq *cq = ibv_create_cq(a, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr init = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					 .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						  .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = pd && cq ? ibv_create_qp(pd, &init) : NULL;
	char *buf = aligned_alloc(4096, 4096);
	struct ibv_mr *mr = other ? ibv_reg_mr(other, buf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct rc_path p = { .access = IBV_ACCESS_REMOTE_WRITE, .mtu = IBV_MTU_1024, .timeout = 14,
			     .sgid_index = 0 };
	CHECK(qp && mr && ibv_query_gid(a, 1, 0, &p.gid) == 0, "A's PD, CQ, QP and a region of another PD");
	p.dest = qp ? qp->qp_num : 0;
	CHECK(qp && rc_connect(qp, &p) == 0, "A's QP at RTS (to itself)");
	struct ibv_sge s = { (uintptr_t)buf, 8, mr ? mr->lkey : 0 };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { (uintptr_t)buf, 0 } };
	struct ibv_wc wc;
	CHECK(qp && post_one(qp, &wr) == 0 && wait_one_ms(cq, &wc, 2000) == 1 &&
	      wc.status == IBV_WC_LOC_PROT_ERR,
	      "A's WRITE with another PD's lkey: LOC_PROT_ERR");

	/* A's descriptor turns readable; B's call takes nothing of A's. */
	struct pollfd pa = { .fd = a->async_fd, .events = POLLIN };
	CHECK(poll(&pa, 1, 2000) == 1, "A's async_fd readable");
	struct ibv_async_event ev;
	errno = 0;
	CHECK(ibv_get_async_event(b, &ev) == -1 && errno == EAGAIN, "B: EAGAIN, A's event is not B's");
	struct pollfd pb = { .fd = b->async_fd, .events = POLLIN };
	CHECK(poll(&pb, 1, 0) == 0, "B's async_fd not readable");
	CHECK(poll(&pa, 1, 0) == 1, "A's async_fd still readable");
	CHECK(ibv_get_async_event(a, &ev) == 0 && ev.event_type == IBV_EVENT_QP_FATAL &&
	      ev.element.qp == qp, "A: QP_FATAL naming A's QP");
	ibv_ack_async_event(&ev);
	errno = 0;
	CHECK(ibv_get_async_event(a, &ev) == -1 && errno == EAGAIN && poll(&pa, 1, 0) == 0,
	      "A drained: EAGAIN, not readable");

	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_dealloc_pd(other);
	CHECK(ibv_close_device(c) == 0 && ibv_close_device(b) == 0 && ibv_close_device(a) == 0,
	      "the three contexts close");
	ibv_free_device_list(list);
	free(buf);
	return failed;
}
