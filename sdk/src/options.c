/*
 * options.c - what colibri_options brings into a model: the port, read only
 * as far as its version goes, and the port's kernel table, with every NULL
 * slot filled from the reference table (the forward pass never tests a slot).
 */
#include "model_internal.h"

int colibri_options_valid(const colibri_options *options)
{
    const colibri_port *port = options != NULL ? options->port : NULL;
    if (port == NULL) {
        return 1;
    }
    if (port->version < 1u || port->version > COLIBRI_PORT_VERSION) {
        return 0;
    }
    /* expert_acquire and expert_release come together, or not at all */
    return port->version < 4u || (port->expert_acquire == NULL) == (port->expert_release == NULL);
}

/* Slots a port of its version has; nothing past them is read. */
static void port_copy(colibri_port *out, const colibri_port *in)
{
    out->version = in->version;
    out->ticks = in->ticks;
    out->prefetch = in->prefetch;
    out->ctx = in->ctx;
    if (in->version >= 2u) {
        out->parallel_for = in->parallel_for;
        out->kernels = in->kernels;
    }
    if (in->version >= 3u) {
        out->route = in->route;
        out->route_ctx = in->route_ctx;
    }
    if (in->version >= 4u) {
        out->expert_acquire = in->expert_acquire;
        out->expert_release = in->expert_release;
        out->experts_chosen = in->experts_chosen;
    }
    if (in->version >= 5u) {
        out->attention_route = in->attention_route;
    }
    if (in->version >= 6u) {
        out->router = in->router;
    }
}

#define KERNEL_SLOT(out, chosen, slot)                                                             \
    ((out)->slot = (chosen)->slot != NULL ? (chosen)->slot : colibri_kernels_reference.slot)

static void kernels_resolve(colibri_kernels *out, const colibri_kernels *chosen)
{
    *out = colibri_kernels_reference;
    if (chosen == NULL) {
        return;
    }
    out->name = chosen->name != NULL ? chosen->name : colibri_kernels_reference.name;
    KERNEL_SLOT(out, chosen, dot);
    KERNEL_SLOT(out, chosen, matvec_f32);
    KERNEL_SLOT(out, chosen, rmsnorm);
    KERNEL_SLOT(out, chosen, softmax);
    KERNEL_SLOT(out, chosen, swiglu);
    KERNEL_SLOT(out, chosen, add);
    KERNEL_SLOT(out, chosen, add_scaled);
    KERNEL_SLOT(out, chosen, rope_apply);
    KERNEL_SLOT(out, chosen, matmat_f32);
    KERNEL_SLOT(out, chosen, matmat_q8);
    KERNEL_SLOT(out, chosen, matmat_q4);
    KERNEL_SLOT(out, chosen, matmat_q8r16);
    KERNEL_SLOT(out, chosen, matmat_q4r16);
    KERNEL_SLOT(out, chosen, matmat_qk);
    KERNEL_SLOT(out, chosen, matmat_qkr16);
}

void colibri_options_apply(colibri_model *m, const colibri_options *options)
{
    if (options != NULL && options->port != NULL) {
        port_copy(&m->port, options->port);
    }
    kernels_resolve(&m->kernels, m->port.kernels);
}
