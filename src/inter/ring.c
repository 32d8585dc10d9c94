/* har's ring between nodes, a transport of inter.h, on host memory.
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
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/log.h"
#include "core/test.h"
#include "host/check.h"
#include "inter/inter.h"

#define RING_TAG 0x6172    /* har's own communicators carry nothing else */
#define HEADER_TAG 0x6174
#define CHECK_TAG 0x6175
#define SETUP_TAG 0x6176
/* A call's first block travels in one message with the header while both
 * fit in this: one message costs less than two, but on one host Open MPI
 * sends up to 256 bytes inline and a larger one costs more than two small
 * ones (measured with pretend nodes). */
#define PACKED_MAX 256

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
    int32_t packed_bytes;   /* the block's bytes after the header; -1: the block follows as its own message */
    int32_t unused;
    char host[48];
} header_t;

typedef struct {
    header_t h;
    char block[PACKED_MAX - sizeof(header_t)];
} packed_t;

/* The ring's messages other than data blocks, in memory that outlives a
 * failed call (a cancelled receive may still land). */
struct har_ring_msgs {
    packed_t out, in;
    block_sum_t sent, came;
};

static har_status_t ring_setup(har_node_t *node)
{
    if (node->ring_msgs) return HAR_OK;
    struct har_ring_msgs *m = node->ring_msgs = calloc(1, sizeof *node->ring_msgs);
    if (!m) {
        har_log(HAR_LOG_ERROR, "inter-node ring: out of memory");
        return HAR_ERR_INTERNAL;
    }
    /* Who this rank is, in every header and checksum it sends. */
    m->out.h.comm_rank = m->sent.comm_rank = node->rank;
    m->out.h.world_rank = m->sent.world_rank = node->peers ? node->peers[node->local_rank].world_rank : -1;
    snprintf(m->out.h.host, sizeof m->out.h.host, "%s", har_host());
    if (node->notice_comm == MPI_COMM_NULL) return HAR_OK;
    /* Who the left neighbour is, told once: a time-out waiting for its
     * blocks can name it by its world rank and host. */
    int right = (node->across_rank + 1) % node->across_size, left = (node->across_rank + node->across_size - 1) %
                                                                     node->across_size;
    MPI_Request req[2];
    int rc = PMPI_Irecv(&m->in.h, (int)sizeof m->in.h, MPI_BYTE, left, SETUP_TAG, node->notice_comm, &req[0]);
    if (rc == MPI_SUCCESS) rc = PMPI_Isend(&m->out.h, (int)sizeof m->out.h, MPI_BYTE, right, SETUP_TAG,
                                           node->notice_comm, &req[1]);
    har_status_t st = rc == MPI_SUCCESS ? har_node_wait_partner(node, 2, req, -1, "set-up") : HAR_ERR_INTERNAL;
    if (st == HAR_OK) {
        node->left_world = m->in.h.world_rank;
        snprintf(node->left_host, sizeof node->left_host, "%s", m->in.h.host);
    }
    return st;
}

static har_status_t check_header(har_node_t *node, const header_t *mine, const header_t *theirs)
{
    const har_arrival_t *a = &mine->what, *b = &theirs->what;
    har_status_t st = har_arrival_differs(a, b);
    if (st == HAR_OK) return HAR_OK;
    char t0[96], t1[96];
    har_note("MPI_Allreduce differs between nodes: rank %d (world rank %d) %s, rank %d (world rank %d, host %s) %s",
             mine->comm_rank, mine->world_rank, har_arrival_text(a, t0, sizeof t0), theirs->comm_rank,
             theirs->world_rank, theirs->host, har_arrival_text(b, t1, sizeof t1));
    har_node_blame(node, st, theirs->comm_rank, theirs->world_rank, theirs->host, "ring");
    return st;
}

/* Leaves nothing pending that could write into this rank's memory later:
 * receives (the even slots) are cancelled, and every request freed. */
static void abandon(int n, MPI_Request *req)
{
    for (int k = 0; k < n; k++) {
        if (req[k] == MPI_REQUEST_NULL) continue;
        if (k % 2 == 0) PMPI_Cancel(&req[k]);
        PMPI_Request_free(&req[k]);
    }
}

/* Waits for the requests of an exchange (`rc`: how posting them went). */
static har_status_t wait_exchange(har_node_t *node, int n, MPI_Request *req, int rc)
{
    har_status_t st = HAR_ERR_INTERNAL;
    if (rc == MPI_SUCCESS) {
        HAR_TEST_POINT("ring");
        st = har_node_wait_partner(node, n, req, node->left, "ring");
    } else {
        har_note("inter-node ring: posting an exchange failed (code %d)", rc);
        har_node_fail(node, st, -1, "ring");
    }
    if (st != HAR_OK) abandon(n, req);
    return st;
}

/* One step: receive from the left, send to the right, with HAR_CHECK's
 * checksums when `check`. On a call's first step (`headers`) the header
 * goes too, with the block in its message when both are small. The block
 * this rank expects is `expect` bytes, but the receive takes up to
 * recv_bytes (the whole of tmp): a rank whose call differs may send more,
 * and the header, not a truncated receive, must say so. The blocks are of
 * memory `kind` (device memory with an MPI that moves it): the header's
 * message, in host memory, packs a small one by a copy. Byte counts fit an
 * int whatever the call's count: a block is at most a chunk, and across
 * nodes a chunk is at most HAR_SLOT_BYTES, itself at most 1 GiB (plan.c). */
static har_status_t exchange(har_node_t *node, char *send, size_t send_bytes, char *recv, size_t expect,
                             size_t recv_bytes, int to, int from, MPI_Comm ring, int headers, int check,
                             har_mem_kind_t kind)
{
    struct har_ring_msgs *m = node->ring_msgs;
    /* Slots: 0, 1 the block, or the header's message; 2, 3 the checksums;
     * 4, 5 a block that travels apart from its header. Receives are even. */
    MPI_Request req[6] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL,
                          MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc;
    if (!headers) {
        rc = PMPI_Irecv(recv, (int)recv_bytes, MPI_BYTE, from, RING_TAG, ring, &req[0]);
        if (rc == MPI_SUCCESS) rc = PMPI_Isend(send, (int)send_bytes, MPI_BYTE, to, RING_TAG, ring, &req[1]);
    } else {
        int packed = send_bytes <= sizeof m->out.block;
        m->out.h.packed_bytes = packed ? (int32_t)send_bytes : -1;
        har_status_t st = packed ? har_mem_copy(m->out.block, HAR_MEM_HOST, send, kind, send_bytes) : HAR_OK;
        if (st != HAR_OK) {
            har_node_fail(node, st, -1, "ring");
            return st;
        }
        size_t out_bytes = sizeof m->out.h + (packed ? send_bytes : 0);
        rc = PMPI_Irecv(&m->in, (int)sizeof m->in, MPI_BYTE, from, HEADER_TAG, ring, &req[0]);
        if (rc == MPI_SUCCESS) rc = PMPI_Isend(&m->out, (int)out_bytes, MPI_BYTE, to, HEADER_TAG, ring, &req[1]);
        if (rc == MPI_SUCCESS && expect > sizeof m->in.block)
            rc = PMPI_Irecv(recv, (int)recv_bytes, MPI_BYTE, from, RING_TAG, ring, &req[4]);
        if (rc == MPI_SUCCESS && !packed) rc = PMPI_Isend(send, (int)send_bytes, MPI_BYTE, to, RING_TAG, ring, &req[5]);
    }
    if (rc == MPI_SUCCESS && check)
        rc = PMPI_Irecv(&m->came, (int)sizeof m->came, MPI_BYTE, from, CHECK_TAG, ring, &req[2]);
    if (rc == MPI_SUCCESS && check)
        rc = PMPI_Isend(&m->sent, (int)sizeof m->sent, MPI_BYTE, to, CHECK_TAG, ring, &req[3]);
    if (!headers) return wait_exchange(node, 4, req, rc);
    /* The header first. Only if the left's call differs from this one does
     * its block come otherwise than expected: then the block receive is
     * dropped, or posted now (the left's send may wait for it), and the
     * header check fails the call. */
    har_status_t st = wait_exchange(node, 4, req, rc);
    if (st != HAR_OK) {
        abandon(2, req + 4);  /* the rest wait_exchange has abandoned */
        return st;
    }
    int32_t came = m->in.h.packed_bytes;
    if (came >= 0) {
        abandon(1, req + 4);
        size_t fits = recv_bytes < sizeof m->in.block ? recv_bytes : sizeof m->in.block;
        if ((st = har_mem_copy(recv, kind, m->in.block, HAR_MEM_HOST, (size_t)came < fits ? (size_t)came : fits)) !=
            HAR_OK) {
            har_node_fail(node, st, -1, "ring");
            return st;
        }
    } else if (req[4] == MPI_REQUEST_NULL)
        rc = PMPI_Irecv(recv, (int)recv_bytes, MPI_BYTE, from, RING_TAG, ring, &req[4]);
    if (req[4] == MPI_REQUEST_NULL && req[5] == MPI_REQUEST_NULL) return HAR_OK;
    return wait_exchange(node, 6, req, rc);
}

/* HAR_CHECK: does the block that came match the checksum its sender sent? */
static har_status_t verify_block(har_node_t *node, const char *data, size_t bytes, size_t at, const block_sum_t *came,
                                 const char *step)
{
    uint64_t got = har_check_sum(data, bytes, at);
    if (got == came->sum) return HAR_OK;
    har_note("HAR_CHECK: rank %d (world rank %d) sent a block with checksum %016llx, rank %d received different data "
             "(%016llx), bytes %zu to %zu", came->comm_rank, came->world_rank, (unsigned long long)came->sum, node->rank,
             (unsigned long long)got, at, at + bytes);
    har_node_blame(node, HAR_ERR_CHECK, came->comm_rank, came->world_rank, "?", step);
    return HAR_ERR_CHECK;
}

static har_status_t ring_allreduce(har_node_t *node, const har_inter_block_t *b)
{
    char *data = b->data, *tmp = b->tmp;
    size_t n = b->n, tmp_bytes = b->tmp_bytes;
    const har_call_t *call = b->call;
    int first = b->first;
    MPI_Comm ring = node->notice_comm;
    int me = node->across_rank, p = node->across_size;
    size_t elem = call->red.elem_size;
    if (p == 1) return HAR_OK;
    struct har_ring_msgs *m = node->ring_msgs;
    int check = node->set->check != 0;
    if (first) har_arrival_of(&m->out.h.what, call, node->call);
    int right = (me + 1) % p, left = (me + p - 1) % p;
    size_t soff, slen, roff, rlen;
    /* Reduce-scatter: after step s, this rank has folded s+2 inputs into
     * block (me - s - 1); at the end it owns block (me + 1) complete. */
    for (int s = 0; s < p - 1; s++) {
        har_shard(n, elem, p, (me - s + p) % p, &soff, &slen);
        har_shard(n, elem, p, (me - s - 1 + 2 * p) % p, &roff, &rlen);
        int headers = first && s == 0;
        if (check) m->sent.sum = har_check_sum(data + soff * elem, slen * elem, soff * elem);
#ifdef HAR_TEST_HOOKS
        if (HAR_CFG(test_corrupt_ring).i == node->rank && slen > 0 && b->kind == HAR_MEM_HOST)
            data[soff * elem] ^= 0x40;  /* in flight */
#endif
        har_status_t st = exchange(node, data + soff * elem, slen * elem, tmp, rlen * elem,
                                   headers ? tmp_bytes : rlen * elem, right, left, ring, headers, check, b->kind);
        if (st == HAR_OK && headers) st = check_header(node, &m->out.h, &m->in.h);
        if (st == HAR_OK && check) st = verify_block(node, tmp, rlen * elem, roff * elem, &m->came, "ring");
        if (st == HAR_OK && b->reduce) st = b->reduce(b->reduce_ctx, data + roff * elem, tmp, rlen);
        else if (st == HAR_OK) call->red.fn(data + roff * elem, tmp, rlen);
        if (st != HAR_OK) return st;
    }
    /* All-gather: pass the finished blocks around. */
    for (int s = 0; s < p - 1; s++) {
        har_shard(n, elem, p, (me + 1 - s + p) % p, &soff, &slen);
        har_shard(n, elem, p, (me - s + p) % p, &roff, &rlen);
        if (check) m->sent.sum = har_check_sum(data + soff * elem, slen * elem, soff * elem);
        har_status_t st = exchange(node, data + soff * elem, slen * elem, data + roff * elem, rlen * elem,
                                   rlen * elem, right, left, ring, 0, check, b->kind);
        if (st == HAR_OK && check) st = verify_block(node, data + roff * elem, rlen * elem, roff * elem, &m->came, "ring");
        if (st != HAR_OK) return st;
    }
    return HAR_OK;
}

/* Device memory too, where the MPI moves it (har_inter_takes asks). */
const har_inter_t har_inter_ring = {HAR_PATH_RING, HAR_TAKES_HOST | HAR_TAKES_DEVICE, ring_setup, ring_allreduce};
