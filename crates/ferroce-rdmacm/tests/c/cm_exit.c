/* What a peer sees when the other side of an rdma_cm connection ends it
 * without rdma_disconnect: by destroying its ID, or by exiting with the ID
 * still connected (the kernel sends the DREQ when the process's rdma_cm
 * descriptor closes; librdmacm programs such as qperf rely on it).
 *
 *   cm_exit server ADDR PORT LINGER_MS  accepts one connection, waits for
 *       DISCONNECTED, destroys its QP and ID without rdma_disconnect, then
 *       stays LINGER_MS before returning from main; with LINGER_MS -1 it
 *       returns from main at once with the ID left as it is (qperf's
 *       server does so: the DREP goes out as the process exits).
 *   cm_exit client ADDR PORT exit       connects, then returns from main
 *       with the ID connected.
 *   cm_exit client ADDR PORT fork-exit  connects, forks a child that exits
 *       at once (its copy of the ID is its parent's: the connection must
 *       stay), checks for 300 ms that no event comes, then returns from
 *       main with the ID connected.
 *   cm_exit client ADDR PORT disconnect connects, calls rdma_disconnect and
 *       waits for DISCONNECTED (the server's DREP).
 *
 * Each step prints a line, flushed at once, with the milliseconds since
 * the program started; a failure prints "FAIL ..." and exits 1. */
#include <rdma/rdma_cma.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/wait.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct timespec start;

static long ms(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
}

static void fail(const char *what)
{
	printf("FAIL %s: %s\n", what, strerror(errno));
	exit(1);
}

static void say(const char *side, const char *what)
{
	printf("%s: %s at %ld ms\n", side, what, ms());
	fflush(stdout);
}

/* The next event on `ch`, which must be `want`. */
static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *e;
	if (rdma_get_cm_event(ch, &e))
		fail("rdma_get_cm_event");
	if (e->event != want) {
		printf("FAIL got %s, expected %s\n", rdma_event_str(e->event), rdma_event_str(want));
		exit(1);
	}
	return e;
}

static void make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	if (rdma_create_qp(id, NULL, &a))
		fail("rdma_create_qp");
}

static int server(struct sockaddr_in *a, long linger_ms)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listen;
	if (!ch || rdma_create_id(ch, &listen, NULL, RDMA_PS_TCP))
		fail("create");
	if (rdma_bind_addr(listen, (struct sockaddr *)a) || rdma_listen(listen, 1))
		fail("listen");
	say("server", "listening");
	struct rdma_cm_event *e = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *id = e->id;
	rdma_ack_cm_event(e);
	make_qp(id);
	if (rdma_accept(id, NULL))
		fail("rdma_accept");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));
	say("server", "established");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	say("server", "disconnected");
	if (linger_ms < 0)
		return 0;
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	say("server", "destroyed");
	usleep(linger_ms * 1000);
	return 0;
}

/* A child's exit must leave its parent's connection alone. */
static void fork_exit(struct rdma_event_channel *ch)
{
	pid_t pid = fork();
	if (pid < 0)
		fail("fork");
	if (pid == 0)
		exit(0);
	waitpid(pid, NULL, 0);
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	if (poll(&p, 1, 300) != 0) {
		printf("FAIL an event came after the forked child exited\n");
		exit(1);
	}
	say("client", "still connected after its forked child's exit");
}

static int client(struct sockaddr_in *a, const char *mode)
{
	int disconnect = !strcmp(mode, "disconnect");
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		fail("create");
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)a, 2000))
		fail("rdma_resolve_addr");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(id, 2000))
		fail("rdma_resolve_route");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	make_qp(id);
	struct rdma_conn_param p = { .retry_count = 7, .rnr_retry_count = 7 };
	if (rdma_connect(id, &p))
		fail("rdma_connect");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));
	say("client", "established");
	if (!strcmp(mode, "fork-exit"))
		fork_exit(ch);
	if (!disconnect) {
		say("client", "exiting connected");
		return 0;
	}
	if (rdma_disconnect(id))
		fail("rdma_disconnect");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	say("client", "disconnected");
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

int main(int argc, char **argv)
{
	clock_gettime(CLOCK_MONOTONIC, &start);
	if (argc != 5) {
		fprintf(stderr, "usage: %s server ADDR PORT LINGER_MS | client ADDR PORT exit|fork-exit|disconnect\n", argv[0]);
		return 2;
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[3])) };
	if (inet_pton(AF_INET, argv[2], &a.sin_addr) != 1)
		return 2;
	if (!strcmp(argv[1], "server"))
		return server(&a, atol(argv[4]));
	return client(&a, argv[4]);
}
