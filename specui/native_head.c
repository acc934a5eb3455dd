/* The drafters' rounds in one native call each, built with native.c by specui/native.py:
 * - head_draft: an EAGLE head's round: it reads the target's states of the tokens just verified, then drafts;
 * - decoder_draft: a draft model's round (a Llama-style decoder run by specui.lean): the context's tokens it has
 *   not read, then its chain;
 * - stack_layers: a range of such a decoder's layers on a block of rows, which is how the lean forward runs a
 *   target's (and a draft's) layers on a CPU: one call instead of some four hundred (a token tree's rows too);
 * - head_tree_step: one depth of an EAGLE head's token tree (its rows' states and logits; Python picks the nodes);
 * and the steps every round takes (native_chain.h; native_adapters.c's early-exit and Medusa rounds take them too).
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
#include "native_chain.h"

typedef struct { /* an EAGLE head (specui/heads/eagle.py) */
    matrix_t fuse, fc;
    layer_t layer;
    chain_t chain;
} head_t;

void chain_product(const matrix_t *m, const float *x, int rows, float *y) {
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

/* A decoder layer on rows x (width floats each) at cache slots pos.., causally, in place: the rotary step writes
 * their keys and values there, row r attends to slots 0..pos + r; x += o(attention), then x += MLP. With a tree
 * (else NULL) row r takes its position's rotary entries and attends to the keys the tree names (each row's bits
 * are the chain's: the same kernels over the same sequence of keys). Returns 1 when attention ran out of memory.
 * work: `chain_layer_work` floats (the products' outputs, attention's scratch, then how many keys each row sees). */
int chain_layer(const layer_t *l, const chain_t *c, float *x, int rows, long long pos, float *work,
                const tree_t *t) {
    const int w = c->width, q_width = l->heads * l->hd, qkv_width = (l->heads + 2 * l->kv_heads) * l->hd;
    const size_t m = rows;
    float *y = work, *qkv = y + m * w, *q = qkv + m * qkv_width, *att = q + m * q_width, *out = att + m * q_width;
    float *gu = out + m * w, *scratch = gu + 2 * m * l->ffn;
    const int stride = ((int)pos + rows + 15) / 16 * 16 + 48; /* the last row sees the most keys */
    int *seen = (int *)(scratch + (size_t)(rows * (l->heads / l->kv_heads) + 24) * stride); /* int and float: 4 bytes */
    for (int r = 0; r < rows; r++) seen[r] = (int)pos + r + 1;
    rowrmsnorm(x, rows, w, w, l->norm1, l->eps, y);
    chain_product(&l->qkv, y, rows, qkv);
    rowrope(qkv, rows, rows, qkv_width, l->heads, l->kv_heads, l->hd, t ? t->cos : c->cos + pos * l->hd,
            t ? t->sin : c->sin + pos * l->hd, l->hd, q, l->keys, l->values, l->cap, pos);
    if (rowattend(q, rows, q_width, l->heads, l->kv_heads, l->hd, l->keys, l->values, l->cap, t ? t->prefix : seen,
                  t ? t->extra : NULL, t ? t->slots : NULL, l->scale, att, scratch, stride))
        return 1;
    chain_product(&l->o, att, rows, out);
    for (size_t i = 0; i < m * w; i++) x[i] += out[i];
    rowrmsnorm(x, rows, w, w, l->norm2, l->eps, y);
    chain_product(&l->gate_up, y, rows, gu);
    rowswiglu(gu, rows, l->ffn, gu); /* row r's activations overwrite what rows 0..r have read */
    chain_product(&l->down, gu, rows, out);
    for (size_t i = 0; i < m * w; i++) x[i] += out[i];
    return 0;
}

/* The floats `chain_layer` needs for `rows` rows when no row sees more than `longest` keys, and at least what
 * `chain_pick` needs (the chain's step shares the buffer between layers). */
size_t chain_layer_work(const layer_t *l, const chain_t *c, int rows, long long longest) {
    const size_t stride = (size_t)((longest + 15) / 16 * 16 + 48);
    const size_t need = (size_t)rows * ((size_t)(3 * l->heads + 2 * l->kv_heads) * l->hd + 2 * (size_t)c->width +
                                        2 * (size_t)l->ffn + 1) + (size_t)(rows * (l->heads / l->kv_heads) + 24) * stride;
    const size_t least = (size_t)c->width + 3 * (size_t)c->out.n; /* normed, logits, `rownucleus`'s scratch */
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

/* Step i of a chain: the drafter's logits at the row h (width floats; normed by c->norm unless NULL), any repetition
 * penalty applied, the token into index[i] and the distribution it came from into probs row i. Greedy (temperature
 * 0): the argmax, its softmax reported. Sampled: softmax(logits / temperature), top-k and top-p applied
 * (`specui.sampling.logits_to_probs`; `rownucleus`), the token drawn from it by uniforms[i]. Returns whether the
 * chain goes on: not at step k, nor once the product of the steps' top probabilities at temperature 1 (`chance`)
 * falls below stop_below > 0 (`Confidence`). */
int chain_pick(const chain_t *c, const float *h, int i, int k, const sampler_t *s, float *chance, long long *index,
               float *probs, float *work) {
    const int n = c->out.n;
    float *normed = work, *logits = work + c->width, *row = probs + (size_t)i * n, top = 1.0f;
    if (c->norm) rowrmsnorm(h, 1, c->width, c->width, c->norm, c->eps, normed); /* NULL: h is normed already */
    chain_product(&c->out, c->norm ? normed : h, 1, logits);
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
const float *chain_embedding(const chain_t *c, long long id) {
    return c->embed + (size_t)(id < c->embed_rows ? id : c->embed_rows - 1) * c->width;
}

/* The target's id of a drafted row of the output. */
long long chain_drafted_id(const chain_t *c, long long index) { return c->ids ? c->ids[index] : index; }

/* An EAGLE head's round. First it reads the target's states not yet fed: `rows` rows of the fused layers
 * (fuse.k floats each) with the tokens that follow them, at cache slots pos..pos + rows - 1
 * (`EagleDrafter._feed_pending`): h = layer(fc([fuse(states), embed(token)])). Then, from the last row's h, up
 * to k tokens into index (rows of the head's vocabulary) and probs (each step's distribution, out.n floats a
 * row; `chain_pick`), each next step on fc([h, embed(the token just drafted)]), which writes cache slot
 * pos + rows + i - 1.
 * Returns how many tokens were drafted, or -1 when memory ran out. */
int head_draft(const head_t *e, const float *states, const long long *follow, int rows, long long pos, int k,
               const sampler_t *s, long long *index, float *probs) {
    const chain_t *c = &e->chain;
    const int w = c->width;
    const size_t m = rows;
    const size_t work_size = chain_layer_work(&e->layer, c, rows, pos + rows + k);
    float *buffer = malloc(sizeof(float) * (m * 4 * w + work_size)); /* fused, [u, embed], then h, work */
    if (!buffer) return -1;
    float *fused = buffer, *x = fused + m * w, *h = x + 2 * m * w, *work = h + m * w, chance = 1.0f;
    int drafted = -1;
    chain_product(&e->fuse, states, rows, fused);
    for (int r = 0; r < rows; r++) {
        memcpy(x + (size_t)r * 2 * w, fused + (size_t)r * w, sizeof(float) * w);
        memcpy(x + (size_t)r * 2 * w + w, chain_embedding(c, follow[r]), sizeof(float) * w);
    }
    chain_product(&e->fc, x, rows, h);
    if (chain_layer(&e->layer, c, h, rows, pos, work, NULL)) goto done;
    const float *last = h + (m - 1) * w;
    for (int i = 0; i < k; i++) {
        drafted = i + 1;
        if (!chain_pick(c, last, i, k, s, &chance, index, probs, work)) break;
        memcpy(x, last, sizeof(float) * w);
        memcpy(x + w, chain_embedding(c, chain_drafted_id(c, index[i])), sizeof(float) * w);
        chain_product(&e->fc, x, 1, h);
        if (chain_layer(&e->layer, c, h, 1, pos + rows + i, work, NULL)) {
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
    const size_t m = rows, work_size = chain_layer_work(&e->layer, c, rows, pos + rows);
    float *buffer = malloc(sizeof(float) * (m * 3 * w + work_size)); /* fused, [u, embed], work */
    if (!buffer) return 1;
    float *fused = buffer, *x = fused + m * w, *work = x + 2 * m * w;
    if (fuse) chain_product(&e->fuse, inputs, rows, fused);
    for (int r = 0; r < rows; r++) {
        memcpy(x + (size_t)r * 2 * w, (fuse ? fused : inputs) + (size_t)r * w, sizeof(float) * w);
        memcpy(x + (size_t)r * 2 * w + w, chain_embedding(c, tokens[r]), sizeof(float) * w);
    }
    chain_product(&e->fc, x, rows, h);
    int failed = chain_layer(&e->layer, c, h, rows, pos, work, fuse ? NULL : t);
    if (!failed) {
        const int first = fuse ? rows - 1 : 0, count = fuse ? 1 : rows;
        rowrmsnorm(h + (size_t)first * w, count, w, w, c->norm, c->eps, work);
        chain_product(&c->out, work, count, logits);
    }
    free(buffer);
    return failed;
}

/* A draft model's round: the context's tokens it has not read (`rows` ids, clamped to its embeddings) go
 * through its layers at cache slots pos..pos + rows - 1, then from its logits at the last of them up to k
 * tokens into index (rows of its output) and probs (`chain_pick`), each next step running the decoder on the
 * token just drafted, which writes cache slot pos + rows + i - 1 of every layer. Returns how many tokens were
 * drafted, or -1 when memory ran out. */
int decoder_draft(const decoder_t *d, const long long *tokens, int rows, long long pos, int k, const sampler_t *s,
                  long long *index, float *probs) {
    const chain_t *c = &d->chain;
    const int w = c->width;
    const size_t m = rows;
    size_t work_size = 0;
    for (int j = 0; j < d->count; j++) {
        const size_t need = chain_layer_work(&d->layers[j], c, rows, pos + rows + k);
        work_size = need > work_size ? need : work_size;
    }
    float *buffer = malloc(sizeof(float) * (m * w + work_size));
    if (!buffer) return -1;
    float *h = buffer, *work = h + m * w, chance = 1.0f;
    int drafted = -1, step_rows = rows;
    for (int r = 0; r < rows; r++) memcpy(h + (size_t)r * w, chain_embedding(c, tokens[r]), sizeof(float) * w);
    for (int i = 0; i < k; i++) {
        for (int j = 0; j < d->count; j++)
            if (chain_layer(&d->layers[j], c, h, step_rows, pos, work, NULL)) {
                drafted = -1;
                goto done;
            }
        drafted = i + 1;
        if (!chain_pick(c, h + (size_t)(step_rows - 1) * w, i, k, s, &chance, index, probs, work)) break;
        pos += step_rows;
        step_rows = 1;
        memcpy(h, chain_embedding(c, chain_drafted_id(c, index[i])), sizeof(float) * w);
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
        const size_t need = chain_layer_work(&d->layers[j], &d->chain, rows, pos + rows);
        work_size = need > work_size ? need : work_size;
    }
    float *work = malloc(sizeof(float) * (work_size ? work_size : 1));
    if (!work) return 1;
    int failed = 0;
    for (int j = start; j < stop && !failed; j++) failed = chain_layer(&d->layers[j], &d->chain, x, rows, pos, work, t);
    free(work);
    return failed;
}
