/* An EAGLE head's greedy drafting steps in one native call, built with native.c by specui/native.py.
 *
 * After the head has read the target's fresh states (`EagleDrafter._feed_pending`), a greedy round drafts up
 * to K tokens one step at a time: the head's logits over its vocabulary, their argmax, and, unless the chain
 * stops (K reached, or the draft no longer confident), one more pass of the head's decoder layer on the
 * token just drafted. In Python each step is some thirty calls (products, norms, the rotary step, attention,
 * the sampling helpers), and on a CPU their per-call costs added up to a third of the drafting time. Here a
 * step is the same kernels called from C: the products are `rowgemm` on the same packed panels (split over
 * the product threads where Python splits them), the norms `rowrmsnorm`, the rotary step and the cache
 * writes `rowrope`, attention `rowattend`; the SiLU and the softmax round on their own, so a step equals the
 * torch ops to float rounding (the tests compare the drafts). Drafting never changes the output: the target
 * verifies whatever is proposed.
 */
#include <math.h>

#include "native.h"

void rowgemm(const float *x, int m, int ldx, const void *w, int n, int k, const float *bias, float *y, int ldy,
             int p0, int p1, int kind);
int rowgemm_split(const float *x, int m, int ldx, const void *w, int n, int k, const float *bias, float *y,
                  int ldy, int p0, int p1, int kind, int threads);
void rowargmax(const float *x, int rows, int n, int ld, long long *out);
void rowrmsnorm(const float *x, int rows, int n, int ldx, const float *w, float eps, float *out);
void rowrope(const float *qkv, int rows, int n, int ld, int heads, int kv_heads, int hd, const float *cos,
             const float *sin, int ldcs, float *q, float *keys, float *values, long long cap, long long past);
int rowattend(const float *q, int rows, int ldq, int heads, int kv_heads, int hd, const float *keys,
              const float *values, long long cap, const int *prefix, const int *extra, const int *slots,
              float scale, float *out, float *scratch, int stride);

typedef struct { /* one packed matrix (`native.Product`): y[n] = x[k] W^T (+ bias) */
    const void *w;
    const float *bias;
    int n, k, count, kind, threads; /* count: panels; threads: 1, or the product threads to split over */
} matrix_t;

typedef struct { /* an EAGLE head (specui/heads/eagle.py) and where its step writes */
    matrix_t fuse, fc, qkv, o, gate_up, down, out;
    const float *norm1, *norm2, *norm; /* the layer's two norms and the one before the output */
    const float *embed;                /* the target's input embeddings [vocabulary][width] */
    const long long *ids;              /* the head's vocabulary: the target's id of each of its out.n tokens */
    const float *cos, *sin;            /* rotary tables [positions][hd], sin's first half negated */
    float *keys, *values;              /* the head's cache: [heads][hd][cap], [heads][cap][hd] */
    long long cap;
    float eps, eps_out, scale;
    int width, heads, hd, ffn;
} head_t;

static void product(const matrix_t *m, const float *x, int rows, float *y) {
    if (m->threads > 1)
        rowgemm_split(x, rows, m->k, m->w, m->n, m->k, m->bias, y, m->n, 0, m->count, m->kind, m->threads);
    else
        rowgemm(x, rows, m->k, m->w, m->n, m->k, m->bias, y, m->n, 0, m->count, m->kind);
}

/* out = softmax(x) over n floats: e^(x - max) / their sum. Returns the largest probability. */
static float softmax(const float *x, int n, float *out) {
    vec best = vset1(-INFINITY);
    int i = 0;
    for (; i + NR <= n; i += NR) best = vmax(best, vload(x + i));
    float m = vhmax(best), sum = 0;
    for (int j = i; j < n; j++) m = x[j] > m ? x[j] : m;
    float lanes[NR];
    vec acc = vzero();
    for (i = 0; i + NR <= n; i += NR) {
        vec e = vexp(vsub(vload(x + i), vset1(m)));
        vstore(out + i, e);
        acc = vadd(acc, e);
    }
    vstore(lanes, acc);
    for (int j = 0; j < NR; j++) sum += lanes[j];
    for (; i < n; i++) sum += out[i] = expf(x[i] - m);
    const float inverse = 1.0f / sum;
    for (i = 0; i < n; i++) out[i] *= inverse;
    return inverse; /* the maximum's e^0 = 1, over the sum */
}

/* a = fc([u, embed(token)]) for `rows` rows of u (width floats each) and their tokens' target ids. */
static void inputs(const head_t *e, const float *u, const long long *ids, int rows, float *x, float *a) {
    const int w = e->width;
    for (int r = 0; r < rows; r++) {
        memcpy(x + (size_t)r * 2 * w, u + (size_t)r * w, sizeof(float) * w);
        memcpy(x + (size_t)r * 2 * w + w, e->embed + (size_t)ids[r] * w, sizeof(float) * w);
    }
    product(&e->fc, x, rows, a);
}

/* The head's decoder layer on rows a (width floats each) at cache slots pos.., causally: the rotary step
 * writes their keys and values there, row r attends to slots 0..pos + r. h = a + o(attention) + MLP, as
 * HeadLayer does. Returns 1 when attention ran out of memory. */
static int layer(const head_t *e, const float *a, int rows, long long pos, float *h, float *work) {
    const int w = e->width;
    const size_t m = rows;
    float *y = work, *qkv = y + m * w, *q = qkv + 3 * m * w, *att = q + m * w, *gu = att + m * w;
    float *scratch = gu + 2 * m * e->ffn;
    int *seen = (int *)malloc(sizeof(int) * m);
    if (!seen) return 1;
    for (int r = 0; r < rows; r++) seen[r] = (int)pos + r + 1;
    rowrmsnorm(a, rows, w, w, e->norm1, e->eps, y);
    product(&e->qkv, y, rows, qkv);
    rowrope(qkv, rows, rows, 3 * w, e->heads, e->heads, e->hd, e->cos + pos * e->hd, e->sin + pos * e->hd, e->hd,
            q, e->keys, e->values, e->cap, pos);
    const int stride = (seen[rows - 1] + 15) / 16 * 16 + 48;
    const int failed = rowattend(q, rows, w, e->heads, e->heads, e->hd, e->keys, e->values, e->cap, seen, NULL,
                                 NULL, e->scale, att, scratch, stride);
    free(seen);
    if (failed) return 1;
    product(&e->o, att, rows, h);
    for (size_t i = 0; i < m * w; i++) h[i] += a[i];
    rowrmsnorm(h, rows, w, w, e->norm2, e->eps, y);
    product(&e->gate_up, y, rows, gu);
    for (int r = 0; r < rows; r++) {
        float *g = gu + (size_t)r * 2 * e->ffn, *act = gu + (size_t)r * e->ffn;
        for (int i = 0; i < e->ffn; i++) {
            const float gate = g[i], up = g[e->ffn + i];
            act[i] = gate / (1.0f + expf(-gate)) * up; /* row r's activations overwrite what row r has read */
        }
    }
    product(&e->down, gu, rows, att);
    for (size_t i = 0; i < m * w; i++) h[i] += att[i];
    return 0;
}

/* One greedy round of drafting. First the head reads the target's states not yet fed: `rows` rows of the
 * fused layers (fuse.k floats each) with the tokens that follow them, at cache slots pos..pos + rows - 1
 * (`EagleDrafter._feed_pending`). Then, from the last row's output, up to k tokens: into index (ids of the
 * head's vocabulary) and probs (each step's softmax over it, out.n floats a row). While stop_below > 0 the
 * chain stops once the product of the steps' top probabilities falls below it (`Confidence`). Drafting step
 * i > 0 writes cache slot pos + rows + i - 1. Returns how many tokens were drafted, or -1 when memory ran out. */
int head_draft(const head_t *e, const float *states, const long long *follow, int rows, long long pos, int k,
               float stop_below, long long *index, float *probs) {
    const int w = e->width, n = e->out.n, ffn = e->ffn;
    const size_t m = rows, stride = (size_t)((pos + rows + k + 15) / 16 * 16 + 48);
    /* fused, [u, embed], a, h, logits, then the layer's y, qkv, q, attention, gate and up, attention's scratch */
    float *buffer = malloc(sizeof(float) * (m * (11 * w + 2 * ffn) + n + (m + 24) * stride));
    if (!buffer) return -1;
    float *fused = buffer, *x = fused + m * w, *a = x + 2 * m * w, *h = a + m * w, *logits = h + m * w;
    float *work = logits + n;
    int drafted = -1;
    product(&e->fuse, states, rows, fused);
    inputs(e, fused, follow, rows, x, a);
    if (layer(e, a, rows, pos, h, work)) goto done;
    float *last = h + (m - 1) * w, chance = 1.0f;
    pos += rows;
    for (int i = 0; i < k; i++) {
        rowrmsnorm(last, 1, w, w, e->norm, e->eps_out, x);
        product(&e->out, x, 1, logits);
        rowargmax(logits, 1, n, n, index + i);
        const float top = softmax(logits, n, probs + (size_t)i * n);
        drafted = i + 1;
        if (drafted == k || (stop_below > 0 && !((chance *= top) >= stop_below))) break;
        inputs(e, last, &e->ids[index[i]], 1, x, a);
        if (layer(e, a, 1, pos + i, h, work)) {
            drafted = -1;
            break;
        }
        last = h;
    }
done:
    free(buffer);
    return drafted;
}
