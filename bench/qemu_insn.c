/*
 * qemu_insn.c - a QEMU TCG plugin that counts the guest instructions a run
 * executes, for colibri-bench --emulate (docs/performance.md): loaded by
 * qemu-aarch64 / qemu-system-arm with
 *
 *     -plugin build/host/qemu-insn.so,out=FILE
 *
 * and at QEMU's exit writes the count to FILE as one decimal line. Every
 * translation block adds its instruction count to one counter each time it
 * runs (an inline add: no call per block); a block left early by an
 * exception counts whole, as QEMU's own example plugins do. One counter for
 * every vCPU: meant for one guest thread (colibri-bench runs --threads 1).
 *
 * The plugin interface is QEMU's stable C API (version 1 in QEMU 7.2, which
 * Debian 12 ships, and accepted by later versions); the few declarations it
 * needs are written out here, so the build needs no QEMU headers. Errors go
 * to QEMU's stderr (qemu_plugin_outs writes only with -d plugin).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_tb_trans_cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_tb_trans_cb cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
                                              void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb cb, void *userdata);

#define EXPORT __attribute__((visibility("default")))

EXPORT int qemu_plugin_version = 1;

static uint64_t executed;
static char out_path[4096];

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &executed,
                                             qemu_plugin_tb_n_insns(tb));
}

static void on_exit(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    FILE *f = fopen(out_path, "w");
    if (f == NULL || fprintf(f, "%llu\n", (unsigned long long)executed) < 0 || fclose(f) != 0) {
        fprintf(stderr, "qemu-insn: cannot write the count to %s\n", out_path);
    }
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info, int argc,
                               char **argv)
{
    (void)info;
    if (argc != 1 || strncmp(argv[0], "out=", 4) != 0 || strlen(argv[0] + 4) == 0 ||
        strlen(argv[0] + 4) >= sizeof out_path) {
        fputs("qemu-insn: takes one argument, out=FILE (-plugin qemu-insn.so,out=FILE)\n", stderr);
        return -1;
    }
    strcpy(out_path, argv[0] + 4);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_exit, NULL);
    return 0;
}
