/* pipe_rtt.c N [PARENT_CPU CHILD_CPU] - the floor under any stdio client:
 * N round trips of one short line between two processes over a pair of
 * pipes. Prints the median round trip in microseconds (and p25, p75). With
 * CPUs given, each process is pinned there: the same CPU for both, or one
 * each, are the two regimes a client and its server run in. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void pin(const char *cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(cpu), &set);
    sched_setaffinity(0, sizeof set, &set);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10000;
    if (argc > 3) pin(argv[2]);
    int up[2], down[2];
    if (pipe(up) || pipe(down)) return 1;
    const char msg[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    char buf[256];
    pid_t child = fork();
    if (child == 0) {
        if (argc > 3) pin(argv[3]);
        close(up[1]);
        close(down[0]);
        for (;;) {
            ssize_t r = read(up[0], buf, sizeof buf);
            if (r <= 0) _exit(0);
            if (write(down[1], buf, r) != r) _exit(1);
        }
    }
    close(up[0]);
    close(down[1]);
    double *t = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        if (write(up[1], msg, sizeof msg - 1) < 0) return 1;
        if (read(down[0], buf, sizeof buf) <= 0) return 1;
        t[i] = now_us() - t0;
    }
    close(up[1]); /* EOF: the echoing child exits */
    waitpid(child, NULL, 0);
    qsort(t, n, sizeof(double), cmp);
    printf("%.2f %.2f %.2f\n", t[n / 2], t[n / 4], t[3 * n / 4]);
    return 0;
}
