/* A preload for MPICH ranks on hosts of scripts/hosts-run (tests and figures
 * only). MPICH 4.0's MPI_Finalize closes every UCX endpoint with
 * ucp_disconnect_nb (flush mode), and a rank that has finished closing its
 * own then waits in a PMI barrier without progressing UCX. Over UCX's TCP
 * transport a flush needs the peer to acknowledge, so a rank still closing
 * an endpoint to a peer already in that barrier waits for ever: seen on
 * 2 hosts with plain MPI programs as well as with har. (MPICH 4.2.0 moved
 * the barrier before the disconnects: commit 08d8105b7b.) Here the
 * endpoints are not flushed: at MPI_Finalize every MPI operation is
 * complete, and ucp_worker_destroy, which MPICH calls next, destroys the
 * endpoints it still has. Only ucp_disconnect_nb is replaced. */
#include <stddef.h>

__attribute__((visibility("default"))) void *ucp_disconnect_nb(void *ep)
{
    (void)ep;
    return NULL;  /* UCS_OK: done, nothing pending */
}
