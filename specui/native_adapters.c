/* The rounds of the drafters that put a small head on the target's own states, in one native call each, built with
 * native_head.c (whose steps they take: native_chain.h) by specui/native.py:
 * - exit_draft: an early-exit head's round (specui/heads/early_exit.py): the target's first layers on the target's
 *   own cache, with the bits of its native forward, then the head; specui/native_adapters.py's ExitChain;
 * - medusa_draft: Medusa's round (specui/heads/medusa.py): each head's residual blocks on the target's last normed
 *   state; MedusaChain.
 * In Python a drafted token was some twenty calls, each dearer once the verify forward has swept Python's own code and
 * data from the caches. The drafts equal the Python steps' to float rounding (the SiLU here rounds on its own).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"
#include "native_chain.h"

/* y += SiLU(t) over n floats: t / (1 + e^-t). */
static void add_silu(float *y, const float *t, int n) {
    for (int q = 0; q < n; q++) y[q] += t[q] / (1.0f + expf(-t[q]));
}

typedef struct { /* an early-exit head (specui/heads/early_exit.py) after its target's layer stop - 1 */
    matrix_t block, gate_up, down; /* the residual block's product (its bias inside); gate_up.n 0: no MLP */
    const float *norm, *mlp_norm;  /* the head's own RMS norm weights, its MLP's */
    float eps;
    int stop;
    chain_t chain; /* the head's output rows and ids after the target's final norm */
} exit_t;

/* An early-exit head's round on its target's own cache (`EarlyExitDrafter.propose`): `token` (cur) at cache slot pos,
 * then each drafted token but the last, runs through the target's layers 0..stop-1 (d: its layers, embeddings and
 * rotary tables; keys and values written at slots pos.., with the bits of `stack_layers`, as
 * `CachedLM.extend_early` runs them), its state entering layer `stop` kept in states (width floats a row); the head
 * (its norm, x + SiLU(block x), its MLP) takes that state to the chain's logits, and up to k tokens go into index and
 * probs (`chain_pick`). Returns how many tokens were drafted (the states of as many fed tokens kept), or -1 when memory
 * ran out. */
int exit_draft(const exit_t *e, const decoder_t *d, long long token, long long pos, int k, const sampler_t *s,
               long long *index, float *probs, float *states) {
    const chain_t *c = &e->chain;
    const int w = c->width, hidden = e->gate_up.n / 2;
    size_t work_size = 0;
    for (int j = 0; j < e->stop; j++) {
        const size_t need = chain_layer_work(&d->layers[j], c, 1, pos + k);
        work_size = need > work_size ? need : work_size;
    }
    float *buffer = malloc(sizeof(float) * (2 * (size_t)w + 2 * (size_t)hidden + work_size));
    if (!buffer) return -1;
    float *y = buffer, *t = y + w, *gu = t + w, *work = gu + 2 * (size_t)hidden, chance = 1.0f;
    int drafted = -1;
    for (int i = 0; i < k; i++) {
        float *x = states + (size_t)i * w;
        memcpy(x, chain_embedding(&d->chain, token), sizeof(float) * w);
        for (int j = 0; j < e->stop; j++)
            if (chain_layer(&d->layers[j], &d->chain, x, 1, pos + i, work, NULL)) {
                drafted = -1;
                goto done;
            }
        rowrmsnorm(x, 1, w, w, e->norm, e->eps, y);
        chain_product(&e->block, y, 1, t);
        add_silu(y, t, w);
        if (hidden) {
            rowrmsnorm(y, 1, w, w, e->mlp_norm, e->eps, t);
            chain_product(&e->gate_up, t, 1, gu);
            rowswiglu(gu, 1, hidden, gu);
            chain_product(&e->down, gu, 1, t);
            for (int q = 0; q < w; q++) y[q] += t[q];
        }
        drafted = i + 1;
        if (!chain_pick(c, y, i, k, s, &chance, index, probs, work)) break;
        token = chain_drafted_id(c, index[i]);
    }
done:
    free(buffer);
    return drafted;
}

typedef struct { /* Medusa heads (specui/heads/medusa.py) on the target's final normed state */
    const matrix_t *blocks; /* head i's residual blocks at blocks[i * per_head ..], each with its bias inside */
    int heads, per_head;
    chain_t chain; /* the output rows and ids; norm NULL: the state is normed already */
} medusa_t;

/* Medusa's round (`MedusaDrafter.propose`): head i of the first k (at most m->heads) takes the target's final normed
 * state through its residual blocks (x + SiLU(block x)) to the chain's logits, and its token goes into index and
 * probs (`chain_pick`). The heads do not read each other's tokens: the confidence stop only ends the round sooner.
 * Returns how many tokens were drafted, or -1 when memory ran out. */
int medusa_draft(const medusa_t *m, const float *state, int k, const sampler_t *s, long long *index, float *probs) {
    const chain_t *c = &m->chain;
    const int w = c->width;
    float *buffer = malloc(sizeof(float) * (3 * (size_t)w + 3 * (size_t)c->out.n));
    if (!buffer) return -1;
    float *y = buffer, *t = y + w, *work = t + w, chance = 1.0f;
    int drafted = 0;
    for (int i = 0; i < k && i < m->heads; i++) {
        memcpy(y, state, sizeof(float) * w);
        for (int b = 0; b < m->per_head; b++) {
            chain_product(&m->blocks[(size_t)i * m->per_head + b], y, 1, t);
            add_silu(y, t, w);
        }
        drafted = i + 1;
        if (!chain_pick(c, y, i, k, s, &chance, index, probs, work)) break;
    }
    free(buffer);
    return drafted;
}
