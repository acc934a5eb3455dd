/* The drafters' rounds in one native call each, built with native.c by specui/native.py:
 * - head_draft: an EAGLE head's round: it reads the target's states of the tokens just verified, then drafts;
 * - decoder_draft: a draft model's round (a Llama-style decoder run by specui.lean): the context's tokens it has
 *   not read, then its chain;
 * - stack_layers: a range of such a decoder's layers on a block of rows, which is how the lean forward runs a
 *   target's (and a draft's) layers on a CPU: one call instead of some four hundred (a token tree's rows too);
 * - head_tree_step: one depth of an EAGLE head's token tree (its rows' states and logits; Python picks the nodes);
 * - exit_draft: an early-exit head's round: the target's first layers on the target's own cache, then the head.
 *
 * A chain drafts one token a step: the logits over the drafter's vocabulary, their argmax (greedy) or a draw from
 * their softmax at the run's temperature (by a uniform drawn in Python beforehand), and, unless the chain stops
 * (K reached, or the draft no longer confident), one more pass of the drafter's layers on the token just
 * drafted. In Python each step is some thirty calls (products, norms, the rotary step, attention,
 * the sampling helpers), and on a CPU their per-call costs were a third of the drafting time. Here a step is
 * the same kernels called from C: the products are `rowgemm` on the same packed panels (split over the product
 * threads where Python splits them), the norms `rowrmsnorm`, the rotary step and the cache writes `rowrope`,
 * attention `rowattend`, the SiLU `rowswiglu` (the lean forward's own); the softmax rounds on its own, and an EAGLE
 * head's Python layer takes torch's SiLU, so a step equals the Python ops to float rounding (the tests compare the
 * drafts). Drafting never changes the output: the target verifies whatever is proposed.
 */
#include <math.h>
#include <string.h>

#include "native.h"

void rowgemm(const float *x, int m, int ldx, const void *w, int n, int k, const float *bias, float *y, int ldy,
             int p0, int p1, int kind);
int rowgemm_split(const float *x, int m, int ldx, const void *w, int n, int k, const float *bias, float *y,
                  int ldy, int p0, int p1, int kind, int threads);
void rowargmax(const float *x, int rows, int n, int ld, long long *out);
void rowpenalize(float *x, int n, const long long *ids, const unsigned char *seen, float penalty);
void rownucleus(float *x, int n, int top_k, int nucleus, float floor, unsigned *scratch);
void rowrmsnorm(const float *x, int rows, int n, int ldx, const float *w, float eps, float *out);
void rowrope(const float *qkv, int rows, int n, int ld, int heads, int kv_heads, int hd, const float *cos,
             const float *sin, int ldcs, float *q, float *keys, float *values, long long cap, long long past);
void rowswiglu(const float *gu, int rows, int ffn, float *out);
int rowattend(const float *q, int rows, int ldq, int heads, int kv_heads, int hd, const float *keys,
              const float *values, long long cap, const int *prefix, const int *extra, const int *slots,
              float scale, float *out, float *scratch, int stride);

typedef struct { /* one packed matrix (`native.Product`): y[n] = x[k] W^T (+ bias) */
    const void *w;
    const float *bias;
    int n, k, count, kind, threads; /* count: panels; threads: 1, or the product threads to split over */
    const void *narrow;             /* NULL, or the same W as GGUF blocks (kind narrow_kind), read for few rows */
    int narrow_kind, few;           /* products of at most `few` rows read `narrow`: the same bits */
} matrix_t;

typedef struct { /* one pre-norm decoder layer with its KV cache (rotary attention, SwiGLU MLP) */
    matrix_t qkv, o, gate_up, down;
    const float *norm1, *norm2;
    float *keys, *values; /* [kv_heads][hd][cap], [kv_heads][cap][hd] */
    long long cap;
    float eps, scale;
    int heads, kv_heads, hd, ffn;
} layer_t;

typedef struct { /* what a chain reads besides its layers */
    matrix_t out;              /* the output rows over the drafter's vocabulary */
    const float *norm;         /* the norm before them */
    const float *embed;        /* input embeddings [rows][width] */
    const long long *ids;      /* the target's id of each output row (NULL: the row's own index) */
    const float *cos, *sin;    /* rotary tables [positions][hd], sin's first half negated */
    float eps;
    int width, embed_rows;     /* an id past the embeddings reads their last row, as `ModelDrafter._visible` */
} chain_t;

typedef struct { /* how a chain picks its tokens */
    float temperature;      /* 0: greedy */
    float stop_below;       /* the confidence stop, 0 for none */
    const double *uniforms; /* sampled: one uniform in [0, 1) a step */
    int top_k, nucleus;     /* sampled: top-k (0: off); top-p (0: off), cutting running sums at most `floor` */
    float floor;            /* 1 - top_p, rounded to float as torch rounds it for its comparison */
    float penalty; unsigned char *seen; /* repetition penalty on the ids seen marks (NULL: none); drafts mark theirs */
} sampler_t;

typedef struct { /* an EAGLE head (specui/heads/eagle.py) */
    matrix_t fuse, fc;
    layer_t layer;
    chain_t chain;
} head_t;

typedef struct { /* a draft model's decoder (specui/lean.py's DecoderStack) */
    const layer_t *layers;
    int count;
    chain_t chain;
} decoder_t;

typedef struct { /* an early-exit head (specui/heads/early_exit.py) after its target's layer stop - 1 */
    matrix_t block, gate_up, down; /* the residual block's product (its bias inside); gate_up.n 0: no MLP */
    const float *norm, *mlp_norm;  /* the head's own RMS norm weights, its MLP's */
    float eps;
    int stop;
    chain_t chain; /* the head's output rows and ids after the target's final norm */
} exit_t;

static void product(const matrix_t *m, const float *x, int rows, float *y) {
    const int few = m->narrow && rows <= m->few;
    const void *w = few ? m->narrow : m->w;
    const int kind = few ? m->narrow_kind : m->kind;
    if (m->threads > 1)
        rowgemm_split(x, rows, m->k, w, m->n, m->k, m->bias, y, m->n, 0, m->count, kind, m->threads);
    else
        rowgemm(x, rows, m->k, w, m->n, m->k, m->bias, y, m->n, 0, m->count, kind);
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

typedef struct { /* token-tree rows (`stack_layers`): their own positions and the keys each row sees */
    const float *cos, *sin;          /* each row's rotary entries [rows][hd], gathered at its position */
    const int *prefix, *extra, *slots; /* `rowattend`'s: keys from slot 0, then extra ones at `slots` */
} tree_t;

/* A decoder layer on rows x (width floats each) at cache slots pos.., causally, in place: the rotary step writes
 * their keys and values there, row r attends to slots 0..pos + r; x += o(attention), then x += MLP. With a tree
 * (else NULL) row r takes its position's rotary entries and attends to the keys the tree names (each row's bits
 * are the chain's: the same kernels over the same sequence of keys). Returns 1 when attention ran out of memory.
 * work: `layer_work` floats (the products' outputs, attention's scratch, then how many keys each row sees). */
static int layer(const layer_t *l, const chain_t *c, float *x, int rows, long long pos, float *work,
                 const tree_t *t) {
    const int w = c->width, q_width = l->heads * l->hd, qkv_width = (l->heads + 2 * l->kv_heads) * l->hd;
    const size_t m = rows;
    float *y = work, *qkv = y + m * w, *q = qkv + m * qkv_width, *att = q + m * q_width, *out = att + m * q_width;
    float *gu = out + m * w, *scratch = gu + 2 * m * l->ffn;
    const int stride = ((int)pos + rows + 15) / 16 * 16 + 48; /* the last row sees the most keys */
    int *seen = (int *)(scratch + (size_t)(rows * (l->heads / l->kv_heads) + 24) * stride); /* int and float: 4 bytes */
    for (int r = 0; r < rows; r++) seen[r] = (int)pos + r + 1;
    rowrmsnorm(x, rows, w, w, l->norm1, l->eps, y);
    product(&l->qkv, y, rows, qkv);
    rowrope(qkv, rows, rows, qkv_width, l->heads, l->kv_heads, l->hd, t ? t->cos : c->cos + pos * l->hd,
            t ? t->sin : c->sin + pos * l->hd, l->hd, q, l->keys, l->values, l->cap, pos);
    if (rowattend(q, rows, q_width, l->heads, l->kv_heads, l->hd, l->keys, l->values, l->cap, t ? t->prefix : seen,
                  t ? t->extra : NULL, t ? t->slots : NULL, l->scale, att, scratch, stride))
        return 1;
    product(&l->o, att, rows, out);
    for (size_t i = 0; i < m * w; i++) x[i] += out[i];
    rowrmsnorm(x, rows, w, w, l->norm2, l->eps, y);
    product(&l->gate_up, y, rows, gu);
    rowswiglu(gu, rows, l->ffn, gu); /* row r's activations overwrite what rows 0..r have read */
    product(&l->down, gu, rows, out);
    for (size_t i = 0; i < m * w; i++) x[i] += out[i];
    return 0;
}

/* The floats `layer` needs for `rows` rows when no row sees more than `longest` keys, and at least what `pick`
 * needs (the chain's step shares the buffer between layers). */
static size_t layer_work(const layer_t *l, const chain_t *c, int rows, long long longest) {
    const size_t stride = (size_t)((longest + 15) / 16 * 16 + 48);
    const size_t need = (size_t)rows * ((size_t)(3 * l->heads + 2 * l->kv_heads) * l->hd + 2 * (size_t)c->width +
                                        2 * (size_t)l->ffn + 1) + (size_t)(rows * (l->heads / l->kv_heads) + 24) * stride;
    const size_t least = (size_t)c->width + 3 * (size_t)c->out.n; /* `pick`: normed, logits, `rownucleus`'s scratch */
    return need > least ? need : least;
}

/* The first of n probabilities whose running sum, in double, exceeds u times their total; the first to reach the
 * total when u times it rounds up to it (`specui.sampling.sample`, bit for bit given the same probabilities). */
static long long draw(const float *q, int n, double u) {
    double total = 0, sum = 0;
    for (int j = 0; j < n; j++) total += q[j];
    const double x = u * total;
    for (int j = 0; j < n; j++)
        if ((sum += q[j]) > x || sum >= total) return j;
    return n - 1;
}

/* Step i of a chain: the drafter's logits at the row h (width floats), any repetition penalty applied, the token into
 * index[i] and the distribution it came from into probs row i. Greedy (temperature 0): the argmax, its softmax
 * reported. Sampled: softmax(logits / temperature), top-k and top-p applied (`specui.sampling.logits_to_probs`;
 * `rownucleus`), the token drawn from it by uniforms[i]. Returns whether the chain goes on: not at step k, nor once the
 * product of the steps' top probabilities at temperature 1 (`chance`) falls below stop_below > 0 (`Confidence`). */
static int pick(const chain_t *c, const float *h, int i, int k, const sampler_t *s, float *chance, long long *index,
                float *probs, float *work) {
    const int n = c->out.n;
    float *normed = work, *logits = work + c->width, *row = probs + (size_t)i * n, top = 1.0f;
    rowrmsnorm(h, 1, c->width, c->width, c->norm, c->eps, normed);
    product(&c->out, normed, 1, logits);
    if (s->seen) rowpenalize(logits, n, c->ids, s->seen, s->penalty);
    if (s->temperature == 0) {
        rowargmax(logits, 1, n, n, index + i);
        top = softmax(logits, n, row);
    } else {
        if (s->stop_below > 0) top = softmax(logits, n, row); /* the confidence's, overwritten below */
        for (int j = 0; j < n; j++) logits[j] /= s->temperature; /* rounded as torch's scores / temperature */
        if (s->top_k > 0 || s->nucleus) rownucleus(logits, n, s->top_k, s->nucleus, s->floor, (unsigned *)(logits + n));
        softmax(logits, n, row);
        index[i] = draw(row, n, s->uniforms[i]);
    }
    if (s->seen) s->seen[c->ids ? c->ids[index[i]] : index[i]] = 1; /* the chain's next steps have seen it */
    return i + 1 < k && !(s->stop_below > 0 && !((*chance *= top) >= s->stop_below));
}

/* The embedding of a token id, clamped to the embeddings (as `ModelDrafter._visible`). */
static const float *embedding(const chain_t *c, long long id) {
    return c->embed + (size_t)(id < c->embed_rows ? id : c->embed_rows - 1) * c->width;
}

/* The target's id of a drafted row of the output. */
static long long drafted_id(const chain_t *c, long long index) { return c->ids ? c->ids[index] : index; }

/* An EAGLE head's round. First it reads the target's states not yet fed: `rows` rows of the fused layers
 * (fuse.k floats each) with the tokens that follow them, at cache slots pos..pos + rows - 1
 * (`EagleDrafter._feed_pending`): h = layer(fc([fuse(states), embed(token)])). Then, from the last row's h, up
 * to k tokens into index (rows of the head's vocabulary) and probs (each step's distribution, out.n floats a
 * row; `pick`), each next step on fc([h, embed(the token just drafted)]), which writes cache slot pos + rows + i - 1.
 * Returns how many tokens were drafted, or -1 when memory ran out. */
int head_draft(const head_t *e, const float *states, const long long *follow, int rows, long long pos, int k,
               const sampler_t *s, long long *index, float *probs) {
    const chain_t *c = &e->chain;
    const int w = c->width;
    const size_t m = rows;
    const size_t work_size = layer_work(&e->layer, c, rows, pos + rows + k);
    float *buffer = malloc(sizeof(float) * (m * 4 * w + work_size)); /* fused, [u, embed], then h, work */
    if (!buffer) return -1;
    float *fused = buffer, *x = fused + m * w, *h = x + 2 * m * w, *work = h + m * w, chance = 1.0f;
    int drafted = -1;
    product(&e->fuse, states, rows, fused);
    for (int r = 0; r < rows; r++) {
        memcpy(x + (size_t)r * 2 * w, fused + (size_t)r * w, sizeof(float) * w);
        memcpy(x + (size_t)r * 2 * w + w, embedding(c, follow[r]), sizeof(float) * w);
    }
    product(&e->fc, x, rows, h);
    if (layer(&e->layer, c, h, rows, pos, work, NULL)) goto done;
    const float *last = h + (m - 1) * w;
    for (int i = 0; i < k; i++) {
        drafted = i + 1;
        if (!pick(c, last, i, k, s, &chance, index, probs, work)) break;
        memcpy(x, last, sizeof(float) * w);
        memcpy(x + w, embedding(c, drafted_id(c, index[i])), sizeof(float) * w);
        product(&e->fc, x, 1, h);
        if (layer(&e->layer, c, h, 1, pos + rows + i, work, NULL)) {
            drafted = -1;
            break;
        }
        last = h;
    }
done:
    free(buffer);
    return drafted;
}

/* One step of an EAGLE head's token tree (`EagleDrafter.propose_tree`), rows at once. With fuse, the target's states
 * not yet fed (`rows` rows of fuse.k floats) and the tokens after them go into the head's cache at slots pos..,
 * causally, and logits gets the last row's logits; else inputs are the head's own states of the rows' parents (width
 * floats each) and tokens the rows' tokens, placed by the tree t (each row's rotary entries, the keys it sees) at
 * slots pos.., and logits gets every row's. h: each row's new state (width floats); logits: out.n floats a row.
 * The same products, norm and layer as `head_draft`. Returns 1 when memory ran out. */
int head_tree_step(const head_t *e, const float *inputs, const long long *tokens, int rows, long long pos, int fuse,
                   const tree_t *t, float *h, float *logits) {
    const chain_t *c = &e->chain;
    const int w = c->width;
    const size_t m = rows, work_size = layer_work(&e->layer, c, rows, pos + rows);
    float *buffer = malloc(sizeof(float) * (m * 3 * w + work_size)); /* fused, [u, embed], work */
    if (!buffer) return 1;
    float *fused = buffer, *x = fused + m * w, *work = x + 2 * m * w;
    if (fuse) product(&e->fuse, inputs, rows, fused);
    for (int r = 0; r < rows; r++) {
        memcpy(x + (size_t)r * 2 * w, (fuse ? fused : inputs) + (size_t)r * w, sizeof(float) * w);
        memcpy(x + (size_t)r * 2 * w + w, embedding(c, tokens[r]), sizeof(float) * w);
    }
    product(&e->fc, x, rows, h);
    int failed = layer(&e->layer, c, h, rows, pos, work, fuse ? NULL : t);
    if (!failed) {
        const int first = fuse ? rows - 1 : 0, count = fuse ? 1 : rows;
        rowrmsnorm(h + (size_t)first * w, count, w, w, c->norm, c->eps, work);
        product(&c->out, work, count, logits);
    }
    free(buffer);
    return failed;
}

/* A draft model's round: the context's tokens it has not read (`rows` ids, clamped to its embeddings) go
 * through its layers at cache slots pos..pos + rows - 1, then from its logits at the last of them up to k
 * tokens into index (rows of its output) and probs (`pick`), each next step running the decoder on the
 * token just drafted, which writes cache slot pos + rows + i - 1 of every layer. Returns how many tokens were
 * drafted, or -1 when memory ran out. */
int decoder_draft(const decoder_t *d, const long long *tokens, int rows, long long pos, int k, const sampler_t *s,
                  long long *index, float *probs) {
    const chain_t *c = &d->chain;
    const int w = c->width;
    const size_t m = rows;
    size_t work_size = 0;
    for (int j = 0; j < d->count; j++) {
        const size_t need = layer_work(&d->layers[j], c, rows, pos + rows + k);
        work_size = need > work_size ? need : work_size;
    }
    float *buffer = malloc(sizeof(float) * (m * w + work_size));
    if (!buffer) return -1;
    float *h = buffer, *work = h + m * w, chance = 1.0f;
    int drafted = -1, step_rows = rows;
    for (int r = 0; r < rows; r++) memcpy(h + (size_t)r * w, embedding(c, tokens[r]), sizeof(float) * w);
    for (int i = 0; i < k; i++) {
        for (int j = 0; j < d->count; j++)
            if (layer(&d->layers[j], c, h, step_rows, pos, work, NULL)) {
                drafted = -1;
                goto done;
            }
        drafted = i + 1;
        if (!pick(c, h + (size_t)(step_rows - 1) * w, i, k, s, &chance, index, probs, work)) break;
        pos += step_rows;
        step_rows = 1;
        memcpy(h, embedding(c, drafted_id(c, index[i])), sizeof(float) * w);
    }
done:
    free(buffer);
    return drafted;
}

/* Layers start..stop-1 of a decoder (a target's or a draft's, `specui.lean`'s DecoderStack) on `rows` rows x (the
 * chain's width floats each) at cache slots pos.., in place: the lean forward's layers in one native call, with the
 * bits of its Python steps (the same kernels, adds and `rowswiglu`); t: a token tree's rows (NULL: a chain's).
 * Returns 1 when memory ran out. */
int stack_layers(const decoder_t *d, int start, int stop, float *x, int rows, long long pos, const tree_t *t) {
    size_t work_size = 0;
    for (int j = start; j < stop; j++) {
        const size_t need = layer_work(&d->layers[j], &d->chain, rows, pos + rows);
        work_size = need > work_size ? need : work_size;
    }
    float *work = malloc(sizeof(float) * (work_size ? work_size : 1));
    if (!work) return 1;
    int failed = 0;
    for (int j = start; j < stop && !failed; j++) failed = layer(&d->layers[j], &d->chain, x, rows, pos, work, t);
    free(work);
    return failed;
}

/* An early-exit head's round on its target's own cache (`EarlyExitDrafter.propose`): `token` (cur) at cache slot pos,
 * then each drafted token but the last, runs through the target's layers 0..stop-1 (d: its layers, embeddings and
 * rotary tables; keys and values written at slots pos.., with the bits of `stack_layers`, as
 * `CachedLM.extend_early` runs them), its state entering layer `stop` kept in states (width floats a row); the head
 * (its norm, x + SiLU(block x), its MLP) takes that state to the chain's logits, and up to k tokens go into index and
 * probs (`pick`). Returns how many tokens were drafted (the states of as many fed tokens kept), or -1 when memory
 * ran out. */
int exit_draft(const exit_t *e, const decoder_t *d, long long token, long long pos, int k, const sampler_t *s,
               long long *index, float *probs, float *states) {
    const chain_t *c = &e->chain;
    const int w = c->width, hidden = e->gate_up.n / 2;
    size_t work_size = 0;
    for (int j = 0; j < e->stop; j++) {
        const size_t need = layer_work(&d->layers[j], c, 1, pos + k);
        work_size = need > work_size ? need : work_size;
    }
    float *buffer = malloc(sizeof(float) * (2 * (size_t)w + 2 * (size_t)hidden + work_size));
    if (!buffer) return -1;
    float *y = buffer, *t = y + w, *gu = t + w, *work = gu + 2 * (size_t)hidden, chance = 1.0f;
    int drafted = -1;
    for (int i = 0; i < k; i++) {
        float *x = states + (size_t)i * w;
        memcpy(x, embedding(&d->chain, token), sizeof(float) * w);
        for (int j = 0; j < e->stop; j++)
            if (layer(&d->layers[j], &d->chain, x, 1, pos + i, work, NULL)) {
                drafted = -1;
                goto done;
            }
        rowrmsnorm(x, 1, w, w, e->norm, e->eps, y);
        product(&e->block, y, 1, t);
        for (int q = 0; q < w; q++) y[q] += t[q] / (1.0f + expf(-t[q])); /* SiLU */
        if (hidden) {
            rowrmsnorm(y, 1, w, w, e->mlp_norm, e->eps, t);
            product(&e->gate_up, t, 1, gu);
            rowswiglu(gu, 1, hidden, gu);
            product(&e->down, gu, 1, t);
            for (int q = 0; q < w; q++) y[q] += t[q];
        }
        drafted = i + 1;
        if (!pick(c, y, i, k, s, &chance, index, probs, work)) break;
        token = drafted_id(c, index[i]);
    }
done:
    free(buffer);
    return drafted;
}
