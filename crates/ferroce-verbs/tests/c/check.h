/* What the C test programs share: one line per check ("ok   ..." or
 * "FAIL ..."; `failed` makes the exit status), waiting for a completion,
 * posting one send request, and taking an RC QP from RESET to RTS. All
 * static inline, so a program that uses part of it builds clean under
 * -Wall -Werror. Plain C against rdma-core's header, as the programs. */
#ifndef FERROCE_TEST_CHECK_H
#define FERROCE_TEST_CHECK_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

static int failed;

/* Flushed at once: a program that crashes still shows its last check. */
#define CHECK(cond, what)                                                   \
	do {                                                                \
		if (cond) {                                                 \
			printf("ok   %s\n", what);                          \
		} else {                                                    \
			printf("FAIL %s (errno %d)\n", what, errno);        \
			failed = 1;                                         \
		}                                                           \
		fflush(stdout);                                             \
	} while (0)

/* Up to `ms` milliseconds for one completion of `cq`; 1 if one came. */
static inline int wait_one_ms(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	for (int i = 0; i < ms * 10; i++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n != 0)
			return n;
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}

static inline int post_one(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	return ibv_post_send(qp, wr, &bad);
}

/* Where an RC QP goes and how: the peer QP, its GID, our GID index, the
 * first PSN each way, the remote access this QP grants, MTU, timeout. */
struct rc_path {
	uint32_t dest;
	union ibv_gid gid;
	int sgid_index;
	uint32_t rq_psn, sq_psn;
	int access;
	enum ibv_mtu mtu;
	uint8_t timeout;
};

/* INIT, RTR and RTS along `p` (retries 7, 4 READs/atomics each way); 0 if
 * every step took. */
static inline int rc_connect(struct ibv_qp *qp, const struct rc_path *p)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = p->access };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS))
		return 1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = p->mtu;
	a.dest_qp_num = p->dest;
	a.rq_psn = p->rq_psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = p->gid;
	a.ah_attr.grh.sgid_index = p->sgid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER))
		return 1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = p->sq_psn;
	a.timeout = p->timeout;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					 IBV_QP_MAX_QP_RD_ATOMIC);
}

#endif
