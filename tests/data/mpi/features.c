/* MPI calls the recorder handles specially, with known rows (tests/test_trace_recorder.py, 4 ranks).
 *
 *  1. irecv from MPI_ANY_SOURCE (room for 64 ints) + issend of 3 ints to the right (tag 1); MPI_Wait on the
 *     send, MPI_Test until the receive completes
 *  2. persistent requests: send_init of 2 doubles to the right, recv_init from the left (tag 2); twice
 *     startall + waitall; request_free
 *  3. non-periodic shift with sendrecv (4 ints, tag 3): rank 0 receives from MPI_PROC_NULL, rank 3 sends to it
 *  4. sendrecv with different tags (send tag 10 + rank, receive tag 10 + left), 1 double each way
 *  5. alltoallv on a dup of MPI_COMM_WORLD: i + 1 ints to rank i
 *  6. gatherv of rank + 1 ints to rank 3; scatter of 2 doubles from rank 1; reduce_scatter with counts
 *     1, 1, 2, 2 ints; barrier; allgather in place (3 ints); scan of 1 int
 *  7. MPI_Pcontrol(0) ... bcast (not recorded) ... MPI_Pcontrol(1); barrier on MPI_COMM_SELF
 *  8. three rounds of irecv from the left + isend to the right of 1 int (tags 20, 21, 22), completed by
 *     MPI_Waitany twice, by MPI_Waitsome until both are done, by MPI_Testall until both are done
 */
#include <mpi.h>

int main(int argc, char **argv)
{
    int rank, size, flag = 0;
    int in64[64], out3[3] = {0}, s4[4] = {0}, r4[4], a2a_s[10] = {0}, a2a_r[40], sc[4], rc[4], sd[4], rd[4];
    int gath[10], mine[4] = {0}, rsc_in[6] = {0}, rsc_out[2], rcounts[4] = {1, 1, 2, 2}, ag[12] = {0}, x = 1, y;
    double d2s[2] = {0}, d2r[2], scat[8] = {0}, d1s = 1.0, d1r;
    MPI_Request reqs[2];
    MPI_Status st;
    MPI_Comm dup;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    MPI_Irecv(in64, 64, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &reqs[0]);
    MPI_Issend(out3, 3, MPI_INT, right, 1, MPI_COMM_WORLD, &reqs[1]);
    MPI_Wait(&reqs[1], MPI_STATUS_IGNORE);
    while (!flag)
        MPI_Test(&reqs[0], &flag, &st);

    MPI_Send_init(d2s, 2, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &reqs[0]);
    MPI_Recv_init(d2r, 2, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &reqs[1]);
    for (int it = 0; it < 2; it++) {
        MPI_Startall(2, reqs);
        MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    }
    MPI_Request_free(&reqs[0]);
    MPI_Request_free(&reqs[1]);

    MPI_Sendrecv(s4, 4, MPI_INT, rank + 1 < size ? rank + 1 : MPI_PROC_NULL, 3, r4, 4, MPI_INT,
                 rank > 0 ? rank - 1 : MPI_PROC_NULL, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&d1s, 1, MPI_DOUBLE, right, 10 + rank, &d1r, 1, MPI_DOUBLE, left, 10 + left, MPI_COMM_WORLD,
                 &st);

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (int i = 0, off = 0; i < size; i++) {
        sc[i] = i + 1;
        sd[i] = off;
        off += i + 1;
        rc[i] = rank + 1;
        rd[i] = i * (rank + 1);
    }
    MPI_Alltoallv(a2a_s, sc, sd, MPI_INT, a2a_r, rc, rd, MPI_INT, dup);
    MPI_Comm_free(&dup);

    int gcounts[4] = {1, 2, 3, 4}, gdispls[4] = {0, 1, 3, 6};
    MPI_Gatherv(mine, rank + 1, MPI_INT, gath, gcounts, gdispls, MPI_INT, 3, MPI_COMM_WORLD);
    MPI_Scatter(scat, 2, MPI_DOUBLE, d2r, 2, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    MPI_Reduce_scatter(rsc_in, rsc_out, rcounts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ag, 3, MPI_INT, MPI_COMM_WORLD);
    MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

    MPI_Pcontrol(0);
    MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Pcontrol(1);
    MPI_Barrier(MPI_COMM_SELF);

    int one_in = 0, one_out = 0, idx, done, outcount, indices[2];
    for (int round = 0; round < 3; round++) {
        MPI_Irecv(&one_in, 1, MPI_INT, left, 20 + round, MPI_COMM_WORLD, &reqs[0]);
        MPI_Isend(&one_out, 1, MPI_INT, right, 20 + round, MPI_COMM_WORLD, &reqs[1]);
        if (round == 0) {
            MPI_Waitany(2, reqs, &idx, MPI_STATUS_IGNORE);
            MPI_Waitany(2, reqs, &idx, &st);
        } else if (round == 1) {
            for (done = 0; done < 2; done += outcount)
                MPI_Waitsome(2, reqs, &outcount, indices, MPI_STATUSES_IGNORE);
        } else {
            for (flag = 0; !flag;)
                MPI_Testall(2, reqs, &flag, MPI_STATUSES_IGNORE);
        }
    }

    MPI_Finalize();
    return 0;
}
