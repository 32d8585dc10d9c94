/* har's transports between nodes over MPI point-to-point (inter.h), on
 * host memory, or device memory where the MPI moves it.
 *
 * The ring: reduce-scatter, then all-gather, each in P-1 steps of one block
 * of 1/P of the data. Every block is reduced by one rank and then copied,
 * and each rank sends 2(P-1)/P of the data, the least any all-reduce can.
 *
 * Recursive doubling: in step k each rank swaps its whole data with the
 * rank 2^k places away and both reduce, log2(P) steps in all; where P is no
 * power of two, the ranks past the largest power first hand their data to
 * one below and get the result back at the end. Fewer steps, more data:
 * the choice for small calls (har_plan_inter). Both partners of a step
 * reduce the same two operands in the same order (the lower rank's first),
 * so all ranks still end with bitwise identical results.
 *
 * The ring's steps move their blocks in messages of at most
 * HAR_RING_MESSAGE bytes: small enough that the MPI sends it eagerly
 * (no rendezvous round trip per block), and each is reduced as it comes
 * while the later ones are still on the way.
 *
 * A call's first exchange with each partner also carries what this rank
 * calls (count, datatype, op, call number), checked on receipt: ranks on
 * different nodes whose calls differ fail as the MPI would
 * (MPI_ERR_TRUNCATE, or MPI_ERR_OP) instead of mixing data. Every wait is
 * the node's bounded wait, which also hears failure notices from other
 * nodes. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/config.h"
#include "core/log.h"
#include "core/test.h"
#include "cuda/mpi_cuda.h"
#include "host/check.h"
#include "inter/inter.h"

#define RING_TAG 0x6172    /* har's own communicators carry nothing else */
#define HEADER_TAG 0x6174
#define CHECK_TAG 0x6175
/* A call's first block travels in one message with its header while it
 * is at most this: across hosts over TCP a second message cost a whole
 * second latency (2 hosts of 1 rank, Open MPI 4.1, doubling: 10.9 against
 * 5.9 us at 512 B with 256 here; 49.8 against 37.6 us for 8 KiB against
 * 4 KiB of device data when only 8 KiB with the header fitted), and
 * packing costs a copy of as much. Larger blocks go in messages posted
 * with the header (a header and block past the MPI's eager limit would
 * wait for a rendezvous). */
#define PACKED_MAX (32 << 10)
/* Messages of a ring step in flight at once, each way. */
#define WINDOW 16

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
    int32_t packed_bytes;   /* the block's bytes after the header; -1: the block follows in messages */
    int32_t unused;
    char host[48];
} header_t;

typedef struct {
    header_t h;
    char block[PACKED_MAX];
} packed_t;

/* The ring's messages other than data blocks, in memory that outlives a
 * failed call (a cancelled receive may still land). */
struct har_ring_msgs {
    packed_t out, in;
    block_sum_t sent, came;
    /* har_inter_check_calls's agreement: each rank's outcome (INT_MAX where
     * its check passed, else its status) and its culprit's rank. */
    struct { int status, culprit; } check_mine, check_first;
    MPI_Request check_req;
};

static har_status_t p2p_setup(har_node_t *node)
{
    if (node->ring_msgs) return HAR_OK;
    struct har_ring_msgs *m = node->ring_msgs = calloc(1, sizeof *node->ring_msgs);
    har_across_peer_t *all = node->notice_comm == MPI_COMM_NULL ? NULL
                                                                 : calloc((size_t)node->across_size, sizeof *all);
    if (!m || (node->notice_comm != MPI_COMM_NULL && !all)) {
        free(all);
        har_log(HAR_LOG_ERROR, "inter-node transports: out of memory");
        return HAR_ERR_INTERNAL;
    }
    /* Who this rank is, in every header and checksum it sends. */
    har_across_peer_t me;
    memset(&me, 0, sizeof me);
    me.comm_rank = node->rank;
    me.world_rank = node->peers ? node->peers[node->local_rank].world_rank : -1;
    snprintf(me.host, sizeof me.host, "%s", har_hostname());
    m->out.h.comm_rank = m->sent.comm_rank = me.comm_rank;
    m->out.h.world_rank = m->sent.world_rank = me.world_rank;
    memcpy(m->out.h.host, me.host, sizeof m->out.h.host);
    if (!all) return HAR_OK;
    if (node->set->watch) har_node_watch_listen(&node->watch, &me.watch);
    /* Who every rank across nodes is, and where its death watch listens,
     * told once: a time-out waiting for one can name it by its world rank
     * and host. */
    MPI_Request req;
    int rc = PMPI_Iallgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, node->notice_comm, &req);
    har_status_t st = rc == MPI_SUCCESS ? har_node_wait_partner(node, 1, &req, -1, "set-up") : HAR_ERR_INTERNAL;
    if (st == HAR_OK) node->across = all;
    int me_at = node->across_rank, p = node->across_size, right = (me_at + 1) % p, left = (me_at + p - 1) % p;
    if (st == HAR_OK && node->set->watch && p > 1)
        har_node_watch_join(&node->watch, me_at, right, &all[right].watch, left, &all[left].watch);
    return st;  /* on failure `all` may still be written: it stays, as a failed communicator's memory does */
}

static har_status_t check_header(har_node_t *node, const header_t *mine, const header_t *theirs, const char *step)
{
    const har_arrival_t *a = &mine->what, *b = &theirs->what;
    har_status_t st = har_node_arrival_differs(a, b);
    if (st == HAR_OK) return HAR_OK;
    char t0[96], t1[96];
    har_note("MPI_Allreduce differs between nodes: rank %d (world rank %d) %s, rank %d (world rank %d, host %s) %s",
             mine->comm_rank, mine->world_rank, har_node_arrival_text(a, t0, sizeof t0), theirs->comm_rank,
             theirs->world_rank, theirs->host, har_node_arrival_text(b, t1, sizeof t1));
    har_node_blame(node, st, theirs->comm_rank, theirs->world_rank, theirs->host, step);
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

/* Waits for the requests of an exchange with `from` (`rc`: how posting
 * them went) in the transport `step`. */
static har_status_t wait_exchange(har_node_t *node, int n, MPI_Request *req, int rc, int from, const char *step)
{
    har_status_t st = HAR_ERR_INTERNAL;
    if (rc == MPI_SUCCESS) {
        HAR_TEST_POINT(step);
        st = har_node_wait_partner(node, n, req, from, step);
    } else {
        har_note("inter-node %s: posting an exchange failed (code %d)", step, rc);
        har_node_fail(node, st, -1, step);
    }
    if (st != HAR_OK) abandon(n, req);
    return st;
}

/* The n elements of `in` reduced into `acc`: by the block's kernel where
 * its data is device memory, else by the CPU. */
static har_status_t reduce_into(const har_inter_block_t *b, char *acc, const char *in, size_t n)
{
    if (b->reduce) return b->reduce(b->reduce_ctx, acc, in, n);
    b->call->red.fn(acc, in, n);
    return HAR_OK;
}

/* What becomes of each piece of a block that comes; NULL: it stays where
 * it was received. */
typedef struct {
    char *acc;          /* reduced into this: acc op= what came */
    const char *fold;   /* else this is reduced into what came (this rank's input, streamed) */
    char *copy;         /* then what came is copied here (the result, streamed; host memory) */
} land_t;

/* `bytes` that came at `came`, byte `at` of their block, dealt with as
 * `land` says. */
static har_status_t landed(const har_inter_block_t *b, const land_t *land, char *came, size_t at, size_t bytes)
{
    if (!land) return HAR_OK;
    size_t n = bytes / b->call->red.elem_size;
    har_status_t st = HAR_OK;
    if (land->acc) st = reduce_into(b, land->acc + at, came, n);
    else if (land->fold) st = reduce_into(b, came, land->fold + at, n);
    if (st == HAR_OK && land->copy) memcpy(land->copy + at, came, bytes);
    return st;
}

/* Bytes of message i of a block of `bytes` cut into messages of `msg` bytes. */
static size_t message_bytes(size_t bytes, size_t msg, size_t i)
{
    return bytes - i * msg < msg ? bytes - i * msg : msg;
}

/* Moves a block each way between this rank and its partners (send NULL or
 * recv NULL: nothing that way) in messages of HAR_RING_MESSAGE bytes, whole
 * elements, at most WINDOW in flight each way; each message that comes is
 * dealt with at once as `land` says. Both partners cut
 * alike: the message size is rank 0's setting, and the blocks' sizes follow
 * from the call, which the headers check. On a call's first step
 * (`header`: the receive of the partner's header) the header is waited for
 * and checked once the first messages are posted, before any is waited
 * for: a partner whose call differs may never take them. */
static har_status_t exchange_messages(har_node_t *node, const har_inter_block_t *b, const char *send,
                                      size_t send_bytes, char *recv, size_t recv_bytes, const land_t *land, int to,
                                      int from, MPI_Request *header, const char *step)
{
    MPI_Comm ring = node->notice_comm;
    struct har_ring_msgs *m = node->ring_msgs;
    size_t elem = b->call->red.elem_size, most = send_bytes > recv_bytes ? send_bytes : recv_bytes;
    size_t msg = (size_t)node->set->ring_message / elem * elem;
    if (msg == 0 || msg > most) msg = most > 0 ? most : 1;
    size_t ns = send ? (send_bytes + msg - 1) / msg : 0, nr = recv ? (recv_bytes + msg - 1) / msg : 0;
    size_t w = 0;
    do {
        /* slots: 2k the receive of message w + k, 2k + 1 its send */
        MPI_Request req[2 * WINDOW];
        int rc = MPI_SUCCESS;
        for (int k = 0; k < 2 * WINDOW; k++) req[k] = MPI_REQUEST_NULL;
        for (size_t k = 0, i = w; k < WINDOW && rc == MPI_SUCCESS; k++, i++) {
            if (i < nr)
                rc = PMPI_Irecv(recv + i * msg, (int)message_bytes(recv_bytes, msg, i), MPI_BYTE, from, RING_TAG,
                                ring, &req[2 * k]);
            if (rc == MPI_SUCCESS && i < ns)
                rc = PMPI_Isend(send + i * msg, (int)message_bytes(send_bytes, msg, i), MPI_BYTE, to, RING_TAG, ring,
                                &req[2 * k + 1]);
        }
        if (rc != MPI_SUCCESS) return wait_exchange(node, 2 * WINDOW, req, rc, from, step);  /* says why */
        har_status_t st = HAR_OK;
        if (header && w == 0) {
            st = har_node_wait_partner(node, 1, header, from, step);
            if (st == HAR_OK) st = check_header(node, &m->out.h, &m->in.h, step);
        }
        for (size_t k = 0, i = w; k < WINDOW && i < nr && st == HAR_OK; k++, i++) {
            st = har_node_wait_partner(node, 1, &req[2 * k], from, step);
            if (st == HAR_OK) st = landed(b, land, recv + i * msg, i * msg, message_bytes(recv_bytes, msg, i));
        }
        if (st == HAR_OK) st = har_node_wait_partner(node, 2 * WINDOW, req, to, step);  /* the sends */
        if (st != HAR_OK) {
            abandon(2 * WINDOW, req);
            return st;
        }
        w += WINDOW;
    } while (w < ns || w < nr);
    return HAR_OK;
}

/* The largest block a header's message carries: PACKED_MAX, or
 * HAR_RING_MESSAGE where that is smaller (the header's message should go without a
 * rendezvous too; MPICH over UCX took 46 against 15 us for 32 KiB with the
 * header against 16 KiB). Rank 0's setting, so both partners pack alike. */
static size_t packed_most(const har_node_t *node)
{
    size_t msg = (size_t)node->set->ring_message;
    return msg > 0 && msg < PACKED_MAX ? msg : PACKED_MAX;
}

/* One step of `step` (the transport's name): receive `recv_bytes` from
 * `from`, send `send_bytes` to `to` (their places across nodes), dealing
 * with what comes as `land` says, with HAR_CHECK's checksums
 * when `check` (then the caller verifies and reduces). On a call's first
 * step (`headers`) the header goes too, with the block in its message when
 * that is at most packed_most() (a block of the size that comes is packed by
 * its sender alike), and the header that comes is checked against this
 * rank's call before this rank waits for anything else: a partner whose
 * call differs may never take what this rank sends (its count made it
 * take the other transport), and must not hold the failure up; failure
 * notices tell it and every other rank. The blocks are of memory `kind`
 * (device memory with an MPI that moves it): the header's message, in host
 * memory, packs a small one by a copy. Byte counts fit an int whatever the
 * call's count: a block is at most a chunk, and across nodes a chunk is at
 * most HAR_SLOT_BYTES, itself at most 1 GiB (plan.c). */
static har_status_t exchange(har_node_t *node, const har_inter_block_t *b, char *send, size_t send_bytes,
                             char *recv, size_t recv_bytes, const land_t *land, int to, int from, int headers,
                             int check, const char *step)
{
    MPI_Comm ring = node->notice_comm;
    struct har_ring_msgs *m = node->ring_msgs;
    har_mem_kind_t kind = b->kind;
#ifdef HAR_TEST_HOOKS
    if (HAR_CFG(test_corrupt_ring).i == node->rank && send_bytes > 0 && kind == HAR_MEM_HOST)
        send[0] ^= 0x40;  /* in flight: after its checksum */
#endif
    /* Slots: 0, 1 the header's message; 2, 3 the checksums. Receives are
     * even. */
    MPI_Request req[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    size_t most = packed_most(node);
    int rc = MPI_SUCCESS, packed = headers && send_bytes <= most, came_packed = headers && recv_bytes <= most;
    if (headers) {
        m->out.h.packed_bytes = packed ? (int32_t)send_bytes : -1;
        har_status_t st = packed ? har_cuda_copy(m->out.block, HAR_MEM_HOST, send, kind, send_bytes) : HAR_OK;
        if (st != HAR_OK) {
            har_node_fail(node, st, -1, step);
            return st;
        }
        size_t out_bytes = sizeof m->out.h + (packed ? send_bytes : 0);
        rc = PMPI_Irecv(&m->in, (int)sizeof m->in, MPI_BYTE, from, HEADER_TAG, ring, &req[0]);
        if (rc == MPI_SUCCESS) rc = PMPI_Isend(&m->out, (int)out_bytes, MPI_BYTE, to, HEADER_TAG, ring, &req[1]);
    }
    if (rc == MPI_SUCCESS && check)
        rc = PMPI_Irecv(&m->came, (int)sizeof m->came, MPI_BYTE, from, CHECK_TAG, ring, &req[2]);
    if (rc == MPI_SUCCESS && check)
        rc = PMPI_Isend(&m->sent, (int)sizeof m->sent, MPI_BYTE, to, CHECK_TAG, ring, &req[3]);
    if (rc != MPI_SUCCESS) return wait_exchange(node, 4, req, rc, from, step);  /* says why */
    har_status_t st = HAR_OK;
    if (!packed || !came_packed)  /* the blocks, and the header checked on the way */
        st = exchange_messages(node, b, packed ? NULL : send, send_bytes, came_packed ? NULL : recv, recv_bytes, land,
                               to, from, headers ? &req[0] : NULL, step);
    else {
        st = har_node_wait_partner(node, 1, &req[0], from, step);
        if (st == HAR_OK) st = check_header(node, &m->out.h, &m->in.h, step);
    }
    if (st != HAR_OK) {
        abandon(4, req);
        return st;
    }
    if (came_packed) {  /* the calls agree: recv_bytes came, never read past */
        size_t came = (size_t)m->in.h.packed_bytes < recv_bytes ? (size_t)m->in.h.packed_bytes : recv_bytes;
        if ((st = har_cuda_copy(recv, kind, m->in.block, HAR_MEM_HOST, came)) == HAR_OK)
            st = landed(b, land, recv, 0, recv_bytes);
        if (st != HAR_OK) {
            har_node_fail(node, st, -1, step);
            abandon(4, req);
            return st;
        }
    }
    return wait_exchange(node, 4, req, MPI_SUCCESS, from, step);
}

/* HAR_CHECK: does the block that came match the checksum its sender sent? */
static har_status_t verify_block(har_node_t *node, const char *data, size_t bytes, size_t at, const block_sum_t *came,
                                 const char *step)
{
    uint64_t got = har_host_checksum(data, bytes, at);
    if (got == came->sum) return HAR_OK;
    har_note("HAR_CHECK: rank %d (world rank %d) sent a block with checksum %016llx, rank %d received different data "
             "(%016llx), bytes %zu to %zu", came->comm_rank, came->world_rank, (unsigned long long)came->sum, node->rank,
             (unsigned long long)got, at, at + bytes);
    har_node_blame(node, HAR_ERR_CHECK, came->comm_rank, came->world_rank, "?", step);
    return HAR_ERR_CHECK;
}

/* In place, block k lives at its place in b->data. Streamed (b->in), the
 * block in flight alternates between b->data and b->tmp, each step
 * receiving into the one it did not send from: a step sends what the step
 * before received (and reduced), so only this rank's own block of step 0
 * is copied in; every other piece of input is reduced into the piece that
 * came, and every piece of the result is copied out as it is final.
 * (The plan streams only without HAR_CHECK, which verifies whole blocks.) */
static har_status_t ring_allreduce(har_node_t *node, const har_inter_block_t *b)
{
    char *data = b->data, *tmp = b->tmp, *buf[2] = {b->data, b->tmp};
    size_t n = b->n;
    const har_call_t *call = b->call;
    int first = b->first, streamed = b->in != NULL;
    int me = node->across_rank, p = node->across_size;
    size_t elem = call->red.elem_size;
    if (p == 1) return HAR_OK;
    struct har_ring_msgs *m = node->ring_msgs;
    int check = node->set->check != 0;
    if (first) har_node_arrival_of(&m->out.h.what, call, node->call);
    int right = (me + 1) % p, left = (me + p - 1) % p;
    size_t soff, slen, roff, rlen;
    if (streamed) {
        har_plan_shard(n, elem, p, me, &soff, &slen);
        memcpy(buf[0], b->in + soff * elem, slen * elem);
    }
    /* Reduce-scatter: after step s, this rank has folded s+2 inputs into
     * block (me - s - 1); at the end it owns block (me + 1) complete. */
    for (int s = 0; s < p - 1; s++) {
        har_plan_shard(n, elem, p, (me - s + p) % p, &soff, &slen);
        har_plan_shard(n, elem, p, (me - s - 1 + 2 * p) % p, &roff, &rlen);
        int headers = first && s == 0;
        har_status_t st;
        char *send = streamed ? buf[s & 1] : data + soff * elem, *recv = streamed ? buf[(s + 1) & 1] : tmp;
        land_t land = {.acc = streamed ? NULL : data + roff * elem, .fold = streamed ? b->in + roff * elem : NULL};
        if (!headers && !check) {  /* the common step: each message reduced as it comes */
            HAR_TEST_POINT("ring");
            st = exchange_messages(node, b, send, slen * elem, recv, rlen * elem, &land, right, left, NULL, "ring");
        } else {  /* under HAR_CHECK the block is verified whole before it is reduced */
            if (check) m->sent.sum = har_host_checksum(send, slen * elem, soff * elem);
            st = exchange(node, b, send, slen * elem, recv, rlen * elem, check ? NULL : &land, right, left, headers,
                          check, "ring");
            if (st == HAR_OK && check) st = verify_block(node, recv, rlen * elem, roff * elem, &m->came, "ring");
            if (st == HAR_OK && check) st = landed(b, &land, recv, 0, rlen * elem);
        }
        if (st != HAR_OK) return st;
    }
    if (streamed) {
        har_plan_shard(n, elem, p, (me + 1) % p, &soff, &slen);
        memcpy(b->out + soff * elem, buf[(p - 1) & 1], slen * elem);
    }
    /* All-gather: pass the finished blocks around. */
    for (int s = 0; s < p - 1; s++) {
        har_plan_shard(n, elem, p, (me + 1 - s + p) % p, &soff, &slen);
        har_plan_shard(n, elem, p, (me - s + p) % p, &roff, &rlen);
        har_status_t st;
        char *send = streamed ? buf[(p - 1 + s) & 1] : data + soff * elem;
        char *recv = streamed ? buf[(p + s) & 1] : data + roff * elem;
        land_t land = {.copy = streamed ? b->out + roff * elem : NULL};
        if (!check) {
            HAR_TEST_POINT("ring");
            st = exchange_messages(node, b, send, slen * elem, recv, rlen * elem, &land, right, left, NULL, "ring");
        } else {
            m->sent.sum = har_host_checksum(send, slen * elem, soff * elem);
            st = exchange(node, b, send, slen * elem, recv, rlen * elem, NULL, right, left, 0, check, "ring");
            if (st == HAR_OK) st = verify_block(node, recv, rlen * elem, roff * elem, &m->came, "ring");
        }
        if (st != HAR_OK) return st;
    }
    return HAR_OK;
}

/* One exchange of the doubling with `peer`: this rank's first `send_bytes`
 * go, and `expect` bytes come into `into`; on the call's first block the
 * headers go both ways (exchange checks them). */
static har_status_t swap(har_node_t *node, const har_inter_block_t *b, int peer, size_t send_bytes, char *into,
                         size_t expect)
{
    struct har_ring_msgs *m = node->ring_msgs;
    int check = node->set->check != 0;
    if (check) m->sent.sum = har_host_checksum(b->data, send_bytes, 0);
    har_status_t st =
        exchange(node, b, b->data, send_bytes, into, expect, NULL, peer, peer, b->first, check, "doubling");
    if (st == HAR_OK && check) st = verify_block(node, into, expect, 0, &m->came, "doubling");
    return st;
}

/* The data that came from `peer` (in b->tmp) reduced with this rank's:
 * the lower rank's operand first, on both sides. */
static har_status_t combine(const har_inter_block_t *b, int me, int peer)
{
    size_t bytes = b->n * b->call->red.elem_size;
    char *acc = me < peer ? b->data : b->tmp;
    const char *in = me < peer ? b->tmp : b->data;
    har_status_t st = reduce_into(b, acc, in, b->n);
    if (st == HAR_OK && acc != b->data) st = har_cuda_copy(b->data, b->kind, acc, b->kind, bytes);
    return st;
}

static har_status_t doubling_allreduce(har_node_t *node, const har_inter_block_t *b)
{
    int me = node->across_rank, p = node->across_size, pow2 = 1;
    if (p == 1) return HAR_OK;
    size_t bytes = b->n * b->call->red.elem_size;
    while (pow2 * 2 <= p) pow2 *= 2;
    if (b->first) har_node_arrival_of(&node->ring_msgs->out.h.what, b->call, node->call);
    har_status_t st = HAR_OK;
    if (me >= pow2) {
        /* Past the power of two: the data to rank me - pow2, which reduces
         * it into its own and sends back the result. */
        if ((st = swap(node, b, me - pow2, bytes, b->tmp, 0)) != HAR_OK) return st;
        har_inter_block_t later = *b;
        later.first = 0;
        if ((st = swap(node, &later, me - pow2, 0, b->data, bytes)) != HAR_OK) return st;
        return HAR_OK;
    }
    int extra = me + pow2 < p;
    if (extra && ((st = swap(node, b, me + pow2, 0, b->tmp, bytes)) != HAR_OK || (st = combine(b, me, me + pow2)) !=
                  HAR_OK))
        return st;
    for (int dist = 1; dist < pow2; dist *= 2) {
        int peer = me ^ dist;
        if ((st = swap(node, b, peer, bytes, b->tmp, bytes)) != HAR_OK || (st = combine(b, me, peer)) != HAR_OK)
            return st;
    }
    if (extra) {
        har_inter_block_t later = *b;
        later.first = 0;
        st = swap(node, &later, me + pow2, bytes, b->tmp, 0);
    }
    return st;
}

/* Around the ring every rank's call is checked against its left
 * neighbour's (the ring's own header message with an empty block, which
 * meets a neighbour that took the ring or doubling for a call planned
 * otherwise). Where one rank finds a difference the ranks beyond it passed,
 * and must not go on into a transport that checks nothing (NCCL): all then
 * agree (one all-reduce, MINLOC) on the first failure by status, which puts
 * another count, type or op before the failures they caused elsewhere, and
 * fail with its class and culprit. A rank whose own check failed posts its
 * outcome and leaves: its wait would end at once on its own failure, and a
 * collective's request cannot be freed, so the request and the words stay
 * in the node, as a failed communicator's memory does. */
har_status_t har_inter_check_calls(har_node_t *node, const har_inter_block_t *b, const char *step)
{
    int me = node->across_rank, p = node->across_size;
    if (p == 1) return HAR_OK;
    struct har_ring_msgs *m = node->ring_msgs;
    har_node_arrival_of(&m->out.h.what, b->call, node->call);
    har_status_t st = exchange(node, b, NULL, 0, NULL, 0, NULL, (me + 1) % p, (me + p - 1) % p, 1, 0, step);
    const har_failure_t *why = st == HAR_OK ? NULL : har_node_record(node);
    m->check_mine.status = st == HAR_OK ? INT_MAX : (int)st;
    m->check_mine.culprit = why ? why->culprit : -1;
    int posted = PMPI_Iallreduce(&m->check_mine, &m->check_first, 1, MPI_2INT, MPI_MINLOC, node->notice_comm,
                                 &m->check_req);
    if (st != HAR_OK) return st;
    if ((st = har_node_exchange(node, posted, &m->check_req, step)) != HAR_OK) return st;
    if (m->check_first.status == INT_MAX) return HAR_OK;
    st = (har_status_t)m->check_first.status;
    const har_across_peer_t *who = NULL;
    for (int r = 0; r < p && node->across; r++)
        if (node->across[r].comm_rank == m->check_first.culprit) who = &node->across[r];
    har_note("MPI_Allreduce differs between nodes: found by another rank across the nodes");
    har_node_blame(node, st, m->check_first.culprit, who ? who->world_rank : -1, who ? who->host : "?", step);
    return st;
}

/* Both take device memory too, where the MPI moves it (har_inter_takes asks). */
const har_inter_t har_inter_ring = {HAR_PATH_RING, har_cuda_mpi_p2p, 1, p2p_setup, ring_allreduce, NULL};
const har_inter_t har_inter_doubling = {HAR_PATH_DOUBLING, har_cuda_mpi_p2p, 1, p2p_setup,
                                        doubling_allreduce, NULL};
