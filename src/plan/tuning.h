/* The tuning table: which choice serves a call of a given size, memory kind
 * and communicator shape on a given class of machine, as measured by
 * har-bench --tuning. Parsing and lookup are pure; loading reads a file. */
#ifndef HAR_TUNING_H
#define HAR_TUNING_H

#include "core/common.h"

#define HAR_CLASS_LEN 64     /* a machine class: "NVIDIA_H200/nvlink", "AMD_EPYC_9454_48-Core_Processor/16" */
#define HAR_TUNE_MAX_ROWS 64
#define HAR_TUNE_MAX_TEXT (64 << 10)  /* a table file is read up to this size */

/* One row: calls on device (`on_device` 1) or host (0) buffers, on communicators of
 * `nodes` nodes of `local_size` ranks, on machines of class `cls` ("*": any),
 * of at most `max_bytes`, take `choice` (a mask of path bits). */
typedef struct {
    uint64_t max_bytes;
    uint32_t nodes;
    uint16_t local_size;
    uint8_t on_device;
    unsigned choice;
    char cls[HAR_CLASS_LEN];
} har_plan_tune_row_t;

/* Parses a table (see src/plan/tuning.txt). Returns the number of rows, or
 * -1 with the 1-based number of the first bad line in *bad_line. */
HAR_HIDDEN int har_plan_tune_parse(const char *text, har_plan_tune_row_t *rows, int max_rows, int *bad_line);
/* Does the row fit a call of this kind, class, shape and size? */
HAR_HIDDEN int har_plan_tune_fits(const har_plan_tune_row_t *row, int on_device, const char *cls, int local_size,
                                  int nodes, uint64_t bytes);
/* The first row that fits, or NULL. */
HAR_HIDDEN const har_plan_tune_row_t *har_plan_tune_lookup(const har_plan_tune_row_t *rows, int nrows, int on_device,
                                                           const char *cls, int local_size, int nodes, uint64_t bytes);
/* The table HAR_TUNING names: "builtin", "none" or a file (read up to
 * HAR_TUNE_MAX_TEXT bytes). A file that cannot be read or parsed is refused
 * (warned about when `report`) and the built-in table serves. `source` says
 * which table it is. Returns the number of rows. */
HAR_HIDDEN int har_plan_tune_load(const char *setting, har_plan_tune_row_t *rows, int max_rows, char *source,
                                  size_t len, int report);
/* Writes a row as the table's text (no newline). */
HAR_HIDDEN void har_plan_tune_format(const har_plan_tune_row_t *row, char *buf, size_t len);
HAR_HIDDEN extern const char har_plan_tune_builtin[];

/* Turns spaces into '_' and keeps the class within HAR_CLASS_LEN. */
HAR_HIDDEN void har_plan_class_word(const char *text, char *out, size_t len);

#endif
