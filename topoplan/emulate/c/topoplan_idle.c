/*
 * topoplan_idle.c -- MPI's idle polling made to sleep, so that many ranks share two cores.
 *
 * Open MPI's progress loop calls sched_yield() when a poll found nothing to do and
 * mpi_yield_when_idle is set (topoplan emulate sets it). Preloaded (LD_PRELOAD), this
 * library's sched_yield sleeps instead of yielding: 20 us after activity, doubling on every
 * idle poll in a row up to 1 ms (TOPOPLAN_IDLE_MIN_US / TOPOPLAN_IDLE_MAX_US; topoplan emulate
 * sets the maximum in proportion to its scale: 1 ms at 400). Every MPI
 * call keeps its algorithm and its blocking semantics; a rank that waits costs a poll per
 * sleep instead of a whole core. The added delay of one wait is below the last sleep.
 *
 *   mpicc -shared -fPIC -O2 -o libtopoplan_idle.so topoplan_idle.c
 */

#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>

static long min_ns = -1, max_ns = 0;
static __thread long sleep_ns = 0;
static __thread struct timespec last = {0, 0};

static long env_us(const char *name, long fallback)
{
    const char *v = getenv(name);
    long x;
    if (v == NULL || *v == '\0')
        return fallback;
    x = strtol(v, NULL, 10);
    return x > 0 ? x : fallback;
}

static long since_ns(const struct timespec *a, const struct timespec *b)
{
    return (b->tv_sec - a->tv_sec) * 1000000000L + (b->tv_nsec - a->tv_nsec);
}

int sched_yield(void)
{
    struct timespec now, nap;
    if (min_ns < 0) {
        min_ns = env_us("TOPOPLAN_IDLE_MIN_US", 20) * 1000L;
        max_ns = env_us("TOPOPLAN_IDLE_MAX_US", 1000) * 1000L;
        if (max_ns < min_ns)
            max_ns = min_ns;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    /* idle polls in a row (the previous one ended just before): sleep longer; else start short */
    if (sleep_ns > 0 && since_ns(&last, &now) < 50000L)
        sleep_ns = sleep_ns * 2 > max_ns ? max_ns : sleep_ns * 2;
    else
        sleep_ns = min_ns;
    nap.tv_sec = sleep_ns / 1000000000L;
    nap.tv_nsec = sleep_ns % 1000000000L;
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &last);
    return 0;
}
