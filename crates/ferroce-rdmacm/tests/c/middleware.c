/* librdmacm and libibverbs behaviours that middleware relies on, in one
 * process with two devices (SRC and DST, both in FERROCE_DEVICES):
 *
 *   middleware migrate SRC DST  libfabric's verbs MSG endpoint: a
 *       synchronous ID resolves its address, moves to a channel, and its
 *       ROUTE_RESOLVED arrives there; an asynchronous ID moved to NULL
 *       waits for its own outcome; a synchronous ID moved to NULL: EINVAL.
 *   middleware idpd SRC DST     id->pd is the device's PD once the ID has a
 *       device (bind, resolve_addr), and UCX's ibv_create_qp(id->pd) works.
 *   middleware eintr SRC DST    a blocked ibv_get_cq_event,
 *       rdma_get_cm_event and ibv_get_async_event fail with EINTR when a
 *       SIGALRM handler without SA_RESTART runs (qperf's event mode); with
 *       SA_RESTART, rdma_get_cm_event goes on waiting and returns the event.
 *
 * One line per check ("ok ..." or "FAIL ..."); exit status 1 if one failed. */
#include <rdma/rdma_cma.h>
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failed;
static struct sockaddr_in src, dst;

static void check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok  " : "FAIL", what);
	fflush(stdout);
	if (!ok)
		failed = 1;
}

static void addr(struct sockaddr_in *a, const char *ip, int port)
{
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_port = htons(port);
	if (inet_pton(AF_INET, ip, &a->sin_addr) != 1) {
		printf("FAIL bad address %s\n", ip);
		exit(2);
	}
}

/* The next event on `ch` within 2 s, or -1. */
static int next_event(struct rdma_event_channel *ch)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;
	if (poll(&p, 1, 2000) != 1 || rdma_get_cm_event(ch, &e))
		return -1;
	int kind = e->event;
	rdma_ack_cm_event(e);
	return kind;
}

static void migrate(void)
{
	struct rdma_cm_id *id;
	check(!rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), "sync: rdma_create_id(NULL channel)");
	check(!rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 2000),
	      "sync: rdma_resolve_addr waits for its outcome");
	check(id->event && id->event->event == RDMA_CM_EVENT_ADDR_RESOLVED,
	      "sync: id->event holds ADDR_RESOLVED");
	struct rdma_event_channel *ch = rdma_create_event_channel();
	check(!rdma_migrate_id(id, ch), "sync -> channel: rdma_migrate_id");
	check(id->channel == ch && id->event == NULL, "sync -> channel: id->channel set, held event acked");
	check(!rdma_resolve_route(id, 2000), "async: rdma_resolve_route");
	check(id->event == NULL, "async: the call does not wait (id->event stays NULL)");
	check(next_event(ch) == RDMA_CM_EVENT_ROUTE_RESOLVED, "async: ROUTE_RESOLVED arrives on the channel");

	struct rdma_cm_id *a;
	check(!rdma_create_id(ch, &a, NULL, RDMA_PS_TCP), "async: rdma_create_id(channel)");
	check(!rdma_migrate_id(a, NULL), "async -> NULL: rdma_migrate_id");
	check(a->channel && a->channel != ch, "async -> NULL: a channel of its own");
	check(!rdma_resolve_addr(a, (struct sockaddr *)&src, (struct sockaddr *)&dst, 2000) && a->event &&
		      a->event->event == RDMA_CM_EVENT_ADDR_RESOLVED,
	      "async -> NULL: rdma_resolve_addr waits, id->event holds ADDR_RESOLVED");
	errno = 0;
	check(rdma_migrate_id(a, NULL) == -1 && errno == EINVAL, "sync -> NULL: EINVAL");
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	check(poll(&p, 1, 100) == 0, "the old channel gets none of the moved ID's events");
	rdma_destroy_id(a);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

static void idpd(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *b, *r;
	rdma_create_id(ch, &b, NULL, RDMA_PS_TCP);
	check(b->pd == NULL, "id->pd is NULL before the ID has a device");
	check(!rdma_bind_addr(b, (struct sockaddr *)&src), "rdma_bind_addr");
	check(b->verbs && b->pd && b->pd->context == b->verbs, "after bind: id->pd is a PD of id->verbs");
	rdma_create_id(ch, &r, NULL, RDMA_PS_TCP);
	check(!rdma_resolve_addr(r, (struct sockaddr *)&src, (struct sockaddr *)&dst, 2000) &&
		      next_event(ch) == RDMA_CM_EVENT_ADDR_RESOLVED,
	      "rdma_resolve_addr");
	check(r->pd == b->pd, "after resolve_addr: the same device's PD (one per device)");
	struct ibv_cq *cq = ibv_create_cq(r->verbs, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(r->pd, &qa);
	check(qp != NULL, "ibv_create_qp(id->pd) (UCX's rdmacm CM)");
	if (qp)
		ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	rdma_destroy_id(r);
	rdma_destroy_id(b);
	rdma_destroy_event_channel(ch);
}

static volatile sig_atomic_t fired;
static void on_alarm(int s) { (void)s; fired = 1; }

static void handle_alarm(int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = flags;
	sigaction(SIGALRM, &sa, NULL);
	fired = 0;
	ualarm(200 * 1000, 0);
}

static void *resolve_later(void *id)
{
	usleep(600 * 1000);
	rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 2000);
	return NULL;
}

static void eintr(void)
{
	struct ibv_context *c = ibv_open_device(ibv_get_device_list(NULL)[0]);
	struct ibv_comp_channel *cc = ibv_create_comp_channel(c);
	struct ibv_cq *cq = ibv_create_cq(c, 4, NULL, cc, 0);
	ibv_req_notify_cq(cq, 0);
	struct ibv_cq *ecq;
	void *ectx;
	handle_alarm(0);
	errno = 0;
	int r = ibv_get_cq_event(cc, &ecq, &ectx);
	check(r == -1 && errno == EINTR && fired, "ibv_get_cq_event: -1/EINTR after a handler without SA_RESTART");

	struct ibv_async_event ae;
	handle_alarm(0);
	errno = 0;
	r = ibv_get_async_event(c, &ae);
	check(r == -1 && errno == EINTR && fired, "ibv_get_async_event: -1/EINTR after a handler without SA_RESTART");

	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	struct rdma_cm_event *e;
	handle_alarm(0);
	errno = 0;
	r = rdma_get_cm_event(ch, &e);
	check(r == -1 && errno == EINTR && fired, "rdma_get_cm_event: -1/EINTR after a handler without SA_RESTART");

	/* With SA_RESTART the read(2) behind librdmacm's call goes on. */
	pthread_t t;
	pthread_create(&t, NULL, resolve_later, id);
	handle_alarm(SA_RESTART);
	r = rdma_get_cm_event(ch, &e);
	check(r == 0 && fired && e->event == RDMA_CM_EVENT_ADDR_RESOLVED,
	      "rdma_get_cm_event with SA_RESTART: the handler runs, the call returns the event");
	if (r == 0)
		rdma_ack_cm_event(e);
	pthread_join(t, NULL);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(cc);
	ibv_close_device(c);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s migrate|idpd|eintr SRC DST\n", argv[0]);
		return 2;
	}
	addr(&src, argv[2], 0);
	addr(&dst, argv[3], 7471);
	if (!strcmp(argv[1], "migrate"))
		migrate();
	else if (!strcmp(argv[1], "idpd"))
		idpd();
	else if (!strcmp(argv[1], "eintr"))
		eintr();
	else
		return 2;
	return failed;
}
