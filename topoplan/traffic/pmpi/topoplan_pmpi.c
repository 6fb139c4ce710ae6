/*
 * topoplan_pmpi.c -- record an MPI program's calls as a topoplan event trace.
 *
 * A PMPI interposition library: built as a shared library and loaded with
 * LD_PRELOAD, its MPI_* functions take the place of the MPI library's; each one
 * reads the clock, calls the real function (PMPI_*), reads the clock again and
 * appends one row to an in-memory buffer of this rank. At MPI_Finalize every
 * rank sends its rows and its communicators to rank 0 (over a private duplicate
 * of MPI_COMM_WORLD, so no shared file system is needed), which writes the trace
 * directory in the format of shared/formats/trace.md:
 *
 *   $TOPOPLAN_TRACE_DIR/events.csv         rank,op,peer,bytes,root,comm_size,t_start,t_end,comm,tag,req
 *   $TOPOPLAN_TRACE_DIR/communicators.csv  comm,size,world_ranks  (0 is MPI_COMM_WORLD)
 *
 * TOPOPLAN_TRACE_DIR defaults to ./topoplan-trace (relative to rank 0's
 * working directory). Build and use:
 *
 *   mpicc -shared -fPIC -O2 -o libtopoplan_pmpi.so topoplan_pmpi.c
 *   mpirun -x LD_PRELOAD=$PWD/libtopoplan_pmpi.so -np 4 ./app
 *
 * (`topoplan trace` does both.) Conventions of the rows:
 *
 *  - ranks, peers and roots are MPI_COMM_WORLD ranks (MPI_Group_translate_ranks);
 *  - bytes = count * MPI_Type_size;
 *  - times are MPI_Wtime seconds since a barrier at the end of MPI_Init;
 *  - a receive records the message it got: the actual source and tag (from the
 *    status, for MPI_ANY_SOURCE and MPI_ANY_TAG) and size; an irecv row is
 *    completed with them when its request completes (until then, peer -1 for
 *    MPI_ANY_SOURCE, tag -1 for MPI_ANY_TAG and the buffer's size);
 *  - calls with MPI_PROC_NULL are not recorded (they move no data);
 *  - every completion of a recorded nonblocking request by Wait, Waitall,
 *    Waitany, Waitsome, Test, Testall, Testany or Testsome is one `wait` row
 *    (peer, bytes and req = 1 for a send, 0 for a receive); the rows of one
 *    Waitall share the call's t_start and t_end; a Test that completes nothing
 *    is not recorded;
 *  - persistent requests (MPI_*send_init, MPI_Recv_init): each MPI_Start is
 *    an isend/irecv row, each completion a wait row;
 *  - MPI_Alltoallv and MPI_Alltoallw are one row per destination (peer set),
 *    MPI_Alltoall one row for the call; MPI_Gatherv/Scatterv are recorded as
 *    gather/scatter, MPI_Reduce_scatter_block as reduce_scatter, MPI_Scan and
 *    MPI_Exscan as `scan`/`exscan` (ops topoplan counts but does not model);
 *  - communicators made by MPI_Comm_split/split_type/dup/dup_with_info/create/
 *    create_group, MPI_Cart_create/sub, MPI_Graph_create, MPI_Dist_graph_create
 *    (_adjacent) and MPI_Intercomm_merge get an id all their members agree on
 *    (the new communicator's rank 0 broadcasts it); others (MPI_COMM_SELF,
 *    communicators from MPI_Comm_idup or MPI_Intercomm_create ...) are
 *    registered when first used and identified by their members;
 *  - MPI_Pcontrol(0) pauses recording and MPI_Pcontrol(1) resumes it;
 *  - MPI_THREAD_MULTIPLE: the calls of all threads are recorded (the buffers are
 *    locked), but communicators must not be created by one thread while another
 *    makes MPI calls.
 *
 * Not recorded: nonblocking and neighborhood collectives, one-sided (RMA),
 * MPI_Mprobe/Mrecv, MPI-IO, collectives on intercommunicators, and the Fortran
 * bindings (Open MPI's call PMPI_* directly). A run that does not reach
 * MPI_Finalize leaves no trace.
 */

#include <mpi.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* ------------------------------------------------------------------ ops */

/* Row kinds; the names are the `op` column (shared/formats/trace.md). */
enum {
    OP_SEND, OP_ISEND, OP_RECV, OP_IRECV, OP_SENDRECV, OP_WAIT, OP_WAITALL,
    OP_BCAST, OP_REDUCE, OP_ALLREDUCE, OP_ALLTOALL, OP_ALLTOALLV, OP_ALLGATHER,
    OP_ALLGATHERV, OP_GATHER, OP_SCATTER, OP_REDUCE_SCATTER, OP_BARRIER,
    OP_SCAN, OP_EXSCAN, N_OPS
};
static const char *const op_name[N_OPS] = {
    "send", "isend", "recv", "irecv", "sendrecv", "wait", "waitall",
    "bcast", "reduce", "allreduce", "alltoall", "alltoallv", "allgather",
    "allgatherv", "gather", "scatter", "reduce_scatter", "barrier",
    "scan", "exscan"
};

/* One recorded call (sent to rank 0 as raw bytes: all ranks run the same binary). */
typedef struct {
    double t_start, t_end;   /* seconds since the barrier in MPI_Init */
    int64_t bytes;
    int32_t peer;            /* world rank, -1 for none / any source */
    int32_t root;            /* world rank of a rooted collective's root, -1 otherwise */
    int32_t comm_size;
    int32_t tag;             /* p2p tag, -1 otherwise */
    int32_t comm;            /* index into this rank's communicator table */
    int8_t op;
    int8_t req;              /* wait rows: 1 send, 0 receive; -1 otherwise */
} event_t;

/* ------------------------------------------------------------- state */

static int world_rank = -1, world_size = 0;
static MPI_Group world_group = MPI_GROUP_NULL;
static MPI_Comm tool_comm = MPI_COMM_NULL;   /* private dup of MPI_COMM_WORLD for the final transfer */
static double t_origin = 0.0;
static int active = 0;                        /* between our MPI_Init and MPI_Finalize */
static int paused = 0;                        /* MPI_Pcontrol(0) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;   /* MPI_THREAD_MULTIPLE programs */

static event_t *events = NULL;
static size_t n_events = 0, cap_events = 0;

static double now(void) { return PMPI_Wtime() - t_origin; }

/* Append one row; returns its index, or -1 when recording is off or memory ran out. */
static long record(int op, int peer, int64_t bytes, int root, int comm_size, int tag, int comm, int req,
                   double t0, double t1)
{
    long idx;
    if (!active || paused)
        return -1;
    pthread_mutex_lock(&lock);
    if (n_events == cap_events) {
        size_t cap = cap_events ? 2 * cap_events : 4096;
        event_t *grown = realloc(events, cap * sizeof *events);
        if (!grown) {
            pthread_mutex_unlock(&lock);
            fprintf(stderr, "topoplan: rank %d: out of memory after %zu events; recording stops\n",
                    world_rank, n_events);
            paused = 1;
            return -1;
        }
        events = grown;
        cap_events = cap;
    }
    idx = (long)n_events;
    event_t *e = &events[n_events++];
    e->t_start = t0 > 0 ? t0 : 0.0;
    e->t_end = t1 > e->t_start ? t1 : e->t_start;
    e->bytes = bytes;
    e->peer = peer;
    e->root = root;
    e->comm_size = comm_size;
    e->tag = tag;
    e->comm = comm;
    e->op = (int8_t)op;
    e->req = (int8_t)req;
    pthread_mutex_unlock(&lock);
    return idx;
}

static int64_t type_bytes(int count, MPI_Datatype type)
{
    int size = 0;
    if (count <= 0 || type == MPI_DATATYPE_NULL)
        return 0;
    PMPI_Type_size(type, &size);
    return (int64_t)count * size;
}

/* ------------------------------------------------------ communicators */

/* Every communicator this rank used. Index 0 is MPI_COMM_WORLD. The key says how
 * rank 0 merges the tables of all ranks into one id per communicator:
 *   0   MPI_COMM_WORLD
 *  >0   agreed by the members when the communicator was made: (world rank of its
 *       rank 0 + 1) << 32 | that rank's count of communicators made so far
 *  <0   seen first in a call: the same communicator is the one with the same members */
typedef struct {
    int64_t key;
    int size;            /* local group */
    int *world;          /* world rank of each local rank (then of each remote rank, for intercommunicators) */
    int remote_size;     /* intercommunicators: size of the remote group; 0 otherwise */
} comm_t;

static comm_t *comms = NULL;
static int n_comms = 0, cap_comms = 0;
static int comm_keyval = MPI_KEYVAL_INVALID;
static int32_t made_here = 0;     /* communicators whose rank 0 this rank is */
static int32_t seen_here = 0;     /* communicators registered on first use */

static void group_to_world(MPI_Group g, int n, int *out)
{
    int *idx = calloc((size_t)(n > 0 ? n : 1), sizeof *idx);
    for (int i = 0; i < n; i++)
        idx[i] = i;
    PMPI_Group_translate_ranks(g, n, idx, world_group, out);
    for (int i = 0; i < n; i++)
        if (out[i] == MPI_UNDEFINED)   /* a process outside MPI_COMM_WORLD (spawned) */
            out[i] = -1;
    free(idx);
}

/* Add comm to the table (the caller holds the lock) and tag it with its index. */
static int add_comm(MPI_Comm comm, int64_t key)
{
    MPI_Group g;
    int inter = 0, size = 0, rsize = 0;
    if (n_comms == cap_comms) {
        cap_comms = cap_comms ? 2 * cap_comms : 16;
        comms = realloc(comms, (size_t)cap_comms * sizeof *comms);
    }
    comm_t *c = &comms[n_comms];
    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Comm_size(comm, &size);
    if (inter)
        PMPI_Comm_remote_size(comm, &rsize);
    c->key = key;
    c->size = size;
    c->remote_size = rsize;
    c->world = malloc((size_t)(size + rsize > 0 ? size + rsize : 1) * sizeof(int));
    PMPI_Comm_group(comm, &g);
    group_to_world(g, size, c->world);
    PMPI_Group_free(&g);
    if (inter) {
        PMPI_Comm_remote_group(comm, &g);
        group_to_world(g, rsize, c->world + size);
        PMPI_Group_free(&g);
    }
    PMPI_Comm_set_attr(comm, comm_keyval, (void *)(intptr_t)(n_comms + 1));
    return n_comms++;
}

/* Index of comm in the table, registering it (by its members) on first use. */
static int comm_index(MPI_Comm comm)
{
    void *val = NULL;
    int flag = 0, idx;
    if (comm == MPI_COMM_WORLD)
        return 0;
    pthread_mutex_lock(&lock);
    PMPI_Comm_get_attr(comm, comm_keyval, &val, &flag);
    if (flag)
        idx = (int)(intptr_t)val - 1;
    else
        idx = add_comm(comm, -(((int64_t)(world_rank + 1) << 32) | ++seen_here));
    pthread_mutex_unlock(&lock);
    return idx;
}

/* A communicator just made by a call all its members make: agree on its id. */
static void new_comm(MPI_Comm comm)
{
    int inter = 0, me = 0, idx;
    int64_t key = 0;
    if (!active || comm == MPI_COMM_NULL)
        return;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) {            /* no broadcast over two groups: identified by members */
        comm_index(comm);
        return;
    }
    PMPI_Comm_rank(comm, &me);
    if (me == 0)
        key = ((int64_t)(world_rank + 1) << 32) | ++made_here;
    PMPI_Bcast(&key, 1, MPI_INT64_T, 0, comm);
    pthread_mutex_lock(&lock);
    idx = add_comm(comm, key);
    (void)idx;
    pthread_mutex_unlock(&lock);
}

/* World rank of local rank r of table entry c (remote group for intercommunicators). */
static int world_of(int c, int r)
{
    const comm_t *e = &comms[c];
    if (r == MPI_ANY_SOURCE || r < 0)
        return -1;
    if (e->remote_size)
        return r < e->remote_size ? e->world[e->size + r] : -1;
    return r < e->size ? e->world[r] : -1;
}

static int comm_size_of(int c) { return comms[c].remote_size ? comms[c].remote_size : comms[c].size; }

static int norm_tag(int tag) { return tag == MPI_ANY_TAG ? -1 : tag; }

/* ------------------------------------------------------------ requests */

/* Open nonblocking requests this rank posted (hash table on the handle's bits). */
typedef struct {
    uint64_t key;        /* the MPI_Request handle's bits; 0 = empty slot */
    int8_t state;        /* 0 empty, 1 used, 2 deleted */
    int8_t is_send;
    int8_t persistent;   /* made by *_init: survives completion until MPI_Request_free */
    int8_t started;      /* persistent: an MPI_Start is in flight */
    int32_t peer;        /* world rank; -1 for MPI_ANY_SOURCE */
    int32_t tag;
    int32_t comm;
    int64_t bytes;
    long row;            /* index of the isend/irecv row of the request's latest start; -1 if none */
} req_t;

static req_t *reqs = NULL;
static size_t cap_reqs = 0, used_reqs = 0;   /* used: slots in state 1 or 2 */

static uint64_t req_key(MPI_Request r)
{
    uint64_t k = 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    return k;
}

static size_t slot_of(uint64_t k, size_t cap) { return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1); }

static req_t *req_find(uint64_t k)   /* caller holds the lock */
{
    if (!cap_reqs)
        return NULL;
    for (size_t i = slot_of(k, cap_reqs);; i = (i + 1) & (cap_reqs - 1)) {
        if (reqs[i].state == 0)
            return NULL;
        if (reqs[i].state == 1 && reqs[i].key == k)
            return &reqs[i];
    }
}

static void req_put(const req_t *r)   /* caller holds the lock */
{
    if (2 * (used_reqs + 1) > cap_reqs) {   /* rehash into a table twice as large, dropping deleted slots */
        size_t old = cap_reqs, cap = cap_reqs ? 2 * cap_reqs : 1024;
        req_t *prev = reqs;
        reqs = calloc(cap, sizeof *reqs);
        cap_reqs = cap;
        used_reqs = 0;
        for (size_t i = 0; i < old; i++)
            if (prev[i].state == 1)
                req_put(&prev[i]);
        free(prev);
    }
    size_t i = slot_of(r->key, cap_reqs);
    while (reqs[i].state == 1)
        i = (i + 1) & (cap_reqs - 1);
    if (reqs[i].state == 0)
        used_reqs++;
    reqs[i] = *r;
    reqs[i].state = 1;
}

/* Remember a request just posted (not for MPI_PROC_NULL peers); row: its isend/irecv row. */
static void track(MPI_Request r, int is_send, int persistent, int peer, int tag, int comm, int64_t bytes, long row)
{
    req_t e = {req_key(r), 1, (int8_t)is_send, (int8_t)persistent, 0, peer, tag, comm, bytes, row};
    if (!active || r == MPI_REQUEST_NULL)
        return;
    pthread_mutex_lock(&lock);
    req_put(&e);
    pthread_mutex_unlock(&lock);
}

/* Request `handle` (its value before the call) completed with `st`: one wait row. */
static void completed(MPI_Request handle, MPI_Status *st, double t0, double t1)
{
    req_t e;
    int peer, cancelled = 0, got = MPI_UNDEFINED;
    int64_t bytes;
    if (handle == MPI_REQUEST_NULL)
        return;
    pthread_mutex_lock(&lock);
    req_t *r = req_find(req_key(handle));
    if (!r) {               /* not ours (a nonblocking collective, I/O ...) */
        pthread_mutex_unlock(&lock);
        return;
    }
    e = *r;
    if (r->persistent && !r->started) {   /* an inactive persistent request completes at once: no message */
        pthread_mutex_unlock(&lock);
        return;
    }
    if (r->persistent)
        r->started = 0;
    else
        r->state = 2;
    pthread_mutex_unlock(&lock);
    peer = e.peer;
    bytes = e.bytes;
    if (!e.is_send) {
        PMPI_Test_cancelled(st, &cancelled);
        if (cancelled)
            return;
        if (peer < 0)
            peer = world_of(e.comm, st->MPI_SOURCE);
        /* the size of the message received; the status counts bytes in Open MPI and MPICH
         * (the request's datatype may have been freed since, so it is not used here) */
        PMPI_Get_count(st, MPI_BYTE, &got);
        if (got != MPI_UNDEFINED && got >= 0)
            bytes = got;
        /* the irecv row gets the message it matched: its source (for MPI_ANY_SOURCE), tag (for
         * MPI_ANY_TAG) and size, as a blocking receive records them, so a replay matches the same message */
        pthread_mutex_lock(&lock);
        if (e.row >= 0 && (size_t)e.row < n_events) {
            events[e.row].peer = peer;
            events[e.row].tag = st->MPI_TAG;
            events[e.row].bytes = bytes;
        }
        pthread_mutex_unlock(&lock);
    }
    record(OP_WAIT, peer, bytes, -1, comm_size_of(e.comm), -1, e.comm, e.is_send ? 1 : 0, t0, t1);
}

/* Persistent request started: the isend/irecv row of this round. */
static void started(MPI_Request handle, double t0, double t1)
{
    req_t e;
    pthread_mutex_lock(&lock);
    req_t *r = req_find(req_key(handle));
    if (!r) {
        pthread_mutex_unlock(&lock);
        return;
    }
    r->started = 1;
    e = *r;
    pthread_mutex_unlock(&lock);
    long row = record(e.is_send ? OP_ISEND : OP_IRECV, e.peer, e.bytes, -1, comm_size_of(e.comm), e.tag, e.comm, -1,
                      t0, t1);
    pthread_mutex_lock(&lock);
    if ((r = req_find(req_key(handle))) != NULL)
        r->row = row;
    pthread_mutex_unlock(&lock);
}

/* ---------------------------------------------------------- init / finalize */

static void tool_init(void)
{
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &comm_keyval, NULL);
    add_comm(MPI_COMM_WORLD, 0);
    PMPI_Comm_dup(MPI_COMM_WORLD, &tool_comm);
    PMPI_Barrier(tool_comm);
    t_origin = PMPI_Wtime();
    active = 1;
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        tool_init();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        tool_init();
    return rc;
}

int MPI_Pcontrol(const int level, ...)
{
    paused = (level == 0);
    return MPI_SUCCESS;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

enum { TAG_COMMS = 1, TAG_COUNT, TAG_EVENTS };
#define CHUNK 65536   /* events per message to rank 0 */

/* This rank's communicator table as int64s: n, then per entry key, size, remote_size, members. */
static int64_t *pack_comms(int *len)
{
    int n = 1;
    for (int c = 0; c < n_comms; c++)
        n += 3 + comms[c].size + comms[c].remote_size;
    int64_t *buf = malloc((size_t)n * sizeof *buf), *p = buf;
    *p++ = n_comms;
    for (int c = 0; c < n_comms; c++) {
        *p++ = comms[c].key;
        *p++ = comms[c].size;
        *p++ = comms[c].remote_size;
        for (int i = 0; i < comms[c].size + comms[c].remote_size; i++)
            *p++ = comms[c].world[i];
    }
    *len = n;
    return buf;
}

/* Rank 0's table of all communicators: one id each (0 = MPI_COMM_WORLD, then in order of discovery). */
typedef struct { int64_t key; int n; const int64_t *members; } gcomm_t;
static gcomm_t *gcomms = NULL;
static int n_gcomms = 0;

static int global_id(int64_t key, int n, const int64_t *members)
{
    for (int g = 0; g < n_gcomms; g++) {
        int same = key >= 0 ? gcomms[g].key == key
                            : gcomms[g].key < 0 && gcomms[g].n == n &&
                                  !memcmp(gcomms[g].members, members, (size_t)n * sizeof *members);
        if (same)
            return g;
    }
    gcomms = realloc(gcomms, (size_t)(n_gcomms + 1) * sizeof *gcomms);
    gcomms[n_gcomms] = (gcomm_t){key, n, members};
    return n_gcomms++;
}

static void write_rows(FILE *f, int rank, const event_t *ev, size_t n, const int *ids)
{
    for (size_t i = 0; i < n; i++) {
        const event_t *e = &ev[i];
        fprintf(f, "%d,%s,%d,%lld,%d,%d,%.9f,%.9f,%d,%d,%d\n", rank, op_name[e->op], e->peer, (long long)e->bytes,
                e->root, e->comm_size, e->t_start, e->t_end, ids[e->comm], e->tag, e->req);
    }
}

/* Rank 0: receive every rank's table and rows and write the trace directory. */
static void gather_and_write(const char *dir, FILE *f)
{
    int64_t **tables = calloc((size_t)world_size, sizeof *tables);
    long long total = 0;
    event_t *buf = malloc(CHUNK * sizeof *buf);
    fprintf(f, "rank,op,peer,bytes,root,comm_size,t_start,t_end,comm,tag,req\n");
    for (int r = 0; r < world_size; r++) {
        int len = 0;
        if (r == 0) {
            tables[0] = pack_comms(&len);
        } else {
            MPI_Status st;
            PMPI_Probe(r, TAG_COMMS, tool_comm, &st);
            PMPI_Get_count(&st, MPI_INT64_T, &len);
            tables[r] = malloc((size_t)len * sizeof(int64_t));
            PMPI_Recv(tables[r], len, MPI_INT64_T, r, TAG_COMMS, tool_comm, MPI_STATUS_IGNORE);
        }
        /* this rank's table index -> global id */
        const int64_t *p = tables[r];
        int n = (int)*p++;
        int *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
        for (int c = 0; c < n; c++) {
            int64_t key = p[0];
            int size = (int)p[1] + (int)p[2];
            ids[c] = global_id(key, size, p + 3);
            p += 3 + size;
        }
        long long count = (long long)n_events;
        if (r != 0)
            PMPI_Recv(&count, 1, MPI_LONG_LONG, r, TAG_COUNT, tool_comm, MPI_STATUS_IGNORE);
        for (long long done = 0; done < count; done += CHUNK) {
            int k = (int)(count - done < CHUNK ? count - done : CHUNK);
            if (r == 0) {
                write_rows(f, 0, events + done, (size_t)k, ids);
            } else {
                PMPI_Recv(buf, k * (int)sizeof *buf, MPI_BYTE, r, TAG_EVENTS, tool_comm, MPI_STATUS_IGNORE);
                write_rows(f, r, buf, (size_t)k, ids);
            }
        }
        total += count;
        free(ids);
    }
    free(buf);

    char path[4200];
    snprintf(path, sizeof path, "%s/communicators.csv", dir);
    FILE *cf = fopen(path, "w");
    if (cf) {
        fprintf(cf, "comm,size,world_ranks\n");
        for (int g = 0; g < n_gcomms; g++) {
            fprintf(cf, "%d,%d,\"", g, gcomms[g].n);
            for (int i = 0; i < gcomms[g].n; i++)
                fprintf(cf, i ? ";%lld" : "%lld", (long long)gcomms[g].members[i]);
            fprintf(cf, "\"\n");
        }
        if (fclose(cf) != 0)
            fprintf(stderr, "topoplan: cannot write %s: %s\n", path, strerror(errno));
    } else {
        fprintf(stderr, "topoplan: cannot write %s: %s\n", path, strerror(errno));
    }
    if (!getenv("TOPOPLAN_TRACE_QUIET"))
        fprintf(stderr, "topoplan: wrote %lld events of %d ranks to %s\n", total, world_size, dir);
    for (int r = 0; r < world_size; r++)
        free(tables[r]);
    free(tables);
    free(gcomms);
    gcomms = NULL;
    n_gcomms = 0;
}

static void tool_finalize(void)
{
    const char *env = getenv("TOPOPLAN_TRACE_DIR");
    const char *dir = env && *env ? env : "topoplan-trace";
    char path[4200], tmp[4300];
    FILE *f = NULL;
    int ok = 0;

    active = 0;
    if (world_rank == 0) {
        snprintf(path, sizeof path, "%s/events.csv", dir);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        if (make_dirs(dir) == 0 && (f = fopen(tmp, "w")) != NULL)
            ok = 1;
        else
            fprintf(stderr, "topoplan: cannot write the trace to %s: %s\n", dir, strerror(errno));
    }
    PMPI_Bcast(&ok, 1, MPI_INT, 0, tool_comm);
    if (ok && world_rank == 0) {
        gather_and_write(dir, f);
        if (fclose(f) != 0 || rename(tmp, path) != 0)
            fprintf(stderr, "topoplan: cannot write %s: %s\n", path, strerror(errno));
    } else if (ok) {
        int len = 0;
        int64_t *table = pack_comms(&len);
        long long count = (long long)n_events;
        PMPI_Send(table, len, MPI_INT64_T, 0, TAG_COMMS, tool_comm);
        PMPI_Send(&count, 1, MPI_LONG_LONG, 0, TAG_COUNT, tool_comm);
        for (long long done = 0; done < count; done += CHUNK) {
            int k = (int)(count - done < CHUNK ? count - done : CHUNK);
            PMPI_Send(events + done, k * (int)sizeof *events, MPI_BYTE, 0, TAG_EVENTS, tool_comm);
        }
        free(table);
    }
    free(events);
    events = NULL;
    n_events = cap_events = 0;
    free(reqs);
    reqs = NULL;
    cap_reqs = used_reqs = 0;
    PMPI_Comm_free(&tool_comm);
}

int MPI_Finalize(void)
{
    if (active)
        tool_finalize();
    return PMPI_Finalize();
}

/* ------------------------------------------------------- point to point */

/* A blocking send of any mode. */
static int sent(int op, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, double t0, int rc)
{
    if (dest != MPI_PROC_NULL) {
        int c = comm_index(comm);
        record(op, world_of(c, dest), type_bytes(count, type), -1, comm_size_of(c), tag, c, -1, t0, now());
    }
    return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    double t0 = now();
    return sent(OP_SEND, count, type, dest, tag, comm, t0, PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    double t0 = now();
    return sent(OP_SEND, count, type, dest, tag, comm, t0, PMPI_Ssend(buf, count, type, dest, tag, comm));
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    double t0 = now();
    return sent(OP_SEND, count, type, dest, tag, comm, t0, PMPI_Bsend(buf, count, type, dest, tag, comm));
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    double t0 = now();
    return sent(OP_SEND, count, type, dest, tag, comm, t0, PMPI_Rsend(buf, count, type, dest, tag, comm));
}

/* A nonblocking send of any mode: the isend row, and the request for its wait. */
static int isent(int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req, double t0,
                 int rc)
{
    if (rc == MPI_SUCCESS && dest != MPI_PROC_NULL) {
        int c = comm_index(comm), peer = world_of(c, dest);
        int64_t bytes = type_bytes(count, type);
        long row = record(OP_ISEND, peer, bytes, -1, comm_size_of(c), tag, c, -1, t0, now());
        track(*req, 1, 0, peer, tag, c, bytes, row);
    }
    return rc;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    double t0 = now();
    return isent(count, type, dest, tag, comm, req, t0, PMPI_Isend(buf, count, type, dest, tag, comm, req));
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    double t0 = now();
    return isent(count, type, dest, tag, comm, req, t0, PMPI_Issend(buf, count, type, dest, tag, comm, req));
}

int MPI_Ibsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    double t0 = now();
    return isent(count, type, dest, tag, comm, req, t0, PMPI_Ibsend(buf, count, type, dest, tag, comm, req));
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    double t0 = now();
    return isent(count, type, dest, tag, comm, req, t0, PMPI_Irsend(buf, count, type, dest, tag, comm, req));
}

/* Bytes of a completed receive: the message's size from the status, else the buffer's. */
static int64_t received(MPI_Status *st, int count, MPI_Datatype type)
{
    int got = MPI_UNDEFINED;
    PMPI_Get_count(st, type, &got);
    return got == MPI_UNDEFINED ? type_bytes(count, type) : type_bytes(got, type);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    double t0 = now();
    int rc = PMPI_Recv(buf, count, type, source, tag, comm, st);
    if (rc == MPI_SUCCESS && source != MPI_PROC_NULL) {
        int c = comm_index(comm);
        record(OP_RECV, world_of(c, st->MPI_SOURCE), received(st, count, type), -1, comm_size_of(c),
               st->MPI_TAG, c, -1, t0, now());
    }
    return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    double t0 = now();
    int rc = PMPI_Irecv(buf, count, type, source, tag, comm, req);
    if (rc == MPI_SUCCESS && source != MPI_PROC_NULL) {
        int c = comm_index(comm), peer = world_of(c, source);
        int64_t bytes = type_bytes(count, type);
        long row = record(OP_IRECV, peer, bytes, -1, comm_size_of(c), norm_tag(tag), c, -1, t0, now());
        track(*req, 0, 0, peer, norm_tag(tag), c, bytes, row);
    }
    return rc;
}

/* Sendrecv(_replace): a `sendrecv` row (the replay posts its receive from any source with the
 * send's tag); one side with MPI_PROC_NULL is a send or a recv; different tags on the two sides
 * are written as isend + irecv + two waits, so that a replay matches them by tag. */
static void sendrecv_rows(int64_t sbytes, int dest, int sendtag, int count, MPI_Datatype rtype, int source,
                          int recvtag, MPI_Comm comm, MPI_Status *st, double t0)
{
    double t1 = now();
    int c = comm_index(comm), size = comm_size_of(c);
    int to = world_of(c, dest), from = source == MPI_PROC_NULL ? -1 : world_of(c, st->MPI_SOURCE);
    int64_t rbytes = source == MPI_PROC_NULL ? 0 : received(st, count, rtype);
    if (dest == MPI_PROC_NULL && source == MPI_PROC_NULL)
        return;
    if (source == MPI_PROC_NULL) {
        record(OP_SEND, to, sbytes, -1, size, sendtag, c, -1, t0, t1);
    } else if (dest == MPI_PROC_NULL) {
        record(OP_RECV, from, rbytes, -1, size, st->MPI_TAG, c, -1, t0, t1);
    } else if (recvtag == sendtag || recvtag == MPI_ANY_TAG) {
        record(OP_SENDRECV, to, sbytes, -1, size, sendtag, c, -1, t0, t1);
    } else {
        record(OP_ISEND, to, sbytes, -1, size, sendtag, c, -1, t0, t0);
        record(OP_IRECV, from, rbytes, -1, size, recvtag, c, -1, t0, t0);
        record(OP_WAIT, to, sbytes, -1, size, -1, c, 1, t0, t1);
        record(OP_WAIT, from, rbytes, -1, size, -1, c, 0, t0, t1);
    }
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    double t0 = now();
    int rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                           recvtag, comm, st);
    if (rc == MPI_SUCCESS)
        sendrecv_rows(type_bytes(sendcount, sendtype), dest, sendtag, recvcount, recvtype, source, recvtag, comm,
                      st, t0);
    return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
                         MPI_Comm comm, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    double t0 = now();
    int rc = PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, st);
    if (rc == MPI_SUCCESS)
        sendrecv_rows(type_bytes(count, type), dest, sendtag, count, type, source, recvtag, comm, st, t0);
    return rc;
}

/* ----------------------------------------------------- persistent requests */

static int persistent(int is_send, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                      MPI_Request *req, int rc)
{
    if (rc == MPI_SUCCESS && peer != MPI_PROC_NULL) {
        int c = comm_index(comm);
        track(*req, is_send, 1, world_of(c, peer), norm_tag(tag), c, type_bytes(count, type), -1);
    }
    return rc;
}

int MPI_Send_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    return persistent(1, count, type, dest, tag, comm, req, PMPI_Send_init(buf, count, type, dest, tag, comm, req));
}

int MPI_Ssend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    return persistent(1, count, type, dest, tag, comm, req, PMPI_Ssend_init(buf, count, type, dest, tag, comm, req));
}

int MPI_Bsend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    return persistent(1, count, type, dest, tag, comm, req, PMPI_Bsend_init(buf, count, type, dest, tag, comm, req));
}

int MPI_Rsend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    return persistent(1, count, type, dest, tag, comm, req, PMPI_Rsend_init(buf, count, type, dest, tag, comm, req));
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    return persistent(0, count, type, source, tag, comm, req, PMPI_Recv_init(buf, count, type, source, tag, comm, req));
}

int MPI_Start(MPI_Request *req)
{
    MPI_Request handle = *req;
    double t0 = now();
    int rc = PMPI_Start(req);
    if (rc == MPI_SUCCESS)
        started(handle, t0, now());
    return rc;
}

int MPI_Startall(int n, MPI_Request reqs_[])
{
    double t0 = now();
    int rc = PMPI_Startall(n, reqs_);
    double t1 = now();
    if (rc == MPI_SUCCESS)
        for (int i = 0; i < n; i++)
            started(reqs_[i], t0, t1);
    return rc;
}

int MPI_Request_free(MPI_Request *req)
{
    MPI_Request handle = *req;
    int rc = PMPI_Request_free(req);
    if (active && handle != MPI_REQUEST_NULL) {
        pthread_mutex_lock(&lock);
        req_t *r = req_find(req_key(handle));
        if (r)
            r->state = 2;
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

/* ------------------------------------------------------------- completion */

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    MPI_Request handle = *req;
    double t0 = now();
    int rc = PMPI_Wait(req, st);
    if (rc == MPI_SUCCESS)
        completed(handle, st, t0, now());
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    MPI_Request handle = *req;
    double t0 = now();
    int rc = PMPI_Test(req, flag, st);
    if (rc == MPI_SUCCESS && *flag)
        completed(handle, st, t0, now());
    return rc;
}

/* Copies of the handles (completion resets them to MPI_REQUEST_NULL) and a status array. */
typedef struct {
    MPI_Request *handles;
    MPI_Status *st;
    MPI_Status *own;
} many_t;

static many_t many_begin(int n, const MPI_Request *r, MPI_Status *statuses, int want_status)
{
    many_t m;
    size_t k = (size_t)(n > 0 ? n : 1);
    m.handles = malloc(k * sizeof *m.handles);
    if (n > 0)
        memcpy(m.handles, r, (size_t)n * sizeof *r);
    m.own = want_status && statuses == MPI_STATUSES_IGNORE ? malloc(k * sizeof *m.own) : NULL;
    m.st = m.own ? m.own : statuses;
    return m;
}

static void many_end(many_t *m)
{
    free(m->handles);
    free(m->own);
}

int MPI_Waitall(int n, MPI_Request r[], MPI_Status statuses[])
{
    many_t m = many_begin(n, r, statuses, 1);
    double t0 = now();
    int rc = PMPI_Waitall(n, r, m.st);
    double t1 = now();
    if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS)
        for (int i = 0; i < n; i++)
            if (rc == MPI_SUCCESS || m.st[i].MPI_ERROR == MPI_SUCCESS)
                completed(m.handles[i], &m.st[i], t0, t1);
    many_end(&m);
    return rc;
}

int MPI_Testall(int n, MPI_Request r[], int *flag, MPI_Status statuses[])
{
    many_t m = many_begin(n, r, statuses, 1);
    double t0 = now();
    int rc = PMPI_Testall(n, r, flag, m.st);
    double t1 = now();
    if (rc == MPI_SUCCESS && *flag)
        for (int i = 0; i < n; i++)
            completed(m.handles[i], &m.st[i], t0, t1);
    many_end(&m);
    return rc;
}

int MPI_Waitany(int n, MPI_Request r[], int *index, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    many_t m = many_begin(n, r, MPI_STATUSES_IGNORE, 0);
    double t0 = now();
    int rc = PMPI_Waitany(n, r, index, st);
    if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED)
        completed(m.handles[*index], st, t0, now());
    many_end(&m);
    return rc;
}

int MPI_Testany(int n, MPI_Request r[], int *index, int *flag, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    many_t m = many_begin(n, r, MPI_STATUSES_IGNORE, 0);
    double t0 = now();
    int rc = PMPI_Testany(n, r, index, flag, st);
    if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED)
        completed(m.handles[*index], st, t0, now());
    many_end(&m);
    return rc;
}

static int some(int n, MPI_Request r[], int *outcount, int indices[], MPI_Status statuses[], int test)
{
    many_t m = many_begin(n, r, statuses, 1);
    double t0 = now();
    int rc = test ? PMPI_Testsome(n, r, outcount, indices, m.st) : PMPI_Waitsome(n, r, outcount, indices, m.st);
    double t1 = now();
    if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *outcount != MPI_UNDEFINED)
        for (int k = 0; k < *outcount; k++)
            if (rc == MPI_SUCCESS || m.st[k].MPI_ERROR == MPI_SUCCESS)
                completed(m.handles[indices[k]], &m.st[k], t0, t1);
    many_end(&m);
    return rc;
}

int MPI_Waitsome(int n, MPI_Request r[], int *outcount, int indices[], MPI_Status statuses[])
{
    return some(n, r, outcount, indices, statuses, 0);
}

int MPI_Testsome(int n, MPI_Request r[], int *outcount, int indices[], MPI_Status statuses[])
{
    return some(n, r, outcount, indices, statuses, 1);
}

/* ------------------------------------------------------------- collectives */

/* One row of a collective on an intracommunicator (intercommunicator collectives are not recorded). */
static void coll(int op, MPI_Comm comm, int64_t bytes, int root, double t0)
{
    double t1 = now();
    int c = comm_index(comm);
    if (comms[c].remote_size)
        return;
    record(op, -1, bytes, root >= 0 ? world_of(c, root) : -1, comms[c].size, -1, c, -1, t0, t1);
}

static int is_root(MPI_Comm comm, int root)
{
    int me = -1;
    PMPI_Comm_rank(comm, &me);
    return me == root;
}

int MPI_Barrier(MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Barrier(comm);
    coll(OP_BARRIER, comm, 0, -1, t0);
    return rc;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Bcast(buf, count, type, root, comm);
    coll(OP_BCAST, comm, type_bytes(count, type), root, t0);
    return rc;
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
    coll(OP_REDUCE, comm, type_bytes(count, type), root, t0);
    return rc;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
    coll(OP_ALLREDUCE, comm, type_bytes(count, type), -1, t0);
    return rc;
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Scan(sendbuf, recvbuf, count, type, op, comm);
    coll(OP_SCAN, comm, type_bytes(count, type), -1, t0);
    return rc;
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm);
    coll(OP_EXSCAN, comm, type_bytes(count, type), -1, t0);
    return rc;
}

/* bytes: what each rank contributes (MPI_IN_PLACE: its block of the receive buffer) */
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    coll(OP_ALLGATHER, comm, sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype)
                                                     : type_bytes(sendcount, sendtype), -1, t0);
    return rc;
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    int64_t bytes;
    if (sendbuf == MPI_IN_PLACE) {
        int me = 0;
        PMPI_Comm_rank(comm, &me);
        bytes = type_bytes(recvcounts[me], recvtype);
    } else {
        bytes = type_bytes(sendcount, sendtype);
    }
    coll(OP_ALLGATHERV, comm, bytes, -1, t0);
    return rc;
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    int in_place = sendbuf == MPI_IN_PLACE && is_root(comm, root);
    coll(OP_GATHER, comm, in_place ? type_bytes(recvcount, recvtype) : type_bytes(sendcount, sendtype), root, t0);
    return rc;
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
    int in_place = sendbuf == MPI_IN_PLACE && is_root(comm, root);
    coll(OP_GATHER, comm, in_place ? type_bytes(recvcounts[root], recvtype) : type_bytes(sendcount, sendtype),
         root, t0);
    return rc;
}

/* bytes: what each rank receives (the root with MPI_IN_PLACE: its own block of the send buffer) */
int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    int in_place = recvbuf == MPI_IN_PLACE && is_root(comm, root);
    coll(OP_SCATTER, comm, in_place ? type_bytes(sendcount, sendtype) : type_bytes(recvcount, recvtype), root, t0);
    return rc;
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
    int in_place = recvbuf == MPI_IN_PLACE && is_root(comm, root);
    coll(OP_SCATTER, comm, in_place ? type_bytes(sendcounts[root], sendtype) : type_bytes(recvcount, recvtype),
         root, t0);
    return rc;
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm)
{
    int me = 0;
    double t0 = now();
    int rc = PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
    PMPI_Comm_rank(comm, &me);
    coll(OP_REDUCE_SCATTER, comm, type_bytes(recvcounts[me], type), -1, t0);
    return rc;
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
    coll(OP_REDUCE_SCATTER, comm, type_bytes(recvcount, type), -1, t0);
    return rc;
}

/* bytes: sent to each destination (MPI_IN_PLACE: received from each) */
int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm)
{
    double t0 = now();
    int rc = PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    coll(OP_ALLTOALL, comm, sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype)
                                                    : type_bytes(sendcount, sendtype), -1, t0);
    return rc;
}

/* One alltoallv row per destination: bytes[i] to local rank i; all rows share t_start. */
static void alltoallv_rows(MPI_Comm comm, const int64_t *bytes, double t0)
{
    double t1 = now();
    int c = comm_index(comm);
    if (comms[c].remote_size)
        return;
    for (int i = 0; i < comms[c].size; i++)
        record(OP_ALLTOALLV, comms[c].world[i], bytes[i], -1, comms[c].size, -1, c, -1, t0, t1);
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    int n = 0, inter = 0;
    double t0 = now();
    int rc = PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
    PMPI_Comm_test_inter(comm, &inter);
    if (!inter) {
        PMPI_Comm_size(comm, &n);
        int64_t *bytes = malloc((size_t)(n > 0 ? n : 1) * sizeof *bytes);
        for (int i = 0; i < n; i++)
            bytes[i] = sendbuf == MPI_IN_PLACE ? type_bytes(recvcounts[i], recvtype)
                                               : type_bytes(sendcounts[i], sendtype);
        alltoallv_rows(comm, bytes, t0);
        free(bytes);
    }
    return rc;
}

int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                  void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                  MPI_Comm comm)
{
    int n = 0, inter = 0;
    double t0 = now();
    int rc = PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
    PMPI_Comm_test_inter(comm, &inter);
    if (!inter) {
        PMPI_Comm_size(comm, &n);
        int64_t *bytes = malloc((size_t)(n > 0 ? n : 1) * sizeof *bytes);
        for (int i = 0; i < n; i++)
            bytes[i] = sendbuf == MPI_IN_PLACE ? type_bytes(recvcounts[i], recvtypes[i])
                                               : type_bytes(sendcounts[i], sendtypes[i]);
        alltoallv_rows(comm, bytes, t0);
        free(bytes);
    }
    return rc;
}

/* ----------------------------------------------------------- communicators */

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_split(comm, color, key, newcomm);
    if (rc == MPI_SUCCESS)
        new_comm(*newcomm);
    return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_split_type(comm, split_type, key, info, newcomm);
    if (rc == MPI_SUCCESS)
        new_comm(*newcomm);
    return rc;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_dup(comm, newcomm);
    if (rc == MPI_SUCCESS)
        new_comm(*newcomm);
    return rc;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_dup_with_info(comm, info, newcomm);
    if (rc == MPI_SUCCESS)
        new_comm(*newcomm);
    return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_create(comm, group, newcomm);
    if (rc == MPI_SUCCESS)
        new_comm(*newcomm);
    return rc;
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_create_group(comm, group, tag, newcomm);
    if (rc == MPI_SUCCESS)
        new_comm(*newcomm);
    return rc;
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm *newcomm)
{
    int rc = PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm);
    if (rc == MPI_SUCCESS)
        new_comm(*newcomm);
    return rc;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm)
{
    int rc = PMPI_Cart_sub(comm, remain_dims, newcomm);
    if (rc == MPI_SUCCESS)
        new_comm(*newcomm);
    return rc;
}

int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder, MPI_Comm *newcomm)
{
    int rc = PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm);
    if (rc == MPI_SUCCESS)
        new_comm(*newcomm);
    return rc;
}

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int nodes[], const int degrees[], const int targets[],
                          const int weights[], MPI_Info info, int reorder, MPI_Comm *newcomm)
{
    int rc = PMPI_Dist_graph_create(comm, n, nodes, degrees, targets, weights, info, reorder, newcomm);
    if (rc == MPI_SUCCESS)
        new_comm(*newcomm);
    return rc;
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[], const int sourceweights[],
                                   int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm *newcomm)
{
    int rc = PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree, destinations,
                                             destweights, info, reorder, newcomm);
    if (rc == MPI_SUCCESS)
        new_comm(*newcomm);
    return rc;
}

int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newcomm)
{
    int rc = PMPI_Intercomm_merge(intercomm, high, newcomm);
    if (rc == MPI_SUCCESS)
        new_comm(*newcomm);
    return rc;
}
