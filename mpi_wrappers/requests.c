/* The entry points of MPI_Allreduce's non-blocking and persistent forms
 * and of the calls that complete, start and free requests: each calls one
 * of har's internals (src/entry/collectives.h, src/entry/requests.h), the
 * all-reduce's in both its int and (MPI 4) its large-count bindings; nothing
 * else lives here. The completion calls must be har's too, or a staged
 * request's results would never reach the device. */
#include "entry/collectives.h"
#include "entry/requests.h"

#include "export.h"

HAR_EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request *request)
{
    return har_iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request, HAR_BINDING_INT);
}

#ifdef HAR_HAVE_MPI_C_COUNTS
HAR_EXPORT int MPI_Iallreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                                MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    return har_iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request, HAR_BINDING_LARGE);
}

HAR_EXPORT int MPI_Allreduce_init_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                                    MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return har_allreduce_init(sendbuf, recvbuf, count, datatype, op, comm, info, request, HAR_BINDING_LARGE);
}
#endif

#if defined(HAR_HAVE_ALLREDUCE_INIT) && !defined(HAR_ALLREDUCE_INIT_IS_MPIX)
HAR_EXPORT int MPI_Allreduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                  MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return har_allreduce_init(sendbuf, recvbuf, count, datatype, op, comm, info, request, HAR_BINDING_INT);
}
#elif defined(HAR_ALLREDUCE_INIT_IS_MPIX)
/* Open MPI 4.1's persistent collectives are its MPIX_ extension. */
HAR_EXPORT int MPIX_Allreduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                   MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    return har_allreduce_init(sendbuf, recvbuf, count, datatype, op, comm, info, request, HAR_BINDING_INT);
}
#endif

HAR_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status) { return har_wait(request, status); }

HAR_EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    return har_test(request, flag, status);
}

HAR_EXPORT int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[])
{
    return har_waitall(count, array_of_requests, array_of_statuses);
}

HAR_EXPORT int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag, MPI_Status array_of_statuses[])
{
    return har_testall(count, array_of_requests, flag, array_of_statuses);
}

HAR_EXPORT int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status)
{
    return har_waitany(count, array_of_requests, index, status);
}

HAR_EXPORT int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag, MPI_Status *status)
{
    return har_testany(count, array_of_requests, index, flag, status);
}

HAR_EXPORT int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
                            MPI_Status array_of_statuses[])
{
    return har_waitsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
}

HAR_EXPORT int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
                            MPI_Status array_of_statuses[])
{
    return har_testsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
}

HAR_EXPORT int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    return har_request_get_status(request, flag, status);
}

HAR_EXPORT int MPI_Request_free(MPI_Request *request) { return har_request_free(request); }

HAR_EXPORT int MPI_Start(MPI_Request *request) { return har_start(request); }

HAR_EXPORT int MPI_Startall(int count, MPI_Request array_of_requests[])
{
    return har_startall(count, array_of_requests);
}
