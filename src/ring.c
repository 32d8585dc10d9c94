/* Ring all-reduce over MPI point-to-point: reduce-scatter, then all-gather,
 * each in P-1 steps of one block. Every block is reduced by one rank and
 * then copied, so all ranks end with bitwise identical results, and each
 * rank sends 2(P-1)/P of the buffer, the least any all-reduce can. */
#include "hier.h"

#define RING_TAG 0x6172  /* har's own communicators carry nothing else */

static int exchange(char *send, size_t send_bytes, char *recv, size_t recv_bytes, int to, int from, MPI_Comm ring)
{
    MPI_Request req[2];
    int rc = PMPI_Irecv(recv, (int)recv_bytes, MPI_BYTE, from, RING_TAG, ring, &req[0]);
    if (rc == MPI_SUCCESS) rc = PMPI_Isend(send, (int)send_bytes, MPI_BYTE, to, RING_TAG, ring, &req[1]);
    else return rc;
    if (rc != MPI_SUCCESS) {
        PMPI_Cancel(&req[0]);
        PMPI_Request_free(&req[0]);
        return rc;
    }
    return PMPI_Waitall(2, req, MPI_STATUSES_IGNORE);
}

int har_ring_allreduce(void *buf, size_t n, size_t elem_size, har_reduce_fn fn, MPI_Comm ring, void *tmp)
{
    int me, p;
    PMPI_Comm_rank(ring, &me);
    PMPI_Comm_size(ring, &p);
    if (p == 1 || n == 0) return MPI_SUCCESS;
    char *data = buf;
    int right = (me + 1) % p, left = (me + p - 1) % p;
    size_t soff, slen, roff, rlen;
    /* Reduce-scatter: after step s, this rank has folded s+2 inputs into
     * block (me - s - 1); at the end it owns block (me + 1) complete. */
    for (int s = 0; s < p - 1; s++) {
        har_shard(n, elem_size, p, (me - s + p) % p, &soff, &slen);
        har_shard(n, elem_size, p, (me - s - 1 + 2 * p) % p, &roff, &rlen);
        int rc = exchange(data + soff * elem_size, slen * elem_size, tmp, rlen * elem_size, right, left, ring);
        if (rc != MPI_SUCCESS) return rc;
        fn(data + roff * elem_size, tmp, rlen);
    }
    /* All-gather: pass the finished blocks around. */
    for (int s = 0; s < p - 1; s++) {
        har_shard(n, elem_size, p, (me + 1 - s + p) % p, &soff, &slen);
        har_shard(n, elem_size, p, (me - s + p) % p, &roff, &rlen);
        int rc = exchange(data + soff * elem_size, slen * elem_size, data + roff * elem_size,
                          rlen * elem_size, right, left, ring);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}
