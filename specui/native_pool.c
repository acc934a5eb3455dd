/* specui's product threads, built with native.c by specui/native.py (one shared library): rowgemm_split
 * computes a product's panels on the calling thread and on up to MAX_WORKERS worker threads at once.
 *
 * Why: a one-token forward of a model like SmolLM2 is bound by reading its weights, and one core of a
 * CPU cannot keep the memory busy (few misses in flight): two cores read a matrix about 1.3-2 times as
 * fast. Python's thread pools cost tens of microseconds per hand-off, more than a layer's product saves,
 * so the hand-off is here: workers spin on a counter for a while after each share (a forward's products
 * follow each other within microseconds), then yield their core to other threads (a server's, a browser's)
 * for 3 ms by the clock, then sleep on a condition variable until the next.
 *
 * The bits: the panels are split in contiguous shares, and every output is the same chain over k as in
 * rowgemm whichever thread computes it, so a split product equals the unsplit one bit for bit.
 * One caller at a time: a second thread that calls while a split runs computes its product alone. A
 * forked child starts with no workers (pthread_atfork), and starts its own when it first splits.
 *
 * Giving way: where another program wants the same cores (a browser beside the app on a 2-core machine), a
 * worker loses its core in the middle of a share and the product waits for it, far longer than computing it
 * alone would take. So each split is timed: this thread's share times the shares is what it would have cost
 * alone, and the difference is what the split saved (or cost). Where the splits of a WINDOW of time cost
 * more than they saved (or LOSS_LIMIT more, sooner), products run alone for a rest, then splits are tried
 * again. A rest is twice the last (REST_MIN to REST_MAX), and each window that paid halves the next one, so
 * where splits keep failing (the browser stays) a try costs a few milliseconds every two seconds, and where
 * they pay a passing hiccup costs a short rest. Nor does a product of less than WAKE_BYTES of weights wake
 * workers that went to sleep (products half a millisecond or more apart, as in a small model's forward, whose
 * output layer alone is large enough to split): it runs alone. GGUF blocks count at their float32 size: their
 * rebuild makes them cost about what float32 panels do (counted at 6 bits a weight, SmolLM2's layers never woke
 * the workers, and every product of a verify after a drafting pause ran alone, at half speed). A block of
 * WAKE_ROWS rows or more (a prompt) counts its weights once a row: a small model's prompt is long work whose
 * every product pays for a wake (the stdlib target's 256-token prompt: 1.45x faster). Which thread computes
 * an output never changes its bits.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "native.h"

void rowgemm(const float *x, int m, int ldx, const void *w, int n, int k, const float *bias, float *y, int ldy,
             int p0, int p1, int kind);

#define MAX_WORKERS 15
#define SPINS 2000  /* pauses a worker spins for the next share (tens of microseconds: a forward's products) */
#define YIELD_SECONDS 3e-3 /* then sched_yield()s, leaving the core to any other thread, this long before it sleeps
                            * (by the clock: a VM's sched_yield returned in 0.17 us, so 1,000 of them were 0.2 ms,
                            * less than a round's Python between its verify and its drafting, and a sampled round's
                            * gaps reach a millisecond or more: docs/performance.md, stop 85) */

typedef struct {
    const float *x; const void *w; const float *bias; float *y;
    int m, ldx, n, k, ldy, kind;
} product_t;

static product_t job;
static int shares[MAX_WORKERS + 2];                  /* share i of the panels: [shares[i], shares[i + 1]) */
static atomic_int posted, done[MAX_WORKERS];         /* the job's number; the last each worker finished */
static int workers;                                  /* started workers */
static atomic_int sleeping;                          /* how many wait on `wake` */
static pthread_mutex_t calling = PTHREAD_MUTEX_INITIALIZER, sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_once_t fork_handler = PTHREAD_ONCE_INIT;

#define WINDOW 0.1       /* seconds over which splits are judged: they must have saved more than they cost */
#define LOSS_LIMIT 5e-3  /* or, sooner: seconds they may cost beyond what they saved within a window */
#define REST_MIN 0.05    /* seconds of computing alone after the splits did not pay, doubled each time ... */
#define REST_MAX 2.0     /* ... up to this, and halved by each window that paid */
#define WAKE_BYTES (1L << 22) /* weight bytes from which a product wakes sleeping workers (below, a wake costs more) */
#define WAKE_ROWS 16 /* a block of this many rows or more (a prompt) counts its weights once a row */
static double saved, window_start, rest_until, rest = REST_MIN; /* guarded by `calling`, as the counts */
static long counts[4]; /* splits, products alone while resting, rests, products alone as the workers slept */
static int giving_way = 1; /* 0: split every large product, never rest nor let workers sleep on (tests) */
static _Atomic double yield_seconds = YIELD_SECONDS; /* `pool_yield` */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Counts one split that would have taken `alone` seconds on this thread and took `took`, ending at `at`
 * (`calling` held). Returns the time until which products run alone (at or before `at`: no rest). */
static double account(double alone, double took, double at) {
    counts[0]++;
    if (at - window_start > 2 * WINDOW) { /* a new window after a pause (or the first): start it afresh */
        window_start = at - took;
        saved = 0;
    }
    saved += alone - took;
    const int ended = at - window_start >= WINDOW;
    if (giving_way && (saved < -LOSS_LIMIT || (ended && saved < 0))) { /* a rest, and a longer one next time */
        rest_until = at + rest;
        rest = 2 * rest < REST_MAX ? 2 * rest : REST_MAX;
        counts[2]++;
    } else if (ended && rest > REST_MIN) { /* a window that paid: a shorter rest next time */
        rest = rest / 2 > REST_MIN ? rest / 2 : REST_MIN;
    }
    if (ended || at < rest_until) {
        window_start = at;
        saved = 0;
    }
    return rest_until;
}

double pool_account(double alone, double took, double at) { /* `account` from Python (the tests) */
    pthread_mutex_lock(&calling);
    const double until = account(alone, took, at);
    pthread_mutex_unlock(&calling);
    return until;
}

/* Copies the counts into `out` (splits, products computed alone while resting, rests, products computed alone
 * as the workers slept); turns giving way on or off (-1: unchanged); clears the counts, the savings and any
 * rest when `clear`. */
void pool_state(long *out, int give_way, int clear) {
    pthread_mutex_lock(&calling);
    for (int i = 0; i < 4; i++) out[i] = counts[i];
    if (give_way >= 0) giving_way = give_way;
    if (clear) {
        counts[0] = counts[1] = counts[2] = counts[3] = 0;
        saved = window_start = rest_until = 0;
        rest = REST_MIN;
    }
    pthread_mutex_unlock(&calling);
}

/* Sets how long an idle worker yields before it sleeps (seconds; a negative value: unchanged); returns the
 * setting before (`tools` race settings in one process). */
double pool_yield(double seconds) {
    const double before = atomic_load(&yield_seconds);
    if (seconds >= 0) atomic_store(&yield_seconds, seconds);
    return before;
}

static void *work(void *arg) {
    const int me = (int)(long)arg;
    int seen = atomic_load_explicit(&done[me], memory_order_acquire); /* the job before its first */
    for (;;) {
        double since = 0; /* when the yields began */
        for (int spins = 0; atomic_load_explicit(&posted, memory_order_acquire) == seen;) {
            if (++spins < SPINS) {
                _mm_pause();
                continue;
            }
            if (spins == SPINS) since = now();
            if (spins % 16 || now() - since < atomic_load(&yield_seconds)) {
                sched_yield();
                continue;
            }
            pthread_mutex_lock(&sleep_lock);
            sleeping++;
            while (atomic_load_explicit(&posted, memory_order_acquire) == seen) pthread_cond_wait(&wake, &sleep_lock);
            sleeping--;
            pthread_mutex_unlock(&sleep_lock);
        }
        seen = atomic_load_explicit(&posted, memory_order_acquire);
        rowgemm(job.x, job.m, job.ldx, job.w, job.n, job.k, job.bias, job.y, job.ldy, shares[me + 1], shares[me + 2],
                job.kind);
        atomic_store_explicit(&done[me], seen, memory_order_release);
    }
    return 0;
}

static void forked_child(void) { /* the workers stayed in the parent: start afresh */
    workers = 0;
    atomic_store(&sleeping, 0);
    atomic_store(&posted, 0);
    for (int i = 0; i < MAX_WORKERS; i++) atomic_store(&done[i], 0);
    pthread_mutex_init(&calling, 0);
    pthread_mutex_init(&sleep_lock, 0);
    pthread_cond_init(&wake, 0);
}

static void at_fork(void) { pthread_atfork(0, 0, forked_child); }

/* rowgemm's product (same arguments) over `threads` threads: this one and threads - 1 workers, started on
 * first use (fewer where the system refuses more). Returns how many threads computed it. */
int rowgemm_split(const float *x, int m, int ldx, const void *w, int n, int k, const float *bias, float *y,
                  int ldy, int p0, int p1, int kind, int threads) {
    int helpers = threads - 1 < MAX_WORKERS ? threads - 1 : MAX_WORKERS;
    if (helpers > p1 - p0 - 1) helpers = p1 - p0 - 1;
    if (helpers < 1 || pthread_mutex_trylock(&calling) != 0) {
        rowgemm(x, m, ldx, w, n, k, bias, y, ldy, p0, p1, kind);
        return 1;
    }
    /* alone while resting, or when the workers slept since the last split and this product is too small to
     * pay for waking them */
    const int resting = giving_way && rest_until > 0 && now() < rest_until;
    const int asleep = giving_way && !resting && workers >= helpers && atomic_load(&sleeping) > 0 &&
                       (long)(m >= WAKE_ROWS ? m : 1) * (long)((n + NR - 1) / NR) *
                               (long)panel_bytes(kind == Q4 || kind == Q8 ? F32 : kind, k) < WAKE_BYTES;
    if (resting || asleep) {
        counts[resting ? 1 : 3]++;
        pthread_mutex_unlock(&calling);
        rowgemm(x, m, ldx, w, n, k, bias, y, ldy, p0, p1, kind);
        return 1;
    }
    pthread_once(&fork_handler, at_fork);
    while (workers < helpers) {
        pthread_t thread;
        atomic_store(&done[workers], atomic_load(&posted)); /* it waits for the next job, not the last one */
        if (pthread_create(&thread, 0, work, (void *)(long)workers) != 0) break;
        pthread_detach(thread);
        workers++;
    }
    if (helpers > workers) helpers = workers;
    /* every worker takes part in every job (a share may be empty): shares of the panels, contiguous */
    const int parts = workers + 1, ours = helpers + 1;
    for (int i = 0; i <= parts; i++) shares[i] = i < ours ? p0 + (int)((long)(p1 - p0) * i / ours) : p1;
    job = (product_t){x, w, bias, y, m, ldx, n, k, ldy, kind};
    const int number = atomic_load(&posted) + 1;
    atomic_store_explicit(&posted, number, memory_order_release);
    const double start = now();
    pthread_mutex_lock(&sleep_lock);
    if (atomic_load(&sleeping)) pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&sleep_lock);
    rowgemm(x, m, ldx, w, n, k, bias, y, ldy, shares[0], shares[1], kind);
    const double own = now() - start;
    for (int i = 0; i < workers; i++)
        while (atomic_load_explicit(&done[i], memory_order_acquire) != number) _mm_pause();
    const double end = now();
    account(own * ours, end - start, end);
    pthread_mutex_unlock(&calling);
    return ours;
}
