/* 1000 communicators created, used through har and freed: open files,
 * resident memory and /dev/shm must not grow. Knows nothing of har, so it
 * also runs under valgrind or the leak sanitizer as a plain program. */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long count_dir(const char *path, const char *prefix)
{
    DIR *d = opendir(path);
    long n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.' && strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

static long resident_kib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    if (f) fclose(f);
    return rss * 4;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, cycles = argc > 1 ? atoi(argv[1]) : 1000;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long fds0 = 0, rss0 = 0, shm0 = 0;
    int data[4096], bad = 0;
    for (int c = 0; c < cycles; c++) {
        if (c == cycles / 10) {  /* after warm-up: the MPI's own caches are full */
            fds0 = count_dir("/proc/self/fd", "");
            rss0 = resident_kib();
            shm0 = count_dir("/dev/shm", "har-");
        }
        MPI_Comm comm;
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        for (int i = 0; i < 4096; i++) data[i] = i + c;
        MPI_Allreduce(MPI_IN_PLACE, data, 4096, MPI_INT, MPI_MAX, comm);
        int size;
        MPI_Comm_size(comm, &size);
        bad += data[4095] != 4095 + c;
        MPI_Comm_free(&comm);
    }
    long fds = count_dir("/proc/self/fd", ""), rss = resident_kib(), shm = count_dir("/dev/shm", "har-");
    printf("stress_comms: rank %d: %d cycles, wrong results %d, fds %ld -> %ld, resident %ld -> %ld KiB, "
           "har entries in /dev/shm %ld -> %ld\n", rank, cycles, bad, fds0, fds, rss0, rss, shm0, shm);
    int fail = bad || fds > fds0 || rss > rss0 + 4096 || shm > 0;
    MPI_Finalize();
    return fail;
}
