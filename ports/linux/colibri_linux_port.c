/*
 * colibri_linux_port.c - the Linux port's colibri_port: a monotonic clock in
 * nanoseconds, the prefetch hook (colibri_linux_advice.c), the thread pool's
 * parallel_for, the kernel table the CPU probe chose and the expert cache's
 * slots (colibri_linux_expert_slots.c); and an aligned
 * allocation for the caller's buffers.
 */
#define _GNU_SOURCE

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "colibri_linux_internal.h"

uint64_t colibri_linux_ticks_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        return 0;
    }
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t port_ticks(void *ctx)
{
    (void)ctx;
    return colibri_linux_ticks_ns();
}

/* parallel_for with the port's context: the pool in it. */
static void port_parallel_for(void *ctx, uint32_t n_tasks, colibri_task_fn fn, void *arg)
{
    colibri_linux_parallel_for(((colibri_linux_port_ctx *)ctx)->pool, n_tasks, fn, arg);
}

/* The expert slots with the port's context: the cache in it. */
static const void *port_expert_acquire(void *ctx, uint32_t layer, uint32_t expert, uint64_t offset,
                                       size_t size)
{
    return colibri_linux_expert_acquire(((colibri_linux_port_ctx *)ctx)->experts, layer, expert,
                                        offset, size);
}

static void port_expert_release(void *ctx, uint32_t layer, uint32_t expert)
{
    colibri_linux_expert_release(((colibri_linux_port_ctx *)ctx)->experts, layer, expert);
}

static void port_experts_chosen(void *ctx, uint32_t layer, const uint32_t *experts, uint32_t count)
{
    colibri_linux_experts_chosen(((colibri_linux_port_ctx *)ctx)->experts, layer, experts, count);
}

void colibri_linux_port_init(colibri_port *port, colibri_linux_port_ctx *ctx)
{
    if (port == NULL) {
        return;
    }
    memset(port, 0, sizeof *port);
    port->version = COLIBRI_PORT_VERSION;
    port->kernels = colibri_linux_kernels(NULL);
    port->ticks = port_ticks;
    port->prefetch = ctx != NULL && ctx->map != NULL && !ctx->map->locked && !ctx->map->populated
                         ? colibri_linux_prefetch
                         : NULL;
    port->parallel_for =
        ctx != NULL && colibri_linux_pool_threads(ctx->pool) > 1u ? port_parallel_for : NULL;
    if (ctx != NULL && ctx->experts != NULL) {
        port->expert_acquire = port_expert_acquire;
        port->expert_release = port_expert_release;
        port->experts_chosen = port_experts_chosen;
    }
    port->ctx = ctx;
}

void *colibri_linux_alloc_aligned(size_t bytes, size_t align)
{
    size_t rounded;
    if (align == 0 || bytes > SIZE_MAX - align) {
        return NULL;
    }
    rounded = (bytes + align - 1) / align * align;
    return aligned_alloc(align, rounded == 0 ? align : rounded);
}
