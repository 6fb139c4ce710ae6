/*
 * topoplan_bcast.c -- MPI_Bcast over a plan's node-leader order, for unmodified C and Fortran programs.
 *
 * A PMPI interposition library (LD_PRELOAD). At MPI_Init it splits MPI_COMM_WORLD with the key of
 * every world rank from TOPOPLAN_BCAST_KEYS ("k0,k1,...", one key per world rank, a permutation of
 * 0..n-1: the rank's position in the order of a `topoplan bcast` plan). Every MPI_Bcast on
 * MPI_COMM_WORLD then runs on that reordered communicator, with the root translated: the MPI
 * library's broadcast tree is built over the plan's order instead of the allocation's, which is what
 * topology- and speed-aware reordering (as MVAPICH2 builds it in) does. Bcasts on other communicators
 * are left alone. Without TOPOPLAN_BCAST_KEYS, or with keys that are not a permutation of the world's
 * ranks (a warning on rank 0), nothing changes.
 *
 * The next MPI_Bcast in the preload chain is called (the PMPI recorder's, when it is loaded too, so
 * the reordered Bcasts are recorded), and the Fortran bindings (mpi_bcast_ and its spellings, which
 * Open MPI's Fortran library would otherwise route straight to PMPI_Bcast) come here as well.
 *
 *   mpicc -shared -fPIC -O2 -o libtopoplan_bcast.so topoplan_bcast.c -ldl
 *   mpirun -x LD_PRELOAD=$PWD/libtopoplan_bcast.so -x TOPOPLAN_BCAST_KEYS=3,0,1,2 -np 4 ./app
 */

#define _GNU_SOURCE
#include <mpi.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MPI_Comm reordered = MPI_COMM_NULL;
static int *new_rank = NULL;    /* new rank of every world rank */

typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);
typedef int (*init_fn)(int *, char ***);
typedef int (*init_thread_fn)(int *, char ***, int, int *);
typedef int (*finalize_fn)(void);

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "topoplan_bcast: %s not found\n", name);
        abort();
    }
    return f;
}

static void setup(void)
{
    const char *text = getenv("TOPOPLAN_BCAST_KEYS");
    int me, n;
    if (text == NULL || *text == '\0')
        return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &me);
    PMPI_Comm_size(MPI_COMM_WORLD, &n);
    int *keys = malloc(sizeof(int) * n), *seen = calloc((size_t)n, sizeof(int)), k = 0, ok = 1;
    const char *p = text;
    while (*p && k < n) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= n || seen[v]) {
            ok = 0;
            break;
        }
        seen[v] = 1;
        keys[k++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    if (!ok || k != n || *p != '\0') {
        if (me == 0)
            fprintf(stderr, "topoplan_bcast: TOPOPLAN_BCAST_KEYS is not a permutation of the %d world ranks; "
                            "MPI_Bcast is not reordered\n", n);
        free(keys);
        free(seen);
        return;
    }
    PMPI_Comm_split(MPI_COMM_WORLD, 0, keys[me], &reordered);
    new_rank = keys;   /* the split with distinct keys orders ranks by key: new rank = key */
    free(seen);
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = ((init_fn)next("MPI_Init"))(argc, argv);
    setup();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = ((init_thread_fn)next("MPI_Init_thread"))(argc, argv, required, provided);
    setup();
    return rc;
}

int MPI_Finalize(void)
{
    if (reordered != MPI_COMM_NULL)
        PMPI_Comm_free(&reordered);
    return ((finalize_fn)next("MPI_Finalize"))();
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    static bcast_fn real = NULL;
    if (real == NULL)
        real = (bcast_fn)next("MPI_Bcast");
    if (reordered != MPI_COMM_NULL && comm == MPI_COMM_WORLD)
        return real(buf, count, type, new_rank[root], reordered);
    return real(buf, count, type, root, comm);
}

/* Fortran (mpif.h and the mpi module): handles converted, then the C path above. */
static void f_bcast(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
{
    *ierr = MPI_Bcast(buf, *count, MPI_Type_f2c(*type), *root, MPI_Comm_f2c(*comm));
}

void mpi_bcast_(void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *r, MPI_Fint *m, MPI_Fint *e) { f_bcast(b, c, t, r, m, e); }
void mpi_bcast__(void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *r, MPI_Fint *m, MPI_Fint *e) { f_bcast(b, c, t, r, m, e); }
void mpi_bcast(void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *r, MPI_Fint *m, MPI_Fint *e) { f_bcast(b, c, t, r, m, e); }
void MPI_BCAST(void *b, MPI_Fint *c, MPI_Fint *t, MPI_Fint *r, MPI_Fint *m, MPI_Fint *e) { f_bcast(b, c, t, r, m, e); }
