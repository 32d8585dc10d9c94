/* What every internal source includes: config.h, MPI, har.h, visibility. */
#ifndef HAR_COMMON_H
#define HAR_COMMON_H

#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>
#include "har.h"

/* Nothing internal is exported: libhar exports only MPI_*, mpi_* and har_*. */
#define HAR_HIDDEN __attribute__((visibility("hidden")))

#endif
