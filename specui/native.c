/* specui's native kernels, built and loaded by specui/native.py:
 * - rowgemm: row-invariant float32 matrix products for few rows, y[m, n] = x[m, k] W[n, k]^T (+ b);
 * - rowrmsnorm, rowrope, rowargmax, blockfind (native_layer.c, built with this file): a layer's RMSNorm and
 *   rotary step, argmax over rows of logits, GGUF blocks found in float32 weights;
 * - rowattend (native_attend.c, built with this file): attention of few query rows over a KV cache, each row's
 *   bits a function of the sequence of keys it sees (not of their slots, the row count, the padding or the
 *   instruction set).
 *
 * One shared library per instruction set (AVX2 or AVX-512), compiled with gcc. rowgemm: W is packed once
 * into panels of NR output columns, [n / NR][k][NR] (zero-padded), so one vector load reads NR columns
 * at one k, and the whole packed matrix is one sequential stream. Panels of a weight whose every value
 * is exactly a float16 (or bfloat16) value are stored as such: half the bytes, the same bits (below).
 *
 * Every output element is ONE fused multiply-add chain from 0 over k = 0, 1, ..., k-1 in order, then
 * the bias added: its bits depend on nothing but its row of x and its column of W. Not on m, not on
 * how rows and panels are tiled, not on threads, not on the vector width (an FMA rounds once, lane by
 * lane), so the AVX2 and the AVX-512 builds give the same bits. A verify forward's rows are then
 * bitwise equal to one-token forwards (greedy speculative decoding = plain greedy decoding).
 *
 * Speed: a few rows are bound by reading W from memory. All rows of a tile are computed in one pass
 * over W (each weight is read from memory once and used for every row while it is in a register), and
 * each panel's stream is prefetched PREFETCH k-steps ahead, so the extra rows' arithmetic overlaps
 * the memory traffic instead of following it.
 */
#include "native.h"
#define ROWS 8        /* rows per tile of PANELS panels (and per tile of a product of more than WIDE_ROWS) */
#define WIDE_ROWS 12  /* 9 to 12 rows: one tile of WIDE_PANELS panels, so W is read once up to 12 rows */
#define WIDE 8        /* panels per tile when there is a single row (pure streaming) */
#define PREFETCH 64   /* k-steps ahead */

int rowgemm_panel_width(void) { return NR; }

/* Weight panels hold float32, or float16 / bfloat16 where every weight is exactly such a value (a model
 * saved in half precision and loaded as float32): half the bytes to read, and each weight widened to
 * the same float32 in a register (both conversions are exact), so the FMA chains and their bits are
 * those of float32 panels. Or int8 (I8), where every row of W is an integer in [-127, 127] times a power of two
 * (`specui.int8`: specui's own drafters, rounded so): a quarter of the bytes; the chains run on the integers
 * and each output is scaled by its row's power of two at the end, which is exact, so again the bits are
 * those of float32 panels of W. The scales (float32, one per output column) follow the panels. */
static inline __attribute__((always_inline)) vec wload(const void *w, size_t i, int kind) {
    if (kind == F32) return vload((const float *)w + i);
    if (kind == I8) {
#if NR == 16
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)((const signed char *)w + i))));
#else
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)((const signed char *)w + i))));
#endif
    }
    const unsigned short *h = (const unsigned short *)w + i;
#if NR == 16
    __m256i raw = _mm256_loadu_si256((const __m256i *)h);
    if (kind == F16) return _mm512_cvtph_ps(raw);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
#else
    __m128i raw = _mm_loadu_si128((const __m128i *)h);
    if (kind == F16) return _mm256_cvtph_ps(raw);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
#endif
}

/* A tile's outputs: each column scaled (I8's powers of two; NULL: none), the bias added, stored (the last panel
 * may be partial: `cols` columns left) */
static inline __attribute__((always_inline)) void store(vec acc[WIDE_ROWS][WIDE], int rows, int panels,
                                                         const float *scale, const float *bias, float *y, int ldy,
                                                         int cols) {
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < panels; g++) {
            vec v = acc[r][g];
            if (scale) v = vmul(v, vload(scale + g * NR));
            if (bias) v = vadd(v, vload(bias + g * NR));
            int c = cols - g * NR;
            if (c >= NR) {
                vstore(y + (size_t)r * ldy + g * NR, v);
            } else if (c > 0) {  /* the last, partial panel */
                float t[NR];
                vstore(t, v);
                memcpy(y + (size_t)r * ldy + g * NR, t, (size_t)c * sizeof(float));
            }
        }
}

/* rows x panels outputs over all of k; compiled once per (rows, panels, kind) below, all loops unrolled */
static inline __attribute__((always_inline)) void tile(const float *x, int ldx, const void *w, int k,
                                                        int rows, int panels, const float *bias, const float *scale,
                                                        float *y, int ldy, int cols, int kind) {
    vec acc[WIDE_ROWS][WIDE];
    const size_t stride = (size_t)k * NR, bytes = wbytes(kind);
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < panels; g++) acc[r][g] = vzero();
    for (int i = 0; i < k; i++) {
        vec wv[WIDE];
        for (int g = 0; g < panels; g++) {
            _mm_prefetch((const char *)w + (g * stride + (size_t)(i + PREFETCH) * NR) * bytes, _MM_HINT_T0);
            wv[g] = wload(w, g * stride + (size_t)i * NR, kind);
        }
        for (int r = 0; r < rows; r++) {
            vec xb = vset1(x[(size_t)r * ldx + i]);
            for (int g = 0; g < panels; g++) acc[r][g] = vfma(xb, wv[g], acc[r][g]);
        }
    }
    store(acc, rows, panels, kind == I8 ? scale : NULL, bias, y, ldy, cols);
}

/* The same tile for panels of GGUF blocks (Q4, Q8): each block of QBLOCK k-steps has a scale d (and, for Q4, an
 * offset m) per column, and each weight is rebuilt in a register as the float32 it stands for, d q + m (one FMA:
 * d q is exact, so this is the one rounding of GGUF's own dequantization) or d q (exact), before the same FMA
 * chain over k in order as float32 panels: the same bits, from 6 or 9 bits a weight instead of 32. A Q4
 * panel holds two k-steps a byte (the low nibbles k, the high k + 1), NR bytes a pair; its scales are
 * [k / QBLOCK][d, m][NR], a Q8 panel's [k / QBLOCK][NR]. */
static inline __attribute__((always_inline)) vec qwidth(const unsigned char *p, int kind, int high) {
#if NR == 16
    if (kind == Q4) {  /* a nibble's float from a table of 0..15: one permute reads the low 4 bits of each lane */
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
        const __m512 values = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        return _mm512_permutexvar_ps(high ? _mm512_srli_epi32(v, 4) : v, values);
    }
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + (high ? NR : 0)))));
#else
    __m256i v = kind == Q4 ? _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p))
                           : _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + (high ? NR : 0))));
    if (kind == Q4) v = high ? _mm256_srli_epi32(v, 4) : _mm256_and_si256(v, _mm256_set1_epi32(15));
    return _mm256_cvtepi32_ps(v);
#endif
}

/* x for a Q tile: one row as it is (ldx 1), or a tile's rows interleaved by k, xt[i * rows + r] (`rowgemm` packs
 * them), so every broadcast of a block is a constant offset from one pointer. One row streams its panels one after
 * another, each weight rebuilt where it is used (8 accumulators, the 16 scales of a block: 32 registers); more rows
 * rebuild a k-pair of every panel of the tile first, then run each row's chains over them, so that no accumulator
 * spills (`q_panels` keeps rows x panels + 2 panels + the scales within the registers). */
static inline __attribute__((always_inline)) void tile_q(const float *x, int ldx, const void *w, int k, int rows,
                                                          int panels, const float *bias, const float *scale,
                                                          float *y, int ldy, int cols, int kind) {
    vec acc[WIDE_ROWS][WIDE];
    const size_t stride = panel_bytes(kind, k), sstride = panel_scales(kind, k);
    const int pair = kind == Q4 ? NR : 2 * NR, per_block = kind == Q4 ? 2 * NR : NR;
    (void)ldx;
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < panels; g++) acc[r][g] = vzero();
    const unsigned char *p = (const unsigned char *)w;
    for (int b = 0; b < k / QBLOCK; b++, p += QBLOCK / 2 * pair, scale += per_block, x += QBLOCK * rows) {
        vec d[WIDE], m[WIDE];
        for (int g = 0; g < panels; g++) {
            d[g] = vload(scale + g * sstride);
            m[g] = kind == Q4 ? vload(scale + g * sstride + NR) : vzero();
        }
#pragma GCC unroll 16
        for (int j = 0; j < QBLOCK; j += 2) {
            vec w0[WIDE], w1[WIDE];
            for (int g = 0; g < panels; g++) {
                const unsigned char *pg = p + g * stride + (size_t)(j / 2) * pair;
                if ((j / 2 * pair) % 64 == 0) _mm_prefetch((const char *)pg + PREFETCH / 2 * pair, _MM_HINT_T0);
                const vec q0 = qwidth(pg, kind, 0), q1 = qwidth(pg, kind, 1);
                w0[g] = kind == Q4 ? vfma(q0, d[g], m[g]) : vmul(q0, d[g]);
                w1[g] = kind == Q4 ? vfma(q1, d[g], m[g]) : vmul(q1, d[g]);
                if (rows == 1) {
                    acc[0][g] = vfma(vset1(x[j]), w0[g], acc[0][g]);
                    acc[0][g] = vfma(vset1(x[j + 1]), w1[g], acc[0][g]);
                }
            }
            if (rows > 1)
                for (int r = 0; r < rows; r++) {
                    const vec x0 = vset1(x[j * rows + r]), x1 = vset1(x[(j + 1) * rows + r]);
                    for (int g = 0; g < panels; g++) acc[r][g] = vfma(x0, w0[g], acc[r][g]);
                    for (int g = 0; g < panels; g++) acc[r][g] = vfma(x1, w1[g], acc[r][g]);
                }
        }
    }
    store(acc, rows, panels, NULL, bias, y, ldy, cols);
}

typedef void (*tile_fn)(const float *, int, const void *, int, const float *, const float *, float *, int, int);
#define TK(r, g, kind, name, body)                                                                            \
    static void t##r##_##g##_##name(const float *x, int ldx, const void *w, int k, const float *b,              \
                                    const float *s, float *y, int ldy, int cols) {                            \
        body(x, ldx, w, k, r, g, b, s, y, ldy, cols, kind);                                                   \
    }
#define T(r, g) TK(r, g, F32, f32, tile) TK(r, g, F16, f16, tile) TK(r, g, BF16, bf16, tile) TK(r, g, I8, i8, tile) \
    TK(r, g, Q4, q4, tile_q) TK(r, g, Q8, q8, tile_q)
T(1, 1) T(1, 2) T(1, 3) T(1, 4) T(1, 5) T(1, 6) T(1, 7) T(1, 8)
T(2, 1) T(2, 2) T(2, 3) T(3, 1) T(3, 2) T(3, 3) T(4, 1) T(4, 2) T(4, 3)
T(5, 1) T(5, 2) T(5, 3) T(6, 1) T(6, 2) T(6, 3) T(7, 1) T(7, 2) T(7, 3) T(8, 1) T(8, 2) T(8, 3)
T(9, 1) T(9, 2) T(10, 1) T(10, 2) T(11, 1) T(11, 2) T(12, 1) T(12, 2)
#define TABLE(n)                                                                                        \
    {                                                                                                   \
        [1] = {0, t1_1_##n, t1_2_##n, t1_3_##n, t1_4_##n, t1_5_##n, t1_6_##n, t1_7_##n, t1_8_##n},      \
        [2] = {0, t2_1_##n, t2_2_##n, t2_3_##n}, [3] = {0, t3_1_##n, t3_2_##n, t3_3_##n},               \
        [4] = {0, t4_1_##n, t4_2_##n, t4_3_##n}, [5] = {0, t5_1_##n, t5_2_##n, t5_3_##n},               \
        [6] = {0, t6_1_##n, t6_2_##n, t6_3_##n}, [7] = {0, t7_1_##n, t7_2_##n, t7_3_##n},               \
        [8] = {0, t8_1_##n, t8_2_##n, t8_3_##n}, [9] = {0, t9_1_##n, t9_2_##n},                         \
        [10] = {0, t10_1_##n, t10_2_##n}, [11] = {0, t11_1_##n, t11_2_##n}, [12] = {0, t12_1_##n, t12_2_##n}, \
    }
static const tile_fn tiles[6][WIDE_ROWS + 1][WIDE + 1] = {TABLE(f32), TABLE(f16), TABLE(bf16), TABLE(i8),
                                                       TABLE(q4), TABLE(q8)};

/* Panels per tile of a Q4 or Q8 product by rows (see tile_q): rows x panels accumulators, 2 rebuilt weights and 2
 * scales a panel, 2 broadcasts and the nibble table within 32 registers (AVX2: 16) */
#if NR == 16
static const int q_panels[WIDE_ROWS + 1] = {0, 8, 3, 3, 3, 3, 2, 2, 2, 2, 2, 1, 1};
#else
static const int q_panels[WIDE_ROWS + 1] = {0, 4, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
#endif

/* x's rows for Q tiles: each tile of `tile_rows` rows interleaved by k (tile_q), in this thread's buffer; NULL where
 * there is no memory for it */
static const float *q_rows(const float *x, int m, int ldx, int k, int tile_rows) {
    static __thread float *buffer;
    static __thread size_t capacity;
    const size_t need = (size_t)m * k;
    if (need > capacity) {
        free(buffer);
        buffer = malloc(need * sizeof(float));
        capacity = buffer ? need : 0;
        if (!buffer) return NULL;
    }
    for (int r0 = 0; r0 < m; r0 += tile_rows) {
        const int rows = m - r0 < tile_rows ? m - r0 : tile_rows;
        float *t = buffer + (size_t)r0 * k;
        for (int i = 0; i < k; i++)
            for (int r = 0; r < rows; r++) t[(size_t)i * rows + r] = x[(size_t)(r0 + r) * ldx + i];
    }
    return buffer;
}

/* Columns of panels [p0, p1) (all: 0, ceil(n / NR)) of y = x W^T + bias (bias may be NULL).
 * x: m rows of k floats, ldx apart; w: packed, of `kind` (F32, F16, BF16, or I8 followed by the scales); y: m
 * rows, ldy apart. */
void rowgemm(const float *x, int m, int ldx, const void *w, int n, int k, const float *bias,
             float *y, int ldy, int p0, int p1, int kind) {
    /* rows per tile: all of them up to WIDE_ROWS (W read once), else tiles of ROWS */
    int tile_rows = m <= WIDE_ROWS ? m : ROWS;
    int per_tile = m == 1 ? WIDE : tile_rows > ROWS ? WIDE_PANELS : PANELS;
    const float *xt = x;  /* Q tiles of more than one row read their rows interleaved (q_rows) */
    if (kind == Q4 || kind == Q8) {
        if (tile_rows > 1 && !(xt = q_rows(x, m, ldx, k, tile_rows))) {
            for (int r = 0; r < m; r++)  /* no memory: a row at a time, the same bits */
                rowgemm(x + (size_t)r * ldx, 1, ldx, w, n, k, bias, y + (size_t)r * ldy, ldy, p0, p1, kind);
            return;
        }
        per_tile = q_panels[tile_rows];
    }
    const size_t bytes = panel_bytes(kind, k), count = ((size_t)n + NR - 1) / NR, sstride = panel_scales(kind, k);
    const float *scales = sstride ? (const float *)((const char *)w + count * bytes) : NULL;
    for (int p = p0; p < p1; p += per_tile) {
        const int g = p1 - p < per_tile ? p1 - p : per_tile;
        const char *wp = (const char *)w + (size_t)p * bytes;
        const float *bp = bias ? bias + (size_t)p * NR : NULL, *sp = scales ? scales + (size_t)p * sstride : NULL;
        for (int r = 0; r < m; r += tile_rows) {
            const int rows = m - r < tile_rows ? m - r : tile_rows;
            const float *xr = xt != x ? xt + (size_t)r * k : x + (size_t)r * ldx;
            tiles[kind][rows][g](xr, ldx, wp, k, bp, sp, y + (size_t)r * ldy + (size_t)p * NR, ldy, n - p * NR);
        }
    }
}
