/* specui's product threads, built with native.c by specui/native.py (one shared library): rowgemm_split
 * computes a product's panels on the calling thread and on up to MAX_WORKERS worker threads at once.
 *
 * Why: a one-token forward of a model like SmolLM2 is bound by reading its weights, and one core of a
 * CPU cannot keep the memory busy (few misses in flight): two cores read a matrix about 1.3-2 times as
 * fast. Python's thread pools cost tens of microseconds per hand-off, more than a layer's product saves,
 * so the hand-off is here: workers spin on a counter for a while after each share (a forward's products
 * follow each other within microseconds), then yield their core to other threads (a server's, a browser's)
 * for about a millisecond, then sleep on a condition variable until the next.
 *
 * The bits: the panels are split in contiguous shares, and every output is the same chain over k as in
 * rowgemm whichever thread computes it, so a split product equals the unsplit one bit for bit.
 * One caller at a time: a second thread that calls while a split runs computes its product alone. A
 * forked child starts with no workers (pthread_atfork), and starts its own when it first splits.
 */
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

void rowgemm(const float *x, int m, int ldx, const void *w, int n, int k, const float *bias, float *y, int ldy,
             int p0, int p1, int kind);

#define MAX_WORKERS 15
#define SPINS 2000  /* pauses a worker spins for the next share (tens of microseconds: a forward's products) */
#define YIELDS 1000 /* then sched_yield()s, leaving the core to any other thread, before it sleeps (~1 ms) */

typedef struct {
    const float *x; const void *w; const float *bias; float *y;
    int m, ldx, n, k, ldy, kind;
} product_t;

static product_t job;
static int shares[MAX_WORKERS + 2];                  /* share i of the panels: [shares[i], shares[i + 1]) */
static atomic_int posted, done[MAX_WORKERS];         /* the job's number; the last each worker finished */
static int workers, sleeping;                        /* started workers; how many wait on `wake` */
static pthread_mutex_t calling = PTHREAD_MUTEX_INITIALIZER, sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_once_t fork_handler = PTHREAD_ONCE_INIT;

static void *work(void *arg) {
    const int me = (int)(long)arg;
    int seen = atomic_load_explicit(&done[me], memory_order_acquire); /* the job before its first */
    for (;;) {
        for (int spins = 0; atomic_load_explicit(&posted, memory_order_acquire) == seen;) {
            if (++spins < SPINS) {
                _mm_pause();
                continue;
            }
            if (spins < SPINS + YIELDS) {
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
    sleeping = 0;
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
    pthread_mutex_lock(&sleep_lock);
    if (sleeping) pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&sleep_lock);
    rowgemm(x, m, ldx, w, n, k, bias, y, ldy, shares[0], shares[1], kind);
    for (int i = 0; i < workers; i++)
        while (atomic_load_explicit(&done[i], memory_order_acquire) != number) _mm_pause();
    pthread_mutex_unlock(&calling);
    return ours;
}
