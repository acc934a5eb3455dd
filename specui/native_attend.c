/* specui's native attention (built with native.c by specui/native_build.py): rowattend, attention of few query
 * rows over a KV cache, each row's bits a function of the sequence of keys it sees (not of their slots, the row
 * count, the padding or the instruction set). */
#include "native.h"

#define LANES 16  /* the sum of e^s runs in 16 lanes by rank in both builds (AVX2: two vectors) */

/* Attention is computed for the query vectors of one key/value head together (a verify's rows times the
 * heads that share it), so each key and value is read once per block rather than once per query (the
 * cache is too large for L1; a query-at-a-time pass is bound by L2). A block holds 1, 2, 4 or QS queries
 * for the scores (the fewest that hold what is left), QV or 1 for the values, padded with a copy of its
 * last query (its output goes to scratch): a one-token forward computes one query's scores, not QS
 * copies. A block's scores run over its own longest prefix, its value sums over its shortest together and then
 * each query's further keys alone (a prompt's rows see one key more each: the causal half is never computed, and
 * blocks of consecutive rows share nearly all their keys; a 128-token prompt of the stdlib target's attention
 * took 196 us a layer with one shortest prefix for all, 97-124 so). Every output is one chain in rank order: the
 * grouping, the padding and where a block's shared keys end change no bits. */
#define QS 8                       /* query vectors per score block */
#if NR == 16
#define QV(nv) ((nv) >= 16 ? 1 : 16 / (nv) > 8 ? 8 : 16 / (nv))  /* 16 accumulators of 32 registers */
#else
#define QV(nv) ((nv) >= 8 ? 1 : 8 / (nv))                       /* 8 accumulators of 16 registers */
#endif

/* e_i[j..j + nk*NR) = q_i . k_j for nq (<= QS) queries and nk vectors of NR consecutive slots from j:
 * each lane one (query, key) chain over d in order */
static inline __attribute__((always_inline)) void score_block(const float *const *q, int hd, const float *keys,
                                                               long long cap, int j, int nk, int nq, float *const *e) {
    vec acc[QS][2];
    for (int i = 0; i < nq; i++)
        for (int c = 0; c < nk; c++) acc[i][c] = vzero();
    for (int d = 0; d < hd; d++) {
        vec k[2];
        for (int c = 0; c < nk; c++) k[c] = vload(keys + (size_t)d * cap + j + c * NR);
        for (int i = 0; i < nq; i++) {
            vec qd = vset1(q[i][d]);
            for (int c = 0; c < nk; c++) acc[i][c] = vfma(qd, k[c], acc[i][c]);
        }
    }
    for (int i = 0; i < nq; i++)
        for (int c = 0; c < nk; c++) vstore(e[i] + j + c * NR, acc[i][c]);
}
typedef void (*score_fn)(const float *const *, int, const float *, long long, int, float *const *);
#define SCORE(n)                                                                                       \
    static void score##n##_1(const float *const *q, int hd, const float *k, long long cap, int j,      \
                             float *const *e) { score_block(q, hd, k, cap, j, 1, n, e); }              \
    static void score##n##_2(const float *const *q, int hd, const float *k, long long cap, int j,      \
                             float *const *e) { score_block(q, hd, k, cap, j, 2, n, e); }
SCORE(1) SCORE(2) SCORE(4) SCORE(8)
static const score_fn score_of[QS + 1][3] = {[1] = {0, score1_1, score1_2}, [2] = {0, score2_1, score2_2},
                                             [4] = {0, score4_1, score4_2}, [8] = {0, score8_1, score8_2}};

/* acc_i += sum over ranks j in [j0, j1) of e_i[j] v_j (slots = ranks: the shared prefix) for nq (QV(nv)
 * or 1) queries, nv vectors over d; acc_i lives in out_i between calls (a float stored is the float read) */
static inline __attribute__((always_inline)) void weigh_block(const float *const *e, int j0, int j1,
                                                               const float *values, int hd, int nv, int nq,
                                                               float *const *out) {
    enum { MAXQ = 8 };
    vec acc[MAXQ][16];
    for (int i = 0; i < nq; i++)
        for (int v = 0; v < nv; v++) acc[i][v] = vload(out[i] + v * NR);
    for (int j = j0; j < j1; j++) {
        vec x[16];
        for (int v = 0; v < nv; v++) x[v] = vload(values + (size_t)j * hd + v * NR);
        for (int i = 0; i < nq; i++) {
            vec w = vset1(e[i][j]);
            for (int v = 0; v < nv; v++) acc[i][v] = vfma(w, x[v], acc[i][v]);
        }
    }
    for (int i = 0; i < nq; i++)
        for (int v = 0; v < nv; v++) vstore(out[i] + v * NR, acc[i][v]);
}
typedef void (*weigh_fn)(const float *const *, int, int, const float *, int, float *const *);
#define WEIGH(n) static void weigh##n(const float *const *e, int j0, int j1, const float *values, int hd, \
    float *const *out) { weigh_block(e, j0, j1, values, hd, n, QV(n), out); }                        \
    static void weigh##n##_one(const float *const *e, int j0, int j1, const float *values, int hd,   \
    float *const *out) { weigh_block(e, j0, j1, values, hd, n, 1, out); }
WEIGH(1) WEIGH(2) WEIGH(3) WEIGH(4) WEIGH(5) WEIGH(6) WEIGH(7) WEIGH(8)
WEIGH(9) WEIGH(10) WEIGH(11) WEIGH(12) WEIGH(13) WEIGH(14) WEIGH(15) WEIGH(16)
static const weigh_fn weigh_of[17] = {
    0, weigh1, weigh2, weigh3, weigh4, weigh5, weigh6, weigh7, weigh8,
    weigh9, weigh10, weigh11, weigh12, weigh13, weigh14, weigh15, weigh16};
static const weigh_fn weigh_one_of[17] = {  /* one query: what is left of a block of QV(nv) */
    0, weigh1_one, weigh2_one, weigh3_one, weigh4_one, weigh5_one, weigh6_one, weigh7_one, weigh8_one,
    weigh9_one, weigh10_one, weigh11_one, weigh12_one, weigh13_one, weigh14_one, weigh15_one, weigh16_one};

/* Whether rowattend computes heads of this size (else the caller takes torch's ops). */
int rowattend_supports(int hd) {
    return hd % NR == 0 && hd / NR >= 1 && hd / NR <= 16;
}

/* out[r, h*hd:(h+1)*hd] = attention of q[r, h] (rows ldq floats apart, heads hd apart) over the keys
 * [kv_heads][hd][cap] and values [kv_heads][cap][hd] of one layer; head h reads key/value head
 * h / (heads / kv_heads). Row r sees prefix[r] keys from slot 0, then extra[r] more at the next
 * extra[r] entries of `slots`, increasing (extra may be NULL: none). Its bits depend only on the
 * sequence of keys it sees: a token tree's row (ancestors at scattered slots) equals the chain's.
 * scratch: (rows * heads / kv_heads + QS + QV) * stride floats, stride = the most keys a row sees
 * rounded up to 16, plus 48. Returns 0, or 1 when memory ran out (nothing computed). */
int rowattend(const float *q, int rows, int ldq, int heads, int kv_heads, int hd, const float *keys,
               const float *values, long long cap, const int *prefix, const int *extra, const int *slots,
               float scale, float *out, float *scratch, int stride) {
    const int groups = heads / kv_heads, nv = hd / NR, nq = rows * groups;
    const int padded_nq = nq + QS + QV(nv);  /* queries and the padding of the last blocks */
    int *first = malloc(sizeof(int) * (rows + 1));  /* row r's extra slots start at slots + first[r] */
    int *from = malloc(sizeof(int) * nq);  /* query i's keys from this rank on are its own (its block's are before) */
    const float **qs = malloc(sizeof(float *) * padded_nq);
    float **es = malloc(sizeof(float *) * padded_nq), **os = malloc(sizeof(float *) * padded_nq);
    if (!first || !from || !qs || !es || !os) {  /* out of memory: the caller raises MemoryError */
        free(first); free(from); free(qs); free(es); free(os);
        return 1;
    }
    first[0] = 0;
    for (int r = 0; r < rows; r++) first[r + 1] = first[r] + (extra ? extra[r] : 0);
    float *spare = scratch + (size_t)(padded_nq - 1) * stride;  /* padding's output */
    for (int g = 0; g < kv_heads; g++) {
        const float *k = keys + (size_t)g * hd * cap, *v = values + (size_t)g * cap * hd;
        for (int i = 0; i < padded_nq; i++) {  /* query i: row i / groups, head g * groups + i % groups */
            const int real = i < nq ? i : nq - 1, r = real / groups, h = g * groups + real % groups;
            qs[i] = q + (size_t)r * ldq + (size_t)h * hd;
            es[i] = scratch + (size_t)real * stride;
            os[i] = i < nq ? out + ((size_t)r * heads + h) * hd : spare;
        }
        /* scores over each block's longest prefix (vectors past a row's own prefix read cache slots inside the
         * capacity, a multiple of NR, and are never used), then each row's extra keys one by one */
        for (int b = 0, n; b < nq; b += n) {  /* blocks of 1, 2, 4 or QS queries: the fewest that hold the rest */
            const int left = nq - b;
            n = left > 4 ? QS : left > 2 ? 4 : left;
            int longest = 0;  /* the block's longest prefix (a prompt's rows see more keys as they go) */
            for (int i = b; i < b + n && i < nq; i++)
                longest = prefix[i / groups] > longest ? prefix[i / groups] : longest;
            const int vectors = (longest + NR - 1) / NR;
            for (int c = 0; c < vectors; c += 2)
                score_of[n][c + 2 <= vectors ? 2 : 1](qs + b, hd, k, cap, c * NR, es + b);
        }
        for (int i = 0; i < nq; i++) {
            const int r = i / groups, count = prefix[r] + (extra ? extra[r] : 0);
            float *e = es[i];
            for (int j = prefix[r]; j < count; j++) {  /* extra keys: the same chain over d as a lane's */
                const long long slot = slots[first[r] + j - prefix[r]];
                float a = 0.0f;
                for (int d = 0; d < hd; d++) a = __builtin_fmaf(qs[i][d], k[(size_t)d * cap + slot], a);
                e[j] = a;
            }
            vec top = vset1(-__builtin_inff());  /* scale, and the maximum (exact in any order) */
            int j = 0;
            for (; j + NR <= count; j += NR) {
                vec x = vmul(vload(e + j), vset1(scale));
                vstore(e + j, x);
                top = vmax(top, x);
            }
            float m = vhmax(top);
            for (; j < count; j++) {
                e[j] *= scale;
                m = e[j] > m ? e[j] : m;
            }
            const int padded = (count + LANES - 1) / LANES * LANES;
            for (j = count; j < padded; j++) e[j] = m;
            for (j = 0; j < padded; j += NR) vstore(e + j, vexp(vsub(vload(e + j), vset1(m))));
            for (j = count; j < padded; j++) e[j] = 0.0f;
            float lanes[LANES] = {0}, sum = 0.0f;
            for (j = 0; j < padded; j += LANES)
                for (int l = 0; l < LANES; l++) lanes[l] += e[j + l];
            for (int l = 0; l < LANES; l++) sum += lanes[l];
            e[stride - 1] = sum;  /* kept past the scores (stride leaves room) */
            for (int d = 0; d < hd; d++) os[i][d] = 0.0f;
        }
        for (int b = 0, n; b < nq; b += n) {  /* the keys every row of a block sees, its queries at once */
            n = nq - b > 1 ? QV(nv) : 1;
            int seen = prefix[b / groups];  /* the block's shortest prefix (its first row's, in a prompt) */
            for (int i = b; i < b + n && i < nq; i++)
                seen = prefix[i / groups] < seen ? prefix[i / groups] : seen;
            for (int i = b; i < b + n && i < nq; i++) from[i] = seen;
            (n > 1 ? weigh_of : weigh_one_of)[nv]((const float *const *)(es + b), 0, seen, v, hd, os + b);
        }
        for (int i = 0; i < nq; i++) {  /* then each row's own further keys, in rank order, and / sum */
            const int r = i / groups, count = prefix[r] + (extra ? extra[r] : 0);
            const float *e = es[i];
            float *o = os[i];
            for (int j = from[i]; j < count; j++) {
                const float *x = v + (size_t)(j < prefix[r] ? j : slots[first[r] + j - prefix[r]]) * hd;
                vec w = vset1(e[j]);
                for (int d = 0; d < hd; d += NR) vstore(o + d, vfma(w, vload(x + d), vload(o + d)));
            }
            vec sum = vset1(e[stride - 1]);
            for (int d = 0; d < hd; d += NR) vstore(o + d, vdiv(vload(o + d), sum));
        }
    }
    free(first); free(from); free(qs); free(es); free(os);
    return 0;
}
