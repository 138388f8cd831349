/*
 * colibri_linux_pool.c - the Linux port's parallel_for: a pool of worker
 * threads started once and kept. A batch of tasks is published under a
 * generation number; the workers and the calling thread take task numbers
 * from one atomic counter until none is left, and the caller returns when
 * every worker has finished the batch. Workers spin briefly between batches
 * (a decoded token issues about a hundred, microseconds apart), then sleep
 * on a condition variable. Which thread runs a task never changes a result:
 * the core gives each task its own output rows.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "colibri_linux.h"

/* Polls (each with a pause) of the generation before a worker (or the
 * caller) sleeps: a few milliseconds at most, longer than the serial work
 * between two products of a decoded token, so a busy pool never sleeps. */
#define SPIN_POLLS 50000u

struct colibri_linux_pool {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* a new generation (or stop) for the workers */
    pthread_cond_t done; /* the last worker finished the generation */
    atomic_uint_fast64_t generation;
    atomic_uint next_task;
    atomic_uint busy; /* workers not yet done with the generation */
    colibri_task_fn fn;
    void *arg;
    uint32_t n_tasks;
    int stop;
    uint32_t n_workers;
    pthread_t workers[COLIBRI_LINUX_MAX_THREADS];
};

/* A hint to the CPU that this is a spin loop: it lets a sibling hardware
 * thread (a virtual CPU's host SMT twin, say) run while we wait. */
static void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static void run_tasks(colibri_linux_pool *p)
{
    for (;;) {
        uint32_t task = atomic_fetch_add_explicit(&p->next_task, 1u, memory_order_relaxed);
        if (task >= p->n_tasks) {
            return;
        }
        p->fn(p->arg, task);
    }
}

/* The next generation after `seen`, or 0 when the pool stops. */
static uint64_t await_generation(colibri_linux_pool *p, uint64_t seen)
{
    uint64_t now;
    for (uint32_t i = 0; i < SPIN_POLLS; i++) {
        now = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (now != seen) {
            return now;
        }
        spin_pause();
    }
    pthread_mutex_lock(&p->lock);
    while (!p->stop && atomic_load_explicit(&p->generation, memory_order_acquire) == seen) {
        pthread_cond_wait(&p->wake, &p->lock);
    }
    now = p->stop ? 0u : atomic_load_explicit(&p->generation, memory_order_acquire);
    pthread_mutex_unlock(&p->lock);
    return now;
}

static void *worker_main(void *arg)
{
    colibri_linux_pool *p = arg;
    uint64_t seen = 0;
    while ((seen = await_generation(p, seen)) != 0u) {
        run_tasks(p);
        if (atomic_fetch_sub_explicit(&p->busy, 1u, memory_order_acq_rel) == 1u) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
    return NULL;
}

static void await_workers(colibri_linux_pool *p)
{
    for (uint32_t i = 0; i < SPIN_POLLS; i++) {
        if (atomic_load_explicit(&p->busy, memory_order_acquire) == 0u) {
            return;
        }
        spin_pause();
    }
    pthread_mutex_lock(&p->lock);
    while (atomic_load_explicit(&p->busy, memory_order_acquire) != 0u) {
        pthread_cond_wait(&p->done, &p->lock);
    }
    pthread_mutex_unlock(&p->lock);
}

void colibri_linux_parallel_for(void *ctx, uint32_t n_tasks, colibri_task_fn fn, void *arg)
{
    colibri_linux_pool *p = ctx;
    if (p == NULL || p->n_workers == 0 || n_tasks <= 1u) {
        for (uint32_t task = 0; task < n_tasks; task++) {
            fn(arg, task);
        }
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next_task, 0u, memory_order_relaxed);
    atomic_store_explicit(&p->busy, p->n_workers, memory_order_relaxed);
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add_explicit(&p->generation, 1u, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    run_tasks(p);
    await_workers(p);
}

static void pool_join(colibri_linux_pool *p, uint32_t started)
{
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (uint32_t i = 0; i < started; i++) {
        pthread_join(p->workers[i], NULL);
    }
}

static void pool_free(colibri_linux_pool *p)
{
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

colibri_linux_pool *colibri_linux_pool_start(uint32_t n_threads)
{
    colibri_linux_pool *p;
    if (n_threads < 1u || n_threads > COLIBRI_LINUX_MAX_THREADS ||
        (p = calloc(1, sizeof *p)) == NULL) {
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->generation, 0u); /* the first batch is generation 1 */
    atomic_init(&p->next_task, 0u);
    atomic_init(&p->busy, 0u);
    for (; p->n_workers + 1u < n_threads; p->n_workers++) {
        if (pthread_create(&p->workers[p->n_workers], NULL, worker_main, p) != 0) {
            pool_join(p, p->n_workers);
            pool_free(p);
            return NULL;
        }
    }
    return p;
}

void colibri_linux_pool_stop(colibri_linux_pool *p)
{
    if (p == NULL) {
        return;
    }
    pool_join(p, p->n_workers);
    pool_free(p);
}

uint32_t colibri_linux_pool_threads(const colibri_linux_pool *p)
{
    return p != NULL ? p->n_workers + 1u : 1u;
}

uint32_t colibri_linux_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) {
        return 1u;
    }
    return n > (long)COLIBRI_LINUX_MAX_THREADS ? COLIBRI_LINUX_MAX_THREADS : (uint32_t)n;
}
