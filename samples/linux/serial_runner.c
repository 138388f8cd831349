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
 *
 * The model image is mapped with the Linux port; the KV, scratch and logits
 * buffers are sized from the image and allocated once here (a firmware
 * makes them static). "Interrupt" requests run the forward pass inside a
 * SIGUSR1 handler on a painted alternate signal stack, which reports the
 * stack bytes used. Ticks are CLOCK_MONOTONIC nanoseconds.
 * Status lines go to stderr (stdout in --tcp/--pty mode for the address).
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "colibri.h"
#include "colibri_linux.h"
#include "colibri_runner.h"

#define PROG "serial_runner"
#define BUFFER_ALIGN 64u
#define ALT_STACK_BYTES (512u * 1024u)
#define PAINT 0xA5u
#define POLL_MS 500u

typedef enum transport { TRANSPORT_TCP, TRANSPORT_STDIO, TRANSPORT_PTY } transport;

typedef struct options {
    const char *model_path;
    transport mode;
    int port;
    uint32_t context;
    uint32_t fingerprint;
    const char *board;
    int once;
} options;

/* One byte stream (socket, stdin/stdout, pty master) with a read buffer. */
typedef struct stream {
    int in_fd, out_fd;
    uint8_t buf[512];
    size_t head, tail;
    int closed; /* end of input or a write error */
} stream;

static stream g_stream;
static volatile sig_atomic_t g_stop;

/* ---- the IO callbacks ------------------------------------------------------------- */

static int stream_read_byte(void *ctx, uint32_t timeout_ms)
{
    stream *s = (stream *)ctx;
    if (s->head == s->tail && !s->closed) {
        struct pollfd pfd = {s->in_fd, POLLIN, 0};
        int ready = poll(&pfd, 1, (int)timeout_ms);
        if (ready > 0) {
            ssize_t n = read(s->in_fd, s->buf, sizeof s->buf);
            if (n > 0) {
                s->head = 0;
                s->tail = (size_t)n;
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                s->closed = 1;
            }
        }
    }
    if (s->head == s->tail) {
        return -1;
    }
    return s->buf[s->head++];
}

static void stream_write(void *ctx, const uint8_t *data, size_t n)
{
    stream *s = (stream *)ctx;
    while (n > 0 && !s->closed) {
        ssize_t w = write(s->out_fd, data, n);
        if (w > 0) {
            data += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EAGAIN) {
            struct pollfd pfd = {s->out_fd, POLLOUT, 0};
            (void)poll(&pfd, 1, 100);
        } else if (w < 0 && errno != EINTR) {
            s->closed = 1;
        }
    }
}

static uint64_t linux_ticks(void *ctx)
{
    (void)ctx;
    return colibri_linux_ticks_ns();
}

/* "Interrupt": a SIGUSR1 handler on a painted alternate stack. */
static uint8_t *g_alt_stack;
static void (*volatile g_isr_fn)(void *);
static void *volatile g_isr_arg;

static void on_sigusr1(int sig)
{
    (void)sig;
    g_isr_fn(g_isr_arg);
}

static int setup_interrupt(void)
{
    void *mem =
        mmap(NULL, ALT_STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        return -1;
    }
    g_alt_stack = (uint8_t *)mem;
    stack_t ss = {.ss_sp = mem, .ss_size = ALT_STACK_BYTES, .ss_flags = 0};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    return (sigaltstack(&ss, NULL) == 0 && sigaction(SIGUSR1, &sa, NULL) == 0) ? 0 : -1;
}

static int linux_run_in_interrupt(void *ctx, void (*fn)(void *), void *arg, size_t *stack_used)
{
    size_t untouched = 0;
    (void)ctx;
    memset(g_alt_stack, PAINT, ALT_STACK_BYTES);
    g_isr_fn = fn;
    g_isr_arg = arg;
    if (raise(SIGUSR1) != 0) {
        return -1;
    }
    while (untouched < ALT_STACK_BYTES && g_alt_stack[untouched] == PAINT) {
        untouched++; /* the stack grows down: painted bytes left at the bottom */
    }
    if (stack_used != NULL) {
        *stack_used = ALT_STACK_BYTES - untouched;
    }
    return 0;
}

/* ---- model buffers ------------------------------------------------------------------ */

typedef struct buffers {
    void *kv, *scratch;
    float *logits;
    size_t kv_size, scratch_size;
    uint32_t vocab, context;
} buffers;

static void *alloc_aligned(size_t bytes)
{
    size_t rounded = (bytes + BUFFER_ALIGN - 1) / BUFFER_ALIGN * BUFFER_ALIGN;
    return aligned_alloc(BUFFER_ALIGN, rounded == 0 ? BUFFER_ALIGN : rounded);
}

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
    b->kv = alloc_aligned(b->kv_size);
    b->scratch = alloc_aligned(b->scratch_size);
    b->logits = (float *)alloc_aligned((size_t)b->vocab * sizeof(float));
    if (b->kv == NULL || b->scratch == NULL || b->logits == NULL) {
        fprintf(stderr, PROG ": out of memory for the model buffers\n");
        return -1;
    }
    return 0;
}

/* ---- transports ------------------------------------------------------------------------ */

static void on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void serve_stream(colibri_runner *runner, int in_fd, int out_fd)
{
    memset(&g_stream, 0, sizeof g_stream);
    g_stream.in_fd = in_fd;
    g_stream.out_fd = out_fd;
    colibri_runner_banner(runner);
    while (!g_stream.closed && !g_stop) {
        (void)colibri_runner_poll(runner, POLL_MS);
    }
}

static int open_listener(int port)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 1) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        close(fd);
        return -1;
    }
    printf("listening on 127.0.0.1:%d\n", ntohs(addr.sin_port));
    fflush(stdout);
    return fd;
}

static int serve_tcp(colibri_runner *runner, const options *o)
{
    int listener = open_listener(o->port);
    if (listener < 0) {
        fprintf(stderr, PROG ": cannot listen on 127.0.0.1:%d: %s\n", o->port, strerror(errno));
        return 1;
    }
    while (!g_stop) {
        int one = 1;
        int fd = accept(listener, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR) {
                continue;
            }
            fprintf(stderr, PROG ": accept: %s\n", strerror(errno));
            break;
        }
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        serve_stream(runner, fd, fd);
        close(fd);
        if (o->once) {
            break;
        }
    }
    close(listener);
    return 0;
}

static int make_raw(int fd)
{
    struct termios tio;
    if (tcgetattr(fd, &tio) != 0) {
        return -1;
    }
    cfmakeraw(&tio);
    return tcsetattr(fd, TCSANOW, &tio);
}

static int serve_pty(colibri_runner *runner)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    const char *name = NULL;
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0 ||
        (name = ptsname(master)) == NULL) {
        fprintf(stderr, PROG ": cannot open a pseudo-terminal: %s\n", strerror(errno));
        return 1;
    }
    /* Hold the slave open: the master then never sees a hang-up between
     * clients, and the line discipline is raw before anyone opens it. */
    int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0 || make_raw(slave) != 0) {
        fprintf(stderr, PROG ": cannot set up %s: %s\n", name, strerror(errno));
        return 1;
    }
    printf("pty %s\n", name);
    fflush(stdout);
    while (!g_stop) {
        serve_stream(runner, master, master);
    }
    close(slave);
    close(master);
    return 0;
}

/* ---- arguments ---------------------------------------------------------------------------- */

static int usage(const char *why)
{
    fprintf(stderr,
            PROG ": %s\nusage: " PROG " MODEL.bin [--tcp PORT | --stdio | --pty] [--context N]\n"
                 "       [--fingerprint HEX] [--board NAME] [--once]\n",
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

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGTERM, &sa, NULL);
    (void)sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

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
    if (size_buffers(&map, &o, &b) != 0 || setup_interrupt() != 0) {
        return 1;
    }
    install_signals();
    colibri_linux_port_init(&port, &map);
    colibri_serial_io io = {stream_read_byte, stream_write, linux_run_in_interrupt, linux_ticks,
                            &g_stream};
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
        rc = serve_tcp(&g_runner, &o);
    } else if (o.mode == TRANSPORT_PTY) {
        rc = serve_pty(&g_runner);
    } else {
        serve_stream(&g_runner, STDIN_FILENO, STDOUT_FILENO);
    }
    free(b.kv);
    free(b.scratch);
    free(b.logits);
    colibri_linux_unmap(&map);
    return rc;
}
