/* Two RC QPs of one ferroce device connected to each other, driven through
 * rdma-core's header as any C program would: SEND with immediate data,
 * inline SEND, RDMA WRITE, RDMA READ, FETCH_ADD and CMP_SWAP, each checked
 * in the application's own buffers (registered in place, no copy), and a
 * completion channel whose descriptor poll(2) sees become readable.
 * Run by loopback.rs; prints one line per check, exits 1 if one failed. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "check.h"

enum { LEN = 4096 };

static int wait_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return wait_one_ms(cq, wc, 2000);
}

static int connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid)
{
	struct rc_path p = { .dest = dest, .gid = *gid, .rq_psn = 0x100, .sq_psn = 0x100,
			     .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				       IBV_ACCESS_REMOTE_ATOMIC,
			     .mtu = IBV_MTU_1024, .timeout = 14 };
	return rc_connect(qp, &p);
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	CHECK(ctx != NULL, "open");
	if (!ctx)
		return 1;
	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "gid 0");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	int cookie;
	struct ibv_cq *cq_a = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cq_b = ibv_create_cq(ctx, 64, &cookie, ch, 0);
	CHECK(pd && ch && cq_a && cq_b && ch->fd >= 0, "pd, channel, cqs");

	char *a = aligned_alloc(4096, LEN), *b = aligned_alloc(4096, LEN);
	memset(a, 0, LEN);
	memset(b, 0, LEN);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		  IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_mr *mr_a = ibv_reg_mr(pd, a, LEN, acc), *mr_b = ibv_reg_mr(pd, b, LEN, acc);
	CHECK(mr_a && mr_b, "reg_mr");

	struct ibv_qp_init_attr init = {
		.send_cq = cq_a, .recv_cq = cq_a, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
	};
	struct ibv_qp *qa = ibv_create_qp(pd, &init);
	init.send_cq = init.recv_cq = cq_b;
	struct ibv_qp *qb = ibv_create_qp(pd, &init);
	CHECK(qa && qb && init.cap.max_inline_data >= 64, "create_qp (inline 64)");
	CHECK(connect_qp(qa, qb->qp_num, &gid) == 0 && connect_qp(qb, qa->qp_num, &gid) == 0,
	      "connect A <-> B");

	/* SEND with immediate data, B waiting on its completion channel. */
	struct ibv_sge rsge = { (uintptr_t)b, 64, mr_b->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	CHECK(ibv_post_recv(qb, &rwr, &rbad) == 0, "post_recv");
	CHECK(ibv_req_notify_cq(cq_b, 0) == 0, "req_notify_cq");
	strcpy(a, "hello from A");
	struct ibv_sge sge = { (uintptr_t)a, 13, mr_a->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(0x12345678) };
	CHECK(post_one(qa, &wr) == 0, "post SEND_WITH_IMM");
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 2000) == 1 && (pfd.revents & POLLIN), "poll: channel readable");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == cq_b && ev_ctx == &cookie,
	      "get_cq_event names the CQ and its context");
	ibv_ack_cq_events(cq_b, 1);
	struct ibv_wc wc;
	CHECK(wait_one(cq_b, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      wc.byte_len == 13 && (wc.wc_flags & IBV_WC_WITH_IMM) &&
	      ntohl(wc.imm_data) == 0x12345678 && wc.qp_num == qb->qp_num && wc.wr_id == 1,
	      "receive completion with the immediate");
	CHECK(strcmp(b, "hello from A") == 0, "the bytes landed in B's own buffer");
	CHECK(wait_one(cq_a, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND &&
	      wc.wr_id == 2, "send completion");

	/* ibv_resize_cq (A's CQ holds nothing now) and ibv_query_gid_table. */
	CHECK(ibv_resize_cq(cq_a, 256) == 0 && cq_a->cqe == 256, "resize_cq to 256");
	CHECK(ibv_resize_cq(cq_a, 0) == EINVAL && cq_a->cqe == 256, "resize_cq to 0: EINVAL");
	struct ibv_gid_entry ents[4];
	CHECK(ibv_query_gid_table(ctx, ents, 4, 0) == 1 &&
		      memcmp(ents[0].gid.raw, gid.raw, 16) == 0 && ents[0].gid_index == 0 &&
		      ents[0].port_num == 1 && ents[0].gid_type == IBV_GID_TYPE_ROCE_V2,
	      "query_gid_table: GID 0, RoCE v2");
	CHECK(ibv_query_gid_table(ctx, ents, 0, 0) == -EINVAL, "query_gid_table, no room: -EINVAL");

	/* Inline SEND: the bytes are taken at post, the buffer is free at once. */
	CHECK(ibv_post_recv(qb, &rwr, &rbad) == 0, "post_recv again");
	char stack_msg[32] = "inline bytes";
	struct ibv_sge isge = { (uintptr_t)stack_msg, 13, 0 };
	wr.sg_list = &isge;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	CHECK(post_one(qa, &wr) == 0, "post inline SEND");
	memset(stack_msg, 'x', sizeof stack_msg);
	CHECK(wait_one(cq_b, &wc) == 1 && wc.status == IBV_WC_SUCCESS && strcmp(b, "inline bytes") == 0,
	      "inline SEND received");
	wait_one(cq_a, &wc);

	/* RDMA WRITE into B's buffer at B's own address. */
	for (int i = 0; i < LEN; i++)
		a[i] = (char)(i * 7);
	sge = (struct ibv_sge){ (uintptr_t)a, LEN / 2, mr_a->lkey };
	wr = (struct ibv_send_wr){ .wr_id = 3, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED };
	wr.wr.rdma.remote_addr = (uintptr_t)b + LEN / 2;
	wr.wr.rdma.rkey = mr_b->rkey;
	CHECK(post_one(qa, &wr) == 0, "post RDMA WRITE");
	CHECK(wait_one(cq_a, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE,
	      "WRITE completes");
	CHECK(memcmp(b + LEN / 2, a, LEN / 2) == 0, "WRITE landed in B's buffer");

	/* RDMA READ from B into A. */
	memset(a, 0, LEN);
	sge = (struct ibv_sge){ (uintptr_t)a + 100, 1000, mr_a->lkey };
	wr.wr_id = 4;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = (uintptr_t)b + LEN / 2;
	CHECK(post_one(qa, &wr) == 0, "post RDMA READ");
	CHECK(wait_one(cq_a, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ,
	      "READ completes");
	CHECK(memcmp(a + 100, b + LEN / 2, 1000) == 0, "READ landed in A's buffer");

	/* Atomics on 8 bytes of B. */
	uint64_t *target = (uint64_t *)(b + 64);
	*target = 40;
	sge = (struct ibv_sge){ (uintptr_t)a, 8, mr_a->lkey };
	wr = (struct ibv_send_wr){ .wr_id = 5, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				   .send_flags = IBV_SEND_SIGNALED };
	wr.wr.atomic.remote_addr = (uintptr_t)target;
	wr.wr.atomic.rkey = mr_b->rkey;
	wr.wr.atomic.compare_add = 2;
	CHECK(post_one(qa, &wr) == 0, "post FETCH_ADD");
	CHECK(wait_one(cq_a, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD &&
	      *(uint64_t *)a == 40 && *target == 42, "FETCH_ADD: 40 fetched, 42 left");
	wr.wr_id = 6;
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 42;
	wr.wr.atomic.swap = 7;
	CHECK(post_one(qa, &wr) == 0, "post CMP_AND_SWP");
	CHECK(wait_one(cq_a, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_COMP_SWAP &&
	      *(uint64_t *)a == 42 && *target == 7, "CMP_AND_SWP: 42 fetched, 7 left");

	/* A WRITE past the end of B's region: the peer refuses it. */
	sge = (struct ibv_sge){ (uintptr_t)a, 64, mr_a->lkey };
	wr = (struct ibv_send_wr){ .wr_id = 7, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED };
	wr.wr.rdma.remote_addr = (uintptr_t)b + LEN - 8;
	wr.wr.rdma.rkey = mr_b->rkey;
	CHECK(post_one(qa, &wr) == 0, "post WRITE out of bounds");
	CHECK(wait_one(cq_a, &wc) == 1 && wc.status == IBV_WC_REM_ACCESS_ERR && wc.wr_id == 7,
	      "remote access error completion");
	struct ibv_qp_attr qa_attr;
	struct ibv_qp_init_attr qa_init;
	CHECK(ibv_query_qp(qa, &qa_attr, IBV_QP_STATE, &qa_init) == 0 && qa_attr.qp_state == IBV_QPS_ERR,
	      "A's QP in the error state");

	/* ibv_rereg_mr: new access, a new PD; not a new translation (as rxe). */
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	struct ibv_mr *m2 = ibv_reg_mr(pd, a, 64, IBV_ACCESS_LOCAL_WRITE);
	CHECK(pd2 && m2, "a second PD and region");
	CHECK(ibv_rereg_mr(m2, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) == 0,
	      "rereg_mr: new access");
	CHECK(ibv_rereg_mr(m2, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0) == 0 && m2->pd == pd2 &&
		      ibv_dealloc_pd(pd2) == EBUSY,
	      "rereg_mr: new PD (which then holds it)");
	errno = 0;
	CHECK(ibv_rereg_mr(m2, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, b, 64, 0) ==
			      IBV_REREG_MR_ERR_CMD && errno == EOPNOTSUPP,
	      "rereg_mr: new translation: ERR_CMD, EOPNOTSUPP");
	errno = 0;
	CHECK(ibv_rereg_mr(m2, 1 << 7, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL,
	      "rereg_mr: unknown flag: ERR_INPUT, EINVAL");
	CHECK(ibv_dereg_mr(m2) == 0 && ibv_dealloc_pd(pd2) == 0, "dereg, dealloc the second PD");
	CHECK(ibv_rate_to_mbps(IBV_RATE_100_GBPS) == 103125 &&
		      mbps_to_ibv_rate(25781) == IBV_RATE_25_GBPS &&
		      ibv_rate_to_mult(IBV_RATE_40_GBPS) == 16 && mult_to_ibv_rate(3) == IBV_RATE_MAX,
	      "rate helpers");
	CHECK(ibv_query_qp_data_in_order(qb, IBV_WR_RDMA_WRITE, 0) == 0,
	      "query_qp_data_in_order: not promised (0, as rxe)");

	CHECK(ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0, "destroy QPs");
	CHECK(ibv_dereg_mr(mr_a) == 0 && ibv_dereg_mr(mr_b) == 0, "dereg");
	CHECK(ibv_destroy_cq(cq_a) == 0 && ibv_destroy_cq(cq_b) == 0, "destroy CQs");
	CHECK(ibv_destroy_comp_channel(ch) == 0 && ibv_dealloc_pd(pd) == 0, "destroy channel, PD");
	CHECK(ibv_close_device(ctx) == 0, "close");
	ibv_free_device_list(list);
	free(a);
	free(b);
	return failed;
}
