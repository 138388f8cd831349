/*
 * colibri_linux_expert_io.c - the expert cache's reads: the file opened
 * again (O_DIRECT where the filesystem allows it), one block read into its
 * slot (whole, retried on EINTR, checked with VERIFY), and the reader threads
 * that read the blocks experts_chosen queued.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "colibri_linux_experts_internal.h"
#include "colibri_linux_internal.h"

static uint64_t align_down(uint64_t v)
{
    return v - v % EXPERT_IO_ALIGN;
}

/* The bytes [*start, *start + *len) the read of slot s asks for: the block,
 * widened to EXPERT_IO_ALIGN boundaries for a direct read. */
static void read_span(const colibri_linux_experts *c, const expert_slot *s, uint64_t *start,
                      size_t *len)
{
    if (c->direct) {
        *start = align_down(s->offset);
        *len = colibri_linux_round_up((size_t)(s->offset + s->size - *start), EXPERT_IO_ALIGN);
    } else {
        *start = s->offset;
        *len = s->size;
    }
}

/* Read [start, start + len) into buf until `need` bytes are in (a direct
 * read may stop at the end of the file, past the block). 0, or -1 with
 * failure->what an errno or READ_SHORT. */
static int read_fully(const colibri_linux_experts *c, uint8_t *buf, uint64_t start, size_t len,
                      size_t need, read_failure *failure)
{
    size_t got = 0;
    while (got < need) {
        long n = c->read(c->fd, buf + got, len - got, (int64_t)(start + got));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            failure->what = n < 0 ? (errno != 0 ? errno : EIO) : READ_SHORT;
            failure->at = start + got;
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

int colibri_expert_read(colibri_linux_experts *c, uint32_t slot, read_failure *failure)
{
    expert_slot *s = &c->slots[slot];
    uint64_t start;
    size_t len;
    uint32_t layer = s->key / c->experts, expert = s->key % c->experts;
    memset(failure, 0, sizeof *failure);
    failure->key = s->key;
    read_span(c, s, &start, &len);
    s->data_at = (size_t)(s->offset - start);
    if (read_fully(c, s->buf, start, len, s->data_at + s->size, failure) != 0) {
        return -1;
    }
    if (!c->direct) { /* keep the budget: the pages just read are not needed again */
        (void)posix_fadvise(c->fd, (off_t)start, (off_t)len, POSIX_FADV_DONTNEED);
    }
    if (c->flags & COLIBRI_LINUX_EXPERTS_VERIFY) {
        failure->status = colibri_verify_expert_block(c->model, layer, expert, s->buf + s->data_at);
        if (failure->status != COLIBRI_OK) {
            failure->what = READ_CHECKSUM;
            failure->at = s->offset;
            return -1;
        }
    }
    return 0;
}

void colibri_expert_read_done(colibri_linux_experts *c, uint32_t slot, int rc,
                              const read_failure *failure)
{
    expert_slot *s = &c->slots[slot];
    uint64_t start;
    size_t len;
    read_span(c, s, &start, &len);
    c->stats.reads++;
    c->stats.bytes_read += len;
    s->state = rc == 0 ? SLOT_READY : SLOT_FAILED;
    if (rc != 0) {
        c->stats.failures++;
        c->failure = *failure;
    }
    pthread_cond_broadcast(&c->done);
}

/* ---- readers ------------------------------------------------------------------ */

static void *reader(void *arg)
{
    colibri_linux_experts *c = (colibri_linux_experts *)arg;
    pthread_mutex_lock(&c->lock);
    while (!c->stop) {
        uint32_t slot;
        read_failure failure;
        int rc;
        if (c->q_count == 0) {
            pthread_cond_wait(&c->work, &c->lock);
            continue;
        }
        slot = c->queue[c->q_head];
        c->q_head = (c->q_head + 1u) % c->n_slots;
        c->q_count--;
        pthread_mutex_unlock(&c->lock);
        rc = colibri_expert_read(c, slot, &failure);
        pthread_mutex_lock(&c->lock);
        colibri_expert_read_done(c, slot, rc, &failure);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

colibri_linux_status colibri_expert_readers_start(colibri_linux_experts *c, uint32_t n)
{
    for (c->n_threads = 0; c->n_threads < n; c->n_threads++) {
        if (pthread_create(&c->threads[c->n_threads], NULL, reader, c) != 0) {
            colibri_expert_readers_stop(c);
            return COLIBRI_LINUX_E_THREAD;
        }
    }
    return COLIBRI_LINUX_OK;
}

void colibri_expert_readers_stop(colibri_linux_experts *c)
{
    pthread_mutex_lock(&c->lock);
    c->stop = 1;
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->lock);
    for (uint32_t i = 0; i < c->n_threads; i++) {
        pthread_join(c->threads[i], NULL);
    }
    c->n_threads = 0;
}

/* ---- the file ----------------------------------------------------------------- */

static long plain_pread(int fd, void *buf, size_t count, int64_t offset)
{
    return (long)pread(fd, buf, count, (off_t)offset);
}

/* Does a direct read of the first aligned bytes work on fd (into the first
 * slot, unused yet)? Some filesystems accept O_DIRECT and refuse the read. */
static int direct_reads_work(const colibri_linux_experts *c, int fd)
{
    ssize_t n;
    do {
        n = pread(fd, c->arena, EXPERT_IO_ALIGN, 0);
    } while (n < 0 && errno == EINTR);
    return n > 0;
}

colibri_linux_status colibri_expert_file_open(colibri_linux_experts *c,
                                              const colibri_linux_mapping *map, char *err,
                                              size_t err_size)
{
    char path[64];
    (void)snprintf(path, sizeof path, "/proc/self/fd/%d", map->fd);
    if (c->read == NULL) {
        c->read = plain_pread;
    }
    if ((c->flags & COLIBRI_LINUX_EXPERTS_BUFFERED) == 0) {
        c->fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
        if (c->fd >= 0 && direct_reads_work(c, c->fd)) {
            c->direct = 1;
            return COLIBRI_LINUX_OK;
        }
        if (c->fd >= 0) {
            close(c->fd);
        }
    }
    c->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (c->fd < 0) {
        colibri_linux_set_err(err, err_size, "cannot open the model file again to read experts: %s",
                              strerror(errno));
        return COLIBRI_LINUX_E_OPEN;
    }
    (void)posix_fadvise(c->fd, 0, 0, POSIX_FADV_RANDOM);
    return COLIBRI_LINUX_OK;
}
