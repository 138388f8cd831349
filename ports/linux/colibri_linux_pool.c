/*
 * colibri_linux_pool.c - the Linux port's parallel_for: a pool of worker
 * threads started once and kept. A batch of tasks is published as one
 * atomic word (batch number, task count, next task); the workers and the calling thread
 * claim runs of task numbers from it (a share of those left: claim_size)
 * until none is left, and the caller returns when
 * every task has finished. The caller never waits for a worker that took no
 * task: on a machine with more runnable threads than CPUs a worker may not
 * get a CPU for milliseconds, and waiting for it at each of the hundred
 * batches of a decoded token made two threads 15x slower than one. Idle
 * workers spin briefly between batches, then sleep on a condition variable.
 * Which thread runs a task never changes a result: the core gives each task
 * its own output rows.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "colibri_linux.h"

/* Polls (each with a pause) before an idle worker sleeps: a few
 * milliseconds at most, longer than the serial work between two products of
 * a decoded token, so a busy pool's workers never sleep. */
#define SPIN_POLLS 50000u
/* Polls before the caller, waiting for the last tasks, yields its CPU
 * between polls (the thread running them may be waiting for one). */
#define FINISH_POLLS 2000u

/* The published word: batch number in the high half, then the batch's task
 * count and the next task to claim, 16 bits each. The count is in the word so
 * that a batch that is used up stays used up: a thread that still holds the
 * word of a finished batch can never claim a task of it, whatever the pool's
 * fields say by then. A parallel_for of more tasks runs as several batches. */
#define BATCH_SHIFT 32u
#define COUNT_SHIFT 16u
#define MAX_BATCH_TASKS 0xFFFFu

struct colibri_linux_pool {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* a new batch (or stop) for the workers */
    /* Each of the two words the threads write on its own cache line, away
     * from what a task reads (fn, arg, base). */
    _Alignas(64) atomic_uint_fast64_t work; /* batch << 32 | count << 16 | next task */
    _Alignas(64) atomic_uint finished;      /* tasks of the current batch done */
    _Alignas(64) colibri_task_fn fn;        /* the current batch's: written only */
    void *arg;                              /* while no task can be claimed or */
    uint32_t base;                          /* is running; base: task 0's number */
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

static uint32_t word_batch(uint64_t word)
{
    return (uint32_t)(word >> BATCH_SHIFT);
}

static uint32_t word_count(uint64_t word)
{
    return (uint32_t)(word >> COUNT_SHIFT) & MAX_BATCH_TASKS;
}

static uint32_t word_next(uint64_t word)
{
    return (uint32_t)word & MAX_BATCH_TASKS;
}

/* Tasks one claim takes when `left` are left: a share of them per thread
 * (the guided schedule), so that a batch of 16 tasks on two threads costs
 * five or six claims, not sixteen, and the last claims, one task each,
 * still even out the threads. Each claim is a contended atomic on a line the
 * threads pass between them (docs/performance.md, "Threads"). */
static uint32_t claim_size(const colibri_linux_pool *p, uint32_t left)
{
    uint32_t share = left / (2u * (p->n_workers + 1u));
    return share > 1u ? share : 1u;
}

/* Claim and run tasks of `batch` until none is left. A claim succeeds only
 * while the word still names that batch with a task left, and fn, arg and
 * base are read after it: they stay the batch's until its last task ends. */
static void run_tasks(colibri_linux_pool *p, uint32_t batch)
{
    uint64_t word = atomic_load_explicit(&p->work, memory_order_acquire);
    while (word_batch(word) == batch && word_next(word) < word_count(word)) {
        uint32_t first = word_next(word), take = claim_size(p, word_count(word) - first);
        if (atomic_compare_exchange_weak_explicit(&p->work, &word, word + take,
                                                  memory_order_acquire, memory_order_acquire)) {
            for (uint32_t task = first; task < first + take; task++) {
                p->fn(p->arg, p->base + task);
            }
            atomic_fetch_add_explicit(&p->finished, take, memory_order_release);
            word = atomic_load_explicit(&p->work, memory_order_acquire);
        }
    }
}

/* The batch after `seen`, or 0 when the pool stops. */
static uint32_t await_batch(colibri_linux_pool *p, uint32_t seen)
{
    uint32_t now;
    for (uint32_t i = 0; i < SPIN_POLLS; i++) {
        now = word_batch(atomic_load_explicit(&p->work, memory_order_acquire));
        if (now != seen) {
            return now;
        }
        spin_pause();
    }
    pthread_mutex_lock(&p->lock);
    while (!p->stop && word_batch(atomic_load_explicit(&p->work, memory_order_acquire)) == seen) {
        pthread_cond_wait(&p->wake, &p->lock);
    }
    now = p->stop ? 0u : word_batch(atomic_load_explicit(&p->work, memory_order_acquire));
    pthread_mutex_unlock(&p->lock);
    return now;
}

static void *worker_main(void *arg)
{
    colibri_linux_pool *p = arg;
    uint32_t seen = 0;
    while ((seen = await_batch(p, seen)) != 0u) {
        run_tasks(p, seen);
    }
    return NULL;
}

/* Until all `count` tasks of the batch have finished (the caller ran out of
 * tasks to claim, so the rest are running on workers). */
static void await_tasks(colibri_linux_pool *p, uint32_t count)
{
    for (uint32_t i = 0; atomic_load_explicit(&p->finished, memory_order_acquire) < count; i++) {
        if (i < FINISH_POLLS) {
            spin_pause();
        } else {
            sched_yield();
        }
    }
}

/* Tasks base .. base + count - 1 (count <= MAX_BATCH_TASKS) as one batch. */
static void run_batch(colibri_linux_pool *p, colibri_task_fn fn, void *arg, uint32_t base,
                      uint32_t count)
{
    /* Every task of the previous batch has finished: nobody reads these. */
    uint32_t batch = word_batch(atomic_load_explicit(&p->work, memory_order_relaxed)) + 1u;
    batch = batch == 0u ? 1u : batch; /* 0 means "stop" to a worker */
    p->fn = fn;
    p->arg = arg;
    p->base = base;
    atomic_store_explicit(&p->finished, 0u, memory_order_relaxed);
    pthread_mutex_lock(&p->lock);
    atomic_store_explicit(&p->work, (uint64_t)batch << BATCH_SHIFT | (uint64_t)count << COUNT_SHIFT,
                          memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    run_tasks(p, batch);
    await_tasks(p, count);
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
    for (uint32_t base = 0, count; base < n_tasks; base += count) {
        count = n_tasks - base < MAX_BATCH_TASKS ? n_tasks - base : MAX_BATCH_TASKS;
        run_batch(p, fn, arg, base, count);
    }
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
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

colibri_linux_pool *colibri_linux_pool_start(uint32_t n_threads)
{
    colibri_linux_pool *p;
    if (n_threads < 1u || n_threads > COLIBRI_LINUX_MAX_THREADS ||
        (p = aligned_alloc(_Alignof(colibri_linux_pool), sizeof *p)) == NULL) {
        return NULL;
    }
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    atomic_init(&p->work, 0u); /* batch 0: none yet (the first is 1) */
    atomic_init(&p->finished, 0u);
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
