/*
 * serial_runner.c - the serial protocol runner (ports/serial) on Linux, so
 * the host tools and tests can talk to the C core without a board or QEMU.
 *
 *   serial_runner MODEL.bin [--tcp PORT | --stdio | --pty] [--context N]
 *                 [--fingerprint HEX] [--board NAME] [--once]
 *
 *   --tcp PORT   listen on 127.0.0.1:PORT (0: any free port) and serve one
 *                client after the other; prints "listening on 127.0.0.1:P"
 *   --stdio      requests on stdin, replies on stdout; ends at end of input
 *   --pty        open a pseudo-terminal, print "pty /dev/pts/N", serve it
 *   --once       (--tcp) exit after the first client has gone
 *   --idle-timeout S  (--tcp) disconnect a client silent for S seconds
 *                (default 60; 0: never), so it cannot block the next one
 *
 * The model image is mapped with the Linux port; the KV, scratch and logits
 * buffers are sized from the image and allocated once here (a firmware
 * makes them static). The transport (TCP, stdio, pty, the SIGUSR1
 * "interrupt" on a painted alternate stack, CLOCK_MONOTONIC ticks) is port
 * code: ports/linux/colibri_serial_linux.c.
 * Status lines go to stderr (stdout in --tcp/--pty mode for the address).
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "colibri.h"
#include "colibri_linux.h"
#include "colibri_runner.h"
#include "colibri_serial_linux.h"

#define PROG "serial_runner"
#define BUFFER_ALIGN 64u

typedef enum transport { TRANSPORT_TCP, TRANSPORT_STDIO, TRANSPORT_PTY } transport;

typedef struct options {
    const char *model_path;
    transport mode;
    int port;
    uint32_t context;
    uint32_t fingerprint;
    const char *board;
    int once;
    uint32_t idle_s; /* --tcp: seconds a silent client may hold the connection */
} options;

/* ---- model buffers ------------------------------------------------------------------ */

typedef struct buffers {
    void *kv, *scratch;
    float *logits;
    size_t kv_size, scratch_size;
    uint32_t vocab, context;
} buffers;

/* Size the buffers from the image (a throw-away colibri_init). A bad image
 * leaves them empty: the runner then reports its status in INFO. */
static int size_buffers(const colibri_linux_mapping *map, const options *o, buffers *b)
{
    colibri_model probe;
    memset(b, 0, sizeof *b);
    if (colibri_init(&probe, map->data, map->size, NULL) != COLIBRI_OK) {
        return 0;
    }
    b->context = o->context != 0 ? o->context : probe.hp.max_context;
    if (b->context > probe.hp.max_context) {
        fprintf(stderr, PROG ": --context %u is above the model's %u\n", b->context,
                probe.hp.max_context);
        return -1;
    }
    b->vocab = probe.hp.vocab_size;
    b->kv_size = colibri_state_size(&probe, b->context);
    b->scratch_size = colibri_scratch_size(&probe, b->context);
    b->kv = colibri_linux_alloc_aligned(b->kv_size, BUFFER_ALIGN);
    b->scratch = colibri_linux_alloc_aligned(b->scratch_size, BUFFER_ALIGN);
    b->logits =
        (float *)colibri_linux_alloc_aligned((size_t)b->vocab * sizeof(float), BUFFER_ALIGN);
    if (b->kv == NULL || b->scratch == NULL || b->logits == NULL) {
        fprintf(stderr, PROG ": out of memory for the model buffers\n");
        return -1;
    }
    return 0;
}

/* ---- arguments ---------------------------------------------------------------------------- */

static int usage(const char *why)
{
    fprintf(stderr,
            PROG ": %s\nusage: " PROG " MODEL.bin [--tcp PORT | --stdio | --pty] [--context N]\n"
                 "       [--fingerprint HEX] [--board NAME] [--once] [--idle-timeout S]\n",
            why);
    return 2;
}

static int parse_number(const char *text, unsigned long max, int base, unsigned long *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(text, &end, base);
    if (text[0] == '\0' || text[0] == '-' || *end != '\0' || errno != 0 || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_option(options *o, const char *name, const char *value)
{
    unsigned long v = 0;
    if (strcmp(name, "--tcp") == 0 && value && parse_number(value, 65535, 10, &v) == 0) {
        o->mode = TRANSPORT_TCP;
        o->port = (int)v;
    } else if (strcmp(name, "--context") == 0 && value &&
               parse_number(value, 1u << 24, 10, &v) == 0) {
        o->context = (uint32_t)v;
    } else if (strcmp(name, "--fingerprint") == 0 && value &&
               parse_number(value, 0xFFFFFFFFul, 16, &v) == 0) {
        o->fingerprint = (uint32_t)v;
    } else if (strcmp(name, "--idle-timeout") == 0 && value &&
               parse_number(value, 86400, 10, &v) == 0) {
        o->idle_s = (uint32_t)v;
    } else if (strcmp(name, "--board") == 0 && value) {
        o->board = value;
    } else {
        return -1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->mode = TRANSPORT_STDIO;
    o->board = "linux-host";
    o->idle_s = 60;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--stdio") == 0) {
            o->mode = TRANSPORT_STDIO;
        } else if (strcmp(a, "--pty") == 0) {
            o->mode = TRANSPORT_PTY;
        } else if (strcmp(a, "--once") == 0) {
            o->once = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            if (parse_option(o, a, i + 1 < argc ? argv[i + 1] : NULL) != 0) {
                return usage("bad option or value");
            }
            i++;
        } else if (o->model_path == NULL) {
            o->model_path = a;
        } else {
            return usage("more than one model file");
        }
    }
    return o->model_path == NULL ? usage("no model file given") : 0;
}

/* ---- main ------------------------------------------------------------------------------------ */

static colibri_runner g_runner;

int main(int argc, char **argv)
{
    options o;
    colibri_linux_mapping map;
    char err[1024];
    buffers b;
    colibri_port port;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0) {
        return rc;
    }
    if (colibri_linux_map(&map, o.model_path, 0, err, sizeof err) != COLIBRI_LINUX_OK) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    colibri_serial_io io;
    if (size_buffers(&map, &o, &b) != 0 || colibri_serial_linux_init(&io) != 0) {
        return 1;
    }
    colibri_linux_port_ctx port_ctx = {.map = &map}; /* one thread: the runner answers in order */
    colibri_linux_port_init(&port, &port_ctx);
    colibri_runner_config cfg = {
        .image = map.data,
        .image_size = map.size,
        .expected_fingerprint = o.fingerprint,
        .port = &port,
        .kv = b.kv,
        .kv_size = b.kv_size,
        .context = b.context,
        .scratch = b.scratch,
        .scratch_size = b.scratch_size,
        .logits = b.logits,
        .logits_count = b.vocab,
        .board_name = o.board,
        .tick_unit = "nanoseconds (CLOCK_MONOTONIC)",
    };
    colibri_status status = colibri_runner_init(&g_runner, &io, &cfg);
    if (status != COLIBRI_OK) {
        fprintf(stderr, PROG ": model not usable: %s (status %d); serving anyway\n",
                colibri_strerror(status), (int)status);
    }
    if (o.mode == TRANSPORT_TCP) {
        rc = colibri_serial_linux_serve_tcp(&g_runner, o.port, o.once, o.idle_s);
    } else if (o.mode == TRANSPORT_PTY) {
        rc = colibri_serial_linux_serve_pty(&g_runner);
    } else {
        colibri_serial_linux_serve_fds(&g_runner, STDIN_FILENO, STDOUT_FILENO, 0);
    }
    free(b.kv);
    free(b.scratch);
    free(b.logits);
    colibri_linux_unmap(&map);
    return rc;
}
