/*
 * colibri-slot - A/B weight slots in a file or block device on Linux
 * (docs/ota.md): make a store, install an image into the slot that is not
 * running (verified before the record flips), show the record, confirm or
 * reject the image on trial. colibri-run --slots boots from the store.
 *
 *   colibri-slot init STORE --slot-size BYTES
 *   colibri-slot install STORE IMAGE [--trusted-key HEX] [--allow-older]
 *   colibri-slot status STORE [--trusted-key HEX]
 *   colibri-slot confirm|reject STORE A|B
 *
 * Exit status: 0 success, 1 the store or the image was refused, 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "colibri.h"
#include "colibri_linux.h"

#define SLOT_PROG "colibri-slot"
#define SECTOR 4096u
#define CHUNK (64u * 1024u)

static const char usage[] =
    "usage: colibri-slot init STORE --slot-size BYTES\n"
    "       colibri-slot install STORE IMAGE [--trusted-key HEX] [--allow-older]\n"
    "       colibri-slot status STORE [--trusted-key HEX]\n"
    "       colibri-slot confirm|reject STORE A|B\n";

static const char *state_name(uint8_t state)
{
    static const char *const names[] = {"empty", "pending", "trying", "good", "bad"};
    return state <= COLIBRI_SLOT_BAD ? names[state] : "?";
}

static int fail(const char *path, const char *what, colibri_status st)
{
    fprintf(stderr, SLOT_PROG ": error: %s: %s: %s (status %d)\n", path, what, colibri_strerror(st),
            (int)st);
    return 1;
}

static int cmd_init(const char *path, const char *size_text)
{
    char *end = NULL;
    errno = 0;
    unsigned long long slot = strtoull(size_text, &end, 0);
    if (errno != 0 || end == size_text || *end != '\0' || slot == 0 || slot % SECTOR != 0 ||
        slot > (1ull << 40)) {
        fprintf(stderr, SLOT_PROG ": error: --slot-size %s: a multiple of %u up to 1 TiB\n",
                size_text, SECTOR);
        return 2;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, SLOT_PROG ": error: %s: cannot create the store: %s\n", path,
                strerror(errno));
        return 1;
    }
    int rc = ftruncate(fd, (off_t)(2 * SECTOR + 2 * slot)) == 0 && fsync(fd) == 0 ? 0 : 1;
    if (rc != 0) {
        fprintf(stderr, SLOT_PROG ": error: %s: %s\n", path, strerror(errno));
    }
    close(fd);
    return rc;
}

static int blank(const uint8_t *p, size_t n)
{
    uint8_t zeros = 0, ones = 0xFF;
    for (size_t i = 0; i < n; i++) {
        zeros |= p[i];
        ones &= p[i];
    }
    return zeros == 0 || ones == 0xFF;
}

/* Why the file is not a store colibri-slot init made (NULL: it may be): a
 * file of another size, or record sectors that hold neither a valid record
 * copy nor erased bytes (a model image, say). Block devices keep their
 * size. */
static const char *not_a_store(const colibri_linux_store *s)
{
    struct stat st;
    if (fstat(s->fd, &st) == 0 && S_ISREG(st.st_mode) &&
        s->size != 2 * SECTOR + 2 * s->slots.slot_size) {
        return "its size is not two 4 KiB records and two equal slots";
    }
    if (colibri_slot_record_copies(&s->slots) == 0 && !blank(s->map, 2 * SECTOR)) {
        return "its first two sectors hold no slot record and are not erased";
    }
    return NULL;
}

static int open_store(colibri_linux_store *s, const char *path, const uint8_t *key)
{
    char err[1024];
    if (colibri_linux_store_open(s, path, SECTOR, key, err, sizeof err) != COLIBRI_LINUX_OK) {
        fprintf(stderr, SLOT_PROG ": error: %s\n", err);
        return 1;
    }
    const char *why = not_a_store(s);
    if (why != NULL) {
        fprintf(stderr,
                SLOT_PROG ": error: %s: not a slot store: %s (make one with colibri-slot init)\n",
                path, why);
        colibri_linux_store_close(s);
        return 1;
    }
    return 0;
}

/* Copy the image file into the update, CHUNK bytes a step. */
static colibri_status copy_image(colibri_slot_update *u, int fd, uint64_t size)
{
    static uint8_t buf[CHUNK];
    for (uint64_t at = 0; at < size;) {
        ssize_t n = pread(fd, buf, size - at < CHUNK ? (size_t)(size - at) : CHUNK, (off_t)at);
        if (n <= 0) {
            return COLIBRI_E_TRUNCATED;
        }
        colibri_status st = colibri_slot_update_write(u, at, buf, (size_t)n);
        if (st != COLIBRI_OK) {
            return st;
        }
        at += (uint64_t)n;
    }
    return COLIBRI_OK;
}

static int cmd_install(const char *path, const char *image, const uint8_t *key, int allow_older)
{
    colibri_linux_store s;
    colibri_slot_record r;
    colibri_slot_update u;
    struct stat st;
    int fd = open(image, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, SLOT_PROG ": error: %s: cannot read the image: %s\n", image,
                fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) {
            close(fd);
        }
        return 1;
    }
    if (open_store(&s, path, key) != 0) {
        close(fd);
        return 1;
    }
    (void)colibri_slot_record_read(&s.slots, &r);
    int running = colibri_slot_running(&r);
    colibri_status status = colibri_slot_update_begin(&u, &s.slots, running, (uint64_t)st.st_size);
    if (status == COLIBRI_OK) {
        status = copy_image(&u, fd, (uint64_t)st.st_size);
    }
    if (status == COLIBRI_OK) {
        status = colibri_slot_update_finish(&u, allow_older);
    }
    close(fd);
    colibri_linux_store_close(&s);
    if (status == COLIBRI_E_UPDATE_ORDER && running >= 0 &&
        r.state[running] == COLIBRI_SLOT_TRYING) {
        fprintf(stderr,
                SLOT_PROG ": error: %s: not installed: slot %c is on trial: confirm or reject the "
                          "image on trial first (colibri-slot confirm|reject %s %c)\n",
                image, 'A' + running, path, 'A' + running);
        return 1;
    }
    if (status != COLIBRI_OK) {
        return fail(image, "not installed", status);
    }
    printf("%s: installed into slot %c; the next boot tries it\n", image, 'A' + (int)u.target);
    return 0;
}

static int cmd_status(const char *path, const uint8_t *key)
{
    colibri_linux_store s;
    colibri_slot_record r;
    if (open_store(&s, path, key) != 0) {
        return 1;
    }
    int copy = colibri_slot_record_read(&s.slots, &r);
    printf("record: %s (seq %u), slots of %llu bytes\n",
           copy < 0 ? "none"
           : copy   ? "copy 1"
                    : "copy 0",
           r.seq, (unsigned long long)s.slots.slot_size);
    for (uint32_t i = 0; i < 2; i++) {
        uint64_t size, version;
        colibri_status v = colibri_slot_verify(&s.slots, i, &size, &version);
        printf("slot %c: %s, generation %u, fingerprint 0x%08X, version %llu; verify: %s\n",
               'A' + (int)i, state_name(r.state[i]), r.generation[i], r.fingerprint[i],
               (unsigned long long)r.image_version[i],
               v == COLIBRI_OK ? "ok" : colibri_strerror(v));
    }
    colibri_linux_store_close(&s);
    return 0;
}

static int cmd_mark(const char *path, const char *which, int confirm)
{
    colibri_linux_store s;
    if ((which[0] != 'A' && which[0] != 'B') || which[1] != '\0') {
        fprintf(stderr, SLOT_PROG ": error: the slot is A or B, not '%s'\n", which);
        return 2;
    }
    if (open_store(&s, path, NULL) != 0) {
        return 1;
    }
    uint32_t slot = (uint32_t)(which[0] - 'A');
    colibri_status st =
        confirm ? colibri_slot_confirm(&s.slots, slot) : colibri_slot_reject(&s.slots, slot);
    colibri_linux_store_close(&s);
    if (st == COLIBRI_E_LAST_IMAGE) {
        fprintf(stderr,
                SLOT_PROG ": error: %s: cannot reject slot %s: it holds the last bootable image "
                          "(the other slot is not good); install another image first\n",
                path, which);
        return 1;
    }
    return st == COLIBRI_OK ? 0 : fail(path, confirm ? "cannot confirm" : "cannot reject", st);
}

int main(int argc, char **argv)
{
    uint8_t key[32];
    const uint8_t *trusted = NULL;
    int allow_older = 0, positional = 0;
    const char *args[3] = {NULL, NULL, NULL};
    const char *slot_size = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--trusted-key") == 0 && i + 1 < argc) {
            if (colibri_linux_parse_key(argv[++i], key) != 0) {
                fprintf(stderr, SLOT_PROG ": error: --trusted-key needs 64 hex digits\n");
                return 2;
            }
            trusted = key;
        } else if (strcmp(argv[i], "--slot-size") == 0 && i + 1 < argc) {
            slot_size = argv[++i];
        } else if (strcmp(argv[i], "--allow-older") == 0) {
            allow_older = 1;
        } else if (argv[i][0] == '-' || positional == 3) {
            fputs(usage, stderr);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        } else {
            args[positional++] = argv[i];
        }
    }
    const char *cmd = args[0];
    if (cmd != NULL && strcmp(cmd, "init") == 0 && positional == 2 && slot_size != NULL) {
        return cmd_init(args[1], slot_size);
    }
    if (cmd != NULL && strcmp(cmd, "install") == 0 && positional == 3) {
        return cmd_install(args[1], args[2], trusted, allow_older);
    }
    if (cmd != NULL && strcmp(cmd, "status") == 0 && positional == 2) {
        return cmd_status(args[1], trusted);
    }
    if (cmd != NULL && (strcmp(cmd, "confirm") == 0 || strcmp(cmd, "reject") == 0) &&
        positional == 3) {
        return cmd_mark(args[1], args[2], cmd[0] == 'c');
    }
    fputs(usage, stderr);
    return 2;
}
