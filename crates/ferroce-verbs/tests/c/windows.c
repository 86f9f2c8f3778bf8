/* Memory windows through rdma-core's header, as a C program uses them: the
 * device's flags and max_mw, ibv_alloc_mw of both types, ibv_bind_mw of a
 * type 1 window (its rkey moves on), a type 2 window bound by an
 * IBV_WR_BIND_MW request and by ibv_wr_bind_mw, WRITE and READ through a
 * window onto a region with no remote rights of its own, the window's
 * range bounding them, ibv_dereg_mr of a region with a window bound
 * (EBUSY), IBV_WR_LOCAL_INV, ibv_wr_local_inv and a peer's SEND with
 * invalidate closing a type 2 window, and a bind that breaks a rule
 * completing with IBV_WC_MW_BIND_ERR.
 * Two RC QPs of one device (A the requester, B the owner of the windows);
 * run by c_programs.rs; prints one line per check, exits 1 if one failed. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "check.h"

enum { LEN = 16384 };

static int wait_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return wait_one_ms(cq, wc, 2000);
}

static int connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid, uint32_t psn)
{
	struct rc_path p = { .dest = dest, .gid = *gid, .rq_psn = psn, .sq_psn = psn,
			     .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
			     .mtu = IBV_MTU_1024, .timeout = 14 };
	return rc_connect(qp, &p);
}

/* Posts one request from `qp` and returns its completion's status (or -1
 * with no completion). */
static int run(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_send_wr *wr)
{
	struct ibv_wc wc;
	if (post_one(qp, wr))
		return -1;
	return wait_one(cq, &wc) == 1 ? (int)wc.status : -1;
}

static struct ibv_send_wr rdma(enum ibv_wr_opcode op, struct ibv_sge *sge, uint64_t addr,
			       uint32_t rkey)
{
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED };
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	return wr;
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	CHECK(ctx != NULL, "open");
	if (!ctx)
		return 1;
	struct ibv_device_attr dev;
	CHECK(ibv_query_device(ctx, &dev) == 0 &&
		      (dev.device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
		      (dev.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) && dev.max_mw > 0,
	      "device: MEM_WINDOW, MEM_WINDOW_TYPE_2B, max_mw");
	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "gid 0");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq_a = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cq_b = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cq_c = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	char *a = aligned_alloc(4096, LEN), *b = aligned_alloc(4096, LEN);
	memset(a, 0, LEN);
	memset(b, 0, LEN);
	struct ibv_mr *mr_a = ibv_reg_mr(pd, a, LEN, IBV_ACCESS_LOCAL_WRITE);
	/* B's region: windows may be bound to it; no remote rights of its own. */
	struct ibv_mr *mr_b = ibv_reg_mr(pd, b, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	struct ibv_mr *plain = ibv_reg_mr(pd, b, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(pd && cq_a && cq_b && cq_c && mr_a && mr_b && plain, "pd, cqs, regions");

	struct ibv_qp_init_attr_ex init = {
		.send_cq = cq_a, .recv_cq = cq_a, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV |
				  IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
				  IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV,
	};
	struct ibv_qp *qa = ibv_create_qp_ex(ctx, &init);
	init.send_cq = init.recv_cq = cq_b;
	struct ibv_qp *qb = ibv_create_qp_ex(ctx, &init);
	CHECK(qa && qb, "create_qp_ex with BIND_MW, LOCAL_INV and SEND_WITH_INV");
	CHECK(connect_qp(qa, qb->qp_num, &gid, 0x200) == 0 &&
		      connect_qp(qb, qa->qp_num, &gid, 0x200) == 0,
	      "connect A <-> B");
	struct ibv_wc wc;
	struct ibv_sge sge = { (uintptr_t)a, 64, mr_a->lkey };

	/* Type 1: ibv_bind_mw, then a WRITE through it. */
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK(mw1 && mw1->type == IBV_MW_TYPE_1 && mw1->pd == pd, "alloc_mw type 1");
	errno = 0;
	CHECK(ibv_alloc_mw(pd, 7) == NULL && errno == EINVAL, "alloc_mw of type 7: EINVAL");
	uint32_t before = mw1->rkey;
	struct ibv_mw_bind bind = {
		.wr_id = 11, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr_b, .addr = (uintptr_t)b, .length = 4096,
			       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ },
	};
	CHECK(ibv_bind_mw(qb, mw1, &bind) == 0 && mw1->rkey == ibv_inc_rkey(before),
	      "bind_mw (type 1): the window's rkey moves on");
	CHECK(wait_one(cq_b, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 11,
	      "BIND_MW completion");
	memset(a, 0x61, 64);
	struct ibv_send_wr wr = rdma(IBV_WR_RDMA_WRITE, &sge, (uintptr_t)b + 100, mw1->rkey);
	CHECK(run(qa, cq_a, &wr) == IBV_WC_SUCCESS && b[100] == 0x61 && b[163] == 0x61 &&
		      b[164] == 0,
	      "WRITE through the type 1 window lands in B's buffer");
	errno = 0;
	CHECK(ibv_dereg_mr(mr_b) == EBUSY, "dereg_mr of a region with a window bound: EBUSY");
	struct ibv_mw_bind unbind = { .wr_id = 12, .send_flags = IBV_SEND_SIGNALED,
				      .bind_info = { .mr = mr_b } };
	CHECK(ibv_bind_mw(qb, mw1, &unbind) == 0 && wait_one(cq_b, &wc) == 1 &&
		      wc.status == IBV_WC_SUCCESS,
	      "bind_mw of length 0 unbinds it");

	/* Type 2 through IBV_WR_BIND_MW: a READ through it. */
	struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw2 && mw2->type == IBV_MW_TYPE_2, "alloc_mw type 2");
	uint32_t key2 = ibv_inc_rkey(mw2->rkey);
	struct ibv_send_wr bw = { .wr_id = 13, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED };
	bw.bind_mw.mw = mw2;
	bw.bind_mw.rkey = key2;
	bw.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = mr_b, .addr = (uintptr_t)b + 8192, .length = 256,
		.mw_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
	};
	CHECK(run(qb, cq_b, &bw) == IBV_WC_SUCCESS, "post_send BIND_MW (type 2)");
	memset(b + 8192, 0x72, 256);
	struct ibv_sge into = { (uintptr_t)a + 1024, 256, mr_a->lkey };
	wr = rdma(IBV_WR_RDMA_READ, &into, (uintptr_t)b + 8192, key2);
	CHECK(run(qa, cq_a, &wr) == IBV_WC_SUCCESS && a[1024] == 0x72 && a[1279] == 0x72,
	      "READ through the type 2 window");

	/* LOCAL_INV by B, then ibv_wr_bind_mw and ibv_wr_local_inv. */
	struct ibv_send_wr inv = { .wr_id = 14, .opcode = IBV_WR_LOCAL_INV,
				   .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = key2 };
	CHECK(post_one(qb, &inv) == 0 && wait_one(cq_b, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		      wc.opcode == IBV_WC_LOCAL_INV,
	      "LOCAL_INV of the type 2 window");
	struct ibv_qp_ex *bx = ibv_qp_to_qp_ex(qb);
	uint32_t key3 = ibv_inc_rkey(key2);
	struct ibv_mw_bind_info info = { .mr = mr_b, .addr = (uintptr_t)b, .length = 512,
					 .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	ibv_wr_start(bx);
	bx->wr_id = 15;
	bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(bx, mw2, key3, &info);
	bx->wr_id = 16;
	ibv_wr_local_inv(bx, key3);
	bx->wr_id = 17;
	ibv_wr_bind_mw(bx, mw2, ibv_inc_rkey(key3), &info);
	CHECK(ibv_wr_complete(bx) == 0, "ibv_wr_bind_mw, ibv_wr_local_inv, ibv_wr_bind_mw");
	int ok = 1;
	for (int i = 0; i < 3; i++)
		ok &= wait_one(cq_b, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == (uint64_t)(15 + i) &&
		      wc.opcode == (i == 1 ? IBV_WC_LOCAL_INV : IBV_WC_BIND_MW);
	CHECK(ok, "their completions, in order");
	uint32_t key4 = ibv_inc_rkey(key3);

	/* A's SEND with invalidate closes the window at B. */
	struct ibv_sge rsge = { (uintptr_t)b + 12288, 64, mr_b->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 18, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	CHECK(ibv_post_recv(qb, &rwr, &rbad) == 0, "post_recv");
	struct ibv_send_wr si = { .wr_id = 19, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_INV,
				  .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = key4 };
	CHECK(run(qa, cq_a, &si) == IBV_WC_SUCCESS, "SEND_WITH_INV");
	CHECK(wait_one(cq_b, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		      (wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == key4,
	      "the receive names the invalidated rkey");

	/* A bind onto a region without MW_BIND: MW_BIND_ERR at completion (on
	 * a third QP, which sends nothing: the error ends it). */
	init.send_cq = init.recv_cq = cq_c;
	struct ibv_qp *qc = ibv_create_qp_ex(ctx, &init);
	CHECK(qc && connect_qp(qc, qb->qp_num, &gid, 0x300) == 0, "a third QP");
	bw.wr_id = 20;
	bw.bind_mw.rkey = ibv_inc_rkey(key4);
	bw.bind_mw.bind_info.mr = plain;
	bw.bind_mw.bind_info.addr = (uintptr_t)b;
	CHECK(post_one(qc, &bw) == 0 && wait_one(cq_c, &wc) == 1 &&
		      wc.status == IBV_WC_MW_BIND_ERR && wc.wr_id == 20,
	      "bind onto a region without MW_BIND: IBV_WC_MW_BIND_ERR");

	/* The closed window refuses A's WRITE (and the connection ends). */
	wr = rdma(IBV_WR_RDMA_WRITE, &sge, (uintptr_t)b, key4);
	CHECK(run(qa, cq_a, &wr) == IBV_WC_REM_ACCESS_ERR,
	      "WRITE through the invalidated window: REM_ACCESS_ERR");

	CHECK(ibv_dealloc_mw(mw1) == 0 && ibv_dealloc_mw(mw2) == 0, "dealloc_mw");
	CHECK(ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0 && ibv_destroy_qp(qc) == 0 &&
		      ibv_destroy_cq(cq_c) == 0 && ibv_dereg_mr(mr_a) == 0 &&
		      ibv_dereg_mr(mr_b) == 0 && ibv_dereg_mr(plain) == 0 &&
		      ibv_destroy_cq(cq_a) == 0 && ibv_destroy_cq(cq_b) == 0 &&
		      ibv_dealloc_pd(pd) == 0,
	      "teardown");
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(a);
	free(b);
	return failed;
}
