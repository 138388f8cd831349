/*
 * crypto_probe.c - test driver for the core's SHA-512 and Ed25519 verifier.
 * Reads commands from stdin, one per line, and answers each with one line:
 *
 *   sha512 HEX              -> the digest of the bytes, hex
 *   sha512r HEX N           -> the digest of the bytes repeated N times, fed
 *                              in pieces of 1, 2, 3, ... bytes (streaming)
 *   verify SIG PK MSG       -> the colibri_status number (MSG "-" is empty)
 *   image FILE KEY          -> "check=N blocks=N bad=K version=V" for a signed
 *                              image file (KEY "-": the block's own key);
 *                              blocks = colibri_signature_verify_blocks over all
 *
 * Messages live in heap buffers of their exact size (AddressSanitizer sees
 * any read past them). Exits 2 on a malformed command.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

static int hex_value(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* Decode hex text into a new buffer of exactly its size; NULL on bad hex. */
static unsigned char *unhex(const char *text, size_t *size)
{
    size_t n = strcmp(text, "-") == 0 ? 0 : strlen(text);
    if (n % 2 != 0) {
        return NULL;
    }
    unsigned char *out = malloc(n / 2 > 0 ? n / 2 : 1);
    for (size_t i = 0; out != NULL && i < n / 2; i++) {
        int hi = hex_value(text[2 * i]);
        int lo = hex_value(text[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(out);
            return NULL;
        }
        out[i] = (unsigned char)(hi * 16 + lo);
    }
    *size = n / 2;
    return out;
}

static void print_hex(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        printf("%02x", p[i]);
    }
    printf("\n");
}

static int cmd_sha512(const char *hex, long repeat)
{
    size_t n;
    unsigned char *msg = unhex(hex, &n);
    unsigned char digest[64];
    if (msg == NULL || repeat < 1) {
        free(msg);
        return 2;
    }
    if (repeat == 1) {
        colibri_sha512(msg, n, digest);
    } else {
        colibri_sha512_ctx ctx;
        colibri_sha512_init(&ctx);
        size_t piece = 1;
        for (long r = 0; r < repeat; r++) {
            for (size_t at = 0; at < n;) {
                size_t take = piece < n - at ? piece : n - at;
                colibri_sha512_update(&ctx, msg + at, take);
                at += take;
                piece = piece % 200 + 1;
            }
        }
        colibri_sha512_final(&ctx, digest);
    }
    print_hex(digest, sizeof digest);
    free(msg);
    return 0;
}

static int cmd_verify(const char *sig_hex, const char *pk_hex, const char *msg_hex)
{
    size_t ns, np, nm;
    unsigned char *sig = unhex(sig_hex, &ns);
    unsigned char *pk = unhex(pk_hex, &np);
    unsigned char *msg = unhex(msg_hex, &nm);
    int rc = 2;
    if (sig != NULL && pk != NULL && msg != NULL && ns == 64 && np == 32) {
        printf("%d\n", (int)colibri_ed25519_verify(sig, pk, nm > 0 ? msg : NULL, nm));
        rc = 0;
    }
    free(sig);
    free(pk);
    free(msg);
    return rc;
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    long length = -1;
    unsigned char *data = NULL;
    if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (length = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0) {
        data = malloc(length > 0 ? (size_t)length : 1u);
        if (data != NULL && fread(data, 1, (size_t)length, f) != (size_t)length) {
            free(data);
            data = NULL;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    *size = length > 0 ? (size_t)length : 0;
    return data;
}

static int cmd_image(const char *path, const char *key_hex)
{
    size_t n, nk = 0;
    unsigned char *image = read_file(path, &n);
    unsigned char *key = strcmp(key_hex, "-") == 0 ? NULL : unhex(key_hex, &nk);
    if (image == NULL || (key != NULL && nk != 32) || (key == NULL && strcmp(key_hex, "-") != 0)) {
        free(image);
        free(key);
        return 2;
    }
    colibri_signature sig;
    uint32_t bad = 0xFFFFFFFFu;
    int check = (int)colibri_signature_check(&sig, image, n, key);
    int blocks = check == 0 ? (int)colibri_signature_verify_blocks(&sig, 0, 0, &bad) : -1;
    printf("check=%d blocks=%d bad=%d version=%llu\n", check, blocks, (int)bad,
           (unsigned long long)sig.image_version);
    free(image);
    free(key);
    return 0;
}

int main(void)
{
    static char line[1 << 20];
    while (fgets(line, sizeof line, stdin) != NULL) {
        char *words[4] = {NULL, NULL, NULL, NULL};
        int count = 0;
        for (char *w = strtok(line, " \n"); w != NULL && count < 4; w = strtok(NULL, " \n")) {
            words[count++] = w;
        }
        int rc = 2;
        if (count == 2 && strcmp(words[0], "sha512") == 0) {
            rc = cmd_sha512(words[1], 1);
        } else if (count == 3 && strcmp(words[0], "sha512r") == 0) {
            rc = cmd_sha512(words[1], strtol(words[2], NULL, 10));
        } else if (count == 3 && strcmp(words[0], "image") == 0) {
            rc = cmd_image(words[1], words[2]);
        } else if (count == 4 && strcmp(words[0], "verify") == 0) {
            rc = cmd_verify(words[1], words[2], words[3]);
        }
        if (rc != 0) {
            fprintf(stderr, "crypto_probe: bad command\n");
            return rc;
        }
        fflush(stdout);
    }
    return 0;
}
