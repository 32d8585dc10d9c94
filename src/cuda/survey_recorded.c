/* The test build's recorded machines (HAR_TEST_GPUS=FILE): the device
 * survey asks these instead of the driver and NVML (survey.h's
 * har_cuda_api_t), so that tests without a GPU can put it on any machine.
 * FILE describes one machine and how each rank sees it, one fact a line:
 *
 *   gpu ORDINAL UUID BUS_ID MPS NVLINK NAME
 *       a GPU, in the machine's numbering (0, 1, ... in order). UUID: 32 hex
 *       digits, '-' and a "GPU-" prefix allowed (as nvidia-smi -L says it);
 *       BUS_ID as cuDeviceGetPCIBusId says it; MPS 1: contexts on it go
 *       through MPS (CU_DEVICE_ATTRIBUTE_MPS_ENABLED); NVLINK 1: NVML shows
 *       an active NVLink on it; NAME: the rest of the line.
 *   nopeer A B
 *       GPUs A and B have no peer access to each other (either way).
 *   rank R visible A[,B...]
 *       rank R of MPI_COMM_WORLD sees only these GPUs, as its ordinals 0,
 *       1, ... (CUDA_VISIBLE_DEVICES=A,B); a rank without such a line sees
 *       every GPU at the machine's ordinals.
 *   rank R gpu N
 *       rank R's buffers are on its ordinal N: for the test program (which
 *       passes it to the survey), not read here.
 *   # a comment
 *
 * nopeer and visible lines name GPUs already described. A malformed file
 * is said once, and the survey then finds no driver (as before libcuda is
 * loaded). */
#include "core/common.h"  /* HAR_HAVE_CUDA */
#if defined HAR_TEST_HOOKS && defined HAR_HAVE_CUDA
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "core/config.h"
#include "core/log.h"
#include "cuda/survey.h"

#define MAX_GPUS 64

static struct {
    int ok;
    int ngpus;  /* the machine's */
    struct { unsigned char uuid[16]; char bus[32], name[128]; int mps, nvlink; } gpu[MAX_GPUS];
    unsigned char nopeer[MAX_GPUS][MAX_GPUS];
    int nseen, seen[MAX_GPUS];  /* this process's ordinals: the machine's GPU at each */
} rec;

static int parse_uuid(const char *text, unsigned char out[16])
{
    int n = 0;
    if (strncmp(text, "GPU-", 4) == 0) text += 4;
    for (; *text; text++) {
        int c = tolower((unsigned char)*text);
        if (c == '-') continue;
        if (n == 32 || !isxdigit(c)) return 0;
        int v = isdigit(c) ? c - '0' : c - 'a' + 10;
        out[n / 2] = (unsigned char)(n % 2 ? out[n / 2] | v : v << 4);
        n++;
    }
    return n == 32;
}

/* A GPU list "A,B,..." of GPUs described so far, as this process's ordinals. */
static int parse_visible(const char *list)
{
    rec.nseen = 0;
    for (const char *p = list; *p; p++) {
        char *end;
        long g = strtol(p, &end, 10);
        if (end == p || g < 0 || g >= rec.ngpus || (*end && *end != ',') || rec.nseen == MAX_GPUS) return 0;
        rec.seen[rec.nseen++] = (int)g;
        p = end;
        if (!*p) break;
    }
    return rec.nseen > 0;
}

/* NULL, or what is wrong with the line. */
static const char *parse_line(char *p, int rank, int *visible)
{
    char uuid[64], bus[32], list[256];
    int ord, mps, nvlink, a, b, r, n, used = 0;
    if (sscanf(p, "gpu %d %63s %31s %d %d %n", &ord, uuid, bus, &mps, &nvlink, &used) == 5 && used) {
        if (ord != rec.ngpus || ord >= MAX_GPUS) return "GPUs must be numbered 0, 1, ... in order";
        if (!parse_uuid(uuid, rec.gpu[ord].uuid)) return "a UUID is 32 hex digits";
        if ((mps | nvlink) & ~1) return "MPS and NVLINK are 0 or 1";
        size_t len = strlen(p + used);
        while (len && isspace((unsigned char)p[used + len - 1])) len--;
        if (!len || len >= sizeof rec.gpu[ord].name) return "the name is missing or too long";
        snprintf(rec.gpu[ord].bus, sizeof rec.gpu[ord].bus, "%s", bus);
        snprintf(rec.gpu[ord].name, sizeof rec.gpu[ord].name, "%.*s", (int)len, p + used);
        rec.gpu[ord].mps = mps;
        rec.gpu[ord].nvlink = nvlink;
        rec.ngpus++;
        return NULL;
    }
    if (sscanf(p, "nopeer %d %d %n", &a, &b, &used) == 2 && !p[used]) {
        if (a < 0 || b < 0 || a >= rec.ngpus || b >= rec.ngpus) return "no such GPU (yet)";
        rec.nopeer[a][b] = rec.nopeer[b][a] = 1;
        return NULL;
    }
    if (sscanf(p, "rank %d visible %255s %n", &r, list, &used) == 2 && !p[used]) {
        if (r != rank) return NULL;
        *visible = 1;
        return parse_visible(list) ? NULL : "a list of GPUs described so far, as A,B,...";
    }
    if (sscanf(p, "rank %d gpu %d %n", &r, &n, &used) == 2 && !p[used]) return NULL;
    return "not a gpu, nopeer or rank line";
}

static void load(void)
{
    const char *file = HAR_CFG(test_gpus).s, *why = NULL;
    char line[512];
    int rank = 0, lineno = 0, visible = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int fd = har_open_setting_file(file);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    if (!f) why = "cannot open it as a regular file";
    if (!f && fd >= 0) close(fd);
    while (f && !why && fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line + strspn(line, " \t");
        p[strcspn(p, "\r\n")] = '\0';
        if (*p && *p != '#') why = parse_line(p, rank, &visible);
    }
    if (f) fclose(f);
    if (!why && !rec.ngpus) why = "no GPU described";
    if (why) {
        har_log(HAR_LOG_WARN, "HAR_TEST_GPUS=%s: line %d: %s", file, lineno, why);
        return;
    }
    if (!visible)
        for (rec.nseen = 0; rec.nseen < rec.ngpus; rec.nseen++) rec.seen[rec.nseen] = rec.nseen;
    rec.ok = 1;
}

/* The driver's calls, on the recording: CUdevice is the process's ordinal,
 * as with the real driver. */
static int machine_gpu(CUdevice dev) { return dev >= 0 && dev < rec.nseen ? rec.seen[dev] : -1; }

static CUresult device_get(CUdevice *dev, int ordinal)
{
    if (machine_gpu(ordinal) < 0) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

static CUresult device_get_count(int *n)
{
    *n = rec.nseen;
    return CUDA_SUCCESS;
}

static CUresult device_get_name(char *name, int len, CUdevice dev)
{
    int g = machine_gpu(dev);
    if (g < 0) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", rec.gpu[g].name);
    return CUDA_SUCCESS;
}

static CUresult device_get_uuid(CUuuid *uuid, CUdevice dev)
{
    int g = machine_gpu(dev);
    if (g < 0) return CUDA_ERROR_INVALID_DEVICE;
    memcpy(uuid->bytes, rec.gpu[g].uuid, 16);
    return CUDA_SUCCESS;
}

static CUresult device_can_access_peer(int *can, CUdevice dev, CUdevice peer)
{
    int g = machine_gpu(dev), h = machine_gpu(peer);
    if (g < 0 || h < 0) return CUDA_ERROR_INVALID_DEVICE;
    *can = g != h && !rec.nopeer[g][h];  /* the driver says 0 for a GPU and itself */
    return CUDA_SUCCESS;
}

static CUresult device_get_pci_bus_id(char *bus, int len, CUdevice dev)
{
    int g = machine_gpu(dev);
    if (g < 0) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(bus, (size_t)len, "%s", rec.gpu[g].bus);
    return CUDA_SUCCESS;
}

static CUresult device_get_attribute(int *value, CUdevice_attribute attr, CUdevice dev)
{
    int g = machine_gpu(dev);
    if (g < 0) return CUDA_ERROR_INVALID_DEVICE;
    if (attr != CU_DEVICE_ATTRIBUTE_MPS_ENABLED) return CUDA_ERROR_INVALID_VALUE;  /* not recorded */
    *value = rec.gpu[g].mps;
    return CUDA_SUCCESS;
}

/* NVML sees every GPU of the machine, whatever CUDA_VISIBLE_DEVICES says. */
static int nvlink_active(const char *bus_id)
{
    for (int g = 0; g < rec.ngpus; g++)
        if (strcasecmp(bus_id, rec.gpu[g].bus) == 0) return rec.gpu[g].nvlink;
    return 0;
}

int har_cuda_recorded(har_cuda_api_t *api)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    static const har_cuda_device_api_t cu = {
        .device_get = device_get, .device_get_count = device_get_count, .device_get_name = device_get_name,
        .device_get_uuid = device_get_uuid, .device_can_access_peer = device_can_access_peer,
        .device_get_pci_bus_id = device_get_pci_bus_id, .device_get_attribute = device_get_attribute};
    if (!*HAR_CFG(test_gpus).s) return 0;
    pthread_once(&once, load);
    api->cu = rec.ok ? &cu : NULL;
    api->nvlink_active = nvlink_active;
    return 1;
}
#endif
