/*
 * colibri_serial_linux.c - the serial protocol runner's transport on Linux
 * (colibri_serial_linux.h): a byte stream over a TCP connection on
 * 127.0.0.1, stdin/stdout or a pseudo-terminal; a SIGUSR1 "interrupt" on a
 * painted alternate stack; and the loops
 * that serve a runner until SIGTERM or SIGINT.
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

#include "colibri_linux.h"
#include "colibri_serial_linux.h"

#define PROG "serial_runner"
#define ALT_STACK_BYTES (512u * 1024u)
#define PAINT 0xA5u
#define POLL_MS 500u

/* One byte stream (socket, stdin/stdout, pty master) with a read buffer. */
typedef struct stream {
    int in_fd, out_fd;
    uint8_t buf[512];
    size_t head, tail;
    int closed;          /* end of input or a write error */
    uint64_t last_rx_ns; /* when bytes last arrived */
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
                s->last_rx_ns = colibri_linux_ticks_ns();
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

static void on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}

static int idle_too_long(uint32_t idle_s)
{
    return idle_s > 0 &&
           colibri_linux_ticks_ns() - g_stream.last_rx_ns > (uint64_t)idle_s * 1000000000u;
}

void colibri_serial_linux_serve_fds(colibri_runner *runner, int in_fd, int out_fd, uint32_t idle_s)
{
    memset(&g_stream, 0, sizeof g_stream);
    g_stream.in_fd = in_fd;
    g_stream.out_fd = out_fd;
    g_stream.last_rx_ns = colibri_linux_ticks_ns();
    colibri_runner_banner(runner);
    while (!g_stream.closed && !g_stop) {
        (void)colibri_runner_poll(runner, POLL_MS);
        if (idle_too_long(idle_s)) {
            fprintf(stderr, PROG ": closing a connection idle for %u s\n", idle_s);
            break;
        }
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

int colibri_serial_linux_serve_tcp(colibri_runner *runner, int port, int once, uint32_t idle_s)
{
    int listener = open_listener(port);
    if (listener < 0) {
        fprintf(stderr, PROG ": cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
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
        colibri_serial_linux_serve_fds(runner, fd, fd, idle_s);
        close(fd);
        if (once) {
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

int colibri_serial_linux_serve_pty(colibri_runner *runner)
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
        colibri_serial_linux_serve_fds(runner, master, master, 0);
    }
    close(slave);
    close(master);
    return 0;
}

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

int colibri_serial_linux_init(colibri_serial_io *io)
{
    if (setup_interrupt() != 0) {
        fprintf(stderr, PROG ": cannot set up the interrupt stack: %s\n", strerror(errno));
        return -1;
    }
    install_signals();
    io->read_byte = stream_read_byte;
    io->write = stream_write;
    io->run_in_interrupt = linux_run_in_interrupt;
    io->ctx = &g_stream;
    return 0;
}
