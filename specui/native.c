/* specui's native kernels, built and loaded by specui/native.py:
 * - rowgemm: row-invariant float32 matrix products for few rows, y[m, n] = x[m, k] W[n, k]^T (+ b);
 * - rowargmax: torch.argmax over rows of logits, vectorised.
 *
 * One shared library per instruction set (AVX2 or AVX-512), compiled with gcc. rowgemm: W is packed once
 * into panels of NR output columns, [n / NR][k][NR] (zero-padded), so one vector load reads NR columns
 * at one k, and the whole packed matrix is one sequential stream.
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
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#if defined(SPECUI_AVX512)
#define NR 16
#define PANELS 3 /* per tile of ROWS rows: 8 x 3 accumulators + 3 weights + 1 broadcast of 32 registers */
typedef __m512 vec;
#define vzero _mm512_setzero_ps
#define vload _mm512_loadu_ps
#define vstore _mm512_storeu_ps
#define vset1 _mm512_set1_ps
#define vfma _mm512_fmadd_ps
#define vadd _mm512_add_ps
#define vmax _mm512_max_ps
#define vnan(v) (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0)
#define vhmax _mm512_reduce_max_ps
#else
#define NR 8
#define PANELS 2 /* 8 x 2 accumulators of 16 registers: a few spill, still the fastest for 8 rows */
typedef __m256 vec;
#define vzero _mm256_setzero_ps
#define vload _mm256_loadu_ps
#define vstore _mm256_storeu_ps
#define vset1 _mm256_set1_ps
#define vfma _mm256_fmadd_ps
#define vadd _mm256_add_ps
#define vmax _mm256_max_ps
#define vnan(v) (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0)
static inline float vhmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
#endif
#define ROWS 8        /* rows per tile: a verify of up to 8 tokens reads W once */
#define WIDE 8        /* panels per tile when there is a single row (pure streaming) */
#define PREFETCH 64   /* k-steps ahead */

int rowgemm_panel_width(void) { return NR; }

/* rows x panels outputs over all of k; compiled once per (rows, panels) below, all loops unrolled */
static inline __attribute__((always_inline)) void tile(const float *x, int ldx, const float *w, int k,
                                                        int rows, int panels, const float *bias,
                                                        float *y, int ldy, int cols) {
    vec acc[ROWS][WIDE];
    const size_t stride = (size_t)k * NR;
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < panels; g++) acc[r][g] = vzero();
    for (int i = 0; i < k; i++) {
        vec wv[WIDE];
        for (int g = 0; g < panels; g++) {
            _mm_prefetch((const char *)(w + g * stride + (size_t)(i + PREFETCH) * NR), _MM_HINT_T0);
            wv[g] = vload(w + g * stride + (size_t)i * NR);
        }
        for (int r = 0; r < rows; r++) {
            vec xb = vset1(x[(size_t)r * ldx + i]);
            for (int g = 0; g < panels; g++) acc[r][g] = vfma(xb, wv[g], acc[r][g]);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < panels; g++) {
            vec v = acc[r][g];
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

typedef void (*tile_fn)(const float *, int, const float *, int, const float *, float *, int, int);
#define T(r, g)                                                                                   \
    static void t##r##_##g(const float *x, int ldx, const float *w, int k, const float *b, float *y, \
                           int ldy, int cols) { tile(x, ldx, w, k, r, g, b, y, ldy, cols); }
T(1, 1) T(1, 2) T(1, 3) T(1, 4) T(1, 5) T(1, 6) T(1, 7) T(1, 8)
T(2, 1) T(2, 2) T(2, 3) T(3, 1) T(3, 2) T(3, 3) T(4, 1) T(4, 2) T(4, 3)
T(5, 1) T(5, 2) T(5, 3) T(6, 1) T(6, 2) T(6, 3) T(7, 1) T(7, 2) T(7, 3) T(8, 1) T(8, 2) T(8, 3)
static const tile_fn tiles[ROWS + 1][WIDE + 1] = {
    [1] = {0, t1_1, t1_2, t1_3, t1_4, t1_5, t1_6, t1_7, t1_8},
    [2] = {0, t2_1, t2_2, t2_3}, [3] = {0, t3_1, t3_2, t3_3}, [4] = {0, t4_1, t4_2, t4_3},
    [5] = {0, t5_1, t5_2, t5_3}, [6] = {0, t6_1, t6_2, t6_3}, [7] = {0, t7_1, t7_2, t7_3},
    [8] = {0, t8_1, t8_2, t8_3},
};

/* Columns of panels [p0, p1) (all: 0, ceil(n / NR)) of y = x W^T + bias (bias may be NULL).
 * x: m rows of k floats, ldx apart; w: packed; y: m rows, ldy apart. */
void rowgemm(const float *x, int m, int ldx, const float *w, int n, int k, const float *bias,
             float *y, int ldy, int p0, int p1) {
    const int per_tile = m == 1 ? WIDE : PANELS;
    for (int p = p0; p < p1; p += per_tile) {
        const int g = p1 - p < per_tile ? p1 - p : per_tile;
        const float *wp = w + (size_t)p * k * NR;
        const float *bp = bias ? bias + (size_t)p * NR : NULL;
        for (int r = 0; r < m; r += ROWS) {
            const int rows = m - r < ROWS ? m - r : ROWS;
            tiles[rows][g](x + (size_t)r * ldx, ldx, wp, k, bp, y + (size_t)r * ldy + (size_t)p * NR, ldy,
                           n - p * NR);
        }
    }
}

/* out[r] = torch.argmax(x[r]) for float32 rows of n, ld apart: the first index of the maximum, or the
 * first NaN's index where there is one (torch counts NaN as the largest value). torch's own CPU argmax
 * does not vectorise this reduction; two vector passes (maximum and NaN check, then the first equal
 * element) take a tenth of its time over a vocabulary. */
void rowargmax(const float *x, int rows, int n, int ld, long long *out) {
    for (int r = 0; r < rows; r++) {
        const float *row = x + (size_t)r * ld;
        vec best = vset1(-__builtin_inff());
        int i = 0, nan = 0;
        for (; i + NR <= n; i += NR) {
            vec v = vload(row + i);
            nan |= vnan(v);
            best = vmax(best, v);
        }
        float m = vhmax(best);
        for (; i < n; i++) {
            nan |= row[i] != row[i];
            if (row[i] > m) m = row[i];
        }
        long long found = 0;
        if (nan) {
            while (row[found] == row[found]) found++;
        } else {
            while (row[found] != m) found++;
        }
        out[r] = found;
    }
}
