/* Ring all-reduce over MPI point-to-point: reduce-scatter, then all-gather,
 * each in P-1 steps of one block. Every block is reduced by one rank and
 * then copied, so all ranks end with bitwise identical results, and each
 * rank sends 2(P-1)/P of the buffer, the least any all-reduce can. */
#include <sched.h>
#include "core/log.h"
#include "inter/inter.h"

#define RING_TAG 0x6172  /* har's own communicators carry nothing else */

/* One step: receive from the left, send to the right. Completion is polled,
 * not waited for, so that HAR_TIMEOUT (timeout > 0) also bounds a partner
 * on another node that never comes (its node failed); the requests are then
 * given up and the caller fails the call. */
static har_status_t exchange(char *send, size_t send_bytes, char *recv, size_t recv_bytes, int to, int from,
                             MPI_Comm ring, double timeout)
{
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    har_status_t st = HAR_OK;
    int rc = PMPI_Irecv(recv, (int)recv_bytes, MPI_BYTE, from, RING_TAG, ring, &req[0]);
    if (rc == MPI_SUCCESS) rc = PMPI_Isend(send, (int)send_bytes, MPI_BYTE, to, RING_TAG, ring, &req[1]);
    double start = har_seg_now();
    for (unsigned long i = 0; rc == MPI_SUCCESS; i++) {
        int done = 0;
        rc = PMPI_Testall(2, req, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS || done) break;
        if (i < 1024) continue;
        sched_yield();
        if (timeout > 0 && i % 256 == 0 && har_seg_now() - start > timeout) {
            har_log(HAR_LOG_ERROR, "inter-node ring: no data from ring rank %d within HAR_TIMEOUT", from);
            st = HAR_ST_TIMEOUT;
            break;
        }
    }
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        PMPI_Error_string(rc, msg, &len);
        har_log(HAR_LOG_ERROR, "inter-node ring: exchange with ring ranks %d and %d failed: %s", from, to, msg);
        st = HAR_ST_INTERNAL;
    }
    if (st != HAR_OK) {  /* leave nothing pending behind */
        if (req[0] != MPI_REQUEST_NULL) { PMPI_Cancel(&req[0]); PMPI_Request_free(&req[0]); }
        if (req[1] != MPI_REQUEST_NULL) PMPI_Request_free(&req[1]);
    }
    return st;
}

static har_status_t ring_allreduce(char *data, size_t n, size_t elem_size, har_reduce_fn fn, MPI_Comm ring,
                                   char *tmp, double timeout)
{
    int me, p;
    PMPI_Comm_rank(ring, &me);
    PMPI_Comm_size(ring, &p);
    if (p == 1 || n == 0) return HAR_OK;
    int right = (me + 1) % p, left = (me + p - 1) % p;
    size_t soff, slen, roff, rlen;
    /* Reduce-scatter: after step s, this rank has folded s+2 inputs into
     * block (me - s - 1); at the end it owns block (me + 1) complete. */
    for (int s = 0; s < p - 1; s++) {
        har_shard(n, elem_size, p, (me - s + p) % p, &soff, &slen);
        har_shard(n, elem_size, p, (me - s - 1 + 2 * p) % p, &roff, &rlen);
        har_status_t st = exchange(data + soff * elem_size, slen * elem_size, tmp, rlen * elem_size, right, left,
                                   ring, timeout);
        if (st != HAR_OK) return st;
        fn(data + roff * elem_size, tmp, rlen);
    }
    /* All-gather: pass the finished blocks around. */
    for (int s = 0; s < p - 1; s++) {
        har_shard(n, elem_size, p, (me + 1 - s + p) % p, &soff, &slen);
        har_shard(n, elem_size, p, (me - s + p) % p, &roff, &rlen);
        har_status_t st = exchange(data + soff * elem_size, slen * elem_size, data + roff * elem_size,
                                   rlen * elem_size, right, left, ring, timeout);
        if (st != HAR_OK) return st;
    }
    return HAR_OK;
}

har_status_t har_inter_allreduce(const har_node_t *node, MPI_Comm across, char *data, size_t n,
                                 const har_call_t *call, char *tmp)
{
    if (!node->set->inter_mpi)
        return ring_allreduce(data, n, call->red.elem_size, call->red.fn, across, tmp, node->set->timeout);
    int rc = PMPI_Allreduce(MPI_IN_PLACE, data, (int)n, call->type, call->op, across);
    if (rc == MPI_SUCCESS) return HAR_OK;
    har_log(HAR_LOG_ERROR, "inter-node step by the MPI's MPI_Allreduce (HAR_INTER=mpi) failed (code %d)", rc);
    return HAR_ST_INTERNAL;
}
