/* UD multicast through rdma-core's header: three UD QPs of one ferroce
 * device, two attached to a group with ibv_attach_mcast; a send from the
 * third to the group through an address handle reaches both (their own
 * receives, the GRH in front naming the group), a detached QP gets nothing
 * more, and the refusals get rdma-core's errno (EINVAL: an RC QP, a
 * unicast GID, a QP not attached; attaching twice; EBUSY: destroying an
 * attached QP, as the kernel's uverbs), and mlx5's
 * IBV_QP_CREATE_BLOCK_SELF_MCAST_LB keeps a QP's own send from it while
 * another QP still gets it. Run by c_programs.rs;
 * prints one line per check, exits 1 if one failed. */
#include <arpa/inet.h>
#include <stdlib.h>

#include "check.h"

enum { QKEY = 0x11110000, MSG = 64, GRH = 40 };

static struct ibv_qp *to_rts(struct ibv_qp *qp)
{
	if (!qp)
		return NULL;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return NULL;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return NULL;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return NULL;
	return qp;
}

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr init = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
					 .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						  .max_send_sge = 1, .max_recv_sge = 1 } };
	return to_rts(ibv_create_qp(pd, &init));
}

/* A UD QP made with ibv_create_qp_ex and `flags`. */
static struct ibv_qp *ud_qp_ex(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq,
			       enum ibv_qp_type type, uint32_t flags)
{
	struct ibv_qp_init_attr_ex init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = type,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
		.pd = pd, .create_flags = flags,
	};
	return ibv_create_qp_ex(ctx, &init);
}

static int post_recv(struct ibv_qp *qp, struct ibv_mr *mr, char *buf)
{
	struct ibv_sge s = { .addr = (uintptr_t)buf, .length = GRH + MSG, .lkey = mr->lkey };
	struct ibv_recv_wr w = { .wr_id = (uintptr_t)qp, .sg_list = &s, .num_sge = 1 }, *bad;
	return ibv_post_recv(qp, &w, &bad);
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list ? ibv_open_device(list[0]) : NULL;
	CHECK(ctx != NULL, "open");
	if (!ctx)
		return 1;
	struct ibv_device_attr dev;
	CHECK(ibv_query_device(ctx, &dev) == 0 && dev.max_mcast_grp > 0 &&
		      dev.max_mcast_qp_attach > 0,
	      "the device reports multicast groups and attachments");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq[3];
	for (int i = 0; i < 3; i++)
		cq[i] = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	static char buf[3][GRH + MSG];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *tx = ud_qp(pd, cq[0]), *a = ud_qp(pd, cq[1]), *b = ud_qp(pd, cq[2]);
	CHECK(pd && mr && tx && a && b, "three UD QPs in RTS");

	union ibv_gid group = { .raw = { [10] = 0xff, [11] = 0xff, 239, 255, 0, 73 } };
	union ibv_gid unicast = { .raw = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 } };
	CHECK(ibv_attach_mcast(a, &group, 0) == 0, "attach a");
	CHECK(ibv_attach_mcast(b, &group, 0) == 0, "attach b");
	CHECK(ibv_attach_mcast(b, &group, 0) == EINVAL, "attach b twice: EINVAL");
	CHECK(ibv_attach_mcast(a, &unicast, 0) == EINVAL, "attach to a unicast GID: EINVAL");
	CHECK(ibv_detach_mcast(tx, &group, 0) == EINVAL, "detach what is not attached: EINVAL");
	struct ibv_qp_init_attr rc_init = { .send_cq = cq[0], .recv_cq = cq[0], .qp_type = IBV_QPT_RC,
					    .cap = { .max_send_wr = 1, .max_recv_wr = 1,
						     .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *rc = ibv_create_qp(pd, &rc_init);
	CHECK(rc && ibv_attach_mcast(rc, &group, 0) == EINVAL, "attach an RC QP: EINVAL");
	if (rc)
		ibv_destroy_qp(rc);

	CHECK(post_recv(a, mr, buf[1]) == 0 && post_recv(b, mr, buf[2]) == 0, "post receives");
	struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1,
				       .grh = { .dgid = group, .hop_limit = 64 } };
	struct ibv_ah *ah = ibv_create_ah(pd, &ah_attr);
	CHECK(ah != NULL, "create_ah to the group");
	strcpy(buf[0], "to the group");
	struct ibv_sge s = { .addr = (uintptr_t)buf[0], .length = MSG, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.ud = { .ah = ah, .remote_qpn = 0xffffff, .remote_qkey = QKEY } },
			   *bad;
	CHECK(ibv_post_send(tx, &wr, &bad) == 0, "post SEND to the group");
	struct ibv_wc wc;
	CHECK(wait_one_ms(cq[0], &wc, 2000) == 1 && wc.status == IBV_WC_SUCCESS, "send completes");
	for (int i = 1; i <= 2; i++) {
		struct ibv_qp *q = i == 1 ? a : b;
		CHECK(wait_one_ms(cq[i], &wc, 2000) == 1 && wc.status == IBV_WC_SUCCESS &&
			      wc.byte_len == GRH + MSG && wc.src_qp == tx->qp_num &&
			      wc.wr_id == (uintptr_t)q,
		      i == 1 ? "a received it" : "b received it");
		CHECK(strcmp(buf[i] + GRH, "to the group") == 0 &&
			      memcmp(buf[i] + 36, &group.raw[12], 4) == 0,
		      "its bytes, behind a GRH naming the group");
	}
	CHECK(ibv_detach_mcast(a, &group, 0) == 0, "detach a");
	CHECK(post_recv(a, mr, buf[1]) == 0 && post_recv(b, mr, buf[2]) == 0, "post receives again");
	CHECK(ibv_post_send(tx, &wr, &bad) == 0, "post SEND again");
	CHECK(wait_one_ms(cq[0], &wc, 2000) == 1, "second send completes");
	CHECK(wait_one_ms(cq[2], &wc, 2000) == 1 && wc.status == IBV_WC_SUCCESS, "b received it again");
	CHECK(wait_one_ms(cq[1], &wc, 300) == 0, "a, detached, received nothing");

	/* mlx5's loopback block: its own send skips it, b still gets it. */
	CHECK(ud_qp_ex(ctx, pd, cq[0], IBV_QPT_RC, IBV_QP_CREATE_BLOCK_SELF_MCAST_LB) == NULL &&
		      errno == EOPNOTSUPP,
	      "BLOCK_SELF_MCAST_LB on an RC QP: EOPNOTSUPP");
	struct ibv_qp *lone = to_rts(ud_qp_ex(ctx, pd, cq[0], IBV_QPT_UD,
					      IBV_QP_CREATE_BLOCK_SELF_MCAST_LB));
	CHECK(lone && ibv_attach_mcast(lone, &group, 0) == 0,
	      "a UD QP created with BLOCK_SELF_MCAST_LB, attached");
	static char own[GRH + MSG];
	struct ibv_mr *own_mr = ibv_reg_mr(pd, own, sizeof own, IBV_ACCESS_LOCAL_WRITE);
	CHECK(own_mr && post_recv(lone, own_mr, own) == 0 && post_recv(b, mr, buf[2]) == 0,
	      "post receives on it and b");
	CHECK(lone && ibv_post_send(lone, &wr, &bad) == 0, "post SEND from it to the group");
	CHECK(wait_one_ms(cq[0], &wc, 2000) == 1 && wc.opcode == IBV_WC_SEND, "its send completes");
	CHECK(wait_one_ms(cq[2], &wc, 2000) == 1 && wc.status == IBV_WC_SUCCESS &&
		      wc.src_qp == lone->qp_num,
	      "b received it");
	CHECK(wait_one_ms(cq[0], &wc, 300) == 0, "it did not receive its own send");
	CHECK(ibv_detach_mcast(lone, &group, 0) == 0 && ibv_destroy_qp(lone) == 0,
	      "detach and destroy it");
	ibv_dereg_mr(own_mr);

	CHECK(ibv_destroy_ah(ah) == 0, "destroy_ah");
	CHECK(ibv_destroy_qp(b) == EBUSY, "destroy b while attached: EBUSY (as the kernel)");
	CHECK(ibv_detach_mcast(b, &group, 0) == 0, "detach b");
	CHECK(ibv_destroy_qp(tx) == 0 && ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0,
	      "destroy QPs");
	for (int i = 0; i < 3; i++)
		ibv_destroy_cq(cq[i]);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	CHECK(ibv_close_device(ctx) == 0, "close");
	ibv_free_device_list(list);
	return failed;
}
