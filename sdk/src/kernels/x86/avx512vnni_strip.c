/*
 * avx512vnni_strip.c - Q4 prompts (avx512vnni.h STRIP_MIN_TOKENS tokens or
 * more) in strips of sixteen rows, unpacked once per strip so that lane r
 * of a vector is row r.
 */
#include "colibri_compat.h"
#include "kernels.h"
#include "quant.h"
#include "avx512vnni.h"

/* Q4 with many tokens (a prompt): a strip of sixteen rows is unpacked, a
 * chunk of blocks at a time, into the layout in which lane r of a vector is
 * row r: group g of block b holds elements 4g..4g+3 of each row as signed
 * nibble - 8, so one vpdpbusd with four of a token's x bytes broadcast adds
 * into each row's own lane and no horizontal sum is left; the unpacking is
 * paid once per strip, not once per token. vpdpbusd's unsigned operand is
 * then x + 128 (x xor 0x80), and each row's sum starts at -128 * (its sum of
 * nibble - 8 in the block): exact. A row's float sum starts at 0 and takes
 * the blocks in order, as in every kernel; between chunks it waits in out. */
enum { CHUNK_BLOCKS = 16 };

typedef struct q4_chunk {
    __m512i group[CHUNK_BLOCKS][8]; /* [block][group]: lane r, 4 weights of row r */
    __m512i init[CHUNK_BLOCKS];     /* -128 * each row's sum of the block's weights */
    __m512 dw[CHUNK_BLOCKS];        /* each row's scale of the block */
} q4_chunk;

/* Blocks b0 .. b0 + count - 1 of the strip's rows (past the matrix: its last
 * row again; those lanes are not stored). */
VNNI static void q4_pack(q4_chunk *c, const uint8_t *w, size_t row_bytes, uint32_t rows_left,
                         uint32_t b0, uint32_t count)
{
    uint32_t rows_nibbles[STRIP][8];
    uint16_t h[STRIP];
    const __m128i low = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    const __m512i row_start = _mm512_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96,
                                                104, 112, 120),
                  ones = _mm512_set1_epi8(1);
    for (uint32_t bb = 0; bb < count; bb++) {
        for (uint32_t r = 0; r < STRIP; r++) {
            const uint8_t *blk = w + (size_t)(r < rows_left ? r : rows_left - 1u) * row_bytes +
                                 (size_t)(b0 + bb) * 18u;
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(blk + 2));
            h[r] = colibri_rd_u16(blk);
            _mm_storeu_si128((__m128i *)(void *)rows_nibbles[r],
                             _mm_sub_epi8(_mm_and_si128(v, low), eight));
            _mm_storeu_si128((__m128i *)(void *)(rows_nibbles[r] + 4),
                             _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), low), eight));
        }
        c->dw[bb] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)h));
        __m512i wsum = _mm512_setzero_si512();
        for (uint32_t g = 0; g < 8u; g++) {
            c->group[bb][g] = _mm512_i32gather_epi32(
                _mm512_add_epi32(row_start, _mm512_set1_epi32((int)g)), rows_nibbles, 4);
            wsum = _mm512_dpbusd_epi32(wsum, ones, c->group[bb][g]);
        }
        c->init[bb] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(wsum, 7));
    }
}

/* Block bb of the chunk times token block xb: each row's exact sum. */
VNNI static INLINE __m512i q4_strip_block(const q4_chunk *c, uint32_t bb, const colibri_qblock *xb)
{
    int32_t xu[8]; /* x + 128, four bytes to a word */
    _mm256_storeu_si256((__m256i *)(void *)xu,
                        _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)xb->q),
                                         _mm256_set1_epi8((char)0x80)));
    __m512i isum = c->init[bb];
#pragma GCC unroll 8
    for (uint32_t g = 0; g < 8u; g++) {
        isum = _mm512_dpbusd_epi32(isum, _mm512_set1_epi32(xu[g]), c->group[bb][g]);
    }
    return isum;
}

VNNI void colibri_avx512vnni_q4_strip(float *out, size_t stride, const uint8_t *w, size_t row_bytes,
                                      const colibri_qblock *x, uint32_t nb, uint32_t rows_left,
                                      uint32_t n)
{
    q4_chunk c;
    __mmask16 keep = rows_left >= STRIP ? (__mmask16)0xFFFF : (__mmask16)((1u << rows_left) - 1u);
    for (uint32_t b0 = 0; b0 < nb; b0 += CHUNK_BLOCKS) {
        uint32_t count = nb - b0 < CHUNK_BLOCKS ? nb - b0 : CHUNK_BLOCKS;
        q4_pack(&c, w, row_bytes, rows_left, b0, count);
        for (uint32_t t = 0; t < n; t++) {
            const colibri_qblock *xt = x + (size_t)t * nb + b0;
            __m512 acc = b0 ? _mm512_maskz_loadu_ps(keep, out + t * stride) : _mm512_setzero_ps();
            for (uint32_t bb = 0; bb < count; bb++) {
                __m512 scale = _mm512_mul_ps(c.dw[bb], _mm512_set1_ps(xt[bb].d));
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q4_strip_block(&c, bb, xt + bb)), scale,
                                      acc);
            }
            _mm512_mask_storeu_ps(out + t * stride, keep, acc);
        }
    }
}
