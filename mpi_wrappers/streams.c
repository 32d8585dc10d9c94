/* The entry points of MPICH's stream communicators that har takes part in
 * (src/entry/streams.h): the making and freeing of an MPIX_Stream, so that
 * har knows the CUDA stream behind each, and MPIX_Allreduce_enqueue in
 * both its bindings. Only where the MPI has them (MPICH 4.1 on). */
#include "entry/streams.h"

#include "export.h"

#ifdef HAR_HAVE_MPIX_STREAM
HAR_EXPORT int MPIX_Stream_create(MPI_Info info, MPIX_Stream *stream) { return har_mpix_stream_create(info, stream); }

HAR_EXPORT int MPIX_Stream_free(MPIX_Stream *stream) { return har_mpix_stream_free(stream); }

HAR_EXPORT int MPIX_Allreduce_enqueue(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                                      MPI_Op op, MPI_Comm comm)
{
    return har_mpix_allreduce_enqueue(sendbuf, recvbuf, count, datatype, op, comm, HAR_BINDING_INT);
}

HAR_EXPORT int MPIX_Allreduce_enqueue_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                                        MPI_Op op, MPI_Comm comm)
{
    return har_mpix_allreduce_enqueue(sendbuf, recvbuf, count, datatype, op, comm, HAR_BINDING_LARGE);
}
#endif
