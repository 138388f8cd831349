/*
 * qtile.h - what the Cortex-M quantized tables (dsp.c, helium.c) share: the
 * results of a tile of two weight rows by one or two tokens, written out.
 */
#ifndef COLIBRI_QTILE_H
#define COLIBRI_QTILE_H

#include <stddef.h>
#include <stdint.h>

/* a<token><row> to out[token * stride + row] for the rows (1 or 2) and
 * tokens (T: 1 or 2) the tile really has. */
static inline void colibri_qtile_store(float *out, size_t stride, uint32_t rows, uint32_t T,
                                       float a00, float a01, float a10, float a11)
{
    out[0] = a00;
    if (rows == 2u) {
        out[1] = a01;
    }
    if (T == 2u) {
        out[stride] = a10;
        if (rows == 2u) {
            out[stride + 1] = a11;
        }
    }
}

#endif
