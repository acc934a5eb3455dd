/* specui's native kernels, built into one library by specui/native_build.py and loaded by specui/native.py:
 * - rowgemm: row-invariant float32 matrix products for few rows, y[m, n] = x[m, k] W[n, k]^T (+ b);
 * - rowrmsnorm, rowrope, rowargmax, blockfind (native_layer.c): a layer's RMSNorm and rotary step, argmax over
 *   rows of logits, GGUF blocks found in float32 weights;
 * - rowattend (native_attend.c): attention of few query rows over a KV cache, each row's bits a function of the
 *   sequence of keys it sees (not of their slots, the row count, the padding or the instruction set).
 *
 * One shared library per instruction set (AVX2 or AVX-512), compiled with gcc. rowgemm: W is packed once into
 * panels of NR output columns, [n / NR][k][NR] (zero-padded), so one vector load reads NR columns at one k, and the
 * packed matrix is one sequential stream (of float16, bfloat16, int8 or GGUF blocks where W allows: below).
 *
 * Every output element is ONE fused multiply-add chain from 0 over k = 0, 1, ..., k-1 in order, then
 * the bias added: its bits depend on nothing but its row of x and its column of W. Not on m, not on
 * how rows and panels are tiled, not on threads, not on the vector width (an FMA rounds once, lane by
 * lane), so the AVX2 and the AVX-512 builds give the same bits. A verify forward's rows are then
 * bitwise equal to one-token forwards (greedy speculative decoding = plain greedy decoding).
 *
 * Speed: a few rows are bound by reading W. A tile's rows are computed in one pass over W (each weight used
 * for every row while it is in a register), the next tile's weights fetched meanwhile (`fetch_ahead`), so the
 * extra rows' arithmetic overlaps the memory traffic instead of following it.
 */
#include "native.h"
#define ROWS 8        /* rows per tile of PANELS panels (and per tile of a product of more than WIDE_ROWS) */
#define WIDE_ROWS 12  /* 9 to 12 rows: one tile of WIDE_PANELS panels, so W is read once up to 12 rows */
#define WIDE 8        /* panels per tile when there is a single row (pure streaming) */
#define PREFETCH 64   /* k-steps ahead in a panel, where W is read by more than one tile of rows */
#define Q_WIDE (NR == 16 ? WIDE : 4) /* panels per tile of one row of Q4 or Q8 panels (AVX2: 16 registers) */
/* AVX2: Q4 or Q8 tiles of more rows take one panel each (two crowd its 16 registers: 5-6 rows 1.1x slower). Up to
 * 4 take two: on one panel, r rows are r FMA chains, too few to hide an FMA's latency (SmolLM2's forward of 3 and 4
 * rows, stop 67: 12.8 and 13.1 ms on one panel, 10.4 and 12.1 on two) */
#define Q_ROWS_TWO_PANELS (NR == 16 ? WIDE_ROWS : 4)

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

/* Where one tile of rows reads W (`next`: up to WIDE_ROWS rows, one token or a verify), the next tile's weights are
 * fetched while this tile runs, each line at the same offset one tile ahead, so DRAM's latency hides behind a whole
 * tile's work: a tile's panels are a few KB long, too short for the CPU's own prefetchers, which stop at every 4 KB
 * page (a fixed distance ahead inside each panel left a product 1.35x slower than with its weights in cache for
 * one row, 1.1-1.2x for 2-4: stop 79). One row's tile of 8 panels is fetched into L2 (tens of KB ahead), a tile of
 * several rows into L1. Where tiles of rows take turns on the same panels (a prompt), the next panel group would
 * evict the one they share (a 200-token prompt 1.2x slower): those fetch PREFETCH k-steps ahead in each panel. */
static inline __attribute__((always_inline)) void fetch_ahead(const void *p, int rows) {
    if (rows > 1)
        _mm_prefetch((const char *)p, _MM_HINT_T0);
    else
        _mm_prefetch((const char *)p, _MM_HINT_T1);
}

/* The line `next_tile` bytes past p where `next`, else the one `in_panel` bytes past it */
static inline __attribute__((always_inline)) void fetch(const void *p, int next, size_t in_panel, size_t next_tile,
                                                         int rows) {
    if (next)
        fetch_ahead((const char *)p + next_tile, rows);
    else
        _mm_prefetch((const char *)p + in_panel, _MM_HINT_T0);
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
            float t[NR];  /* the last panel may be partial */
            vstore(c >= NR ? y + (size_t)r * ldy + g * NR : t, v);
            if (c > 0 && c < NR) memcpy(y + (size_t)r * ldy + g * NR, t, (size_t)c * sizeof(float));
        }
}

/* rows x panels outputs over all of k; compiled once per (rows, panels, kind) below, all loops unrolled */
static inline __attribute__((always_inline)) void tile(const float *x, int ldx, const void *w, int k,
                                                        int rows, int panels, const float *bias, const float *scale,
                                                        float *y, int ldy, int cols, int kind, int next) {
    vec acc[WIDE_ROWS][WIDE];
    const size_t stride = (size_t)k * NR, bytes = wbytes(kind);
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < panels; g++) acc[r][g] = vzero();
    for (int i = 0; i < k; i++) {
        vec wv[WIDE];
        for (int g = 0; g < panels; g++) {
            if (!next || (size_t)i * NR * bytes % 64 == 0)  /* the next tile once a line */
                fetch((const char *)w + (g * stride + (size_t)i * NR) * bytes, next, PREFETCH * NR * bytes,
                      panels * stride * bytes, rows);
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

static inline __attribute__((always_inline)) void tile_q(const float *x, int ldx, const void *w, int k, int rows,
                                                          int panels, const float *bias, const float *scale,
                                                          float *y, int ldy, int cols, int kind, int next) {
    vec acc[WIDE_ROWS][WIDE];
    const size_t stride = panel_bytes(kind, k), sstride = panel_scales(kind, k), pair = kind == Q4 ? NR : 2 * NR;
    const int per_block = kind == Q4 ? 2 * NR : NR, blocks = k / QBLOCK;
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < panels; g++) acc[r][g] = vzero();
    /* block by block (`specui.blocks.find` packs whole blocks only), each panel's scale (and offset) read once */
    for (int b = 0; b < blocks; b++) {
        vec d[WIDE], m[WIDE];
        const unsigned char *pb[WIDE];
        for (int g = 0; g < panels; g++) {
            const float *s = scale + g * sstride + (size_t)b * per_block;
            for (int o = 0; o < (next ? per_block : 1); o += 64 / sizeof(float))  /* the next tile: every line */
                fetch(s + o, next, PREFETCH / QBLOCK * per_block * sizeof(float), panels * sstride * sizeof(float),
                      rows);
            d[g] = vload(s);
            m[g] = kind == Q4 ? vload(s + NR) : vzero();
            pb[g] = (const unsigned char *)w + g * stride + (size_t)b * (QBLOCK / 2) * pair;
        }
        const float *xb = x + (size_t)b * QBLOCK;
        /* Several rows: k-step j's weights of every panel, each row's broadcast used for all of them, then j + 1
         * (panel by panel, AVX-512's 12 rows of 2 panels took 1.4-1.7x as long, 10 rows 1.1x: stop 78); one row:
         * panel by panel, j then j + 1. Each accumulator's chain is j, then j + 1 */
        const int together = rows > 1;
        for (int j = 0; j < QBLOCK; j += 2)
            for (int g0 = 0; g0 < panels; g0 += together ? panels : 1) {
                const int g1 = together ? panels : g0 + 1;
                for (int h = 0; h < 2; h++) {
                    vec wq[WIDE];
                    for (int g = g0; g < g1; g++) {
                        const unsigned char *p = pb[g] + (size_t)(j / 2) * pair;
                        if (h == 0 && (j / 2) * pair % 64 == 0)
                            fetch(p, next, PREFETCH / 2 * pair, panels * stride, rows);
                        const vec q = qwidth(p, kind, h);
                        wq[g] = kind == Q4 ? vfma(q, d[g], m[g]) : vmul(q, d[g]);
                    }
                    for (int r = 0; r < rows; r++) {
                        const vec xr = vset1(xb[(size_t)r * ldx + j + h]);
                        for (int g = g0; g < g1; g++) acc[r][g] = vfma(xr, wq[g], acc[r][g]);
                    }
                }
            }
    }
    store(acc, rows, panels, NULL, bias, y, ldy, cols);
}

/* native_build.py compiles this file twice at once, with -DSPECUI_PART=1 (the float tiles and the rest) and 2 (the GGUF
 * tiles), and links both: its tiles took 12 s to compile on one core. Without SPECUI_PART one unit holds it all. */
#define TILE(name) __attribute__((visibility("hidden"))) void name(const float *x, int ldx, const void *w, int k, \
                                                                 const float *b, const float *s, float *y, int ldy, \
                                                                 int cols, int next)
#define TK(r, g, kind, name, body) \
    TILE(t##r##_##g##_##name) { body(x, ldx, w, k, r, g, b, s, y, ldy, cols, kind, next); }
#define TD(r, g, kind, name, body) TILE(t##r##_##g##_##name);  /* compiled in the other part */
#if SPECUI_PART == 2
#define TA TD
#else
#define TA TK
#endif
#if SPECUI_PART == 1
#define TB TD
#else
#define TB TK
#endif
#define T(r, g) TA(r, g, F32, f32, tile) TA(r, g, F16, f16, tile) TA(r, g, BF16, bf16, tile) TA(r, g, I8, i8, tile) \
    TB(r, g, Q4, q4, tile_q) TB(r, g, Q8, q8, tile_q)
T(1, 1) T(1, 2) T(1, 3) T(1, 4) T(1, 5) T(1, 6) T(1, 7) T(1, 8)
T(2, 1) T(2, 2) T(2, 3) T(3, 1) T(3, 2) T(3, 3) T(4, 1) T(4, 2) T(4, 3)
T(5, 1) T(5, 2) T(5, 3) T(6, 1) T(6, 2) T(6, 3) T(7, 1) T(7, 2) T(7, 3) T(8, 1) T(8, 2) T(8, 3)
T(9, 1) T(9, 2) T(10, 1) T(10, 2) T(11, 1) T(11, 2) T(12, 1) T(12, 2)
#if SPECUI_PART != 2
typedef void (*tile_fn)(const float *, int, const void *, int, const float *, const float *, float *, int, int,
                        int);
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

int rowgemm_panel_width(void) { return NR; }

/* Columns of panels [p0, p1) (all: 0, ceil(n / NR)) of y = x W^T + bias (bias may be NULL). x: m rows of k floats,
 * ldx apart; w: packed, of `kind` (F32, F16, BF16, I8 or Q4/Q8, followed by their scales); y: m rows, ldy apart. */
void rowgemm(const float *x, int m, int ldx, const void *w, int n, int k, const float *bias,
             float *y, int ldy, int p0, int p1, int kind) {
    /* rows per tile: all of them up to WIDE_ROWS (W read once), else tiles of ROWS */
    const int tile_rows = m <= WIDE_ROWS ? m : ROWS;
    int per_tile = m == 1 ? WIDE : tile_rows > ROWS ? WIDE_PANELS : PANELS;
    if (kind == Q4 || kind == Q8)  /* a scale (and offset) a panel more in registers */
        per_tile = m == 1 ? Q_WIDE : tile_rows > Q_ROWS_TWO_PANELS ? 1 : per_tile;
    const size_t bytes = panel_bytes(kind, k), count = ((size_t)n + NR - 1) / NR, sstride = panel_scales(kind, k);
    const float *scales = sstride ? (const float *)((const char *)w + count * bytes) : NULL;
    /* the next tile fetched ahead (`fetch_ahead`) where one tile of rows reads W, unless that tile is one panel of
     * several rows (AVX2's Q tiles of 5-12 rows: 8 rows 1.04-1.12x slower so, stop 79) */
    const int next = m <= tile_rows && (per_tile > 1 || m == 1);
    for (int p = p0; p < p1; p += per_tile) {
        const int g = p1 - p < per_tile ? p1 - p : per_tile;
        const char *wp = (const char *)w + (size_t)p * bytes;
        const float *bp = bias ? bias + (size_t)p * NR : NULL, *sp = scales ? scales + (size_t)p * sstride : NULL;
        for (int r = 0; r < m; r += tile_rows) {
            const int rows = m - r < tile_rows ? m - r : tile_rows;
            tiles[kind][rows][g](x + (size_t)r * ldx, ldx, wp, k, bp, sp, y + (size_t)r * ldy + (size_t)p * NR,
                                 ldy, n - p * NR, next);
        }
    }
}
#endif
