/* What the drafters' rounds share (native_head.c, native_adapters.c): the structs specui/native_chain.py fills, the
 * kernels they call, and the steps of a round (defined in native_head.c, hidden outside the library). */
#ifndef SPECUI_NATIVE_CHAIN_H
#define SPECUI_NATIVE_CHAIN_H

#include <stddef.h>

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
    const float *norm;         /* the norm before them (NULL: the row is normed already, as Medusa's) */
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

typedef struct { /* a draft model's decoder (specui/lean.py's DecoderStack) */
    const layer_t *layers;
    int count;
    chain_t chain;
} decoder_t;

typedef struct { /* token-tree rows (`stack_layers`): their own positions and the keys each row sees */
    const float *cos, *sin;          /* each row's rotary entries [rows][hd], gathered at its position */
    const int *prefix, *extra, *slots; /* `rowattend`'s: keys from slot 0, then extra ones at `slots` */
} tree_t;

#define CHAIN_STEP __attribute__((visibility("hidden")))

/* y = x W^T (+ bias) for `rows` rows: a matrix's product, split over the product threads where Python splits it. */
CHAIN_STEP void chain_product(const matrix_t *m, const float *x, int rows, float *y);
/* A decoder layer on rows x at cache slots pos.., in place (tree: a token tree's rows, else NULL). */
CHAIN_STEP int chain_layer(const layer_t *l, const chain_t *c, float *x, int rows, long long pos, float *work,
                           const tree_t *t);
/* The floats `chain_layer` needs, and at least what `chain_pick` needs. */
CHAIN_STEP size_t chain_layer_work(const layer_t *l, const chain_t *c, int rows, long long longest);
/* Step i of a chain: its token and distribution from the row h; whether the chain goes on. */
CHAIN_STEP int chain_pick(const chain_t *c, const float *h, int i, int k, const sampler_t *s, float *chance,
                          long long *index, float *probs, float *work);
/* The embedding of a token id; the target's id of a drafted row. */
CHAIN_STEP const float *chain_embedding(const chain_t *c, long long id);
CHAIN_STEP long long chain_drafted_id(const chain_t *c, long long index);

#endif
