/* What specui's vector kernels share (native.c, native_head.c, native_pool.c): `vec`, an AVX2 or an AVX-512
 * register of NR floats (SPECUI_AVX512 picks the build), the few operations they use under one name each, e^x
 * over a vector, and the kinds of weight panels with their bytes a weight. Included by those files, never
 * compiled alone. */
#ifndef SPECUI_NATIVE_H
#define SPECUI_NATIVE_H
#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(SPECUI_AVX512)
#define NR 16
#define PANELS 3 /* per tile of ROWS rows: 8 x 3 accumulators + 3 weights + 1 broadcast of 32 registers */
#define WIDE_PANELS 2 /* per tile of 9..WIDE_ROWS rows: 12 x 2 + 2 + 1 of 32 */
typedef __m512 vec;
#define vzero _mm512_setzero_ps
#define vload _mm512_loadu_ps
#define vstore _mm512_storeu_ps
#define vset1 _mm512_set1_ps
#define vfma _mm512_fmadd_ps
#define vadd _mm512_add_ps
#define vmax _mm512_max_ps
#define vnan(v) (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0)
#define veqmask(v, m) ((unsigned)_mm512_cmp_ps_mask(v, m, _CMP_EQ_OQ)) /* lane i's bit set where v == m */
#define vhmax _mm512_reduce_max_ps
#define vmul _mm512_mul_ps
#define vsub _mm512_sub_ps
#define vdiv _mm512_div_ps
#define vfnmadd _mm512_fnmadd_ps
#define vround(v) _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vpow2(n) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23))
#else
#define NR 8
#define PANELS 2 /* 8 x 2 accumulators of 16 registers: a few spill, still the fastest for 8 rows */
#define WIDE_PANELS 1 /* per tile of 9..WIDE_ROWS rows: 12 accumulators + 1 weight + 1 broadcast of 16 */
typedef __m256 vec;
#define vzero _mm256_setzero_ps
#define vload _mm256_loadu_ps
#define vstore _mm256_storeu_ps
#define vset1 _mm256_set1_ps
#define vfma _mm256_fmadd_ps
#define vadd _mm256_add_ps
#define vmax _mm256_max_ps
#define vnan(v) (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0)
#define veqmask(v, m) ((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, m, _CMP_EQ_OQ)))
static inline float vhmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
#define vmul _mm256_mul_ps
#define vsub _mm256_sub_ps
#define vdiv _mm256_div_ps
#define vfnmadd _mm256_fnmadd_ps
#define vround(v) _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vpow2(n) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23))
#endif

/* what weight panels hold (native.c; `native._KINDS`): float32, float16, bfloat16, int8 rows with a power-of-two
 * scale each, and GGUF's blocks of QBLOCK weights along k: Q4 (4-bit q, w = d q + m) and Q8 (8-bit q, w = d q) */
enum { F32 = 0, F16 = 1, BF16 = 2, I8 = 3, Q4 = 4, Q8 = 5 };
#define QBLOCK 32
static inline size_t wbytes(int kind) { return kind == F32 ? sizeof(float) : kind >= I8 ? 1 : sizeof(short); }
/* bytes of one panel of NR columns over k; the float32 scales a panel has after all the panels */
static inline size_t panel_bytes(int kind, int k) { return (size_t)k * NR * wbytes(kind) / (kind == Q4 ? 2 : 1); }
static inline size_t panel_scales(int kind, int k) {
    return kind == I8 ? NR : kind == Q4 ? (size_t)(k / QBLOCK) * 2 * NR : kind == Q8 ? (size_t)(k / QBLOCK) * NR : 0;
}

/* e^x for x <= 0 (a score minus its row's maximum), the same ops lane by lane in every build: x clamped
 * at -87 (e^-87 ~ 1.6e-38: nothing next to the maximum's e^0 = 1), x = n ln2 + r, |r| <= ln2 / 2,
 * e^r by its degree-6 Taylor polynomial in Horner form (error ~2e-7 relative), times 2^n. */
static inline vec vexp(vec x) {
    x = vmax(x, vset1(-87.0f));
    vec n = vround(vmul(x, vset1(1.44269504088896341f)));
    vec r = vfnmadd(n, vset1(0.693145751953125f), x);
    r = vfnmadd(n, vset1(1.428606765330187e-06f), r);
    vec p = vset1(1.0f / 720);
    p = vfma(p, r, vset1(1.0f / 120));
    p = vfma(p, r, vset1(1.0f / 24));
    p = vfma(p, r, vset1(1.0f / 6));
    p = vfma(p, r, vset1(0.5f));
    p = vfma(p, r, vset1(1.0f));
    p = vfma(p, r, vset1(1.0f));
    return vmul(p, vpow2(n));
}

#endif
