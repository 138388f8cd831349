/*
 * colibri_membw.c - the machine's memory read bandwidth, the ceiling of a
 * memory-bound decode: colibri-bench reports each engine's tokens per second
 * as a fraction of it.
 *
 *   colibri-membw [--mib N] [--threads T] [--passes P]
 *
 * Fills N MiB (default 2048: well beyond a last-level cache), then reads it
 * P times (default 5) on T threads (default 1), each thread summing its own
 * contiguous share, and prints the best pass:
 *   read: threads=T mib=N best_gb_per_s=X
 * (1 GB = 1e9 bytes). Exit 1 with a message when memory or threads fail.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 64

typedef struct share {
    const uint64_t *words;
    size_t n;
    uint64_t sum;
} share;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Eight independent sums, so the loop is bound by the loads. */
static void *read_share(void *arg)
{
    share *s = arg;
    uint64_t acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= s->n; i += 8) {
        for (int j = 0; j < 8; j++) {
            acc[j] += s->words[i + j];
        }
    }
    for (; i < s->n; i++) {
        acc[0] += s->words[i];
    }
    s->sum = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
    return NULL;
}

static int one_pass(const uint64_t *words, size_t n, int threads, double *gbps, uint64_t *sum)
{
    pthread_t tid[MAX_THREADS];
    share shares[MAX_THREADS];
    size_t per = n / (size_t)threads;
    uint64_t start = now_ns();
    for (int t = 0; t < threads; t++) {
        shares[t] =
            (share){words + (size_t)t * per, t == threads - 1 ? n - (size_t)t * per : per, 0};
        if (t > 0 && pthread_create(&tid[t], NULL, read_share, &shares[t]) != 0) {
            fprintf(stderr, "colibri-membw: cannot start thread %d\n", t);
            return -1;
        }
    }
    read_share(&shares[0]);
    for (int t = 1; t < threads; t++) {
        pthread_join(tid[t], NULL);
    }
    uint64_t ns = now_ns() - start;
    for (int t = 0; t < threads; t++) {
        *sum += shares[t].sum;
    }
    *gbps = (double)n * sizeof(uint64_t) / (double)(ns ? ns : 1);
    return 0;
}

static long option(int argc, char **argv, const char *name, long fallback, long lo, long hi)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], name) == 0) {
            char *end;
            long v = strtol(argv[i + 1], &end, 10);
            if (*end != '\0' || v < lo || v > hi) {
                fprintf(stderr, "colibri-membw: %s must be %ld .. %ld\n", name, lo, hi);
                exit(2);
            }
            return v;
        }
    }
    return fallback;
}

int main(int argc, char **argv)
{
    long mib = option(argc, argv, "--mib", 2048, 1, 1 << 20);
    int threads = (int)option(argc, argv, "--threads", 1, 1, MAX_THREADS);
    long passes = option(argc, argv, "--passes", 5, 1, 1000);
    size_t bytes = (size_t)mib << 20, n = bytes / sizeof(uint64_t);
    uint64_t *words = aligned_alloc(64, bytes), sum = 0;
    double best = 0.0;
    if (words == NULL) {
        fprintf(stderr, "colibri-membw: cannot allocate %ld MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        words[i] = i; /* every page really backed before timing */
    }
    for (long p = 0; p < passes; p++) {
        double gbps;
        if (one_pass(words, n, threads, &gbps, &sum) != 0) {
            free(words);
            return 1;
        }
        best = gbps > best ? gbps : best;
    }
    volatile uint64_t sink = sum; /* the sums are used: the reads cannot be dropped */
    (void)sink;
    printf("read: threads=%d mib=%ld best_gb_per_s=%.2f\n", threads, mib, best);
    free(words);
    return 0;
}
