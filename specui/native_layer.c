/* specui's native kernels for the ops around a layer's products, built and loaded with native.c by
 * specui/native.py (one shared library):
 * - rowrmsnorm: RMSNorm of rows, one summation order in every build (batch-invariant);
 * - rowrope: rotary embeddings of q and k, the new keys and values written into the cache, with the bits of
 *   the torch ops they replace.
 * Both use AVX2 (and FMA) intrinsics alone, so the AVX2 and AVX-512 builds compute them alike.
 */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

/* out[r] = w * (x[r] * (1 / sqrt(mean(x[r]^2) + eps))), transformers' LlamaRMSNorm in float32 for rows of
 * n, ldx apart (out dense). The sum of squares is one fixed order in every build (8 lanes of AVX2 FMA
 * chains, added pairwise, then the tail), so a row's bits depend on nothing but the row: batch-invariant.
 * It rounds as torch does after the sum (a correctly rounded square root and division, then two products),
 * but torch sums in another order, so it equals transformers' norm to float32 rounding, not bit for bit. */
void rowrmsnorm(const float *x, int rows, int n, int ldx, const float *w, float eps, float *out) {
    for (int r = 0; r < rows; r++) {
        const float *row = x + (size_t)r * ldx;
        float *o = out + (size_t)r * n;
        __m256 acc = _mm256_setzero_ps();
        int i = 0;
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_loadu_ps(row + i);
            acc = _mm256_fmadd_ps(v, v, acc);
        }
        float lanes[8];
        _mm256_storeu_ps(lanes, acc);
        float sum = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
        for (; i < n; i++)
            sum = __builtin_fmaf(row[i], row[i], sum);
        float scale = 1.0f / __builtin_sqrtf(sum / (float)n + eps);
        __m256 s = _mm256_set1_ps(scale);
        for (i = 0; i + 8 <= n; i += 8)
            _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(_mm256_loadu_ps(row + i), s)));
        for (; i < n; i++)
            o[i] = w[i] * (row[i] * scale);
    }
}

/* Rotary embeddings of one layer's q and k heads, and the new keys and values written into its cache, as
 * the lean forward's torch ops do it: t * cos + rotate_half(t) * sin with sin's first half negated, each
 * product and the sum rounded on its own (the empty asm keeps the compiler from fusing them into an FMA),
 * so the bits are those ops' bits. qkv: rows of ld floats, q heads then k heads then v heads of hd; cos,
 * sin: a row of hd per query row, ldcs apart (0: one row for all); q: [rows][heads][hd] out; keys
 * [kv_heads][hd][cap], values [kv_heads][cap][hd]: rows 0..n-1 go to slots past..past+n-1 (a row past n
 * is one token's second copy, which writes nothing). */
void rowrope(const float *qkv, int rows, int n, int ld, int heads, int kv_heads, int hd, const float *cos,
             const float *sin, int ldcs, float *q, float *keys, float *values, long long cap, long long past) {
    int half = hd / 2;
    for (int r = 0; r < rows; r++) {
        const float *row = qkv + (size_t)r * ld, *c = cos + (size_t)r * ldcs, *s = sin + (size_t)r * ldcs;
        for (int h = 0; h < heads + (r < n ? kv_heads : 0); h++) {
            const float *x = row + (size_t)h * hd;
            float *out = h < heads ? q + ((size_t)r * heads + h) * hd : NULL;
            float *key = h < heads ? NULL : keys + (size_t)(h - heads) * hd * cap + past + r;
            for (int d = 0; d < hd; d++) {
                float a = x[d] * c[d], b = x[d < half ? d + half : d - half] * s[d];
                __asm__("" : "+x"(a), "+x"(b));
                if (out)
                    out[d] = a + b;
                else
                    key[(size_t)d * cap] = a + b;
            }
        }
        if (r < n)
            for (int h = 0; h < kv_heads; h++)
                memcpy(values + ((size_t)h * cap + past + r) * hd, row + (size_t)(heads + kv_heads + h) * hd,
                       hd * sizeof(float));
    }
}
