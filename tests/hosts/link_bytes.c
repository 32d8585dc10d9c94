/* Bytes each host puts on its link during a fixed number of all-reduces,
 * from the counters of its own interface (/sys/class/net/IF/statistics, as
 * seen inside the host's network namespace), for MPI_Allreduce (har, when
 * it is preloaded) and PMPI_Allreduce (the MPI alone) in turn, on the same
 * float vector summed in place. One warm-up call of each first (connections,
 * har's set-up), not counted. Only the lowest rank of each host reads the
 * counters, between two barriers, so what they count is the calls plus the
 * barriers' few bytes.
 *   link_bytes [--bytes B] [--calls K] [--if NAME]   (default 4 MiB, 5, eth0)
 * Rank 0 prints one line per side and host:
 *   link_bytes: SIDE host H ranks R tx T rx X seconds S ring T0 tx/ring Q
 * where T0 = K * 2(N-1)/N * B is what a ring all-reduce between the N hosts
 * sends from each host (the node's data, whatever its number of ranks). It
 * exits 1 if a result is wrong or the counters cannot be read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>

static long long counter(const char *ifname, const char *which)
{
    char path[256];
    snprintf(path, sizeof path, "/sys/class/net/%s/statistics/%s", ifname, which);
    FILE *f = fopen(path, "r");
    long long v = -1;
    if (f) {
        if (fscanf(f, "%lld", &v) != 1) v = -1;
        fclose(f);
    }
    return v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long long bytes = 4 << 20;
    int calls = 5, rank, size;
    const char *ifname = "eth0";
    for (int a = 1; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "--bytes")) bytes = atoll(argv[a + 1]);
        else if (!strcmp(argv[a], "--calls")) calls = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--if")) ifname = argv[a + 1];
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm host, leaders;
    int local, nlocal, nhosts;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
    MPI_Comm_rank(host, &local);
    MPI_Comm_size(host, &nlocal);
    MPI_Comm_split(MPI_COMM_WORLD, local == 0 ? 0 : MPI_UNDEFINED, rank, &leaders);
    nhosts = local == 0 ? 0 : 1;
    if (leaders != MPI_COMM_NULL) MPI_Comm_size(leaders, &nhosts);
    MPI_Bcast(&nhosts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    gethostname(name, sizeof name - 1);

    size_t n = (size_t)bytes / sizeof(float);
    float *v = malloc(n * sizeof *v);
    int bad = 0;
    const char *sides[2] = {"har", "mpi"};
    for (int s = 0; s < 2; s++) {
        int (*reduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm) = s == 0 ? MPI_Allreduce : PMPI_Allreduce;
        for (size_t i = 0; i < n; i++) v[i] = 1.0f;
        reduce(MPI_IN_PLACE, v, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);  /* warm-up */
        bad |= v[0] != (float)size || v[n - 1] != (float)size;
        MPI_Barrier(MPI_COMM_WORLD);
        long long tx0 = counter(ifname, "tx_bytes"), rx0 = counter(ifname, "rx_bytes");
        double t0 = MPI_Wtime();
        for (int c = 0; c < calls; c++) {
            for (size_t i = 0; i < n; i++) v[i] = 1.0f;
            reduce(MPI_IN_PLACE, v, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            bad |= v[0] != (float)size || v[n / 2] != (float)size || v[n - 1] != (float)size;
        }
        double secs = MPI_Wtime() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
        long long mine[4] = {counter(ifname, "tx_bytes") - tx0, counter(ifname, "rx_bytes") - rx0, nlocal,
                             (long long)(secs * 1e6)};
        if (tx0 < 0 || rx0 < 0) bad = 1;
        if (leaders != MPI_COMM_NULL) {
            int nl;
            MPI_Comm_size(leaders, &nl);
            long long *all = malloc(sizeof *all * 4 * (size_t)nl);
            char *names = malloc((size_t)nl * 64);
            char mine_name[64] = "";
            strncpy(mine_name, name, sizeof mine_name - 1);
            MPI_Gather(mine, 4, MPI_LONG_LONG, all, 4, MPI_LONG_LONG, 0, leaders);
            MPI_Gather(mine_name, 64, MPI_CHAR, names, 64, MPI_CHAR, 0, leaders);
            double ring = (double)calls * 2.0 * (nhosts - 1) / nhosts * (double)(n * sizeof(float));
            for (int h = 0; rank == 0 && h < nl; h++)
                printf("link_bytes: %s host %s ranks %lld tx %lld rx %lld seconds %.3f ring %.0f tx/ring %.4f\n",
                       sides[s], names + 64 * h, all[4 * h + 2], all[4 * h], all[4 * h + 1], all[4 * h + 3] / 1e6,
                       ring, ring > 0 ? all[4 * h] / ring : 0.0);
            free(all);
            free(names);
        }
    }
    int any;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("link_bytes: %d hosts, %d ranks, %lld bytes x %d calls: %s\n", nhosts, size, bytes, calls,
                          any ? "WRONG results or no counters" : "results right");
    fflush(stdout);
    free(v);
    if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
    MPI_Comm_free(&host);
    MPI_Finalize();
    return any;
}
