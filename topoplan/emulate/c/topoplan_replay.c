/*
 * topoplan_replay.c -- replay a topoplan trace with real MPI calls.
 *
 *   mpirun -np N topoplan_replay DIR
 *
 * DIR (written by topoplan.emulate.replayer.write_replay) holds:
 *
 *   comms.txt      one line per communicator other than MPI_COMM_WORLD:
 *                  "id size world_rank_0 world_rank_1 ..." (members in communicator-rank order)
 *   rank-R.txt     the calls of world rank R, one per line:
 *                  "op peer bytes root comm tag req gap_ns"
 *
 * op is the index of the call in topoplan's op list (send isend recv irecv sendrecv wait waitall
 * bcast reduce allreduce alltoall alltoallv allgather allgatherv gather scatter reduce_scatter
 * barrier); peer and root are world ranks (-1: none, or any source for a receive); comm is a
 * communicator id of comms.txt (-1: MPI_COMM_WORLD); tag -1 is tag 0 on a send and any tag on a
 * receive; req is what a wait completes (1 send, 0 receive, -1 either); gap_ns is the computation
 * before the call, slept. bytes follow the trace format: the message (point to point), the buffer
 * (bcast, reduce, allreduce), per destination (alltoall), per rank (allgather, gather, scatter,
 * reduce_scatter's block). alltoallv and allgatherv never reach this program (the writer turns them
 * into point-to-point calls). Reductions use MPI_BYTE with MPI_BOR, so the byte counts are exact.
 *
 * A wait with a peer completes this rank's oldest open request with that peer (of the kind req
 * says); a wait without one, and waitall, complete every open request. The replay runs between
 * MPI_Pcontrol(1) and MPI_Pcontrol(0), after a barrier, so that a PMPI recorder preloaded with it
 * records the replayed calls only. Before it, every pair of ranks exchanges a small message in both
 * directions: Open MPI opens its TCP connections on a pair's first message, and that set-up (0.3-0.5 ms
 * of a 1.6 ms ring step, measured) is not the network's time. Every rank writes the CPU time it used (user + system seconds) to
 * DIR/cpu-R.txt at the end; rank 0 writes the replay's window to DIR/window.txt, the wall-clock time
 * (CLOCK_REALTIME, seconds) after the barrier that starts it (written then) and after the barrier that ends it
 * (added then), so that what the network did meanwhile (the emulator's samples of its counters, which it
 * takes as it sees each time appear) is set on the replay's time axis. Exit status 2 and one line on stderr
 * for a bad input.
 */

#include <mpi.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

enum {
    OP_SEND, OP_ISEND, OP_RECV, OP_IRECV, OP_SENDRECV, OP_WAIT, OP_WAITALL, OP_BCAST, OP_REDUCE,
    OP_ALLREDUCE, OP_ALLTOALL, OP_ALLTOALLV, OP_ALLGATHER, OP_ALLGATHERV, OP_GATHER, OP_SCATTER,
    OP_REDUCE_SCATTER, OP_BARRIER, N_OPS
};

typedef struct {
    int op, peer, root, comm, tag, req;
    int64_t bytes, gap_ns;
} call_t;

typedef struct {
    int id, size;
    int *world;      /* member world ranks */
    int *local;      /* world rank -> local rank, -1 outside */
    MPI_Comm comm;
} comm_t;

typedef struct {
    MPI_Request req;
    int peer, send;
} open_t;

static int me = 0, world_size = 1;
static comm_t *comms = NULL;
static int n_comms = 0;

static void die(const char *fmt, const char *what, long line)
{
    fprintf(stderr, "topoplan_replay: rank %d: ", me);
    fprintf(stderr, fmt, what, line);
    fputc('\n', stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static comm_t *find_comm(int id)
{
    for (int i = 0; i < n_comms; i++)
        if (comms[i].id == id)
            return &comms[i];
    return NULL;
}

static void read_comms(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/comms.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        die("%s: cannot open (line %ld)", path, 0);
    int id, size, cap = 0;
    long line = 0;
    while (fscanf(f, "%d %d", &id, &size) == 2) {
        line++;
        if (size < 1 || size > world_size)
            die("%s:%ld: bad communicator size", path, line);
        if (n_comms == cap) {
            cap = cap ? 2 * cap : 8;
            comms = realloc(comms, (size_t)cap * sizeof *comms);
        }
        comm_t *c = &comms[n_comms++];
        c->id = id;
        c->size = size;
        c->world = malloc((size_t)size * sizeof(int));
        c->local = malloc((size_t)world_size * sizeof(int));
        for (int r = 0; r < world_size; r++)
            c->local[r] = -1;
        for (int k = 0; k < size; k++) {
            if (fscanf(f, "%d", &c->world[k]) != 1 || c->world[k] < 0 || c->world[k] >= world_size)
                die("%s:%ld: bad member", path, line);
            c->local[c->world[k]] = k;
        }
    }
    fclose(f);
    /* every rank makes every communicator, in file order (MPI_Comm_split is collective on the world) */
    for (int i = 0; i < n_comms; i++) {
        comm_t *c = &comms[i];
        int pos = c->local[me];
        MPI_Comm_split(MPI_COMM_WORLD, pos >= 0 ? 0 : MPI_UNDEFINED, pos, &c->comm);
    }
}

static call_t *read_calls(const char *dir, long *n_out, int64_t *max_bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d.txt", dir, me);
    FILE *f = fopen(path, "r");
    if (!f)
        die("%s: cannot open (line %ld)", path, 0);
    long n = 0, cap = 0;
    call_t *calls = NULL;
    call_t c;
    long long bytes, gap;
    *max_bytes = 1;
    while (fscanf(f, "%d %d %lld %d %d %d %d %lld", &c.op, &c.peer, &bytes, &c.root, &c.comm, &c.tag, &c.req,
                  &gap) == 8) {
        if (c.op < 0 || c.op >= N_OPS || c.op == OP_ALLTOALLV || c.op == OP_ALLGATHERV || bytes < 0
            || bytes > INT32_MAX || gap < 0)
            die("%s:%ld: bad call", path, n + 1);
        c.bytes = bytes;
        c.gap_ns = gap;
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            calls = realloc(calls, (size_t)cap * sizeof *calls);
            if (!calls)
                die("%s: out of memory at line %ld", path, n + 1);
        }
        calls[n++] = c;
        int64_t need = c.bytes;
        if (c.op == OP_ALLTOALL || c.op == OP_ALLGATHER || c.op == OP_GATHER || c.op == OP_SCATTER
            || c.op == OP_REDUCE_SCATTER)
            need = c.bytes * world_size;
        if (need > *max_bytes)
            *max_bytes = need;
    }
    if (!feof(f))
        die("%s:%ld: unreadable line", path, n + 1);
    fclose(f);
    *n_out = n;
    return calls;
}

static void nap(int64_t ns)
{
    struct timespec t = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
    while (ns > 0 && nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

/* Seconds on the wall clock (CLOCK_REALTIME): the emulator's samples are taken on the same clock. */
static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* DIR/window.txt: "START\n" when the replay starts, "START END\n" when it has ended (end < 0: not yet). */
static void write_window(const char *dir, double start, double end)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/window.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    if (end < 0)
        fprintf(f, "%.6f\n", start);
    else
        fprintf(f, "%.6f %.6f\n", start, end);
    fclose(f);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Pcontrol(0);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (argc != 2)
        die("%s (got %ld arguments)", "usage: topoplan_replay DIR", (long)argc - 1);
    read_comms(argv[1]);
    long n;
    int64_t max_bytes;
    call_t *calls = read_calls(argv[1], &n, &max_bytes);
    char *sbuf = calloc((size_t)max_bytes, 1), *rbuf = calloc((size_t)max_bytes, 1);
    open_t *open_reqs = malloc(sizeof(open_t) * 64);
    MPI_Request *all = malloc(sizeof(MPI_Request) * 64);
    int n_open = 0, cap_open = 64;
    if (!sbuf || !rbuf || !open_reqs || !all)
        die("%s: out of memory (%ld)", "buffers", (long)max_bytes);

    {   /* open every connection: each rank sends 4 KiB to, and receives it from, every other rank */
        int others = world_size - 1, k = 0;
        MPI_Request *w = malloc(sizeof(MPI_Request) * 2 * (others > 0 ? others : 1));
        char *wbuf = calloc((size_t)world_size, 4096);
        for (int r = 0; r < world_size; r++)
            if (r != me)
                MPI_Irecv(wbuf + (size_t)r * 4096, 4096, MPI_BYTE, r, 9, MPI_COMM_WORLD, &w[k++]);
        for (int step = 1; step < world_size; step++)
            MPI_Isend(sbuf, 4096 < max_bytes ? 4096 : (int)max_bytes, MPI_BYTE, (me + step) % world_size, 9,
                      MPI_COMM_WORLD, &w[k++]);
        MPI_Waitall(k, w, MPI_STATUSES_IGNORE);
        free(w);
        free(wbuf);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double window_start = wall_s();
    if (me == 0)
        write_window(argv[1], window_start, -1.0);
    MPI_Pcontrol(1);
    for (long i = 0; i < n; i++) {
        call_t *c = &calls[i];
        nap(c->gap_ns);
        MPI_Comm comm = MPI_COMM_WORLD;
        const int *local = NULL;
        int csize = world_size;
        if (c->comm >= 0) {
            comm_t *cm = find_comm(c->comm);
            if (!cm || cm->local[me] < 0)
                die("call %s %ld: communicator unknown or not a member", "at line", i + 1);
            comm = cm->comm;
            local = cm->local;
            csize = cm->size;
        }
        int peer = c->peer, root = c->root;
        if (local) {
            if (peer >= 0)
                peer = local[peer];
            if (root >= 0)
                root = local[root];
        }
        int count = (int)c->bytes;
        int stag = c->tag >= 0 ? c->tag : 0, rtag = c->tag >= 0 ? c->tag : MPI_ANY_TAG;
        int src = c->peer >= 0 ? peer : MPI_ANY_SOURCE;
        if (n_open + 2 > cap_open) {
            cap_open *= 2;
            open_reqs = realloc(open_reqs, sizeof(open_t) * cap_open);
            all = realloc(all, sizeof(MPI_Request) * cap_open);
        }
        switch (c->op) {
        case OP_SEND:
            MPI_Send(sbuf, count, MPI_BYTE, peer, stag, comm);
            break;
        case OP_RECV:
            MPI_Recv(rbuf, count, MPI_BYTE, src, rtag, comm, MPI_STATUS_IGNORE);
            break;
        case OP_ISEND:
            MPI_Isend(sbuf, count, MPI_BYTE, peer, stag, comm, &open_reqs[n_open].req);
            open_reqs[n_open].peer = c->peer;
            open_reqs[n_open++].send = 1;
            break;
        case OP_IRECV:
            MPI_Irecv(rbuf, count, MPI_BYTE, src, rtag, comm, &open_reqs[n_open].req);
            open_reqs[n_open].peer = c->peer;
            open_reqs[n_open++].send = 0;
            break;
        case OP_SENDRECV:
            MPI_Sendrecv(sbuf, count, MPI_BYTE, peer, stag, rbuf, count, MPI_BYTE, MPI_ANY_SOURCE, rtag, comm,
                         MPI_STATUS_IGNORE);
            break;
        case OP_WAIT:
            if (c->peer >= 0) {
                int k;
                for (k = 0; k < n_open; k++)
                    if (open_reqs[k].peer == c->peer && (c->req < 0 || open_reqs[k].send == c->req))
                        break;
                if (k == n_open)   /* nothing open with that peer: a wait that completes nothing */
                    break;
                MPI_Wait(&open_reqs[k].req, MPI_STATUS_IGNORE);
                memmove(&open_reqs[k], &open_reqs[k + 1], sizeof(open_t) * (size_t)(n_open - k - 1));
                n_open--;
                break;
            }
            /* fall through: a wait without a peer completes everything open */
        case OP_WAITALL:
            for (int k = 0; k < n_open; k++)
                all[k] = open_reqs[k].req;
            MPI_Waitall(n_open, all, MPI_STATUSES_IGNORE);
            n_open = 0;
            break;
        case OP_BCAST:
            MPI_Bcast(sbuf, count, MPI_BYTE, root, comm);
            break;
        case OP_REDUCE:
            MPI_Reduce(sbuf, rbuf, count, MPI_BYTE, MPI_BOR, root, comm);
            break;
        case OP_ALLREDUCE:
            MPI_Allreduce(sbuf, rbuf, count, MPI_BYTE, MPI_BOR, comm);
            break;
        case OP_ALLTOALL:
            MPI_Alltoall(sbuf, count, MPI_BYTE, rbuf, count, MPI_BYTE, comm);
            break;
        case OP_ALLGATHER:
            MPI_Allgather(sbuf, count, MPI_BYTE, rbuf, count, MPI_BYTE, comm);
            break;
        case OP_GATHER:
            MPI_Gather(sbuf, count, MPI_BYTE, rbuf, count, MPI_BYTE, root, comm);
            break;
        case OP_SCATTER:
            MPI_Scatter(sbuf, count, MPI_BYTE, rbuf, count, MPI_BYTE, root, comm);
            break;
        case OP_REDUCE_SCATTER:
            MPI_Reduce_scatter_block(sbuf, rbuf, count, MPI_BYTE, MPI_BOR, comm);
            break;
        case OP_BARRIER:
            MPI_Barrier(comm);
            break;
        }
        (void)csize;
    }
    if (n_open) {   /* requests the trace never waited for: complete them before the end */
        for (int k = 0; k < n_open; k++)
            all[k] = open_reqs[k].req;
        MPI_Waitall(n_open, all, MPI_STATUSES_IGNORE);
    }
    MPI_Pcontrol(0);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0)
        write_window(argv[1], window_start, wall_s());
    {   /* the CPU this rank used (user + system), for the run's CPU budget: DIR/cpu-R.txt */
        struct rusage ru;
        char path[4096];
        getrusage(RUSAGE_SELF, &ru);
        snprintf(path, sizeof path, "%s/cpu-%d.txt", argv[1], me);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%.6f\n", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec
                    + ru.ru_stime.tv_usec * 1e-6);
            fclose(f);
        }
    }
    MPI_Finalize();
    return 0;
}
