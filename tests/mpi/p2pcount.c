/* Test shim, preloaded under libhar: counts the bytes sent through PMPI
 * point-to-point calls, which is how har moves data between nodes. Counting
 * here, not in har, means har cannot flatter itself. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>

static unsigned long long sent, largest;

unsigned long long p2pcount_bytes(void) { return __atomic_load_n(&sent, __ATOMIC_RELAXED); }

/* The largest message sent since the last call. */
unsigned long long p2pcount_take_largest(void) { return __atomic_exchange_n(&largest, 0, __ATOMIC_RELAXED); }

static void add(int count, MPI_Datatype type)
{
    int size = 0;
    PMPI_Type_size(type, &size);
    unsigned long long bytes = (unsigned long long)count * (unsigned long long)size;
    __atomic_fetch_add(&sent, bytes, __ATOMIC_RELAXED);
    unsigned long long was = __atomic_load_n(&largest, __ATOMIC_RELAXED);
    while (bytes > was && !__atomic_compare_exchange_n(&largest, &was, bytes, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        continue;
}

int PMPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    static int (*real)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "PMPI_Isend");
    add(count, type);
    return real(buf, count, type, dest, tag, comm, req);
}

int PMPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    static int (*real)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "PMPI_Send");
    add(count, type);
    return real(buf, count, type, dest, tag, comm);
}

int PMPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
                  MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *status)
{
    static int (*real)(const void *, int, MPI_Datatype, int, int, void *, int, MPI_Datatype, int, int, MPI_Comm,
                       MPI_Status *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "PMPI_Sendrecv");
    add(scount, stype);
    return real(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, status);
}
