/* specui's native kernels for the ops around a layer's products, built and loaded with native.c by
 * specui/native.py (one shared library):
 * - rowrmsnorm: RMSNorm of rows, one summation order in every build (batch-invariant);
 * - rowrope: rotary embeddings of q and k, the new keys and values written into the cache, with the bits of
 *   the torch ops they replace;
 * - rowswiglu: the MLP's SiLU(gate) * up, element by element;
 * - rowargmax: torch.argmax over rows of logits, vectorised;
 * - rownucleus: top-k and top-p on a row of scores, as specui.sampling cuts them (the native rounds' sampling);
 * - rowsort: rows of floats sorted ascending (specui.sampling's top-p);
 * - rowdraw: one token drawn from a row of probabilities by a given uniform (specui.sampling.sample's draw);
 * - blockfind: a weight's GGUF blocks (Q4_1 or Q8_0) from its float32 values, checked exactly (specui/blocks.py).
 * rowrmsnorm and rowrope use AVX2 (and FMA) intrinsics alone, rowswiglu and rowargmax native.h's vector ops,
 * which round lane by lane alike in both builds; so the AVX2 and AVX-512 builds compute them alike.
 */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

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

/* One head's rotary step: out[d * step] = x[d] * c[d] + rotate_half(x)[d] * s[d], each product and the sum
 * rounded on its own (the empty asm keeps the compiler from fusing them into an FMA), eight lanes at a time
 * where half a head is whole vectors (the same ops lane by lane), else one by one. */
static void rope_head(const float *x, const float *c, const float *s, int hd, float *out, size_t step) {
    const int half = hd / 2;
    if (half % 8 == 0 && step == 1) {
        for (int d = 0; d < hd; d += 8) {
            __m256 a = _mm256_mul_ps(_mm256_loadu_ps(x + d), _mm256_loadu_ps(c + d));
            __m256 b = _mm256_mul_ps(_mm256_loadu_ps(x + (d < half ? d + half : d - half)), _mm256_loadu_ps(s + d));
            __asm__("" : "+x"(a), "+x"(b));
            _mm256_storeu_ps(out + d, _mm256_add_ps(a, b));
        }
        return;
    }
    for (int d = 0; d < hd; d++) {
        float a = x[d] * c[d], b = x[d < half ? d + half : d - half] * s[d];
        __asm__("" : "+x"(a), "+x"(b));
        out[(size_t)d * step] = a + b;
    }
}

#define ROPE_STAGE 8  /* from this many new keys on, they are rotated into rows first, then written d by d */

/* Rotary embeddings of one layer's q and k heads, and the new keys and values written into its cache, as
 * the lean forward's torch ops do it: t * cos + rotate_half(t) * sin with sin's first half negated (`rope_head`),
 * so the bits are those ops' bits. qkv: rows of ld floats, q heads then k heads then v heads of hd; cos,
 * sin: a row of hd per query row, ldcs apart (0: one row for all); q: [rows][heads][hd] out; keys
 * [kv_heads][hd][cap], values [kv_heads][cap][hd]: rows 0..n-1 go to slots past..past+n-1 (a row past n
 * is one token's second copy, which writes nothing). A block of keys (a prompt, a verify) is rotated into
 * rows of scratch and then written slot after slot along each d: written a key at a time, its hd floats fall
 * cap floats apart, on a few cache sets, and a prompt's writes took three quarters of this call. */
void rowrope(const float *qkv, int rows, int n, int ld, int heads, int kv_heads, int hd, const float *cos,
             const float *sin, int ldcs, float *q, float *keys, float *values, long long cap, long long past) {
    /* [n][kv_heads][hd]; NULL for few keys, or where there is no memory for it: each key written where it goes */
    float *rotated = n >= ROPE_STAGE ? malloc(sizeof(float) * (size_t)n * kv_heads * hd) : NULL;
    for (int r = 0; r < rows; r++) {
        const float *row = qkv + (size_t)r * ld, *c = cos + (size_t)r * ldcs, *s = sin + (size_t)r * ldcs;
        for (int h = 0; h < heads; h++)
            rope_head(row + (size_t)h * hd, c, s, hd, q + ((size_t)r * heads + h) * hd, 1);
        if (r >= n)
            continue;
        for (int h = 0; h < kv_heads; h++) {
            const float *x = row + (size_t)(heads + h) * hd;
            if (rotated)
                rope_head(x, c, s, hd, rotated + ((size_t)r * kv_heads + h) * hd, 1);
            else
                rope_head(x, c, s, hd, keys + (size_t)h * hd * cap + past + r, (size_t)cap);
            memcpy(values + ((size_t)h * cap + past + r) * hd, row + (size_t)(heads + kv_heads + h) * hd,
                   hd * sizeof(float));
        }
    }
    if (!rotated)
        return;
    for (int h = 0; h < kv_heads; h++)
        for (int d = 0; d < hd; d++) {
            float *key = keys + ((size_t)h * hd + d) * cap + past;
            const float *from = rotated + (size_t)h * hd + d;
            for (int r = 0; r < n; r++) key[r] = from[(size_t)r * kv_heads * hd];
        }
    free(rotated);
}

/* SiLU(gate) * up of a SwiGLU MLP for rows of gu = [gate | up] (2 * ffn floats each) into out (ffn floats a row;
 * out may be gu itself: row r is written over what rows 0..r have read). SiLU(g) = g * sigmoid(g), sigmoid from
 * e = e^-|g| (native.h's vexp, never overflowing): 1 / (1 + e) for g >= 0, e / (1 + e) below. Elementwise, so a
 * row's bits depend on nothing but the row; torch's F.silu rounds otherwise (equal to float32 rounding). The lean
 * forward's Python steps call this too, so its every path computes the same bits. */
static inline vec swiglu(vec g, vec up) {
    const vec e = vexp(vsub(vzero(), vmax(g, vsub(vzero(), g)))), one = vset1(1.0f);
#if NR == 16
    const vec top = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(g, vzero(), _CMP_GE_OQ), e, one);
#else
    const vec top = _mm256_blendv_ps(e, one, _mm256_cmp_ps(g, vzero(), _CMP_GE_OQ));
#endif
    return vmul(vmul(g, vdiv(top, vadd(one, e))), up);
}

void rowswiglu(const float *gu, int rows, int ffn, float *out) {
    for (int r = 0; r < rows; r++) {
        const float *g = gu + (size_t)r * 2 * ffn, *u = g + ffn;
        float *o = out + (size_t)r * ffn;
        int i = 0;
        for (; i + NR <= ffn; i += NR) vstore(o + i, swiglu(vload(g + i), vload(u + i)));
        if (i < ffn) { /* the tail through one padded vector: the same lanes' ops */
            float a[NR] = {0}, b[NR] = {0};
            memcpy(a, g + i, sizeof(float) * (ffn - i));
            memcpy(b, u + i, sizeof(float) * (ffn - i));
            vstore(a, swiglu(vload(a), vload(b)));
            memcpy(o + i, a, sizeof(float) * (ffn - i));
        }
    }
}

/* out[r] = torch.argmax(x[r]) for float32 rows of n, ld apart: the first index of the maximum, or the
 * first NaN's index where there is one (torch counts NaN as the largest value). torch's own CPU argmax
 * does not vectorise this reduction; two vector passes (maximum and NaN check over four accumulators, then
 * the first lane equal to it) take a tenth of its time over a vocabulary. The maximum is exact in any order
 * (-0 and +0 compare equal, as in torch's comparisons), so the accumulators change no index. */
/* transformers' repetition penalty (`specui.sampling.penalize`) on logits x[n] whose rows are the ids `ids` (NULL: the
 * row's index): a row whose id is marked in `seen` is divided by the penalty where positive, multiplied where not. */
void rowpenalize(float *x, int n, const long long *ids, const unsigned char *seen, float penalty) {
    for (int j = 0; j < n; j++)
        if (seen[ids ? ids[j] : j]) x[j] = x[j] < 0 ? x[j] * penalty : x[j] / penalty;
}

void rowargmax(const float *x, int rows, int n, int ld, long long *out) {
    for (int r = 0; r < rows; r++) {
        const float *row = x + (size_t)r * ld;
        vec b0 = vset1(-__builtin_inff()), b1 = b0, b2 = b0, b3 = b0;
        int i = 0, nan = 0;
        for (; i + 4 * NR <= n; i += 4 * NR) {
            vec v0 = vload(row + i), v1 = vload(row + i + NR), v2 = vload(row + i + 2 * NR), v3 = vload(row + i + 3 * NR);
            nan |= vnan(v0) | vnan(v1) | vnan(v2) | vnan(v3);
            b0 = vmax(b0, v0), b1 = vmax(b1, v1), b2 = vmax(b2, v2), b3 = vmax(b3, v3);
        }
        for (; i + NR <= n; i += NR) {
            vec v = vload(row + i);
            nan |= vnan(v);
            b0 = vmax(b0, v);
        }
        float m = vhmax(vmax(vmax(b0, b1), vmax(b2, b3)));
        for (; i < n; i++) {
            nan |= row[i] != row[i];
            if (row[i] > m) m = row[i];
        }
        long long found = 0;
        if (nan) {
            while (row[found] == row[found]) found++;
        } else {
            vec mv = vset1(m);
            int j = 0;
            while (j + NR <= n && !veqmask(vload(row + j), mv)) j += NR;
            found = j;
            while (row[found] != m) found++;  /* within the vector that holds it, or the tail */
        }
        out[r] = found;
    }
}

/* Floats as unsigned keys in the same order (-inf first), and back. */
static unsigned key_of(float f) {
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u ^ (u >> 31 ? 0xFFFFFFFFu : 0x80000000u);
}

static float float_of(unsigned u) {
    u ^= u >> 31 ? 0x80000000u : 0xFFFFFFFFu;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The keys of x's n floats, sorted ascending (a radix sort, 11 bits a pass) into a; b: n more, clobbered. */
static void sort_keys(const float *x, int n, unsigned *a, unsigned *b) {
    for (int j = 0; j < n; j++) b[j] = key_of(x[j]);
    for (int shift = 0; shift < 33; shift += 11) { /* three passes: b -> a -> b -> a */
        unsigned *from = shift == 11 ? a : b, *to = shift == 11 ? b : a;
        int start[2049] = {0};
        for (int j = 0; j < n; j++) start[((from[j] >> shift) & 2047) + 1]++;
        for (int r = 0; r < 2048; r++) start[r + 1] += start[r];
        for (int j = 0; j < n; j++) to[start[(from[j] >> shift) & 2047]++] = from[j];
    }
}

/* Each of `rows` rows of n floats (ld apart) sorted ascending into out (n floats a row): np.sort's values (-inf first;
 * -0 and +0 in either order, as equal values may be). specui.sampling's top-p reads them. Returns 1 when a row holds
 * a NaN (np.sort puts NaN last; its bits put a negative one first): out is then not np.sort's. scratch: 2n unsigned. */
int rowsort(const float *x, int rows, int n, int ld, float *out, unsigned *scratch) {
    const unsigned below = key_of(-INFINITY), above = key_of(INFINITY);
    for (int r = 0; r < rows; r++) {
        sort_keys(x + (size_t)r * ld, n, scratch, scratch + n);
        if (n && (scratch[0] < below || scratch[n - 1] > above)) return 1;
        float *o = out + (size_t)r * n;
        for (int j = 0; j < n; j++) o[j] = float_of(scratch[j]);
    }
    return 0;
}

/* One token drawn from n probabilities p by u in [0, 1), as specui.sampling.sample draws it: the running sum in double,
 * token by token (torch's cumsum of p.double()), and the first token whose sum exceeds u times the total; where u
 * times the total rounds up to the total, the last token of nonzero probability. A zero adds nothing to the sum, so
 * zeros are skipped (most of a top-p row): the same sums at every other token, the same token. Returns -1 where the
 * total is not positive and finite (sample raises then). scratch: n ints (the nonzero tokens, in order). */
long rowdraw(const float *p, int n, double u, int *scratch) {
    double total = 0;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (p[i] != 0.0f) {
            total += (double)p[i];
            scratch[m++] = i;
        }
    if (!(total > 0) || !(total < INFINITY)) return -1;
    const double target = u * total;
    double running = 0;
    for (int j = 0; j < m; j++)
        if ((running += (double)p[scratch[j]]) > target) return scratch[j];
    return scratch[m - 1];
}

/* top-k and top-p on n scores in place, as `specui.sampling.logits_to_probs` applies them: scores below the k-th
 * largest become -inf (ties with it kept); then, sorted ascending, the softmax's running sum (each probability
 * rounded to float, summed in double, the sum rounded to float: torch's cumsum) cuts the scores whose sum is at
 * most `floor`, never the largest, and every score below the smallest kept one becomes -inf
 * (`sampling._outside_nucleus`). The sums round as this code rounds (expf, its own order), not as torch's vector
 * code does, so a cut within rounding of `floor` may fall one token apart from the Python steps'; the draft's q is
 * whatever this leaves, drawn from as reported, so verification stays exact. scratch: 2n unsigned (the sorted
 * keys, then the sort's spare room, which holds each sorted score's e^(s - max) as float bits). */
void rownucleus(float *x, int n, int top_k, int nucleus, float floor, unsigned *scratch) {
    unsigned *sorted = scratch, *spare = scratch + n;
    const int keep_k = top_k > 0 && top_k < n;
    if (!keep_k && !nucleus) return;
    sort_keys(x, n, sorted, spare);
    if (keep_k) { /* the scores it cuts are a prefix of the sorted ones: now -inf there too, still in order */
        const float kth = float_of(sorted[n - top_k]);
        for (int j = 0; j < n; j++)
            if (x[j] < kth) x[j] = -INFINITY;
        for (int j = 0; float_of(sorted[j]) < kth; j++) sorted[j] = key_of(-INFINITY);
    }
    if (!nucleus) return;
    const float top = float_of(sorted[n - 1]);
    float sum = 0;
    for (int j = 0; j < n; j++) {
        const float e = expf(float_of(sorted[j]) - top);
        memcpy(spare + j, &e, sizeof e);
        sum += e;
    }
    double running = 0;
    int cut = 0;
    for (; cut < n - 1; cut++) {
        float e;
        memcpy(&e, spare + cut, sizeof e);
        if ((float)(running += e / sum) > floor) break;
    }
    const float smallest = float_of(sorted[cut]);
    for (int j = 0; j < n; j++)
        if (x[j] < smallest) x[j] = -INFINITY;
}

/* One block of QBLOCK float32 values v as GGUF's Q4_1 (q4: w = d q + m, q in 0..15) or Q8_0 (w = d q, q in
 * -128..127), d and m float16 values: tries d = the float16 nearest the span over the top q and its neighbours
 * up to two steps away; q = round((w - m) / d) (torch.round's ties to even). Returns 1 with q, d, m when every
 * value rebuilds exactly (d q is exact in float32, so fmaf(d, q, m) is the one rounding of d q + m), else 0. */
static int fit_block(const float *v, int q4, signed char *q, float *d, float *m) {
    float low = v[0], high = v[0], top = 0.0f;
    for (int i = 0; i < QBLOCK; i++) {
        if (!__builtin_isfinite(v[i])) return 0;
        low = v[i] < low ? v[i] : low;
        high = v[i] > high ? v[i] : high;
        top = __builtin_fabsf(v[i]) > top ? __builtin_fabsf(v[i]) : top;
    }
    const float offset = q4 ? low : 0.0f;
    if (q4 && _cvtsh_ss(_cvtss_sh(low, _MM_FROUND_TO_NEAREST_INT)) != low) return 0;
    const short guess = (short)_cvtss_sh(q4 ? (high - low) / 15.0f : top / 127.0f, _MM_FROUND_TO_NEAREST_INT);
    static const int steps[5] = {0, 1, -1, 2, -2};
    for (int s = 0; s < 5; s++) {
        float scale = _cvtsh_ss((unsigned short)(short)(guess + steps[s]));
        if (!__builtin_isfinite(scale) || !(scale >= 0.0f)) scale = 0.0f;
        const float divisor = scale > 0.0f ? scale : 1.0f;
        int good = 1;
        for (int i = 0; i < QBLOCK && good; i++) {
            float r = __builtin_nearbyintf((v[i] - offset) / divisor);
            r = q4 ? (r < 0.0f ? 0.0f : r > 15.0f ? 15.0f : r) : (r < -128.0f ? -128.0f : r > 127.0f ? 127.0f : r);
            q[i] = (signed char)(int)r;
            good = __builtin_fmaf(scale, r, offset) == v[i];
        }
        if (good) {
            *d = scale;
            *m = offset;
            return 1;
        }
    }
    return 0;
}

/* w [n][k] (k a multiple of QBLOCK) as blocks of `kind` (Q4 or Q8): q [n][k] (int8; Q4's in 0..15), d and m
 * [n][k / QBLOCK]. Returns 1 when every block fits (`fit_block`), 0 at the first that does not. */
int blockfind(const float *w, long long n, int k, int kind, signed char *q, float *d, float *m) {
    const long long blocks = n * (k / QBLOCK);
    for (long long b = 0; b < blocks; b++)
        if (!fit_block(w + b * QBLOCK, kind == Q4, q + b * QBLOCK, d + b, m + b)) return 0;
    return 1;
}
