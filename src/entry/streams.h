/* MPICH's stream communicators (MPIX_Stream, MPICH 4.1 on): har keeps the
 * CUDA stream behind each MPIX_Stream made with one, so that
 * MPIX_Allreduce_enqueue on a communicator of that stream is
 * har_allreduce_enqueue on it (docs/CALLS.md). */
#ifndef HAR_STREAMS_H
#define HAR_STREAMS_H

#include <stddef.h>
#include "core/common.h"
#include "stage/stage.h"  /* har_count_t, har_binding_t */

/* An info value written by MPIX_Info_set_hex (MPICH's hexadecimal, in
 * which "[N]" stands for N zero bytes) into exactly `len` bytes at out:
 * 0, or -1 where it is not that. */
HAR_HIDDEN int har_info_hex_decode(const char *text, void *out, size_t len);

#ifdef HAR_HAVE_MPIX_STREAM
HAR_HIDDEN int har_mpix_stream_create(MPI_Info info, MPIX_Stream *stream);
HAR_HIDDEN int har_mpix_stream_free(MPIX_Stream *stream);
HAR_HIDDEN int har_mpix_allreduce_enqueue(const void *sbuf, void *rbuf, har_count_t count, MPI_Datatype type,
                                          MPI_Op op, MPI_Comm comm, har_binding_t binding);
#endif

#endif
