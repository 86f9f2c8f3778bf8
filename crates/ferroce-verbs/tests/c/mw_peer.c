/* Memory windows between two hosts, as two programs on any libibverbs use
 * them: the owner binds windows onto its region and the requester reaches
 * its memory only through them. Built against rdma-core's header; runs on
 * ferroce's library or on rdma-core's with a kernel provider (rxe), so the
 * two ends can be either.
 *
 *   mw_peer [-g GID_INDEX] [-p TCP_PORT]          the owner (waits)
 *   mw_peer [-g GID_INDEX] [-p TCP_PORT] OWNER    the requester
 *
 * The QPs are exchanged over TCP (IPv4, default port 18600), RC, MTU 1024.
 * The owner binds a type 1 window (ibv_bind_mw, READ) onto the first 4 KiB
 * of a region that has no remote rights of its own and a type 2 window
 * (IBV_WR_BIND_MW, READ and WRITE) onto the next 8 KiB. The requester READs
 * through the first and WRITEs through the second; the owner checks the
 * bytes, invalidates the type 2 window (LOCAL_INV) and binds it again with
 * a new key onto the last 4 KiB; the requester WRITEs there, then closes it
 * with a SEND with invalidate, which the owner's receive reports; a last
 * WRITE through the closed window completes with REM_ACCESS_ERR.
 * Each side prints one line per check and exits 1 if one failed. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "check.h"

#define DIE(what)                                                           \
	do {                                                                \
		printf("FAIL %s (errno %d)\n", what, errno);                \
		exit(1);                                                    \
	} while (0)

enum { LEN = 20480, T1 = 0, T2 = 4096, T2_LEN = 8192, T3 = 12288, RECV = 16384, PSN = 0x4242 };

/* What the owner tells the requester: each window's address and R_Key. */
struct windows {
	uint64_t t1_addr, t2_addr;
	uint32_t t1_rkey, t2_rkey, mr_rkey, pad;
};

struct qp_info {
	uint32_t qpn, psn;
	uint8_t gid[16];
};

static void xfer(int fd, void *buf, size_t len, int out)
{
	char *p = buf;
	while (len) {
		ssize_t n = out ? write(fd, p, len) : read(fd, p, len);
		if (n <= 0)
			DIE(out ? "TCP write" : "TCP read");
		p += n;
		len -= (size_t)n;
	}
}

static int tcp(const char *owner, int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	if (s < 0)
		DIE("socket");
	if (owner) {
		if (inet_pton(AF_INET, owner, &a.sin_addr) != 1)
			DIE("owner address (IPv4)");
		for (int i = 0; i < 100; i++) {
			if (connect(s, (struct sockaddr *)&a, sizeof a) == 0)
				return s;
			struct timespec ts = { 0, 200000000 };
			nanosleep(&ts, NULL);
		}
		DIE("connect to the owner");
	}
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 1))
		DIE("listen");
	int c = accept(s, NULL, NULL);
	if (c < 0)
		DIE("accept");
	close(s);
	return c;
}

/* Up to 10 s for one completion (a TCG guest is slow). */
static int wait_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return wait_one_ms(cq, wc, 10000);
}

static int connect_qp(struct ibv_qp *qp, struct qp_info *peer, int gidx)
{
	struct rc_path p = { .dest = ntohl(peer->qpn), .sgid_index = gidx,
			     .rq_psn = ntohl(peer->psn), .sq_psn = PSN,
			     .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
			     .mtu = IBV_MTU_1024, .timeout = 16 };
	memcpy(p.gid.raw, peer->gid, 16);
	return rc_connect(qp, &p);
}

/* One request from the requester; its completion's status, -1 if none. */
static int rdma(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode op,
		struct ibv_sge *sge, uint64_t addr, uint32_t rkey)
{
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	if (op == IBV_WR_SEND_WITH_INV)
		wr.invalidate_rkey = rkey;
	struct ibv_wc wc;
	if (ibv_post_send(qp, &wr, &bad))
		return -1;
	return wait_one(cq, &wc) == 1 ? (int)wc.status : -1;
}

static int filled(const char *p, int len, char c)
{
	for (int i = 0; i < len; i++)
		if (p[i] != c)
			return 0;
	return 1;
}

static void owner(int fd, struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_qp *qp,
		  struct ibv_mr *mr, char *buf)
{
	struct ibv_wc wc;
	memset(buf + T1, 'O', 4096);
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw1 && mw2, "alloc_mw, types 1 and 2");
	if (!mw1 || !mw2)
		exit(1);
	struct ibv_mw_bind b1 = {
		.wr_id = 1, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = (uintptr_t)buf + T1, .length = 4096,
			       .mw_access_flags = IBV_ACCESS_REMOTE_READ },
	};
	CHECK(ibv_bind_mw(qp, mw1, &b1) == 0 && wait_one(cq, &wc) == 1 &&
		      wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
	      "type 1 window bound (ibv_bind_mw)");
	uint32_t k2 = ibv_inc_rkey(mw2->rkey);
	struct ibv_send_wr bw = { .wr_id = 2, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	bw.bind_mw.mw = mw2;
	bw.bind_mw.rkey = k2;
	bw.bind_mw.bind_info = (struct ibv_mw_bind_info){
		.mr = mr, .addr = (uintptr_t)buf + T2, .length = T2_LEN,
		.mw_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
	};
	CHECK(ibv_post_send(qp, &bw, &bad) == 0 && wait_one(cq, &wc) == 1 &&
		      wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW,
	      "type 2 window bound (IBV_WR_BIND_MW)");
	/* A bind posted by the application leaves updating the window's R_Key
	 * to it (rdma-core's providers update it for ibv_bind_mw only), and
	 * rxe names the window by that R_Key in the next bind. */
	mw2->rkey = k2;
	struct windows w = { .t1_addr = (uintptr_t)buf + T1, .t2_addr = (uintptr_t)buf + T2,
			     .t1_rkey = mw1->rkey, .t2_rkey = k2, .mr_rkey = mr->rkey };
	xfer(fd, &w, sizeof w, 1);
	char go;
	xfer(fd, &go, 1, 0);
	CHECK(filled(buf + T2, T2_LEN, 'R'), "the peer's WRITE through the type 2 window landed");

	struct ibv_send_wr inv = { .wr_id = 3, .opcode = IBV_WR_LOCAL_INV,
				   .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = k2 };
	CHECK(ibv_post_send(qp, &inv, &bad) == 0 && wait_one(cq, &wc) == 1 &&
		      wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV,
	      "LOCAL_INV of the type 2 window");
	struct ibv_sge rsge = { (uintptr_t)buf + RECV, 64, mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 4, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	CHECK(ibv_post_recv(qp, &rwr, &rbad) == 0, "post_recv");
	uint32_t k3 = ibv_inc_rkey(k2);
	bw.wr_id = 5;
	bw.bind_mw.rkey = k3;
	bw.bind_mw.bind_info.addr = (uintptr_t)buf + T3;
	bw.bind_mw.bind_info.length = 4096;
	CHECK(ibv_post_send(qp, &bw, &bad) == 0 && wait_one(cq, &wc) == 1 &&
		      wc.status == IBV_WC_SUCCESS,
	      "type 2 window bound again, new key, new range");
	mw2->rkey = k3;
	w.t2_addr = (uintptr_t)buf + T3;
	w.t2_rkey = k3;
	xfer(fd, &w, sizeof w, 1);
	int got = wait_one(cq, &wc);
	/* The kernel's rxe writes the kernel's IB_WC_WITH_INVALIDATE (bit 2)
	 * into the user's CQ, where rdma-core's header reads bit 2 as
	 * IBV_WC_IP_CSUM_OK; IBV_WC_WITH_INV is bit 3. Either says it here
	 * (ferroce's own test, windows.c, holds ferroce to bit 3). */
	int inv_flag = wc.wc_flags & (IBV_WC_WITH_INV | (1 << 2));
	CHECK(got == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && inv_flag &&
		      wc.invalidated_rkey == k3,
	      "the peer's SEND with invalidate names the window's key");
	if (got == 1)
		printf("     (status %d, opcode %d, wc_flags %#x, invalidated_rkey %#x; key %#x)\n",
		       wc.status, wc.opcode, wc.wc_flags, wc.invalidated_rkey, k3);
	xfer(fd, &go, 1, 0);
	CHECK(filled(buf + T3, 4096, 'S'), "the WRITE through the rebound window landed");
	CHECK(filled(buf + T1, 4096, 'O'), "the type 1 window (READ only) was not written");
	xfer(fd, &go, 1, 1);
	xfer(fd, &go, 1, 0);
	ibv_dealloc_mw(mw1);
	ibv_dealloc_mw(mw2);
}

static void requester(int fd, struct ibv_cq *cq, struct ibv_qp *qp, struct ibv_mr *mr,
		      char *buf)
{
	struct windows w;
	xfer(fd, &w, sizeof w, 0);
	struct ibv_sge sge = { (uintptr_t)buf, 4096, mr->lkey };
	CHECK(rdma(qp, cq, IBV_WR_RDMA_READ, &sge, w.t1_addr, w.t1_rkey) == IBV_WC_SUCCESS &&
		      filled(buf, 4096, 'O'),
	      "READ through the type 1 window");
	memset(buf + 4096, 'R', T2_LEN);
	struct ibv_sge big = { (uintptr_t)buf + 4096, T2_LEN, mr->lkey };
	CHECK(rdma(qp, cq, IBV_WR_RDMA_WRITE, &big, w.t2_addr, w.t2_rkey) == IBV_WC_SUCCESS,
	      "WRITE of 8 KiB through the type 2 window");
	char go = 1;
	xfer(fd, &go, 1, 1);
	xfer(fd, &w, sizeof w, 0);
	memset(buf, 'S', 4096);
	CHECK(rdma(qp, cq, IBV_WR_RDMA_WRITE, &sge, w.t2_addr, w.t2_rkey) == IBV_WC_SUCCESS,
	      "WRITE through the window bound again");
	struct ibv_sge small = { (uintptr_t)buf, 8, mr->lkey };
	CHECK(rdma(qp, cq, IBV_WR_SEND_WITH_INV, &small, 0, w.t2_rkey) == IBV_WC_SUCCESS,
	      "SEND with invalidate of the window");
	xfer(fd, &go, 1, 1);
	xfer(fd, &go, 1, 0);
	CHECK(rdma(qp, cq, IBV_WR_RDMA_WRITE, &small, w.t2_addr, w.t2_rkey) ==
		      IBV_WC_REM_ACCESS_ERR,
	      "WRITE through the closed window: REM_ACCESS_ERR");
	xfer(fd, &go, 1, 1);
}

int main(int argc, char **argv)
{
	int gidx = 0, port = 18600, opt;
	while ((opt = getopt(argc, argv, "g:p:")) != -1) {
		if (opt == 'g')
			gidx = atoi(optarg);
		else if (opt == 'p')
			port = atoi(optarg);
		else
			return 2;
	}
	const char *peer = optind < argc ? argv[optind] : NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	if (!ctx)
		DIE("open a device");
	struct ibv_device_attr dev;
	CHECK(ibv_query_device(ctx, &dev) == 0 && (dev.device_cap_flags & IBV_DEVICE_MEM_WINDOW),
	      "the device has memory windows");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	char *buf = aligned_alloc(4096, LEN);
	memset(buf, 0, LEN);
	int access = IBV_ACCESS_LOCAL_WRITE | (peer ? 0 : IBV_ACCESS_MW_BIND);
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, LEN, access) : NULL;
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = mr && cq ? ibv_create_qp(pd, &init) : NULL;
	if (!qp)
		DIE("PD, CQ, region and QP");
	struct qp_info me = { .qpn = htonl(qp->qp_num), .psn = htonl(PSN) }, them;
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		DIE("query_gid");
	memcpy(me.gid, gid.raw, 16);
	int fd = tcp(peer, port);
	xfer(fd, &me, sizeof me, 1);
	xfer(fd, &them, sizeof them, 0);
	CHECK(connect_qp(qp, &them, gidx) == 0, "QP connected");
	if (peer)
		requester(fd, cq, qp, mr, buf);
	else
		owner(fd, pd, cq, qp, mr, buf);
	close(fd);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("%s: %s\n", peer ? "requester" : "owner", failed ? "FAILED" : "all checks passed");
	return failed;
}
