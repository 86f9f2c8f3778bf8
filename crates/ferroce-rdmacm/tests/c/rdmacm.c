/* rdma_cm on ferroce, in one process with two devices (127.0.0.1 for the
   server side, 127.0.0.2 for the client side): misuse gets an errno, the
   event channel's descriptor is pollable, REJECTED carries the reason (8:
   nobody listens; 28: the application refused, with its private data),
   either side may disconnect, QPs the program moves itself get their
   attributes from rdma_init_qp_attr, and an endpoint made by rdma_create_ep moves
   data with the rdma_verbs.h helpers. One line per check; exit 1 if one
   failed. Every wait is bounded (poll with a timeout). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

static int failed;

#define CHECK(cond, what)                                                  \
	do {                                                               \
		if (cond) {                                                \
			printf("ok   %s\n", what);                         \
		} else {                                                   \
			printf("FAIL %s (errno %d: %s)\n", what, errno,    \
			       strerror(errno));                           \
			failed = 1;                                        \
		}                                                          \
		fflush(stdout);                                            \
	} while (0)

static struct sockaddr_in addr(const char *ip, int port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

/* The next event on ch (within 5 s), or NULL. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, 5000) != 1)
		return NULL;
	if (rdma_get_cm_event(ch, &ev))
		return NULL;
	return ev;
}

/* Waits for an event of type want; returns it (to ack) or NULL. */
static struct rdma_cm_event *expect(struct rdma_event_channel *ch,
				    enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev = next_event(ch);

	if (ev && ev->event != want) {
		printf("     got %s (status %d), wanted %s\n",
		       rdma_event_str(ev->event), ev->status,
		       rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

static void bad_arguments(struct rdma_event_channel *ch)
{
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct sockaddr_in nowhere = addr("192.0.2.1", 7000);
	uint8_t tos = 0;
	int flags;

	CHECK(rdma_create_id(ch, NULL, NULL, RDMA_PS_TCP) == -1 &&
	      errno == EINVAL, "create_id without a result pointer: EINVAL");
	CHECK(rdma_destroy_id(NULL) == -1 && errno == EINVAL,
	      "destroy_id(NULL): EINVAL");
	CHECK(rdma_get_cm_event(NULL, &ev) == -1 && errno == EINVAL,
	      "get_cm_event(NULL): EINVAL");
	CHECK(rdma_ack_cm_event(NULL) == -1 && errno == EINVAL,
	      "ack_cm_event(NULL): EINVAL");
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_IB) == -1,
	      "create_id in the IB port space refused");
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "create_id");
	CHECK(rdma_bind_addr(id, NULL) == -1 && errno == EINVAL,
	      "bind_addr(NULL): EINVAL");
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&nowhere) == -1 &&
	      errno == ENODEV, "bind_addr to a non-ferroce address: ENODEV");
	CHECK(rdma_connect(id, NULL) == -1 && errno == EINVAL,
	      "connect before resolving: EINVAL");
	CHECK(rdma_join_multicast(id, (struct sockaddr *)&nowhere, NULL) == -1 &&
	      errno == EINVAL, "join_multicast on an ID not bound: EINVAL");
	CHECK(rdma_leave_multicast(id, (struct sockaddr *)&nowhere) == -1 &&
	      errno == EADDRNOTAVAIL, "leave_multicast of a group not joined: EADDRNOTAVAIL");
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, 99, &tos, 1) == -1 &&
	      errno == ENOSYS, "set_option with an unknown name: ENOSYS");
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1) == 0,
	      "set_option TOS");
	CHECK(strcmp(rdma_event_str(999), "UNKNOWN EVENT") == 0,
	      "event_str of an unknown event");
	flags = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK);
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN,
	      "get_cm_event on a non-blocking, empty channel: EAGAIN");
	fcntl(ch->fd, F_SETFL, flags);
	CHECK(rdma_destroy_id(id) == 0, "destroy_id");
}

/* A client ID on cch, resolved from 127.0.0.2 to 127.0.0.1:port, with a QP
   whose PD and CQs rdma_create_qp makes. */
static struct rdma_cm_id *client(struct rdma_event_channel *cch, int port)
{
	struct sockaddr_in src = addr("127.0.0.2", 0), dst = addr("127.0.0.1", port);
	struct pollfd p = { .fd = cch->fd, .events = POLLIN };
	struct ibv_qp_init_attr attr;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	if (rdma_create_id(cch, &id, NULL, RDMA_PS_TCP))
		return NULL;
	CHECK(poll(&p, 1, 0) == 0, "poll: channel not readable before an event");
	CHECK(rdma_resolve_addr(id, (struct sockaddr *)&src,
				(struct sockaddr *)&dst, 2000) == 0, "resolve_addr");
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN),
	      "poll: channel readable with ADDR_RESOLVED waiting");
	ev = expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(ev && id->verbs, "ADDR_RESOLVED, id->verbs set");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(rdma_resolve_route(id, 2000) == 0, "resolve_route");
	ev = expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	CHECK(ev != NULL, "ROUTE_RESOLVED");
	if (ev)
		rdma_ack_cm_event(ev);
	memset(&attr, 0, sizeof attr);
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	attr.qp_type = IBV_QPT_RC;
	CHECK(rdma_create_qp(id, NULL, &attr) == 0 && id->qp && id->pd &&
	      id->send_cq && id->recv_cq_channel, "create_qp with its own PD and CQs");
	return id;
}

static void no_listener(struct rdma_event_channel *cch)
{
	struct rdma_cm_id *id = client(cch, 7999);
	struct rdma_cm_event *ev;

	if (!id)
		return;
	CHECK(rdma_connect(id, NULL) == 0, "connect to a port nobody listens on");
	ev = expect(cch, RDMA_CM_EVENT_REJECTED);
	CHECK(ev && ev->status == 8, "REJECTED, status 8 (no listener)");
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_destroy_qp(id);
	CHECK(rdma_destroy_id(id) == 0, "destroy the rejected ID");
}

/* The server's CONNECT_REQUEST for listener; returns the new ID. */
static struct rdma_cm_id *request(struct rdma_event_channel *sch,
				  struct rdma_cm_id *listener, const char *data)
{
	struct rdma_cm_event *ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *id;

	CHECK(ev && ev->listen_id == listener && ev->id->verbs &&
	      ev->param.conn.private_data_len >= strlen(data) &&
	      memcmp(ev->param.conn.private_data, data, strlen(data)) == 0,
	      "CONNECT_REQUEST on a new ID with the client's private data");
	if (!ev)
		return NULL;
	id = ev->id;
	rdma_ack_cm_event(ev);
	return id;
}

static void reject_with_data(struct rdma_event_channel *sch,
			     struct rdma_event_channel *cch,
			     struct rdma_cm_id *listener)
{
	struct rdma_cm_id *id = client(cch, 7471), *child;
	struct rdma_conn_param param;
	struct rdma_cm_event *ev;

	if (!id)
		return;
	memset(&param, 0, sizeof param);
	param.private_data = "hello";
	param.private_data_len = 6;
	param.responder_resources = param.initiator_depth = 1;
	param.retry_count = param.rnr_retry_count = 7;
	CHECK(rdma_connect(id, &param) == 0, "connect with private data");
	child = request(sch, listener, "hello");
	if (child) {
		CHECK(rdma_reject(child, "no thanks", 10) == 0,
		      "reject with private data");
		rdma_destroy_id(child);
	}
	ev = expect(cch, RDMA_CM_EVENT_REJECTED);
	CHECK(ev && ev->status == 28 && ev->param.conn.private_data_len >= 10 &&
	      memcmp(ev->param.conn.private_data, "no thanks", 10) == 0,
	      "REJECTED, status 28 with the server's private data");
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

/* Connects, then disconnects from the client (by_client) or the server. */
static void connect_and_disconnect(struct rdma_event_channel *sch,
				   struct rdma_event_channel *cch,
				   struct rdma_cm_id *listener, int by_client)
{
	struct rdma_cm_id *id = client(cch, 7471), *child;
	struct ibv_qp_init_attr attr;
	struct rdma_cm_event *ev;

	if (!id)
		return;
	CHECK(rdma_connect(id, NULL) == 0, "connect");
	child = request(sch, listener, "");
	if (!child)
		return;
	memset(&attr, 0, sizeof attr);
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	attr.qp_type = IBV_QPT_RC;
	CHECK(rdma_create_qp(child, NULL, &attr) == 0, "create_qp on the request's ID");
	CHECK(rdma_accept(child, NULL) == 0, "accept");
	ev = expect(cch, RDMA_CM_EVENT_ESTABLISHED);
	CHECK(ev != NULL, "client ESTABLISHED");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = expect(sch, RDMA_CM_EVENT_ESTABLISHED);
	CHECK(ev != NULL, "server ESTABLISHED");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(rdma_disconnect(by_client ? id : child) == 0,
	      by_client ? "client disconnects" : "server disconnects");
	ev = expect(by_client ? sch : cch, RDMA_CM_EVENT_DISCONNECTED);
	CHECK(ev != NULL, "the peer sees DISCONNECTED");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(rdma_disconnect(by_client ? child : id) == 0, "the peer disconnects too");
	ev = expect(by_client ? cch : sch, RDMA_CM_EVENT_DISCONNECTED);
	CHECK(ev != NULL, "the side that started sees DISCONNECTED");
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_destroy_qp(child);
	rdma_destroy_id(child);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

/* A QP of the application's own (ibv_create_qp, not rdma_create_qp) on
   id's device, with a PD and CQ of its own. */
static struct ibv_qp *own_qp(struct rdma_cm_id *id, struct ibv_pd **pd,
			     struct ibv_cq **cq)
{
	struct ibv_qp_init_attr attr;

	*pd = ibv_alloc_pd(id->verbs);
	*cq = *pd ? ibv_create_cq(id->verbs, 8, NULL, NULL, 0) : NULL;
	if (!*cq)
		return NULL;
	memset(&attr, 0, sizeof attr);
	attr.send_cq = attr.recv_cq = *cq;
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	attr.qp_type = IBV_QPT_RC;
	return ibv_create_qp(*pd, &attr);
}

/* rdma_init_qp_attr for state into a, its mask into *mask, then the
   transition with them; 0 when both succeeded. */
static int move_qp(struct rdma_cm_id *id, struct ibv_qp *qp,
		   enum ibv_qp_state state, struct ibv_qp_attr *a, int *mask)
{
	memset(a, 0xa5, sizeof *a);
	a->qp_state = state;
	if (rdma_init_qp_attr(id, a, mask))
		return -1;
	return ibv_modify_qp(qp, a, *mask);
}

#define RTR_MASK (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | \
		  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RTS_MASK (IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | \
		  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)

/* Both sides move QPs of their own with rdma_init_qp_attr (as rping -q):
   the server before rdma_accept, the client at CONNECT_RESPONSE, then
   rdma_establish. Each side's RTR and RTS must match what the other's QP
   then has (ibv_query_qp): QPNs, PSNs both ways, MTU, read depths. */
static void self_managed(struct rdma_event_channel *sch,
			 struct rdma_event_channel *cch,
			 struct rdma_cm_id *listener)
{
	struct sockaddr_in src = addr("127.0.0.2", 0), dst = addr("127.0.0.1", 7471);
	struct ibv_qp_attr crtr, crts, srtr, srts, a, q;
	struct ibv_qp *cqp = NULL, *sqp = NULL;
	struct ibv_pd *cpd = NULL, *spd = NULL;
	struct ibv_cq *ccq = NULL, *scq = NULL;
	struct rdma_conn_param param;
	struct ibv_qp_init_attr init;
	struct rdma_cm_id *id, *child;
	struct rdma_cm_event *ev;
	int mask, ok;

	if (rdma_create_id(cch, &id, NULL, RDMA_PS_TCP))
		return;
	a.qp_state = IBV_QPS_INIT;
	CHECK(rdma_init_qp_attr(id, &a, &mask) == -1 && errno == EINVAL,
	      "init_qp_attr(INIT) before the ID has a device: EINVAL");
	rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 2000);
	ev = expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED);
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_resolve_route(id, 2000);
	ev = expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	if (ev)
		rdma_ack_cm_event(ev);
	cqp = own_qp(id, &cpd, &ccq);
	CHECK(cqp != NULL, "client: a QP of its own (ibv_create_qp)");
	if (!cqp)
		return;
	CHECK(move_qp(id, cqp, IBV_QPS_INIT, &a, &mask) == 0 &&
	      mask == (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		       IBV_QP_ACCESS_FLAGS) && a.port_num == 1 && a.pkey_index == 0,
	      "client: INIT from init_qp_attr (state, P_Key index, port, access)");
	a.qp_state = IBV_QPS_RTR;
	CHECK(rdma_init_qp_attr(id, &a, &mask) == -1 && errno == EINVAL,
	      "client: init_qp_attr(RTR) before the REP: EINVAL");
	a.qp_state = IBV_QPS_SQD;
	CHECK(rdma_init_qp_attr(id, &a, &mask) == -1 && errno == EINVAL,
	      "init_qp_attr(SQD): EINVAL");
	memset(&param, 0, sizeof param);
	param.responder_resources = param.initiator_depth = 1;
	param.retry_count = param.rnr_retry_count = 7;
	param.qp_num = cqp->qp_num;
	CHECK(rdma_connect(id, &param) == 0, "client: connect with qp_num");
	child = request(sch, listener, "");
	if (!child)
		return;
	sqp = own_qp(child, &spd, &scq);
	CHECK(sqp && move_qp(child, sqp, IBV_QPS_INIT, &a, &mask) == 0 &&
	      (a.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) &&
	      move_qp(child, sqp, IBV_QPS_RTR, &srtr, &mask) == 0 && mask == RTR_MASK &&
	      move_qp(child, sqp, IBV_QPS_RTS, &srts, &mask) == 0 && mask == RTS_MASK,
	      "server: INIT, RTR, RTS from init_qp_attr before accept");
	if (!sqp)
		return;
	param.qp_num = sqp->qp_num;
	CHECK(rdma_accept(child, &param) == 0, "server: accept with qp_num");
	ev = expect(cch, RDMA_CM_EVENT_CONNECT_RESPONSE);
	CHECK(ev != NULL, "client: CONNECT_RESPONSE (no QP on the ID)");
	if (ev)
		rdma_ack_cm_event(ev);
	ok = move_qp(id, cqp, IBV_QPS_INIT, &a, &mask) == 0 &&
	     move_qp(id, cqp, IBV_QPS_RTR, &crtr, &mask) == 0 && mask == RTR_MASK &&
	     move_qp(id, cqp, IBV_QPS_RTS, &crts, &mask) == 0 && mask == RTS_MASK;
	CHECK(ok, "client: INIT, RTR, RTS from init_qp_attr at CONNECT_RESPONSE");
	CHECK(rdma_establish(id) == 0, "client: establish (the RTU)");
	ev = expect(sch, RDMA_CM_EVENT_ESTABLISHED);
	CHECK(ev != NULL, "server: ESTABLISHED");
	if (ev)
		rdma_ack_cm_event(ev);
	CHECK(crtr.dest_qp_num == sqp->qp_num && srtr.dest_qp_num == cqp->qp_num,
	      "RTR: each side's dest_qp_num is the other's QP");
	CHECK(ibv_query_qp(sqp, &q, IBV_QP_STATE, &init) == 0 &&
	      q.qp_state == IBV_QPS_RTS && crtr.rq_psn == q.sq_psn &&
	      crts.sq_psn == q.rq_psn && crtr.path_mtu == q.path_mtu &&
	      crtr.max_dest_rd_atomic >= q.max_rd_atomic,
	      "client's RTR/RTS against the server's QP (PSNs, MTU, read depth)");
	CHECK(ibv_query_qp(cqp, &q, IBV_QP_STATE, &init) == 0 &&
	      q.qp_state == IBV_QPS_RTS && srtr.rq_psn == q.sq_psn &&
	      srts.sq_psn == q.rq_psn && srtr.path_mtu == q.path_mtu &&
	      srtr.max_dest_rd_atomic >= q.max_rd_atomic,
	      "server's RTR/RTS against the client's QP (PSNs, MTU, read depth)");
	CHECK(crtr.ah_attr.is_global && crtr.ah_attr.grh.dgid.raw[15] == 1 &&
	      srtr.ah_attr.is_global && srtr.ah_attr.grh.dgid.raw[15] == 2 &&
	      crtr.ah_attr.grh.flow_label == srtr.ah_attr.grh.flow_label &&
	      crtr.ah_attr.grh.hop_limit > 0,
	      "RTR paths: GRH to the peer's GID, one flow label both ways");
	CHECK(crts.timeout > 0 && crts.retry_cnt == 7 && crts.rnr_retry == 7,
	      "client's RTS: ACK timeout, retry counts");
	rdma_disconnect(id);
	ev = expect(sch, RDMA_CM_EVENT_DISCONNECTED);
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_disconnect(child);
	ev = expect(cch, RDMA_CM_EVENT_DISCONNECTED);
	CHECK(ev != NULL, "both sides disconnected");
	if (ev)
		rdma_ack_cm_event(ev);
	ibv_destroy_qp(sqp);
	ibv_destroy_qp(cqp);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(ccq);
	ibv_dealloc_pd(spd);
	ibv_dealloc_pd(cpd);
	rdma_destroy_id(child);
	rdma_destroy_id(id);
}

static struct ibv_qp_init_attr ep_attr(void)
{
	struct ibv_qp_init_attr attr;

	memset(&attr, 0, sizeof attr);
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 2;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	attr.sq_sig_all = 1;
	return attr;
}

static void *ep_server(void *arg)
{
	struct rdma_addrinfo hints, *res;
	struct ibv_qp_init_attr attr = ep_attr();
	struct rdma_cm_id *listen, *id;
	char buf[16] = "";
	struct ibv_mr *mr;
	struct ibv_wc wc;

	(void)arg;
	memset(&hints, 0, sizeof hints);
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	CHECK(rdma_getaddrinfo("127.0.0.1", "7475", &hints, &res) == 0,
	      "server: getaddrinfo (passive)");
	CHECK(rdma_create_ep(&listen, res, NULL, &attr) == 0, "server: create_ep");
	rdma_freeaddrinfo(res);
	CHECK(rdma_listen(listen, 1) == 0, "server: listen");
	if (rdma_get_request(listen, &id)) {
		CHECK(0, "server: get_request");
		return NULL;
	}
	CHECK(id->qp && id->recv_cq, "server: the request's ID has its QP");
	mr = rdma_reg_msgs(id, buf, sizeof buf);
	CHECK(mr && rdma_post_recv(id, NULL, buf, sizeof buf, mr) == 0,
	      "server: reg_msgs, post_recv");
	CHECK(rdma_accept(id, NULL) == 0, "server: accept (waits for ESTABLISHED)");
	CHECK(rdma_get_recv_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
	      strcmp(buf, "ping") == 0, "server: get_recv_comp, \"ping\" arrived");
	strcpy(buf, "pong");
	CHECK(rdma_post_send(id, NULL, buf, 5, mr, 0) == 0 &&
	      rdma_get_send_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
	      "server: post_send, get_send_comp");
	CHECK(rdma_disconnect(id) == 0, "server: disconnect");
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen);
	return NULL;
}

static void endpoints(void)
{
	struct sockaddr_in src = addr("127.0.0.2", 0);
	struct ibv_qp_init_attr attr;
	struct rdma_addrinfo hints, *res;
	char out[16] = "ping", in[16] = "";
	struct ibv_mr *smr, *rmr;
	struct rdma_cm_id *id = NULL;
	struct ibv_wc wc;
	pthread_t t;
	int i;

	pthread_create(&t, NULL, ep_server, NULL);
	memset(&hints, 0, sizeof hints);
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_src_addr = (struct sockaddr *)&src;
	hints.ai_src_len = sizeof src;
	CHECK(rdma_getaddrinfo("127.0.0.1", "7475", &hints, &res) == 0 &&
	      res->ai_dst_addr && res->ai_src_addr, "client: getaddrinfo");
	/* The server thread listens within a moment; connect until it does. */
	for (i = 0; i < 50; i++) {
		/* create_ep writes the CQs it made into attr: start afresh. */
		attr = ep_attr();
		if (rdma_create_ep(&id, res, NULL, &attr)) {
			CHECK(0, "client: create_ep");
			id = NULL;
			break;
		}
		rmr = rdma_reg_msgs(id, in, sizeof in);
		smr = rdma_reg_msgs(id, out, sizeof out);
		rdma_post_recv(id, NULL, in, sizeof in, rmr);
		if (rdma_connect(id, NULL) == 0)
			break;
		rdma_dereg_mr(rmr);
		rdma_dereg_mr(smr);
		rdma_destroy_ep(id);
		id = NULL;
		usleep(100000);
	}
	rdma_freeaddrinfo(res);
	CHECK(id != NULL, "client: create_ep and connect (synchronous)");
	if (id) {
		CHECK(rdma_post_send(id, NULL, out, 5, smr, 0) == 0 &&
		      rdma_get_send_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
		      "client: post_send, get_send_comp");
		CHECK(rdma_get_recv_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		      strcmp(in, "pong") == 0, "client: get_recv_comp, \"pong\" arrived");
		CHECK(rdma_disconnect(id) == 0, "client: disconnect");
		rdma_dereg_mr(rmr);
		rdma_dereg_mr(smr);
		rdma_destroy_ep(id);
	}
	pthread_join(t, NULL);
}

int main(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct sockaddr_in any = addr("127.0.0.1", 7471);
	struct rdma_cm_id *listener;

	setvbuf(stdout, NULL, _IOLBF, 0);
	CHECK(sch && cch, "create_event_channel");
	if (!sch || !cch)
		return 1;
	bad_arguments(cch);
	CHECK(rdma_create_id(sch, &listener, NULL, RDMA_PS_TCP) == 0 &&
	      rdma_bind_addr(listener, (struct sockaddr *)&any) == 0 &&
	      rdma_listen(listener, 4) == 0, "server: listen on 127.0.0.1:7471");
	CHECK(rdma_get_src_port(listener) == htons(7471), "get_src_port");
	no_listener(cch);
	reject_with_data(sch, cch, listener);
	connect_and_disconnect(sch, cch, listener, 1);
	connect_and_disconnect(sch, cch, listener, 0);
	self_managed(sch, cch, listener);
	CHECK(rdma_destroy_id(listener) == 0, "destroy the listener");
	endpoints();
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
	return failed;
}
