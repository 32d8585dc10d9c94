/* The inter-node step (inter.h).
 *
 * Ring all-reduce over MPI point-to-point: reduce-scatter, then all-gather,
 * each in P-1 steps of one block. Every block is reduced by one rank and
 * then copied, so all ranks end with bitwise identical results, and each
 * rank sends 2(P-1)/P of the buffer, the least any all-reduce can.
 *
 * A call's first exchange also carries what this rank calls (count,
 * datatype, op, call number), checked on receipt: ranks on different nodes
 * whose calls differ fail as the MPI would (MPI_ERR_TRUNCATE, or
 * MPI_ERR_OP) instead of mixing data. Every wait is the node's bounded
 * wait, which also hears failure notices from other nodes. */
#include <stdio.h>
#include <string.h>
#include "core/config.h"
#include "core/log.h"
#include "core/test.h"
#include "host/check.h"
#include "inter/inter.h"

#define RING_TAG 0x6172    /* har's own communicators carry nothing else */
#define HEADER_TAG 0x6174
#define CHECK_TAG 0x6175

/* HAR_CHECK: each block travels with its checksum. */
typedef struct {
    uint64_t sum;
    int32_t comm_rank, world_rank;
} block_sum_t;

/* What the receiving rank compares with its own call (as the arrival
 * within a node does), and who sent it. */
typedef struct {
    har_arrival_t what;
    int32_t comm_rank, world_rank;
    char host[48];
} header_t;

static void header_of(const har_node_t *node, const har_call_t *call, header_t *h)
{
    memset(h, 0, sizeof *h);
    h->what.call = (uint32_t)node->call;
    h->what.count = call->count;
    h->what.type = call->red.type_code;
    h->what.op = (int8_t)call->red.op_code;
    h->comm_rank = node->rank;
    h->world_rank = node->peers ? node->peers[node->local_rank].world_rank : -1;
    snprintf(h->host, sizeof h->host, "%s", node->host);
}

static har_status_t check_header(har_node_t *node, const header_t *mine, const header_t *theirs)
{
    const har_arrival_t *a = &mine->what, *b = &theirs->what;
    har_status_t st = har_arrival_differs(a, b);
    if (st == HAR_OK) return HAR_OK;
    char t0[16], t1[16];
    har_log(HAR_LOG_ERROR, "MPI_Allreduce differs between nodes: rank %d (world rank %d) count %llu %s %s (call %u), "
            "rank %d (world rank %d, host %s) count %llu %s %s (call %u)", mine->comm_rank, mine->world_rank,
            (unsigned long long)a->count, har_type_code_name(a->type, t0, sizeof t0), har_op_code_name(a->op), a->call,
            theirs->comm_rank, theirs->world_rank, theirs->host, (unsigned long long)b->count,
            har_type_code_name(b->type, t1, sizeof t1), har_op_code_name(b->op), b->call);
    har_failure_t why = {st, theirs->comm_rank, theirs->world_rank, mine->comm_rank, node->call, "ring", ""};
    snprintf(why.host, sizeof why.host, "%s", theirs->host);
    har_node_record_failure(node, &why);
    return st;
}

/* One step: receive from the left, send to the right, and on a call's first
 * step the headers too. Then the receive may take up to `recv_bytes` (the
 * whole of tmp): a rank whose call differs may send more than this one
 * expects, and the header, not a truncated receive, must say so. A failed
 * wait leaves nothing pending that could write into this rank's memory
 * later: receives are cancelled. */
static har_status_t exchange(har_node_t *node, char *send, size_t send_bytes, char *recv, size_t recv_bytes, int to,
                             int from, MPI_Comm ring, const header_t *mine, header_t *theirs, const block_sum_t *sent,
                             block_sum_t *came)
{
    MPI_Request req[6] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL,
                          MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int n = 6;
    int rc = PMPI_Irecv(recv, (int)recv_bytes, MPI_BYTE, from, RING_TAG, ring, &req[0]);
    if (rc == MPI_SUCCESS) rc = PMPI_Isend(send, (int)send_bytes, MPI_BYTE, to, RING_TAG, ring, &req[1]);
    if (rc == MPI_SUCCESS && mine) rc = PMPI_Irecv(theirs, (int)sizeof *theirs, MPI_BYTE, from, HEADER_TAG, ring, &req[2]);
    if (rc == MPI_SUCCESS && mine) rc = PMPI_Isend(mine, (int)sizeof *mine, MPI_BYTE, to, HEADER_TAG, ring, &req[3]);
    if (rc == MPI_SUCCESS && sent) rc = PMPI_Irecv(came, (int)sizeof *came, MPI_BYTE, from, CHECK_TAG, ring, &req[4]);
    if (rc == MPI_SUCCESS && sent) rc = PMPI_Isend(sent, (int)sizeof *sent, MPI_BYTE, to, CHECK_TAG, ring, &req[5]);
    har_status_t st = HAR_ST_INTERNAL;
    if (rc == MPI_SUCCESS) {
        HAR_TEST_POINT("ring");
        st = har_node_wait_partner(node, n, req, node->left, "ring");
    } else {
        har_log(HAR_LOG_ERROR, "inter-node ring: posting an exchange failed (code %d)", rc);
        har_node_fail(node, st, -1, "ring");
    }
    if (st != HAR_OK) {
        for (int k = 0; k < n; k++) {
            if (req[k] == MPI_REQUEST_NULL) continue;
            if (k % 2 == 0) PMPI_Cancel(&req[k]);
            PMPI_Request_free(&req[k]);
        }
    }
    return st;
}

/* HAR_CHECK: does the block that came match the checksum its sender sent? */
static har_status_t verify_block(har_node_t *node, const char *data, size_t bytes, size_t at, const block_sum_t *came,
                                 const char *step)
{
    uint64_t got = har_check_sum(data, bytes, at);
    if (got == came->sum) return HAR_OK;
    har_log(HAR_LOG_ERROR, "HAR_CHECK: call %llu, step %s: rank %d (world rank %d) sent a block with checksum %016llx, "
            "rank %d received different data (%016llx), bytes %zu to %zu", (unsigned long long)node->call, step,
            came->comm_rank, came->world_rank, (unsigned long long)came->sum, node->rank, (unsigned long long)got, at,
            at + bytes);
    har_failure_t why = {HAR_ST_CHECK, came->comm_rank, came->world_rank, node->rank, node->call, "", "?"};
    snprintf(why.step, sizeof why.step, "%s", step);
    har_node_record_failure(node, &why);
    return HAR_ST_CHECK;
}

static har_status_t ring_allreduce(har_node_t *node, MPI_Comm ring, char *data, size_t n, const har_call_t *call,
                                   char *tmp, size_t tmp_bytes, int first)
{
    int me, p;
    size_t elem = call->red.elem_size;
    PMPI_Comm_rank(ring, &me);
    PMPI_Comm_size(ring, &p);
    if (p == 1) return HAR_OK;
    header_t mine, theirs;
    block_sum_t sent = {0, node->rank, node->peers ? node->peers[node->local_rank].world_rank : -1}, came;
    const block_sum_t *check = node->set->check ? &sent : NULL;
    if (first) header_of(node, call, &mine);
    int right = (me + 1) % p, left = (me + p - 1) % p;
    size_t soff, slen, roff, rlen;
    /* Reduce-scatter: after step s, this rank has folded s+2 inputs into
     * block (me - s - 1); at the end it owns block (me + 1) complete. */
    for (int s = 0; s < p - 1; s++) {
        har_shard(n, elem, p, (me - s + p) % p, &soff, &slen);
        har_shard(n, elem, p, (me - s - 1 + 2 * p) % p, &roff, &rlen);
        int headers = first && s == 0;
        if (check) sent.sum = har_check_sum(data + soff * elem, slen * elem, soff * elem);
#ifdef HAR_TEST_HOOKS
        if (HAR_CFG(test_corrupt_ring).i == node->rank && slen > 0) data[soff * elem] ^= 0x40;  /* in flight */
#endif
        har_status_t st = exchange(node, data + soff * elem, slen * elem, tmp, headers ? tmp_bytes : rlen * elem,
                                   right, left, ring, headers ? &mine : NULL, &theirs, check, &came);
        if (st == HAR_OK && headers) st = check_header(node, &mine, &theirs);
        if (st == HAR_OK && check) st = verify_block(node, tmp, rlen * elem, roff * elem, &came, "ring");
        if (st != HAR_OK) return st;
        call->red.fn(data + roff * elem, tmp, rlen);
    }
    /* All-gather: pass the finished blocks around. */
    for (int s = 0; s < p - 1; s++) {
        har_shard(n, elem, p, (me + 1 - s + p) % p, &soff, &slen);
        har_shard(n, elem, p, (me - s + p) % p, &roff, &rlen);
        if (check) sent.sum = har_check_sum(data + soff * elem, slen * elem, soff * elem);
        har_status_t st = exchange(node, data + soff * elem, slen * elem, data + roff * elem, rlen * elem, right, left,
                                   ring, NULL, NULL, check, &came);
        if (st == HAR_OK && check) st = verify_block(node, data + roff * elem, rlen * elem, roff * elem, &came, "ring");
        if (st != HAR_OK) return st;
    }
    return HAR_OK;
}

har_status_t har_inter_allreduce(har_node_t *node, MPI_Comm across, char *data, size_t n, const har_call_t *call,
                                 char *tmp, size_t tmp_bytes, int first)
{
    if (!node->set->inter_mpi) return ring_allreduce(node, across, data, n, call, tmp, tmp_bytes, first);
    /* The MPI's own all-reduce, waited for like any other exchange (it
     * checks counts itself; a failure of a collective cannot be cancelled,
     * and the communicator fails for good). */
    MPI_Request req;
    return har_node_exchange(node, PMPI_Iallreduce(MPI_IN_PLACE, data, (int)n, call->type, call->op, across, &req), &req,
                             "inter_mpi");
}
