/* This machine as har needs to know it (machine.h): the job's ranks on it,
 * and its class for the tuning table. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "core/log.h"
#include "node/machine.h"
#include "plan/tuning.h"

static int machine_ranks;

/* This machine, as the kernel's boot id names it: the same for every
 * process on it whatever its namespaces, and different on every other. */
static int machine_color(void)
{
    char text[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f || !fgets(text, sizeof text, f)) snprintf(text, sizeof text, "%s", har_hostname());
    if (f) fclose(f);
    uint32_t h = 2166136261u;
    for (const char *s = text; *s && *s != '\n'; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return (int)(h & 0x7fffffff);  /* a colour: two machines that collide only count more sharers */
}

void har_node_census(void)
{
    MPI_Comm same;
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (PMPI_Comm_split(MPI_COMM_WORLD, machine_color(), rank, &same) != MPI_SUCCESS) return;
    PMPI_Comm_size(same, &machine_ranks);
    PMPI_Comm_free(&same);
}

int har_node_machine_ranks(void) { return machine_ranks; }

static char cpu_model[HAR_CLASS_LEN - 12] = "unknown_CPU";
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

/* The CPU's model name as /proc/cpuinfo gives it, spaces as '_'. */
static void read_cpu_model(void)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon[strcspn(colon, "\n")] = '\0';
        har_plan_class_word(colon + 1, cpu_model, sizeof cpu_model);
        break;
    }
    if (f) fclose(f);
}

void har_node_cpu_class(int cores_per_rank, char *out, size_t len)
{
    pthread_once(&cpu_once, read_cpu_model);
    snprintf(out, len, "%s/%d", cpu_model, cores_per_rank);
}
