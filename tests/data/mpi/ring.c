/* A small MPI program with known communication, traced by tests/test_trace_recorder.py (4 ranks).
 *
 *  1. ring, nonblocking: irecv 1000 doubles from the left, isend 1000 doubles to the right (tag 7), waitall
 *  2. ring, blocking: send 10 ints to the right (tag 3); receive from MPI_ANY_SOURCE into a buffer of
 *     100 ints with MPI_STATUS_IGNORE (even ranks send first); a send to MPI_PROC_NULL (not recorded)
 *  3. allreduce of 16 doubles; bcast of 256 ints from rank 2
 *  4. comm_split by parity with key -rank (so the sub-communicators are {2, 0} and {3, 1}): allreduce of
 *     4 ints, bcast of 2 ints from sub-rank 0, reduce of 1 double to sub-rank 1
 *  5. sendrecv: 5 ints to the right, from the left (tag 9)
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size;
    double big_out[1000] = {0}, big_in[1000], v16[16] = {0}, w16[16], d = 1.0, dsum = 0.0;
    int small[100] = {0}, b256[256] = {0}, i4[4] = {0}, o4[4], i2[2] = {0}, s5[5] = {0}, r5[5];
    MPI_Request reqs[2];
    MPI_Comm half;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    MPI_Irecv(big_in, 1000, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(big_out, 1000, MPI_DOUBLE, right, 7, MPI_COMM_WORLD, &reqs[1]);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);

    if (rank % 2 == 0) {
        MPI_Send(small, 10, MPI_INT, right, 3, MPI_COMM_WORLD);
        MPI_Recv(small, 100, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(small, 100, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(small, 10, MPI_INT, right, 3, MPI_COMM_WORLD);
    }
    MPI_Send(small, 10, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD);

    MPI_Allreduce(v16, w16, 16, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(b256, 256, MPI_INT, 2, MPI_COMM_WORLD);

    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    MPI_Allreduce(i4, o4, 4, MPI_INT, MPI_SUM, half);
    MPI_Bcast(i2, 2, MPI_INT, 0, half);
    MPI_Reduce(&d, &dsum, 1, MPI_DOUBLE, MPI_SUM, 1, half);
    MPI_Comm_free(&half);

    MPI_Sendrecv(s5, 5, MPI_INT, right, 9, r5, 5, MPI_INT, left, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    MPI_Finalize();
    return 0;
}
