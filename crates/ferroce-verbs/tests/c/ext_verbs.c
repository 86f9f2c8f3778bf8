/* The extended verbs through rdma-core's header, as a C program uses them:
 * ibv_create_cq_ex and its start_poll / next_poll / end_poll / read_*
 * interface (also through ibv_cq_ex_to_cq, ibv_poll_cq and a completion
 * channel), ibv_create_qp_ex with send_ops_flags, ibv_qp_to_qp_ex and the
 * ibv_wr_* builders (SEND, SEND with immediate, RDMA WRITE (+imm), READ,
 * both atomics, scatter lists, inline data and inline lists, a UD SEND
 * through wr_set_ud_addr), wr_abort, batches a builder failed, and what
 * each create refuses.
 * Two RC QPs of one device connected to each other; run by
 * c_programs.rs; prints one line per check, exits 1 if one failed. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "check.h"

enum { LEN = 4096, INLINE = 64 };

/* Up to 2 s for a completion through start_poll; 0 or an errno. The pass is
 * ended at once: the fields read after end_poll are copies. */
struct got {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len, imm, qp_num, flags;
};

static int poll_ex(struct ibv_cq_ex *cq, struct got *g)
{
	struct ibv_poll_cq_attr attr = { 0 };
	for (int i = 0; i < 200000; i++) {
		int r = ibv_start_poll(cq, &attr);
		if (r == ENOENT) {
			struct timespec ts = { 0, 10000 };
			nanosleep(&ts, NULL);
			continue;
		}
		if (r)
			return r;
		g->wr_id = cq->wr_id;
		g->status = cq->status;
		g->opcode = ibv_wc_read_opcode(cq);
		g->byte_len = ibv_wc_read_byte_len(cq);
		g->imm = ntohl(ibv_wc_read_imm_data(cq));
		g->qp_num = ibv_wc_read_qp_num(cq);
		g->flags = ibv_wc_read_wc_flags(cq);
		ibv_end_poll(cq);
		return 0;
	}
	return ETIMEDOUT;
}

static int connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid)
{
	struct rc_path p = { .dest = dest, .gid = *gid, .rq_psn = 0x100, .sq_psn = 0x100,
			     .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				       IBV_ACCESS_REMOTE_ATOMIC,
			     .mtu = IBV_MTU_1024, .timeout = 14 };
	return rc_connect(qp, &p);
}

enum { UD_QKEY = 0x1111 };

/* A UD QP through INIT and RTR to RTS. */
static int ud_ready(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = UD_QKEY };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return 1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return 1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static const uint64_t OPS = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			    IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_WRITE;

static struct ibv_qp *create_qp_ex(struct ibv_context *ctx, struct ibv_pd *pd,
				   struct ibv_cq_ex *cq, uint32_t mask, uint64_t ops,
				   uint32_t create_flags)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
			 .max_recv_sge = 1, .max_inline_data = INLINE },
		.comp_mask = mask, .pd = pd, .send_ops_flags = ops,
		.create_flags = create_flags,
	};
	return ibv_create_qp_ex(ctx, &a);
}

/* Posts receives for B, each into its own 256 bytes from the start of `b`:
 * the SENDs and the WRITE with immediate use one each. */
static void post_recvs(struct ibv_qp *qb, char *b, struct ibv_mr *mr_b, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge s = { (uintptr_t)b + 256 * i, 256, mr_b->lkey };
		struct ibv_recv_wr r = { .wr_id = 100 + i, .sg_list = &s, .num_sge = 1 }, *bad;
		ibv_post_recv(qb, &r, &bad);
	}
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	CHECK(ctx != NULL, "open");
	if (!ctx)
		return 1;
	union ibv_gid gid;
	ibv_query_gid(ctx, 1, 0, &gid);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);

	/* CQs: what is refused, then two that work. */
	struct ibv_cq_init_attr_ex ca = { .cqe = 64, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
	errno = 0;
	CHECK(ibv_create_cq_ex(ctx, &ca) == NULL && errno == EOPNOTSUPP,
	      "create_cq_ex with completion timestamps: EOPNOTSUPP");
	ca = (struct ibv_cq_init_attr_ex){ .cqe = 64, .comp_mask = 1 << 5 };
	errno = 0;
	CHECK(ibv_create_cq_ex(ctx, &ca) == NULL && errno == EINVAL, "create_cq_ex, unknown comp_mask: EINVAL");
	ca = (struct ibv_cq_init_attr_ex){ .cqe = 0, .wc_flags = IBV_WC_STANDARD_FLAGS };
	errno = 0;
	CHECK(ibv_create_cq_ex(ctx, &ca) == NULL && errno == EINVAL, "create_cq_ex with 0 entries: EINVAL");
	int cookie;
	ca = (struct ibv_cq_init_attr_ex){ .cqe = 64, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_cq_ex *cq_a = ibv_create_cq_ex(ctx, &ca);
	ca.channel = ch;
	ca.cq_context = &cookie;
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
	ca.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	ca.parent_domain = pd;
	errno = 0;
	CHECK(ibv_create_cq_ex(ctx, &ca) == NULL && errno == EOPNOTSUPP,
	      "create_cq_ex with IGNORE_OVERRUN: EOPNOTSUPP");
	ca.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	struct ibv_cq_ex *cq_b = ibv_create_cq_ex(ctx, &ca);
	CHECK(cq_a && cq_b && ibv_cq_ex_to_cq(cq_b)->cq_context == &cookie,
	      "create_cq_ex (B: SINGLE_THREADED, a PD as parent_domain, a channel)");
	struct ibv_poll_cq_attr pa = { 0 };
	CHECK(ibv_start_poll(cq_a, &pa) == ENOENT, "start_poll on an empty CQ: ENOENT");

	/* QPs: what is refused, then two that work. */
	errno = 0;
	CHECK(create_qp_ex(ctx, pd, cq_a, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			   IBV_QP_EX_WITH_TSO, 0) == NULL && errno == EOPNOTSUPP,
	      "create_qp_ex with TSO: EOPNOTSUPP");
	errno = 0;
	CHECK(create_qp_ex(ctx, pd, cq_a, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS, 0,
			   IBV_QP_CREATE_SCATTER_FCS) == NULL && errno == EOPNOTSUPP,
	      "create_qp_ex with a create flag: EOPNOTSUPP");
	errno = 0;
	CHECK(create_qp_ex(ctx, pd, cq_a, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_MAX_TSO_HEADER, 0, 0) ==
		      NULL && errno == EOPNOTSUPP,
	      "create_qp_ex with a TSO header: EOPNOTSUPP");
	struct ibv_qp_init_attr_ex ud = {
		.send_cq = ibv_cq_ex_to_cq(cq_a), .recv_cq = ibv_cq_ex_to_cq(cq_a),
		.qp_type = IBV_QPT_UD, .cap = { .max_send_wr = 4, .max_recv_wr = 4 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE,
	};
	errno = 0;
	CHECK(ibv_create_qp_ex(ctx, &ud) == NULL && errno == EOPNOTSUPP,
	      "create_qp_ex, UD with RDMA WRITE: EOPNOTSUPP, as rxe");
	ud.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	struct ibv_qp *ud_a = ibv_create_qp_ex(ctx, &ud), *ud_b = ibv_create_qp_ex(ctx, &ud);
	CHECK(ud_a && ud_b && ibv_qp_to_qp_ex(ud_a) != NULL, "create_qp_ex, UD with SENDs");
	errno = 0;
	CHECK(create_qp_ex(ctx, NULL, cq_a, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, OPS,
			   0) == NULL && errno == EINVAL,
	      "create_qp_ex without a PD: EINVAL");
	struct ibv_qp *plain = create_qp_ex(ctx, pd, cq_a, IBV_QP_INIT_ATTR_PD, 0, 0);
	errno = 0;
	CHECK(plain && ibv_qp_to_qp_ex(plain) == NULL, "qp_to_qp_ex of a QP without send ops: NULL");
	ibv_destroy_qp(plain);
	struct ibv_qp *qa = create_qp_ex(ctx, pd, cq_a,
					 IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, OPS, 0);
	struct ibv_qp *qb = create_qp_ex(ctx, pd, cq_b,
					 IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, OPS, 0);
	struct ibv_qp_ex *xa = qa ? ibv_qp_to_qp_ex(qa) : NULL;
	CHECK(qa && qb && xa && &xa->qp_base == qa, "create_qp_ex, qp_to_qp_ex");
	if (!xa)
		return 1;
	CHECK(connect_qp(qa, qb->qp_num, &gid) == 0 && connect_qp(qb, qa->qp_num, &gid) == 0,
	      "connect A <-> B");

	char *a = aligned_alloc(4096, LEN), *b = aligned_alloc(4096, LEN);
	memset(a, 0, LEN);
	memset(b, 0, LEN);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		  IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_mr *mr_a = ibv_reg_mr(pd, a, LEN, acc), *mr_b = ibv_reg_mr(pd, b, LEN, acc);
	post_recvs(qb, b, mr_b, 4);
	CHECK(ibv_req_notify_cq(ibv_cq_ex_to_cq(cq_b), 0) == 0, "arm B's extended CQ");

	/* One batch: SEND with immediate from a scatter list of two pieces, an
	 * unsignaled inline SEND from a list of two buffers, a WRITE. */
	strcpy(a, "hello ");
	strcpy(a + 100, "from A");
	struct ibv_sge two[2] = { { (uintptr_t)a, 6, mr_a->lkey }, { (uintptr_t)a + 100, 7, mr_a->lkey } };
	char part1[8] = "inl", part2[8] = "ine!";
	struct ibv_data_buf bufs[2] = { { part1, 3 }, { part2, 5 } };
	for (int i = 0; i < 512; i++)
		a[1024 + i] = (char)(i * 3);
	ibv_wr_start(xa);
	xa->wr_id = 1;
	xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(xa, htonl(0xabcd));
	ibv_wr_set_sge_list(xa, 2, two);
	xa->wr_id = 2;
	xa->wr_flags = 0;
	ibv_wr_send(xa);
	ibv_wr_set_inline_data_list(xa, 2, bufs);
	xa->wr_id = 3;
	xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(xa, mr_b->rkey, (uintptr_t)b + 2048);
	ibv_wr_set_sge(xa, mr_a->lkey, (uintptr_t)a + 1024, 512);
	CHECK(ibv_wr_complete(xa) == 0, "wr_complete: three requests");
	memset(part1, 'x', sizeof part1);
	memset(part2, 'x', sizeof part2);

	struct got g = { 0 };
	CHECK(poll_ex(cq_a, &g) == 0 && g.wr_id == 1 && g.status == IBV_WC_SUCCESS &&
	      g.opcode == IBV_WC_SEND, "A: SEND completes (start_poll)");
	CHECK(poll_ex(cq_a, &g) == 0 && g.wr_id == 3 && g.status == IBV_WC_SUCCESS &&
	      g.opcode == IBV_WC_RDMA_WRITE, "A: the unsignaled SEND makes none; WRITE completes");
	CHECK(memcmp(b + 2048, a + 1024, 512) == 0, "WRITE landed in B's buffer");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == ibv_cq_ex_to_cq(cq_b) &&
	      ev_ctx == &cookie, "B's extended CQ raised its channel event");
	ibv_ack_cq_events(ev_cq, 1);
	CHECK(poll_ex(cq_b, &g) == 0 && g.status == IBV_WC_SUCCESS && g.opcode == IBV_WC_RECV &&
	      g.byte_len == 13 && g.imm == 0xabcd && (g.flags & IBV_WC_WITH_IMM) &&
	      g.qp_num == qb->qp_num && g.wr_id == 100,
	      "B: receive with the immediate (read_byte_len, read_imm_data, read_wc_flags, read_qp_num)");
	CHECK(strcmp(b, "hello from A") == 0, "the scatter list's bytes arrived in order");
	struct ibv_wc wc;
	int n = 0;
	for (int i = 0; i < 200000 && n == 0; i++)
		n = ibv_poll_cq(ibv_cq_ex_to_cq(cq_b), 1, &wc);
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 8 && wc.wr_id == 101 &&
	      memcmp(b + 256, "inline!", 8) == 0, "B: the inline list (ibv_poll_cq on the extended CQ)");

	/* READ, both atomics, WRITE with immediate: one request per batch. */
	memset(a, 0, LEN);
	ibv_wr_start(xa);
	xa->wr_id = 4;
	ibv_wr_rdma_read(xa, mr_b->rkey, (uintptr_t)b + 2048);
	ibv_wr_set_sge(xa, mr_a->lkey, (uintptr_t)a + 16, 300);
	CHECK(ibv_wr_complete(xa) == 0 && poll_ex(cq_a, &g) == 0 && g.wr_id == 4 &&
	      g.opcode == IBV_WC_RDMA_READ && g.status == IBV_WC_SUCCESS &&
	      memcmp(a + 16, b + 2048, 300) == 0, "READ landed in A's buffer");
	uint64_t *target = (uint64_t *)(b + 1024);
	*target = 40;
	ibv_wr_start(xa);
	xa->wr_id = 5;
	ibv_wr_atomic_fetch_add(xa, mr_b->rkey, (uintptr_t)target, 2);
	ibv_wr_set_sge(xa, mr_a->lkey, (uintptr_t)a, 8);
	xa->wr_id = 6;
	ibv_wr_atomic_cmp_swp(xa, mr_b->rkey, (uintptr_t)target, 42, 7);
	ibv_wr_set_sge(xa, mr_a->lkey, (uintptr_t)a + 8, 8);
	CHECK(ibv_wr_complete(xa) == 0, "wr_complete: two atomics");
	CHECK(poll_ex(cq_a, &g) == 0 && g.wr_id == 5 && g.opcode == IBV_WC_FETCH_ADD &&
	      poll_ex(cq_a, &g) == 0 && g.wr_id == 6 && g.opcode == IBV_WC_COMP_SWAP &&
	      *(uint64_t *)a == 40 && *(uint64_t *)(a + 8) == 42 && *target == 7,
	      "FETCH_ADD then CMP_SWAP: 40 and 42 fetched, 7 left");
	/* ATOMIC WRITE: its 8 bytes copied at the call, placed whole. */
	uint64_t eight = 0x0123456789abcdefULL;
	ibv_wr_start(xa);
	xa->wr_id = 8;
	ibv_wr_atomic_write(xa, mr_b->rkey, (uintptr_t)target, &eight);
	eight = 0;
	CHECK(ibv_wr_complete(xa) == 0 && poll_ex(cq_a, &g) == 0 && g.wr_id == 8 &&
	      g.opcode == IBV_WC_ATOMIC_WRITE && g.status == IBV_WC_SUCCESS &&
	      *target == 0x0123456789abcdefULL,
	      "ATOMIC WRITE: 8 bytes placed, IBV_WC_ATOMIC_WRITE");
	ibv_wr_start(xa);
	xa->wr_id = 9;
	ibv_wr_atomic_write(xa, mr_b->rkey, (uintptr_t)target + 4, &eight);
	CHECK(ibv_wr_complete(xa) == EINVAL, "ATOMIC WRITE to an unaligned address: EINVAL at post");
	ibv_wr_start(xa);
	xa->wr_id = 7;
	ibv_wr_rdma_write_imm(xa, mr_b->rkey, (uintptr_t)b + 3000, htonl(77));
	char msg[16] = "imm write";
	ibv_wr_set_inline_data(xa, msg, 10);
	CHECK(ibv_wr_complete(xa) == 0 && poll_ex(cq_a, &g) == 0 && g.wr_id == 7 &&
	      poll_ex(cq_b, &g) == 0 && g.opcode == IBV_WC_RECV_RDMA_WITH_IMM && g.imm == 77 &&
	      strcmp(b + 3000, "imm write") == 0, "inline WRITE with immediate");

	/* UD: a SEND through ibv_wr_set_ud_addr, from one UD QP to another. */
	CHECK(ud_a && ud_b && ud_ready(ud_a) == 0 && ud_ready(ud_b) == 0, "UD QPs to RTS");
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	aa.grh.dgid = gid;
	aa.grh.hop_limit = 64;
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	struct ibv_sge us = { (uintptr_t)b + 3072, 40 + 64, mr_b->lkey };
	struct ibv_recv_wr ur = { .wr_id = 50, .sg_list = &us, .num_sge = 1 }, *ubad;
	CHECK(ah && ibv_post_recv(ud_b, &ur, &ubad) == 0, "AH, UD receive posted");
	struct ibv_qp_ex *xu = ibv_qp_to_qp_ex(ud_a);
	strcpy(a + 512, "datagram");
	ibv_wr_start(xu);
	xu->wr_id = 51;
	xu->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(xu);
	ibv_wr_set_ud_addr(xu, ah, ud_b->qp_num, UD_QKEY);
	ibv_wr_set_sge(xu, mr_a->lkey, (uintptr_t)a + 512, 9);
	CHECK(ibv_wr_complete(xu) == 0 && poll_ex(cq_a, &g) == 0 && g.wr_id == 51 &&
	      g.status == IBV_WC_SUCCESS, "UD SEND completes");
	CHECK(poll_ex(cq_a, &g) == 0 && g.wr_id == 50 && g.opcode == IBV_WC_RECV &&
	      g.byte_len == 40 + 9 && (g.flags & IBV_WC_GRH) && g.qp_num == ud_b->qp_num &&
	      strcmp(b + 3072 + 40, "datagram") == 0, "UD receive: GRH, then the bytes");
	ibv_destroy_qp(ud_a);
	ibv_destroy_qp(ud_b);
	ibv_destroy_ah(ah);

	/* Batches that post nothing. */
	ibv_wr_start(xa);
	xa->wr_id = 8;
	ibv_wr_send(xa);
	ibv_wr_set_sge(xa, mr_a->lkey, (uintptr_t)a, 8);
	ibv_wr_abort(xa);
	ibv_wr_start(xa);
	xa->wr_id = 9;
	ibv_wr_send(xa);
	ibv_wr_set_sge(xa, mr_a->lkey, (uintptr_t)a, 8);
	ibv_wr_send(xa);
	ibv_wr_set_inline_data(xa, a, INLINE + 1);
	CHECK(ibv_wr_complete(xa) == ENOSPC, "inline data past max_inline_data: wr_complete ENOSPC, as rxe");
	/* A length that would wrap the running total is refused, not added. */
	struct ibv_data_buf wrap[2] = { { a, 1 }, { a, SIZE_MAX } };
	ibv_wr_start(xa);
	ibv_wr_send(xa);
	ibv_wr_set_inline_data_list(xa, 2, wrap);
	CHECK(ibv_wr_complete(xa) == ENOSPC, "an inline list whose lengths wrap: ENOSPC");
	struct ibv_sge big = { (uintptr_t)a, INLINE + 1, 0 };
	struct ibv_send_wr iw = { .wr_id = 10, .sg_list = &big, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED },
			   *ibad = NULL;
	CHECK(ibv_post_send(qa, &iw, &ibad) == EINVAL && ibad == &iw,
	      "post_send, inline past max_inline_data: EINVAL, as rxe");
	ibv_wr_start(xa);
	ibv_wr_set_sge(xa, mr_a->lkey, (uintptr_t)a, 8);
	CHECK(ibv_wr_complete(xa) == EINVAL, "a setter before any operation: EINVAL");
	ibv_wr_start(xa);
	ibv_wr_send(xa);
	ibv_wr_send_tso(xa, NULL, 0, 0);
	CHECK(ibv_wr_complete(xa) == EOPNOTSUPP, "TSO: EOPNOTSUPP");
	struct timespec pause = { 0, 50 * 1000 * 1000 };
	nanosleep(&pause, NULL);
	CHECK(ibv_start_poll(cq_a, &pa) == ENOENT && ibv_start_poll(cq_b, &pa) == ENOENT,
	      "the aborted and failed batches posted nothing");

	CHECK(ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0, "destroy QPs");
	CHECK(ibv_dereg_mr(mr_a) == 0 && ibv_dereg_mr(mr_b) == 0, "dereg");
	CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cq_a)) == 0 && ibv_destroy_cq(ibv_cq_ex_to_cq(cq_b)) == 0,
	      "destroy the extended CQs");
	CHECK(ibv_destroy_comp_channel(ch) == 0 && ibv_dealloc_pd(pd) == 0, "destroy channel, PD");
	CHECK(ibv_close_device(ctx) == 0, "close");
	ibv_free_device_list(list);
	free(a);
	free(b);
	return failed;
}
