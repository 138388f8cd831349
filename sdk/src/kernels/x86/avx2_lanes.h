/*
 * avx2_lanes.h - the two lane moves avx2's quantized products share
 * (avx2_quant.c, avx2_qk.c): eight vectors of int32 partial sums to one
 * vector of their totals, and an 8 x 8 transpose of floats. Included by
 * x86 files only (AVX2 target attributes).
 */
#ifndef COLIBRI_KERNELS_AVX2_LANES_H
#define COLIBRI_KERNELS_AVX2_LANES_H

#include <immintrin.h>

/* Eight vectors of eight int32 partial sums -> one vector of the eight
 * totals, vector p in lane p. */
__attribute__((target("avx2"), always_inline)) static inline __m256i isum8(const __m256i *p)
{
    __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
}

/* v[i] lane j <- v[j] lane i (8 x 8). */
__attribute__((target("avx2"), always_inline)) static inline void transpose8(__m256 *v)
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

#endif
