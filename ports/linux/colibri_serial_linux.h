/*
 * colibri_serial_linux.h - the serial protocol runner (ports/serial) on
 * Linux: its byte stream over TCP (127.0.0.1), stdin/stdout or a
 * pseudo-terminal, a SIGUSR1 "interrupt" on a painted alternate stack for
 * FORWARD's in-interrupt flag, and serving loops that end on SIGTERM/SIGINT.
 * One runner per process (the stream and the interrupt stack are static).
 */
#ifndef COLIBRI_SERIAL_LINUX_H
#define COLIBRI_SERIAL_LINUX_H

#include <stdint.h>

#include "colibri_runner.h"

/* Set up the interrupt stack and the stop signals, and fill *io with this
 * transport's callbacks. 0 on success, -1 (reported on stderr) otherwise. */
int colibri_serial_linux_init(colibri_serial_io *io);

/* Listen on 127.0.0.1:port (0: any free port; "listening on 127.0.0.1:N" is
 * printed on stdout) and serve one client after another, or one with once.
 * A client that sends nothing for idle_s seconds is disconnected, so that it
 * cannot hold the runner from the next one (0: never). Returns the process
 * exit status. */
int colibri_serial_linux_serve_tcp(colibri_runner *runner, int port, int once, uint32_t idle_s);

/* Open a pseudo-terminal ("pty /dev/pts/N" on stdout) and serve it. */
int colibri_serial_linux_serve_pty(colibri_runner *runner);

/* Serve one byte stream (stdin/stdout, say) until it closes, a stop signal,
 * or idle_s seconds without a byte (0: no idle limit). */
void colibri_serial_linux_serve_fds(colibri_runner *runner, int in_fd, int out_fd, uint32_t idle_s);

#endif /* COLIBRI_SERIAL_LINUX_H */
