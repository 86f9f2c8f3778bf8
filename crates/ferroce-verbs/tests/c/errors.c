/* Errors on the data path and the descriptors that report them, through
 * rdma-core's header: ibv_get_cq_event and ibv_get_async_event honour an
 * O_NONBLOCK the application sets (EAGAIN), async_fd becomes readable
 * exactly while an event waits and ibv_get_async_event blocks without
 * spinning; a post to a QP in ERR completes with WR_FLUSH_ERR; an lkey of
 * another PD or of a deregistered MR is taken at post and completes with
 * LOC_PROT_ERR, the QP then in ERR (ibv_post_send and ibv_wr_complete); a peer's
 * WRITE into a registered heap buffer the application freed lands there
 * (the application's bug, not a crash); and a peer process SIGKILLed with
 * its QP connected makes the next request complete with RETRY_EXC_ERR.
 * A process that exits (exit(0), no cleanup) with traffic in flight exits
 * at once, and its peer's requests end in errors. The peers are child
 * processes on their own devices (127.0.0.2, 127.0.0.3); run by
 * c_programs.rs; prints one line per check, exits 1 if one failed. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "check.h"

enum { LEN = 4096 };

/* What each side tells the other. */
struct peer {
	uint32_t qpn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						    IBV_ACCESS_REMOTE_READ };
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS);
}

/* INIT -> RTR -> RTS against `p`; a short timeout (8: about 1 ms) and
 * three retries, so that a dead peer shows within a second. */
static int connect_qp(struct ibv_qp *qp, struct peer *p)
{
	struct ibv_qp_attr a = { 0 };
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = p->qpn;
	a.rq_psn = 0x100;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = p->gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER))
		return 1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x100;
	a.timeout = 8;
	a.retry_cnt = 3;
	a.rnr_retry = 3;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					 IBV_QP_MAX_QP_RD_ATOMIC);
}

/* A child: a QP on `addr` with a 4 KiB heap buffer it registers and then
 * frees (small enough that free() keeps it in the heap), connected to the
 * parent's; it then waits to be killed, or, told 'x', exits at once
 * without cleaning up. */
static void child(int rd, int wr, const char *addr)
{
	setenv("FERROCE_DEVICES", addr, 1);
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	if (!ctx)
		_exit(2);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	char *heap = malloc(LEN);
	struct ibv_mr *mr = ibv_reg_mr(pd, heap, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!qp || !mr || to_init(qp))
		_exit(3);
	struct peer me = { qp->qp_num, mr->rkey, (uintptr_t)heap }, them;
	free(heap); /* still registered: the bug this shows */
	ibv_query_gid(ctx, 1, 0, &me.gid);
	if (write(wr, &me, sizeof me) != sizeof me || read(rd, &them, sizeof them) != sizeof them ||
	    connect_qp(qp, &them))
		_exit(4);
	char ready = 1;
	if (write(wr, &ready, 1) != 1)
		_exit(5);
	/* 'x': exit at once; end of file (the parent is gone, whatever
	 * became of it): exit too, so that no child outlives a failed run. */
	char cmd;
	if (read(rd, &cmd, 1) != 1 || cmd == 'x')
		exit(0);
	for (;;)
		pause();
}

/* Forks a child on `addr` before this process's first verbs call (a child
 * forked later would inherit the parent's open device); `to` and `from`
 * get the pipes to and from it. */
static pid_t spawn(const char *addr, int *to, int *from)
{
	int up[2], down[2];
	if (pipe(up) || pipe(down))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		/* The parent's ends: held here too, they would keep the child's
		 * read from ever seeing the parent go. */
		close(down[1]);
		close(up[0]);
		child(down[0], up[1], addr);
		_exit(0);
	}
	close(down[0]);
	close(up[1]);
	*to = down[1];
	*from = up[0];
	return pid;
}

/* Connects `qp` (in RESET) to the child at the other end of the pipes. */
static int meet(struct ibv_context *ctx, struct ibv_qp *qp, int to, int from, struct peer *them)
{
	struct peer me = { qp->qp_num };
	ibv_query_gid(ctx, 1, 0, &me.gid);
	char ready = 0;
	return to_init(qp) || read(from, them, sizeof *them) != sizeof *them ||
	       write(to, &me, sizeof me) != sizeof me || connect_qp(qp, them) ||
	       read(from, &ready, 1) != 1 || ready != 1;
}

/* Blocks in ibv_get_async_event; records the thread's CPU time meanwhile. */
struct waiter {
	struct ibv_context *ctx;
	struct ibv_async_event ev;
	int rc;
	double cpu_ms;
};

static void *wait_async(void *arg)
{
	struct waiter *w = arg;
	struct timespec a, b;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	w->rc = ibv_get_async_event(w->ctx, &w->ev);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	w->cpu_ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
	return NULL;
}

/* The QP's state as ibv_query_qp reports it, or -1. */
static int qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;
	return ibv_query_qp(qp, &a, IBV_QP_STATE, &i) == 0 ? (int)a.qp_state : -1;
}

static int post_write(struct ibv_qp *qp, struct ibv_mr *mr, char *buf, struct peer *p,
		      uint32_t lkey, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)buf, 64, lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	(void)mr;
	w.wr.rdma.remote_addr = p->addr;
	w.wr.rdma.rkey = p->rkey;
	return ibv_post_send(qp, &w, &bad);
}

/* One ibv_wr_* batch of `n` signaled 64-byte WRITEs to `p`, wr_ids from
 * `id`; returns ibv_wr_complete's result. */
static int write_batch(struct ibv_qp_ex *qx, struct ibv_mr *mr, char *buf, struct peer *p,
		       uint64_t id, int n)
{
	ibv_wr_start(qx);
	for (int i = 0; i < n; i++) {
		qx->wr_id = id + i;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(qx, p->rkey, p->addr);
		ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 64);
	}
	return ibv_wr_complete(qx);
}

int main(void)
{
	int to1, from1, to2, from2;
	pid_t pid = spawn("127.0.0.2", &to1, &from1), pid2 = spawn("127.0.0.3", &to2, &from2);
	if (pid < 0 || pid2 < 0)
		return 1;

	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	CHECK(ctx != NULL, "open");
	if (!ctx)
		return 1;
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, ch, 0);
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init), *lone = ibv_create_qp(pd, &init);
	char *buf = aligned_alloc(4096, LEN), *other = aligned_alloc(4096, LEN);
	memset(buf, 0x5a, LEN);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mr2 = ibv_reg_mr(pd2, other, LEN, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *gone = ibv_reg_mr(pd, other, LEN, IBV_ACCESS_LOCAL_WRITE);
	uint32_t gone_lkey = gone ? gone->lkey : 0;
	CHECK(qp && lone && mr && mr2 && gone && ibv_dereg_mr(gone) == 0, "objects");

	/* Completion channel: O_NONBLOCK is the application's to set. */
	int fl = fcntl(ch->fd, F_GETFL);
	CHECK(fl >= 0 && !(fl & O_NONBLOCK), "the channel's fd starts blocking, as rdma-core's");
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	errno = 0;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == -1 && errno == EAGAIN,
	      "get_cq_event with O_NONBLOCK and no event: EAGAIN");

	/* Async events: nothing yet, and O_NONBLOCK gives EAGAIN. */
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 0) == 0, "async_fd not readable without an event");
	fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	struct ibv_async_event ev;
	errno = 0;
	CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN,
	      "get_async_event with O_NONBLOCK and no event: EAGAIN");

	/* A QP in ERR flushes what is posted to it. */
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	CHECK(to_init(lone) == 0 && ibv_modify_qp(lone, &err, IBV_QP_STATE) == 0,
	      "modify_qp INIT -> ERR");
	struct peer nobody = { 0 };
	CHECK(post_write(lone, mr, buf, &nobody, mr->lkey, 11) == 0, "post_send in ERR: accepted");
	struct ibv_wc wc;
	CHECK(wait_one_ms(cq, &wc, 2000) == 1 && wc.wr_id == 11 && wc.status == IBV_WC_WR_FLUSH_ERR,
	      "post_send in ERR: completes with WR_FLUSH_ERR");
	struct ibv_sge rs = { (uintptr_t)buf, 64, mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 12, .sg_list = &rs, .num_sge = 1 }, *rbad;
	CHECK(ibv_post_recv(lone, &rw, &rbad) == 0 && wait_one_ms(cq, &wc, 2000) == 1 &&
	      wc.wr_id == 12 && wc.status == IBV_WC_WR_FLUSH_ERR,
	      "post_recv in ERR: completes with WR_FLUSH_ERR");

	/* More SGEs than the QP was created for (one each way): EINVAL at the
	 * post, as rxe, nothing queued. */
	struct ibv_sge two[2] = { { (uintptr_t)buf, 8, mr->lkey }, { (uintptr_t)buf + 8, 8, mr->lkey } };
	struct ibv_send_wr sw2 = { .wr_id = 13, .sg_list = two, .num_sge = 2, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED },
			   *sbad = NULL;
	CHECK(ibv_post_send(lone, &sw2, &sbad) == EINVAL && sbad == &sw2,
	      "post_send with 2 SGEs on a QP of max_send_sge 1: EINVAL");
	struct ibv_recv_wr rw2 = { .wr_id = 14, .sg_list = two, .num_sge = 2 }, *rbad2 = NULL;
	CHECK(ibv_post_recv(lone, &rw2, &rbad2) == EINVAL && rbad2 == &rw2,
	      "post_recv with 2 SGEs on a QP of max_recv_sge 1: EINVAL");
	CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "a refused post completes nothing");

	/* Connect to the first child's QP. */
	struct peer them;
	CHECK(meet(ctx, qp, to1, from1, &them) == 0, "connected to the child's QP");

	CHECK(post_write(qp, mr, buf, &them, mr->lkey, 1) == 0 && wait_one_ms(cq, &wc, 2000) == 1 &&
	      wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS,
	      "WRITE into the child's freed heap buffer: lands, no crash (the application's bug)");

	/* Bad lkeys, on two probe QPs aimed at a QP the child's device does not
	 * have. As rdma-core (and IBA): the post succeeds, the request completes
	 * with LOC_PROT_ERR, nothing is sent, and the QP goes to ERR (rxe gives
	 * LOC_QP_OP_ERR for an unknown lkey; see the README). */
	struct peer nowhere = them;
	nowhere.qpn = them.qpn ^ 0x5555;
	struct ibv_qp *probe = ibv_create_qp(pd, &init), *probe2 = ibv_create_qp(pd, &init);
	CHECK(probe && probe2 && to_init(probe) == 0 && connect_qp(probe, &nowhere) == 0 &&
	      to_init(probe2) == 0 && connect_qp(probe2, &nowhere) == 0, "two probe QPs");
	CHECK(post_write(probe, mr, other, &nowhere, mr2->lkey, 2) == 0 && wait_one_ms(cq, &wc, 2000) == 1 &&
	      wc.wr_id == 2 && wc.status == IBV_WC_LOC_PROT_ERR,
	      "lkey of another PD: posted, completes with LOC_PROT_ERR");
	CHECK(qp_state(probe) == IBV_QPS_ERR, "the QP is then in ERR (ibv_query_qp)");
	struct ibv_sge bad_rs = { (uintptr_t)other, 64, mr2->lkey };
	struct ibv_recv_wr bad_rw = { .wr_id = 13, .sg_list = &bad_rs, .num_sge = 1 };
	CHECK(ibv_post_recv(probe2, &bad_rw, &rbad) == 0,
	      "post_recv with another PD's lkey: 0 (it fails when a SEND arrives)");
	CHECK(post_write(probe2, mr, other, &nowhere, gone_lkey, 3) == 0 && wait_one_ms(cq, &wc, 2000) == 1 &&
	      wc.wr_id == 3 && wc.status == IBV_WC_LOC_PROT_ERR && qp_state(probe2) == IBV_QPS_ERR,
	      "lkey of a deregistered MR: posted, LOC_PROT_ERR, the QP in ERR");
	CHECK(wait_one_ms(cq, &wc, 2000) == 1 && wc.wr_id == 13 && wc.status == IBV_WC_WR_FLUSH_ERR,
	      "the receive posted before: flushed");
	CHECK(post_write(probe, mr, buf, &nowhere, mr->lkey, 5) == 0 && wait_one_ms(cq, &wc, 2000) == 1 &&
	      wc.wr_id == 5 && wc.status == IBV_WC_WR_FLUSH_ERR,
	      "a good request after it: flushed (the QP is in ERR)");
	CHECK(wait_one_ms(cq, &wc, 20) == 0, "no other completion");

	/* Each probe's failure raised QP_FATAL: async_fd readable, the
	 * events, then EAGAIN and not readable. */
	CHECK(poll(&pfd, 1, 2000) == 1 && (pfd.revents & POLLIN), "async_fd readable with an event");
	CHECK(ibv_get_async_event(ctx, &ev) == 0 && ev.event_type == IBV_EVENT_QP_FATAL &&
	      ev.element.qp == probe, "get_async_event: QP_FATAL naming the first probe");
	ibv_ack_async_event(&ev);
	int more = 0;
	while (ibv_get_async_event(ctx, &ev) == 0) {
		more += ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == probe2;
		ibv_ack_async_event(&ev);
	}
	CHECK(more == 1 && errno == EAGAIN && poll(&pfd, 1, 0) == 0,
	      "then the second's; drained: EAGAIN, async_fd not readable");

	/* The peer dies without cleanup: the next request fails, not hangs, and
	 * a get_async_event blocked meanwhile wakes with the QP's error. */
	fcntl(ctx->async_fd, F_SETFL, fl & ~O_NONBLOCK);
	struct waiter w = { .ctx = ctx };
	pthread_t t;
	pthread_create(&t, NULL, wait_async, &w);
	kill(pid, SIGKILL);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status), "the child is killed");
	struct timespec pause = { 0, 200 * 1000 * 1000 };
	nanosleep(&pause, NULL);
	CHECK(post_write(qp, mr, buf, &them, mr->lkey, 4) == 0, "WRITE to the dead peer posted");
	CHECK(wait_one_ms(cq, &wc, 5000) == 1 && wc.wr_id == 4 && wc.status == IBV_WC_RETRY_EXC_ERR,
	      "WRITE to the dead peer: RETRY_EXC_ERR, not a hang");
	pthread_join(t, NULL);
	CHECK(w.rc == 0 && w.ev.event_type == IBV_EVENT_QP_FATAL && w.ev.element.qp == qp,
	      "a blocked get_async_event woke with QP_FATAL");
	printf("info blocked get_async_event used %.1f ms of CPU\n", w.cpu_ms);
	CHECK(w.cpu_ms < 50, "the blocked get_async_event did not spin");
	ibv_ack_async_event(&w.ev);

	/* The second child exits (exit(0), no cleanup) with WRITEs to it in
	 * flight: it exits at once, and the requests after end in errors. */
	struct ibv_qp *q2 = ibv_create_qp(pd, &init);
	struct peer them2;
	CHECK(q2 && meet(ctx, q2, to2, from2, &them2) == 0, "connected to the second child");
	int posted = 0;
	for (int i = 0; i < 8; i++)
		posted += post_write(q2, mr, buf, &them2, mr->lkey, 20 + i) == 0;
	char x = 'x';
	CHECK(posted == 8 && write(to2, &x, 1) == 1, "8 WRITEs posted, the child told to exit");
	int exited = 0;
	for (int i = 0; i < 300 && !exited; i++) {
		exited = waitpid(pid2, &status, WNOHANG) == pid2;
		if (!exited)
			nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	}
	CHECK(exited && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child's exit(0) with its device open and traffic in flight returns within 3 s");
	int done = 0;
	while (done < 8 && wait_one_ms(cq, &wc, 5000) == 1)
		done++;
	CHECK(done == 8, "the 8 WRITEs completed (successfully or not): no hang");
	nanosleep(&pause, NULL);
	CHECK(post_write(q2, mr, buf, &them2, mr->lkey, 30) != 0 ||
	      (wait_one_ms(cq, &wc, 5000) == 1 && wc.wr_id == 30 &&
	       (wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_WR_FLUSH_ERR)),
	      "a WRITE after the exit: RETRY_EXC_ERR (or flushed behind it), not a hang");
	/* The send queue (4 WRs) and ibv_wr_complete, the QP aimed at a
	 * missing QP so that nothing completes meanwhile: a batch of 6 fails
	 * whole (ENOMEM, as rxe); 3 then fit; of a batch of 3 more, the first
	 * is posted and ENOMEM returned (rxe's builders would have refused the
	 * batch whole: see the README). */
	struct ibv_qp_init_attr_ex xi = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE,
	};
	struct ibv_qp *small = ibv_create_qp_ex(ctx, &xi);
	struct ibv_qp_ex *sx = small ? ibv_qp_to_qp_ex(small) : NULL;
	CHECK(sx && to_init(small) == 0 && connect_qp(small, &nowhere) == 0, "a QP of 4 send WRs");
	if (sx) {
		CHECK(write_batch(sx, mr, buf, &them, 40, 6) == ENOMEM && wait_one_ms(cq, &wc, 50) == 0,
		      "wr_complete, a batch of 6 for 4 slots: ENOMEM, none posted");
		CHECK(write_batch(sx, mr, buf, &them, 50, 3) == 0, "a batch of 3: posted");
		CHECK(write_batch(sx, mr, buf, &them, 60, 3) == ENOMEM,
		      "a batch of 3 more: ENOMEM");
		int n = 0, last = -1;
		while (wait_one_ms(cq, &wc, 3000) == 1) {
			last = (int)wc.wr_id;
			if (++n == 4)
				break;
		}
		CHECK(n == 4 && last == 60 && wait_one_ms(cq, &wc, 100) == 0,
		      "the 3 and the first of the 3 more were posted (and end in errors), no more");
	}

	/* ibv_wr_complete with a bad lkey: 0, then LOC_PROT_ERR and ERR. */
	struct ibv_qp *bq = ibv_create_qp_ex(ctx, &xi);
	struct ibv_qp_ex *bx = bq ? ibv_qp_to_qp_ex(bq) : NULL;
	CHECK(bx && to_init(bq) == 0 && connect_qp(bq, &nowhere) == 0, "an extended probe QP");
	if (bx) {
		ibv_wr_start(bx);
		bx->wr_id = 70;
		bx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(bx, nowhere.rkey, nowhere.addr);
		ibv_wr_set_sge(bx, gone_lkey, (uintptr_t)other, 64);
		CHECK(ibv_wr_complete(bx) == 0 && wait_one_ms(cq, &wc, 2000) == 1 && wc.wr_id == 70 &&
		      wc.status == IBV_WC_LOC_PROT_ERR && qp_state(bq) == IBV_QPS_ERR,
		      "wr_complete with a deregistered MR's lkey: 0, LOC_PROT_ERR, the QP in ERR");
	}

	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	while (ibv_get_async_event(ctx, &ev) == 0)
		ibv_ack_async_event(&ev);

	ibv_destroy_qp(small);
	if (bq)
		ibv_destroy_qp(bq);
	ibv_destroy_qp(q2);
	ibv_destroy_qp(probe);
	ibv_destroy_qp(probe2);
	ibv_destroy_qp(qp);
	ibv_destroy_qp(lone);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(mr2);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	ibv_dealloc_pd(pd);
	ibv_dealloc_pd(pd2);
	CHECK(ibv_close_device(ctx) == 0, "close");
	ibv_free_device_list(list);
	return failed;
}
