/* XRC through rdma-core's header, as a C program uses it: ibv_open_xrcd,
 * ibv_create_srq_ex (IBV_SRQT_XRC) and ibv_get_srq_num, a target QP
 * (ibv_create_qp_ex with an XRCD) and an initiator QP (IBV_QPT_XRC_SEND,
 * with send_ops_flags), SENDs to two SRQs through one target by
 * wr.qp_type.xrc.remote_srqn and by ibv_wr_set_xrc_srqn, completions on
 * each SRQ's CQ with the target's QP number, an RDMA WRITE, a SEND naming
 * no SRQ (REM_INV_REQ_ERR), and the order objects may be destroyed in.
 * One device, the two QPs connected to each other; run by c_programs.rs;
 * prints one line per check, exits 1 if one failed. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "check.h"

enum { LEN = 4096 };

/* INIT, RTR, RTS with the attributes ibv_xsrq_pingpong gives each half. */
static int connect_qp(struct ibv_qp *qp, int target, uint32_t dest, union ibv_gid *gid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = target ? IBV_ACCESS_REMOTE_WRITE : 0 };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS))
		return 1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 0x200;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (ibv_modify_qp(qp, &a, target ? rtr | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER
					 : rtr))
		return 1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x200;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	int rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
	return ibv_modify_qp(qp, &a, target ? rts
					    : rts | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						      IBV_QP_MAX_QP_RD_ATOMIC);
}

static struct ibv_srq *xrc_srq(struct ibv_context *ctx, struct ibv_pd *pd,
			       struct ibv_xrcd *xrcd, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex a = {
		.attr = { .max_wr = 4, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			     IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = xrcd, .cq = cq,
	};
	return ibv_create_srq_ex(ctx, &a);
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	CHECK(ctx != NULL, "open");
	if (!ctx)
		return 1;
	struct ibv_device_attr dev;
	CHECK(ibv_query_device(ctx, &dev) == 0 && (dev.device_cap_flags & IBV_DEVICE_XRC),
	      "the device announces IBV_DEVICE_XRC");
	union ibv_gid gid;
	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "query_gid");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	char *buf = calloc(1, 4 * LEN);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4 * LEN,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_cq *send_cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_cq *cq0 = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_cq *cq1 = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(pd && mr && send_cq && cq0 && cq1, "PD, MR, CQs");

	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD |
						      IBV_XRCD_INIT_ATTR_OFLAGS,
					 .fd = -1, .oflags = O_CREAT };
	struct ibv_xrcd *xrcd = ibv_open_xrcd(ctx, &xa);
	CHECK(xrcd != NULL, "open_xrcd");
	struct ibv_srq *srq[2] = { xrc_srq(ctx, pd, xrcd, cq0), xrc_srq(ctx, pd, xrcd, cq1) };
	uint32_t srqn[2] = { 0, 0 };
	CHECK(srq[0] && srq[1] && ibv_get_srq_num(srq[0], &srqn[0]) == 0 &&
		      ibv_get_srq_num(srq[1], &srqn[1]) == 0 && srqn[0] != srqn[1],
	      "two XRC SRQs, two SRQ numbers");
	struct ibv_srq_init_attr basic_attr = { .attr = { .max_wr = 1, .max_sge = 1 } };
	struct ibv_srq *basic = ibv_create_srq(pd, &basic_attr);
	uint32_t none;
	CHECK(basic && ibv_get_srq_num(basic, &none) == EINVAL, "get_srq_num of a basic SRQ: EINVAL");

	struct ibv_qp_init_attr_ex ta = { .qp_type = IBV_QPT_XRC_RECV,
					  .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd };
	struct ibv_qp *tgt = ibv_create_qp_ex(ctx, &ta);
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = send_cq, .qp_type = IBV_QPT_XRC_SEND,
		.cap = { .max_send_wr = 8, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE,
	};
	struct ibv_qp *ini = ibv_create_qp_ex(ctx, &ia);
	CHECK(tgt && ini && tgt->qp_type == IBV_QPT_XRC_RECV && ini->qp_type == IBV_QPT_XRC_SEND,
	      "a target QP in the domain, an initiator QP with send operations");
	CHECK(tgt && ini && connect_qp(tgt, 1, ini->qp_num, &gid) == 0 &&
		      connect_qp(ini, 0, tgt->qp_num, &gid) == 0,
	      "connect initiator <-> target with xsrq_pingpong's attributes");
	struct ibv_recv_wr rw = { .wr_id = 1 }, *rbad;
	CHECK(tgt && ibv_post_recv(tgt, &rw, &rbad) == EINVAL, "post_recv on a target: EINVAL");
	CHECK(ibv_close_xrcd(xrcd) == EBUSY, "close_xrcd while in use: EBUSY");

	for (int k = 0; k < 2; k++) {
		struct ibv_sge s = { (uintptr_t)(buf + (2 + k) * LEN), LEN, mr->lkey };
		struct ibv_recv_wr r = { .wr_id = 10 + k, .sg_list = &s, .num_sge = 1 };
		CHECK(ibv_post_srq_recv(srq[k], &r, &rbad) == 0, "post_srq_recv");
	}
	/* To SRQ 1 by ibv_post_send, to SRQ 0 by the ibv_wr_* builders. */
	memset(buf, 'a', LEN);
	memset(buf + LEN, 'b', LEN);
	struct ibv_sge s1 = { (uintptr_t)buf, 3000, mr->lkey };
	struct ibv_send_wr w = { .wr_id = 1, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	w.qp_type.xrc.remote_srqn = srqn[1];
	CHECK(ibv_post_send(ini, &w, &bad) == 0, "post_send naming SRQ 1");
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(ini);
	ibv_wr_start(x);
	x->wr_id = 2;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_xrc_srqn(x, srqn[0]);
	ibv_wr_set_sge(x, mr->lkey, (uintptr_t)(buf + LEN), 2000);
	CHECK(ibv_wr_complete(x) == 0, "wr_send with wr_set_xrc_srqn naming SRQ 0");
	struct ibv_wc wc[2];
	CHECK(wait_one_ms(send_cq, &wc[0], 2000) && wait_one_ms(send_cq, &wc[1], 2000) &&
		      wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS,
	      "both SENDs complete on the initiator");
	CHECK(wait_one_ms(cq1, &wc[0], 2000) && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 11 &&
		      wc[0].byte_len == 3000 && wc[0].qp_num == tgt->qp_num &&
		      buf[3 * LEN] == 'a' && buf[3 * LEN + 2999] == 'a',
	      "SRQ 1's CQ: its WQE, 3000 bytes, the target's QP number");
	CHECK(wait_one_ms(cq0, &wc[0], 2000) && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 10 &&
		      wc[0].byte_len == 2000 && wc[0].qp_num == tgt->qp_num &&
		      buf[2 * LEN] == 'b' && buf[2 * LEN + 1999] == 'b',
	      "SRQ 0's CQ: its WQE, 2000 bytes, the target's QP number");

	/* An RDMA WRITE, checked against the named SRQ's PD. */
	ibv_wr_start(x);
	x->wr_id = 3;
	ibv_wr_rdma_write(x, mr->rkey, (uintptr_t)(buf + 2 * LEN + 100));
	ibv_wr_set_xrc_srqn(x, srqn[0]);
	ibv_wr_set_sge(x, mr->lkey, (uintptr_t)(buf + LEN), 16);
	CHECK(ibv_wr_complete(x) == 0 && wait_one_ms(send_cq, &wc[0], 2000) &&
		      wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_RDMA_WRITE &&
		      buf[2 * LEN + 100] == 'b',
	      "RDMA WRITE through the target");

	/* A SEND naming no XRC SRQ of the domain: the target refuses it. */
	w.wr_id = 4;
	w.qp_type.xrc.remote_srqn = 0xabcdef;
	CHECK(ibv_post_send(ini, &w, &bad) == 0 && wait_one_ms(send_cq, &wc[0], 2000) &&
		      wc[0].status == IBV_WC_REM_INV_REQ_ERR,
	      "a SEND naming no SRQ: REM_INV_REQ_ERR");

	CHECK(ibv_destroy_srq(srq[0]) == 0, "an XRC SRQ goes before its target QP");
	CHECK(ibv_destroy_cq(cq1) == EBUSY, "destroy_cq of an XRC SRQ's CQ: EBUSY");
	CHECK(ibv_destroy_qp(ini) == 0 && ibv_destroy_qp(tgt) == 0, "destroy the QPs");
	CHECK(ibv_close_xrcd(xrcd) == EBUSY, "close_xrcd with an SRQ left: EBUSY");
	CHECK(ibv_destroy_srq(srq[1]) == 0 && ibv_destroy_srq(basic) == 0 &&
		      ibv_close_xrcd(xrcd) == 0,
	      "destroy the SRQs, then close the domain");
	CHECK(ibv_destroy_cq(send_cq) == 0 && ibv_destroy_cq(cq0) == 0 && ibv_destroy_cq(cq1) == 0 &&
		      ibv_dereg_mr(mr) == 0 && ibv_dealloc_pd(pd) == 0,
	      "destroy CQs, MR, PD");
	CHECK(ibv_close_device(ctx) == 0, "close");
	ibv_free_device_list(list);
	free(buf);
	return failed;
}
