/*
 * colibri_runner_lines.c - the human line mode: help, info, gen, verify,
 * reset. Every answer ends with one line that starts with "ok" or "error"
 * (docs/serial-protocol.md section 5).
 */
#include "colibri_runner_internal.h"

#define DEFAULT_GEN 8u
#define MAX_ID 0x7FFFFFFFu

typedef void (*command_fn)(colibri_runner *r, const char *args, colibri_text *t);

static void say_status(colibri_text *t, colibri_status status)
{
    colibri_text_str(t, "error: colibri status ");
    colibri_text_u64(t, (uint64_t)status);
    colibri_text_str(t, " (");
    colibri_text_str(t, colibri_strerror(status));
    colibri_text_str(t, ")");
}

static void command_help(colibri_runner *r, const char *args, colibri_text *t)
{
    (void)r;
    (void)args;
    colibri_text_str(t, "commands (end each with Enter):\r\n"
                        "  help               this list\r\n"
                        "  info               board, model and state\r\n"
                        "  gen ID ID ... / N  greedy-generate N tokens after the ids\r\n"
                        "                     (continues from the current position)\r\n"
                        "  verify             check every tensor's CRC-32\r\n"
                        "  reset              empty the KV state (position 0)\r\n"
                        "ok\r\n");
}

static void say_field(colibri_text *t, const char *name, uint64_t value)
{
    colibri_text_str(t, name);
    colibri_text_u64(t, value);
}

static void command_info(colibri_runner *r, const char *args, colibri_text *t)
{
    const colibri_hparams *hp = &r->model.hp;
    (void)args;
    colibri_text_str(t, "colibri serial runner, protocol 1, core ");
    say_field(t, "", COLIBRI_VERSION_MAJOR);
    say_field(t, ".", COLIBRI_VERSION_MINOR);
    say_field(t, ".", COLIBRI_VERSION_PATCH);
    colibri_text_str(t, "\r\nboard: ");
    colibri_text_str(t, r->board_name[0] != '\0' ? r->board_name : "(unnamed)");
    colibri_text_str(t, "\r\nticks: ");
    colibri_text_str(t, r->tick_unit[0] != '\0' ? r->tick_unit : "(none)");
    colibri_text_str(t, "\r\nmodel: fingerprint ");
    colibri_text_hex32(t, r->model.fingerprint);
    say_field(t, ", arch ", hp->arch);
    say_field(t, ", vocab ", hp->vocab_size);
    say_field(t, ", layers ", hp->n_layers);
    say_field(t, ", experts ", hp->n_experts);
    say_field(t, ", top_k ", hp->top_k);
    say_field(t, "\r\nstate: context ", r->state.max_context);
    say_field(t, ", position ", r->state.pos);
    say_field(t, "\r\nframes: ", r->frames_ok);
    say_field(t, " served, ", r->frames_bad);
    colibri_text_str(t, " refused\r\n");
    if (r->init_status != COLIBRI_OK) {
        say_status(t, r->init_status);
        colibri_text_str(t, " at start-up\r\n");
        return;
    }
    colibri_text_str(t, "ok\r\n");
}

/* "ID ID ... [/ N]" -> r->rx.ids, *n_ids, *n_new. 0, or -1 (said why). */
static int parse_gen(colibri_runner *r, const char *args, uint32_t *n_ids, uint32_t *n_new,
                     colibri_text *t)
{
    uint32_t id = 0;
    *n_ids = 0;
    *n_new = DEFAULT_GEN;
    while (colibri_text_parse_u32(&args, MAX_ID, &id) == 0) {
        if (*n_ids == COLIBRI_PROTO_MAX_IDS) {
            colibri_text_str(t, "error: more than 1000 ids\r\n");
            return -1;
        }
        r->rx.ids[(*n_ids)++] = (int32_t)id;
    }
    char c = colibri_text_skip_spaces(&args);
    if (c == '/') {
        args++;
        if (colibri_text_parse_u32(&args, COLIBRI_PROTO_MAX_IDS, n_new) != 0) {
            colibri_text_str(t, "error: after '/' give the number of tokens, 0 to 1000\r\n");
            return -1;
        }
        c = colibri_text_skip_spaces(&args);
    }
    if (c != '\0' || *n_ids == 0) {
        colibri_text_str(t, "error: usage: gen ID ID ... / N (decimal ids, then N)\r\n");
        return -1;
    }
    return 0;
}

static void command_gen(colibri_runner *r, const char *args, colibri_text *t)
{
    uint32_t n_ids = 0, n_new = 0;
    colibri_runner_generation g;
    if (parse_gen(r, args, &n_ids, &n_new, t) != 0) {
        return;
    }
    colibri_runner_generate(r, r->rx.ids, n_ids, n_new, r->tx.bytes, &g);
    colibri_text_str(t, "tokens:");
    for (uint32_t i = 0; i < g.n_generated; i++) {
        say_field(t, " ", colibri_proto_get_u32(r->tx.bytes + 4u * i));
    }
    colibri_text_newline(t);
    if (g.status != COLIBRI_OK) {
        say_status(t, g.status);
        colibri_text_newline(t);
        return;
    }
    say_field(t, "ok: ", g.n_generated);
    say_field(t, " tokens, position ", r->state.pos);
    say_field(t, ", ticks ", g.prompt_ticks + g.decode_ticks);
    say_field(t, " total, ", g.n_generated >= 2 ? g.decode_ticks / (g.n_generated - 1) : 0);
    colibri_text_str(t, " per token\r\n");
}

static void command_verify(colibri_runner *r, const char *args, colibri_text *t)
{
    uint32_t bad = 0;
    uint64_t ticks = 0;
    colibri_status status = colibri_runner_verify(r, &bad, &ticks);
    (void)args;
    if (status == COLIBRI_OK) {
        say_field(t, "ok: every tensor's CRC-32 matches (", ticks);
        colibri_text_str(t, " ticks)\r\n");
        return;
    }
    say_status(t, status);
    if (status == COLIBRI_E_CHECKSUM) {
        say_field(t, ": weights corrupted: tensor ", bad);
    }
    colibri_text_newline(t);
}

static void command_reset(colibri_runner *r, const char *args, colibri_text *t)
{
    colibri_status status = colibri_runner_reset(r);
    (void)args;
    if (status != COLIBRI_OK) {
        say_status(t, status);
        colibri_text_newline(t);
        return;
    }
    colibri_text_str(t, "ok: position 0\r\n");
}

static const struct {
    const char *name;
    command_fn fn;
} k_commands[] = {
    {"help", command_help},     {"info", command_info},   {"gen", command_gen},
    {"verify", command_verify}, {"reset", command_reset},
};

/* If line starts with the word name (then a space or its end), the rest. */
static const char *match_word(const char *line, const char *name)
{
    while (*name != '\0') {
        if (*line++ != *name++) {
            return NULL;
        }
    }
    return (*line == '\0' || *line == ' ') ? line : NULL;
}

void colibri_runner_serve_line(colibri_runner *r, const char *line)
{
    char buf[96];
    colibri_text t;
    colibri_text_init(&t, buf, sizeof buf, &r->io);
    colibri_text_skip_spaces(&line);
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++) {
        const char *args = match_word(line, k_commands[i].name);
        if (args != NULL) {
            k_commands[i].fn(r, args, &t);
            colibri_text_flush(&t);
            return;
        }
    }
    colibri_text_str(&t, "error: unknown command (try help)\r\n");
    colibri_text_flush(&t);
}
