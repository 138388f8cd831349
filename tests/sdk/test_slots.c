/*
 * test_slots.c - A/B weight slots on a simulated NOR flash, with a power cut
 * at every write step of an update (docs/ota.md, "Power-cut proof").
 *
 *   test_slots OLD NEW OTHER_KEY UNSIGNED KEYHEX [STRIDE]
 *
 * OLD and NEW are two signed images of one model shape (NEW with a higher
 * version), OTHER_KEY is NEW signed by another key, UNSIGNED is NEW without
 * its signature block, KEYHEX the trusted public key. The flash: 4 KiB
 * sectors, 256-byte pages; one step is one sector erase or one page
 * program. The cut sequence starts with A = OLD confirmed and runs: boot,
 * update to NEW, boot (trial), confirm. For every step k (every STRIDE-th,
 * default 1) and three ways to die at it - before it, half of it done, its
 * bytes garbage (an erase leaves noise, a program clears random bits) -
 * the flash is powered on again and must boot OLD or NEW, byte for byte,
 * verified; then boot once more (the same image unless a trial ended) and
 * take a fresh update to NEW. Prints "cuts=N" and "N passed, M failed".
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"

#include "check.h"

#define SECTOR 4096u
#define PAGE 256u
#define CHUNK 4096u

typedef struct image {
    unsigned char *bytes;
    size_t size;
} image;

typedef struct flash {
    uint8_t *mem;
    uint64_t size;
    long steps;    /* erase-sector and program-page steps so far */
    long cut_at;   /* the step that loses power (0: none) */
    int tear;      /* 0 before the step, 1 half of it, 2 garbage */
    uint32_t rng;  /* for garbage */
    jmp_buf power; /* where a power cut lands */
    int note;      /* 1: note the steps that touch a record copy */
    long record_steps[64];
    int n_record_steps;
} flash;

static flash sim;

static uint32_t next_random(void)
{
    sim.rng = sim.rng * 1664525u + 1013904223u;
    return sim.rng >> 8;
}

/* Count a step; at the cut, leave its torn effect and lose power. */
static void step(uint8_t *target, const uint8_t *after, uint32_t n, int erase)
{
    ++sim.steps;
    if (sim.note && target < sim.mem + 2 * SECTOR && sim.n_record_steps < 64) {
        sim.record_steps[sim.n_record_steps++] = sim.steps;
    }
    if (sim.steps != sim.cut_at) {
        memcpy(target, after, n);
        return;
    }
    if (sim.tear == 1) {
        memcpy(target, after, n / 2);
    } else if (sim.tear == 2) {
        for (uint32_t i = 0; i < n; i++) {
            uint8_t noise = (uint8_t)next_random();
            target[i] = erase ? noise : (uint8_t)(target[i] & (after[i] | noise));
        }
    }
    longjmp(sim.power, 1);
}

static colibri_status sim_erase(void *ctx, uint64_t offset, uint64_t size)
{
    static uint8_t ones[SECTOR];
    (void)ctx;
    memset(ones, 0xFF, sizeof ones);
    if (offset % SECTOR || size % SECTOR || offset + size > sim.size) {
        return COLIBRI_E_FLASH;
    }
    for (uint64_t at = offset; at < offset + size; at += SECTOR) {
        step(sim.mem + at, ones, SECTOR, 1);
    }
    return COLIBRI_OK;
}

/* NOR programming only clears bits: new = old & data, page by page. */
static colibri_status sim_program(void *ctx, uint64_t offset, const void *data, size_t size)
{
    uint8_t page[PAGE];
    (void)ctx;
    if (offset + size > sim.size) {
        return COLIBRI_E_FLASH;
    }
    const uint8_t *src = (const uint8_t *)data;
    while (size > 0) {
        uint32_t n = PAGE - (uint32_t)(offset % PAGE);
        n = n < size ? n : (uint32_t)size;
        for (uint32_t i = 0; i < n; i++) {
            page[i] = sim.mem[offset + i] & src[i];
        }
        step(sim.mem + offset, page, n, 0);
        offset += n;
        src += n;
        size -= n;
    }
    return COLIBRI_OK;
}

static colibri_slots layout(uint64_t slot_size, const uint8_t *key)
{
    colibri_slots s;
    memset(&s, 0, sizeof s);
    s.base = sim.mem;
    s.sector_size = SECTOR;
    s.record[0] = 0;
    s.record[1] = SECTOR;
    s.slot[0] = 2 * SECTOR;
    s.slot[1] = 2 * SECTOR + slot_size;
    s.slot_size = slot_size;
    s.erase = sim_erase;
    s.program = sim_program;
    s.trusted_key = key;
    return s;
}

static image load(const char *path)
{
    image im = {NULL, 0};
    FILE *f = fopen(path, "rb");
    if (f != NULL && fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        im.bytes = malloc((size_t)n);
        rewind(f);
        if (im.bytes != NULL && fread(im.bytes, 1, (size_t)n, f) == (size_t)n) {
            im.size = (size_t)n;
        }
        fclose(f);
    }
    return im;
}

static colibri_status update(const colibri_slots *s, int running, const image *im)
{
    colibri_slot_update u;
    colibri_status status = colibri_slot_update_begin(&u, s, running, im->size);
    for (size_t at = 0; status == COLIBRI_OK && at < im->size; at += CHUNK) {
        size_t n = im->size - at < CHUNK ? im->size - at : CHUNK;
        status = colibri_slot_update_write(&u, at, im->bytes + at, n);
    }
    return status == COLIBRI_OK ? colibri_slot_update_finish(&u, 0) : status;
}

static uint64_t image_size_of(const unsigned char *bytes)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | bytes[16 + i];
    }
    return v;
}

/* Which image a boot found: 1 OLD, 2 NEW, 0 neither (a failure). */
static int booted(const colibri_slot_boot *b, const image *old_im, const image *new_im)
{
    const image *ims[2] = {old_im, new_im};
    for (int i = 0; i < 2; i++) {
        uint64_t plain = image_size_of(ims[i]->bytes);
        if (b->size == plain && memcmp(b->image, ims[i]->bytes, (size_t)plain) == 0) {
            return i + 1;
        }
    }
    return 0;
}

typedef struct world {
    image old_im, new_im, other_im, unsigned_im;
    uint8_t key[32];
    uint64_t slot_size;
    uint8_t *factory; /* A = OLD, confirmed: the state every cut starts from */
} world;

static int unhex_key(const char *hex, uint8_t key[32])
{
    if (strlen(hex) != 64) {
        return -1;
    }
    for (int i = 0; i < 32; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
            return -1;
        }
        key[i] = (uint8_t)v;
    }
    return 0;
}

static void no_cut(void)
{
    sim.cut_at = 0;
    sim.steps = 0;
}

/* A new device: OLD programmed raw into A at the factory, then one boot
 * writes the first record (A GOOD). */
static void make_factory(world *w)
{
    colibri_slots s = layout(w->slot_size, w->key);
    colibri_slot_boot b;
    memset(sim.mem, 0xFF, sim.size);
    memcpy(sim.mem + s.slot[0], w->old_im.bytes, w->old_im.size);
    no_cut();
    CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK && b.slot == 0 && !b.on_trial);
    CHECK(booted(&b, &w->old_im, &w->new_im) == 1);
    memcpy(w->factory, sim.mem, sim.size);
}

/* The sequence a cut interrupts: boot, update to NEW, boot, confirm. */
static void run_sequence(world *w)
{
    colibri_slots s = layout(w->slot_size, w->key);
    colibri_slot_boot b;
    if (colibri_slot_boot_select(&s, &b) != COLIBRI_OK ||
        update(&s, (int)b.slot, &w->new_im) != COLIBRI_OK ||
        colibri_slot_boot_select(&s, &b) != COLIBRI_OK || !b.on_trial ||
        colibri_slot_confirm(&s, b.slot) != COLIBRI_OK) {
        printf("FAIL: the uninterrupted sequence failed\n");
        failed++;
    }
}

/* After a cut: power on, boot OLD or NEW, boot again, update again. */
static int check_after_cut(world *w, long k, int tear)
{
    colibri_slots s = layout(w->slot_size, w->key);
    colibri_slot_boot b;
    no_cut();
    colibri_status status = colibri_slot_boot_select(&s, &b);
    int which = status == COLIBRI_OK ? booted(&b, &w->old_im, &w->new_im) : 0;
    if (which == 0) {
        printf("FAIL: cut at step %ld (tear %d): boot status %d, image %s\n", k, tear, (int)status,
               status == COLIBRI_OK ? "neither OLD nor NEW" : "none");
        return 0;
    }
    if (b.on_trial) {
        CHECK(colibri_slot_confirm(&s, b.slot) == COLIBRI_OK);
    }
    colibri_slot_boot again;
    CHECK(colibri_slot_boot_select(&s, &again) == COLIBRI_OK && again.slot == b.slot &&
          booted(&again, &w->old_im, &w->new_im) == which);
    CHECK(update(&s, (int)again.slot, &w->new_im) == COLIBRI_OK);
    CHECK(colibri_slot_boot_select(&s, &again) == COLIBRI_OK && again.on_trial &&
          booted(&again, &w->old_im, &w->new_im) == 2);
    return which;
}

/* Run the sequence until the power goes; 1 if it went. */
static int cut_sequence(world *w)
{
    if (setjmp(sim.power) != 0) {
        return 1;
    }
    run_sequence(w);
    return 0;
}

/* Every stride-th step, each of the last 8, and every step of every record
 * write (an erase or a program of either copy). */
static long next_cut(long k, long stride, long total)
{
    long next = k >= total - 8 ? k + 1 : (k + stride < total - 8 ? k + stride : total - 8);
    for (int i = 0; i < sim.n_record_steps; i++) {
        if (sim.record_steps[i] > k && sim.record_steps[i] < next) {
            next = sim.record_steps[i];
        }
    }
    return next;
}

static void test_power_cuts(world *w, long stride)
{
    memcpy(sim.mem, w->factory, sim.size);
    no_cut();
    sim.note = 1;
    sim.n_record_steps = 0;
    run_sequence(w);
    sim.note = 0;
    long total = sim.steps;
    CHECK(sim.n_record_steps == 16); /* 4 record writes x 2 copies x (erase, program) */
    long cuts = 0, old_count = 0, new_count = 0;
    for (long k = 1; k <= total; k = next_cut(k, stride, total)) {
        for (int tear = 0; tear < 3; tear++) {
            memcpy(sim.mem, w->factory, sim.size);
            sim.steps = 0;
            sim.cut_at = k;
            sim.tear = tear;
            sim.rng = (uint32_t)(k * 3 + tear);
            if (!cut_sequence(w)) {
                printf("FAIL: step %ld never came\n", k);
                failed++;
                continue;
            }
            int which = check_after_cut(w, k, tear);
            CHECK(which != 0);
            old_count += which == 1;
            new_count += which == 2;
            cuts++;
        }
    }
    printf("steps=%ld cuts=%ld booted_old=%ld booted_new=%ld\n", total, cuts, old_count, new_count);
    CHECK(old_count > 0 && new_count > 0);
}

/* Images that must never be flipped to: the record stays, OLD boots. */
static void test_refused_updates(world *w)
{
    colibri_slots s = layout(w->slot_size, w->key);
    colibri_slot_boot b;
    image corrupt = {malloc(w->new_im.size), w->new_im.size};
    memcpy(corrupt.bytes, w->new_im.bytes, corrupt.size);
    corrupt.bytes[image_size_of(corrupt.bytes) - 7] ^= 0x10; /* a weight bit */
    const struct {
        const image *im;
        colibri_status status;
    } cases[] = {
        {&w->other_im, COLIBRI_E_WRONG_KEY},
        {&w->unsigned_im, COLIBRI_E_UNSIGNED},
        {&corrupt, COLIBRI_E_HASH_MISMATCH},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(sim.mem, w->factory, sim.size);
        no_cut();
        CHECK(update(&s, 0, cases[i].im) == cases[i].status);
        CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK && !b.on_trial &&
              booted(&b, &w->old_im, &w->new_im) == 1);
    }
    /* NEW installed and confirmed, then OLD offered again: a rollback. */
    memcpy(sim.mem, w->factory, sim.size);
    CHECK(update(&s, 0, &w->new_im) == COLIBRI_OK);
    CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK && b.slot == 1);
    CHECK(colibri_slot_confirm(&s, 1) == COLIBRI_OK);
    CHECK(update(&s, 1, &w->old_im) == COLIBRI_E_ROLLBACK);
    CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK && b.slot == 1 && !b.on_trial);
    /* too large for the slot; writes out of order */
    colibri_slot_update u;
    CHECK(colibri_slot_update_begin(&u, &s, 1, w->slot_size + 1) == COLIBRI_E_SLOT_TOO_SMALL);
    CHECK(colibri_slot_update_begin(&u, &s, 1, w->new_im.size) == COLIBRI_OK);
    CHECK(colibri_slot_update_write(&u, 4, w->new_im.bytes, 4) == COLIBRI_E_UPDATE_ORDER);
    CHECK(colibri_slot_update_finish(&u, 0) == COLIBRI_E_UPDATE_ORDER);
    free(corrupt.bytes);
}

/* The new image's first run never confirms it, or rejects it: OLD returns. */
static void test_revert(world *w)
{
    colibri_slots s = layout(w->slot_size, w->key);
    colibri_slot_boot b;
    for (int how = 0; how < 3; how++) {
        memcpy(sim.mem, w->factory, sim.size);
        no_cut();
        CHECK(update(&s, 0, &w->new_im) == COLIBRI_OK);
        if (how == 2) { /* the new slot rots before its first boot */
            sim.mem[s.slot[1] + image_size_of(w->new_im.bytes) - 3] ^= 1;
        }
        CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK);
        if (how == 0) { /* crash or power loss before confirming */
            CHECK(b.slot == 1 && b.on_trial);
        } else if (how == 1) { /* the application says it is bad */
            CHECK(b.slot == 1 && colibri_slot_reject(&s, 1) == COLIBRI_OK);
        } else {
            CHECK(b.slot == 0 && b.rejected == 2u);
            continue;
        }
        CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK && b.slot == 0 && !b.on_trial);
        CHECK(booted(&b, &w->old_im, &w->new_im) == 1);
        colibri_slot_record r;
        CHECK(colibri_slot_record_read(&s, &r) >= 0 && r.state[1] == COLIBRI_SLOT_BAD &&
              r.state[0] == COLIBRI_SLOT_GOOD);
    }
}

/* Records: both copies garbage -> probe the slots; one copy torn -> the
 * other; every single-byte change of a copy is refused. */
static void test_records(world *w)
{
    colibri_slots s = layout(w->slot_size, w->key);
    colibri_slot_record r, back;
    uint8_t bytes[64];
    memset(&r, 0, sizeof r);
    r.seq = 5;
    r.state[0] = COLIBRI_SLOT_GOOD;
    r.state[1] = COLIBRI_SLOT_PENDING;
    r.generation[1] = 5;
    r.image_version[1] = 1ull << 40;
    colibri_slot_record_encode(&r, bytes);
    CHECK(colibri_slot_record_decode(&back, bytes) == COLIBRI_OK);
    CHECK(memcmp(&back, &r, sizeof r) == 0);
    for (int i = 0; i < 64; i++) {
        bytes[i] ^= 0x20;
        CHECK(colibri_slot_record_decode(&back, bytes) == COLIBRI_E_CHECKSUM);
        bytes[i] ^= 0x20;
    }
    memset(bytes, 0xFF, sizeof bytes);
    CHECK(colibri_slot_record_decode(&back, bytes) == COLIBRI_E_CHECKSUM);
    memcpy(sim.mem, w->factory, sim.size);
    memset(sim.mem, 0x5A, 2 * SECTOR); /* both copies garbage */
    colibri_slot_boot b;
    no_cut();
    CHECK(colibri_slot_record_read(&s, &back) == -1 && back.seq == 0);
    CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK && b.slot == 0);
    /* bad layouts */
    colibri_slots bad = s;
    bad.slot[1] = bad.slot[0] + SECTOR;
    CHECK(colibri_slots_check(&bad) == COLIBRI_E_BAD_ARGUMENT);
    bad = s;
    bad.record[1] = 100;
    CHECK(colibri_slots_check(&bad) == COLIBRI_E_BAD_ARGUMENT);
    bad = s;
    bad.program = NULL;
    CHECK(colibri_slots_check(&bad) == COLIBRI_E_BAD_ARGUMENT);
    /* an empty flash has no slot to boot */
    memset(sim.mem, 0xFF, sim.size);
    CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_E_NO_SLOT);
}

/* An update must verify exactly the bytes it wrote: not a prefix that the
 * slot's older bytes complete, not the image with bytes after it. */
static void test_update_extent(world *w)
{
    colibri_slots s = layout(w->slot_size, w->key);
    colibri_slot_boot b;
    colibri_slot_record r;
    size_t plain = (size_t)image_size_of(w->new_im.bytes);
    image longer = {calloc(1, w->new_im.size + 64), w->new_im.size + 64};
    memcpy(longer.bytes, w->new_im.bytes, w->new_im.size);
    const image cases[] = {
        {w->new_im.bytes, SECTOR},                  /* the first sector */
        {w->new_im.bytes, plain / SECTOR * SECTOR}, /* the last whole sector */
        longer,                                     /* 64 bytes after the block */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(sim.mem, w->factory, sim.size);
        no_cut();
        /* NEW in B fails its trial: B is BAD, its bytes still in the slot */
        CHECK(update(&s, 0, &w->new_im) == COLIBRI_OK);
        CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK && b.slot == 1 && b.on_trial);
        CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK && b.slot == 0 && b.rejected == 2u);
        CHECK(update(&s, 0, &cases[i]) == COLIBRI_E_UPDATE_MISMATCH);
        CHECK(colibri_slot_record_read(&s, &r) >= 0 && r.state[1] == COLIBRI_SLOT_EMPTY);
        CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK && b.slot == 0 && !b.on_trial);
    }
    /* A store without a key takes the image alone or with its block, and
     * still refuses the prefix. */
    colibri_slots open_store = layout(w->slot_size, NULL);
    const image plain_im = {w->new_im.bytes, plain};
    memcpy(sim.mem, w->factory, sim.size);
    CHECK(update(&open_store, 0, &w->new_im) == COLIBRI_OK);
    CHECK(update(&open_store, 0, &plain_im) == COLIBRI_OK);
    CHECK(update(&open_store, 0, &cases[1]) == COLIBRI_E_UPDATE_MISMATCH);
    free(longer.bytes);
}

/* Rejecting never leaves nothing to boot: refused, and the record kept. */
static void test_reject_last_image(world *w)
{
    colibri_slots s = layout(w->slot_size, w->key);
    colibri_slot_boot b;
    colibri_slot_record before, after;
    memcpy(sim.mem, w->factory, sim.size);
    no_cut();
    (void)colibri_slot_record_read(&s, &before);
    CHECK(colibri_slot_reject(&s, 0) == COLIBRI_E_LAST_IMAGE); /* A GOOD, B EMPTY */
    CHECK(colibri_slot_record_read(&s, &after) >= 0 && after.seq == before.seq);
    CHECK(update(&s, 0, &w->new_im) == COLIBRI_OK);
    CHECK(colibri_slot_reject(&s, 0) == COLIBRI_E_LAST_IMAGE); /* B only PENDING */
    CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK && b.slot == 1 && b.on_trial);
    CHECK(colibri_slot_reject(&s, 0) == COLIBRI_E_LAST_IMAGE); /* A typed for B */
    CHECK(colibri_slot_confirm(&s, 1) == COLIBRI_OK);
    CHECK(colibri_slot_reject(&s, 0) == COLIBRI_OK); /* B GOOD: A may go */
    CHECK(colibri_slot_reject(&s, 1) == COLIBRI_E_LAST_IMAGE);
    CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK && b.slot == 1 && !b.on_trial);
    /* the image on trial can always be rejected: the next boot would anyway */
    CHECK(update(&s, 1, &w->new_im) == COLIBRI_OK);
    CHECK(colibri_slot_boot_select(&s, &b) == COLIBRI_OK && b.slot == 0 && b.on_trial);
    CHECK(colibri_slot_reject(&s, 0) == COLIBRI_OK);
}

/* One bit flipped in either record copy, at rest after each record write of
 * boot, update, trial boot and confirm: boot chooses what it chose without
 * the flip, and both copies are valid again after it. */
static void test_record_bit_errors(world *w)
{
    colibri_slots s = layout(w->slot_size, w->key);
    colibri_slot_boot want, got;
    uint8_t *rest = malloc(sim.size);
    long flips = 0;
    memcpy(sim.mem, w->factory, sim.size);
    no_cut();
    for (int stage = 0; stage < 4; stage++) {
        if (stage == 1) {
            CHECK(update(&s, 0, &w->new_im) == COLIBRI_OK);
        } else if (stage == 2) {
            CHECK(colibri_slot_boot_select(&s, &got) == COLIBRI_OK && got.on_trial);
        } else if (stage == 3) {
            CHECK(colibri_slot_confirm(&s, 1) == COLIBRI_OK);
        }
        CHECK(colibri_slot_record_copies(&s) == 2);
        memcpy(rest, sim.mem, sim.size);
        CHECK(colibri_slot_boot_select(&s, &want) == COLIBRI_OK);
        for (int copy = 0; copy < 2; copy++) {
            for (int bit = stage; bit < 8 * (int)COLIBRI_SLOT_RECORD_BYTES; bit += 7) {
                memcpy(sim.mem, rest, sim.size);
                sim.mem[s.record[copy] + (uint32_t)bit / 8] ^= (uint8_t)(1u << (bit % 8));
                CHECK(colibri_slot_boot_select(&s, &got) == COLIBRI_OK && got.slot == want.slot &&
                      got.on_trial == want.on_trial && colibri_slot_record_copies(&s) == 2);
                flips++;
            }
        }
        memcpy(sim.mem, rest, sim.size);
    }
    printf("record bit errors: %ld flips, each booted as without it\n", flips);
    free(rest);
}

int main(int argc, char **argv)
{
    world w;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 6 || unhex_key(argv[5], w.key) != 0) {
        fprintf(stderr, "usage: test_slots OLD NEW OTHER_KEY UNSIGNED KEYHEX [STRIDE]\n");
        return 2;
    }
    w.old_im = load(argv[1]);
    w.new_im = load(argv[2]);
    w.other_im = load(argv[3]);
    w.unsigned_im = load(argv[4]);
    long stride = argc > 6 ? strtol(argv[6], NULL, 10) : 1;
    if (!w.old_im.size || !w.new_im.size || !w.other_im.size || !w.unsigned_im.size || stride < 1) {
        fprintf(stderr, "test_slots: cannot read the images\n");
        return 2;
    }
    size_t largest = w.old_im.size > w.new_im.size ? w.old_im.size : w.new_im.size;
    w.slot_size = (largest + SECTOR - 1) / SECTOR * SECTOR + SECTOR;
    sim.size = 2 * SECTOR + 2 * w.slot_size;
    sim.mem = malloc(sim.size);
    w.factory = malloc(sim.size);
    make_factory(&w);
    test_records(&w);
    test_refused_updates(&w);
    test_revert(&w);
    test_update_extent(&w);
    test_reject_last_image(&w);
    test_record_bit_errors(&w);
    test_power_cuts(&w, stride);
    free(sim.mem);
    free(w.factory);
    free(w.old_im.bytes);
    free(w.new_im.bytes);
    free(w.other_im.bytes);
    free(w.unsigned_im.bytes);
    return CHECK_SUMMARY();
}
