/*
 * linux_port_api.c - direct tests of the Linux port library
 * (ports/linux/colibri_linux*.c), linked with the core only for the kernel
 * table the port hands out: argument checks, error
 * text, cleanup after every failure (no descriptor leaks), the port hooks.
 * Built and run by test_linux_port_api.py:  linux_port_api IMAGE TMPDIR
 * Prints "ok N" and exits 0, or names the first failed check and exits 1.
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "colibri_linux.h"

static int g_checks;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        g_checks++;                                                                                \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

static int is_reset(const colibri_linux_mapping *m)
{
    return m->data == NULL && m->size == 0 && m->fd == -1 && !m->locked && !m->flocked;
}

static void write_file(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(bytes, 1, n, f) == n);
    CHECK(fclose(f) == 0);
}

static void test_arguments(const char *image)
{
    colibri_linux_mapping m;
    char err[256];
    CHECK(colibri_linux_map(NULL, image, 0, err, sizeof err) == COLIBRI_LINUX_E_BAD_ARGUMENT);
    CHECK(strstr(err, "no mapping struct") != NULL);
    CHECK(colibri_linux_map(&m, NULL, 0, err, sizeof err) == COLIBRI_LINUX_E_BAD_ARGUMENT);
    CHECK(is_reset(&m));
    CHECK(colibri_linux_map(&m, "", 0, err, sizeof err) == COLIBRI_LINUX_E_BAD_ARGUMENT);
    CHECK(colibri_linux_map(&m, image, 0x80u, err, sizeof err) == COLIBRI_LINUX_E_BAD_ARGUMENT);
    CHECK(strstr(err, "unknown flags 0x80") != NULL);
    CHECK(is_reset(&m));
    /* No error buffer at all. */
    CHECK(colibri_linux_map(&m, "/nonexistent/model.bin", 0, NULL, 0) == COLIBRI_LINUX_E_OPEN);
    /* A tiny buffer gets a terminated prefix. */
    memset(err, 'x', sizeof err);
    CHECK(colibri_linux_map(&m, "/nonexistent/model.bin", 0, err, 8) == COLIBRI_LINUX_E_OPEN);
    CHECK(strlen(err) == 7);
    colibri_linux_unmap(NULL);
    CHECK(colibri_linux_advise(NULL, COLIBRI_LINUX_ACCESS_RANDOM) == EINVAL);
    CHECK(strcmp(colibri_linux_strerror((colibri_linux_status)99), "unknown port status") == 0);
    CHECK(strcmp(colibri_linux_strerror(COLIBRI_LINUX_E_TRUNCATED),
                 "file shorter than its header's image size") == 0);
}

static void test_failures_leave_nothing_open(const char *image, const char *tmp)
{
    char path[4096], err[1024];
    unsigned char head[512];
    colibri_linux_mapping m;
    int before = open_fds();
    FILE *f = fopen(image, "rb");
    CHECK(f != NULL);
    CHECK(fread(head, 1, sizeof head, f) == sizeof head);
    fclose(f);

    snprintf(path, sizeof path, "%s/api_short.bin", tmp);
    write_file(path, head, 300); /* magic ok, image_size > 300 */
    CHECK(colibri_linux_map(&m, path, 0, err, sizeof err) == COLIBRI_LINUX_E_TRUNCATED);
    CHECK(strstr(err, "truncated") != NULL && strstr(err, path) != NULL);
    CHECK(is_reset(&m));
    head[0] = 'X';
    write_file(path, head, sizeof head);
    CHECK(colibri_linux_map(&m, path, 0, err, sizeof err) == COLIBRI_LINUX_E_BAD_MAGIC);
    CHECK(is_reset(&m));
    write_file(path, head, 0);
    CHECK(colibri_linux_map(&m, path, 0, err, sizeof err) == COLIBRI_LINUX_E_EMPTY);
    write_file(path, head, 255);
    CHECK(colibri_linux_map(&m, path, 0, err, sizeof err) == COLIBRI_LINUX_E_TOO_SMALL);
    CHECK(colibri_linux_map(&m, tmp, 0, err, sizeof err) == COLIBRI_LINUX_E_NOT_REGULAR);
    CHECK(strstr(err, "a directory") != NULL);
    CHECK(is_reset(&m));
    CHECK(open_fds() == before);
}

static void test_map_and_hooks(const char *image)
{
    colibri_linux_mapping m;
    colibri_port port;
    char err[1024];
    uint64_t t0, t1;
    int before = open_fds();

    CHECK(colibri_linux_map(&m, image, 0, err, sizeof err) == COLIBRI_LINUX_OK);
    CHECK(err[0] == '\0');
    CHECK(m.data != NULL && m.size >= 256 && m.image_size <= m.size && m.fd >= 0);
    CHECK(m.flocked == 1 && m.locked == 0 && m.page_size >= 4096);
    CHECK(memcmp(m.data, "COLIBRI\x1a", 8) == 0);
    CHECK(((uintptr_t)m.data % m.page_size) == 0);
    CHECK(open_fds() == before + 1);

    /* The shared lock lets other readers in and keeps writers out. */
    {
        int fd = open(image, O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0);
        CHECK(flock(fd, LOCK_SH | LOCK_NB) == 0);
        CHECK(flock(fd, LOCK_UN) == 0);
        CHECK(flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK);
        close(fd);
    }

    colibri_linux_port_ctx ctx = {.map = &m};
    colibri_linux_port_init(&port, &ctx);
    CHECK(port.version == COLIBRI_PORT_VERSION);
    CHECK(port.ticks != NULL && port.prefetch != NULL && port.ctx == (void *)&ctx);
    CHECK(port.parallel_for == NULL); /* no pool: one thread */
    t0 = port.ticks(port.ctx);
    t1 = port.ticks(port.ctx);
    CHECK(t0 > 0 && t1 >= t0);
    /* prefetch: in range, unaligned, past the end, outside, empty: none may fail */
    port.prefetch(port.ctx, m.data, m.size);
    port.prefetch(port.ctx, m.data + 100, 5000);
    port.prefetch(port.ctx, m.data + m.size - 1, 1u << 20);
    port.prefetch(port.ctx, m.data + m.size, 10);
    port.prefetch(port.ctx, (const void *)&m, sizeof m);
    port.prefetch(port.ctx, m.data, 0);
    port.prefetch(port.ctx, NULL, 10);
    port.prefetch(NULL, m.data, 10);

    CHECK(colibri_linux_advise(&m, COLIBRI_LINUX_ACCESS_SEQUENTIAL) == 0);
    CHECK(colibri_linux_advise(&m, COLIBRI_LINUX_ACCESS_WILLNEED) == 0);
    CHECK(colibri_linux_advise(&m, COLIBRI_LINUX_ACCESS_RANDOM) == 0);
    CHECK(colibri_linux_advise(&m, (colibri_linux_access)42) == EINVAL);

    colibri_linux_unmap(&m);
    CHECK(is_reset(&m));
    colibri_linux_unmap(&m); /* twice is fine */
    CHECK(open_fds() == before);

    /* POPULATE: every page mapped now, so the port sets no prefetch. */
    CHECK(colibri_linux_map(&m, image, COLIBRI_LINUX_MAP_POPULATE, err, sizeof err) ==
          COLIBRI_LINUX_OK);
    CHECK(m.populated == 1);
    colibri_linux_port_init(&port, &ctx);
    CHECK(port.prefetch == NULL);
    colibri_linux_unmap(&m);
    CHECK(colibri_linux_map(&m, image, 0x8u, err, sizeof err) == COLIBRI_LINUX_E_BAD_ARGUMENT);

    /* NO_FLOCK: no lock taken. */
    CHECK(colibri_linux_map(&m, image, COLIBRI_LINUX_MAP_NO_FLOCK, err, sizeof err) ==
          COLIBRI_LINUX_OK);
    CHECK(m.flocked == 0);
    colibri_linux_unmap(&m);

    colibri_linux_port_init(&port, NULL);
    CHECK(port.ticks != NULL && port.prefetch == NULL);
    colibri_linux_port_init(NULL, NULL);
}

/* parallel_for on a pool: every task runs exactly once, whatever thread. */
enum { POOL_TASKS = 1000 };

static void count_task(void *arg, uint32_t task)
{
    atomic_int *runs = arg;
    atomic_fetch_add(&runs[task], 1);
}

/* Many small batches back to back, each with its own counters: a thread
 * that runs a task of one batch with another batch's function or argument
 * (a late worker at a batch boundary) leaves a count off by one. */
enum { SMALL_BATCHES = 20000, SMALL_TASKS = 3 };

static void test_pool_batch_boundaries(void)
{
    static atomic_int runs[SMALL_BATCHES][SMALL_TASKS];
    colibri_linux_port_ctx ctx = {.pool = colibri_linux_pool_start(3)};
    colibri_port port;
    int all = 1;
    colibri_linux_port_init(&port, &ctx);
    for (uint32_t b = 0; b < SMALL_BATCHES; b++) {
        port.parallel_for(port.ctx, 2u + b % 2u, count_task, runs[b]);
    }
    for (uint32_t b = 0; b < SMALL_BATCHES; b++) {
        for (uint32_t t = 0; t < SMALL_TASKS; t++) {
            all = all && atomic_load(&runs[b][t]) == (t < 2u + b % 2u);
        }
    }
    CHECK(all);
    colibri_linux_pool_stop(ctx.pool);
}

static void test_pool(void)
{
    static atomic_int runs[POOL_TASKS];
    colibri_linux_port_ctx ctx = {.pool = colibri_linux_pool_start(3)};
    colibri_port port;
    CHECK(ctx.pool != NULL && colibri_linux_pool_threads(ctx.pool) == 3);
    colibri_linux_port_init(&port, &ctx);
    CHECK(port.parallel_for != NULL && port.prefetch == NULL);
    for (int round = 0; round < 50; round++) {
        port.parallel_for(port.ctx, POOL_TASKS, count_task, runs);
    }
    int all = 1;
    for (int i = 0; i < POOL_TASKS; i++) {
        all = all && atomic_load(&runs[i]) == 50;
    }
    CHECK(all);
    port.parallel_for(port.ctx, 0, count_task, runs); /* no task: returns */
    colibri_linux_pool_stop(ctx.pool);
    CHECK(colibri_linux_pool_start(0) == NULL);
    CHECK(colibri_linux_pool_start(COLIBRI_LINUX_MAX_THREADS + 1u) == NULL);
    CHECK(colibri_linux_pool_threads(NULL) == 1);
    colibri_linux_pool_stop(NULL);
    CHECK(colibri_linux_cpu_count() >= 1);
}

static void test_writer_lock_refuses(const char *image)
{
    colibri_linux_mapping m;
    char err[1024];
    int fd = open(image, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(flock(fd, LOCK_EX | LOCK_NB) == 0);
    CHECK(colibri_linux_map(&m, image, 0, err, sizeof err) == COLIBRI_LINUX_E_LOCKED);
    CHECK(is_reset(&m));
    CHECK(colibri_linux_map(&m, image, COLIBRI_LINUX_MAP_NO_FLOCK, err, sizeof err) ==
          COLIBRI_LINUX_OK);
    colibri_linux_unmap(&m);
    close(fd);
}

/* Buffer allocation: aligned, rounded up, and NULL (not a short block) for a
 * size whose rounding would overflow. */
static void test_alloc_aligned(void)
{
    void *p = colibri_linux_alloc_aligned(100, 64);
    CHECK(p != NULL && ((uintptr_t)p & 63u) == 0);
    free(p);
    p = colibri_linux_alloc_aligned(0, 64);
    CHECK(p != NULL);
    free(p);
    CHECK(colibri_linux_alloc_aligned(SIZE_MAX - 10, 64) == NULL);
    CHECK(colibri_linux_alloc_aligned(64, 0) == NULL);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s IMAGE TMPDIR\n", argv[0]);
        return 2;
    }
    test_arguments(argv[1]);
    test_failures_leave_nothing_open(argv[1], argv[2]);
    test_map_and_hooks(argv[1]);
    test_writer_lock_refuses(argv[1]);
    test_alloc_aligned();
    test_pool();
    test_pool_batch_boundaries();
    printf("ok %d\n", g_checks);
    return 0;
}
