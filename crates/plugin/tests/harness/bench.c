/* Benchmark mode of the fake-NCCL harness (included by scenarios.c): nanoseconds per
 * startEvent + recordEventState + stopEvent triple, through the plugin's v6 table and through
 * an empty table compiled here (the baseline cost of three indirect calls), on 1 and T threads
 * in the same run. Wall time per thread and thread CPU time are both reported: with more
 * threads than cores the wall time includes waiting for a core, the CPU time does not.
 *
 * A second loop times whole operations as NCCL reports them: Coll start and stop, then a
 * KernelCh start, its KernelChStop state and stop (5 events); the operation completes at the
 * KernelChStop, which is where the in-flight view and, with metrics on, the metrics
 * accumulators are updated ("op" lines, ns per operation and per event). */

__attribute__((noinline)) static ncclResult_t noop_init(void** ctx, uint64_t id, int* mask, const char* name, int nn,
                                                        int nr, int r, ncclDebugLogger_t l) {
  (void)id; (void)name; (void)nn; (void)nr; (void)r; (void)l;
  *ctx = (void*)1;
  *mask = 0;
  return 0;
}
__attribute__((noinline)) static ncclResult_t noop_start(void* ctx, void** h, void* d) {
  (void)ctx; (void)d;
  *h = (void*)1;
  return 0;
}
__attribute__((noinline)) static ncclResult_t noop_stop(void* h) { (void)h; return 0; }
__attribute__((noinline)) static ncclResult_t noop_rec(void* h, int s, sargs_t* a) { (void)h; (void)s; (void)a; return 0; }
__attribute__((noinline)) static ncclResult_t noop_fin(void* ctx) { (void)ctx; return 0; }
static prof_t noop_table = {"noop", noop_init, noop_start, noop_stop, noop_rec, noop_fin};

typedef struct { const prof_t* p; long iters; int t; pthread_barrier_t* b; double wall_ns, cpu_ns, op_cpu_ns; } bench_job;

/* One collective as NCCL reports it with one channel: 5 events. */
static inline void bench_op(const prof_t* p, void* ctx, descr6_t* coll, descr6_t* kch, sargs_t* a, uint64_t i) {
  void* h = NULL;
  void* k = NULL;
  coll->coll.c.seqNumber = i;
  p->startEvent(ctx, &h, coll);
  p->stopEvent(h);
  kch->parentObj = h;
  kch->kernelCh.pTimer = 1000000 + 10 * i;
  p->startEvent(ctx, &k, kch);
  a->pTimer = 1000000 + 10 * i + 7;
  p->recordEventState(k, ST_KERNEL_CH_STOP, a);
  p->stopEvent(k);
}

static void* bench_worker(void* arg) {
  bench_job* j = arg;
  const prof_t* volatile pv = j->p; /* keep the calls indirect */
  const prof_t* p = pv;
  comm_t c = {.hash = 0xBE7C, .rank = j->t, .nranks = 64, .dev = j->t};
  int mask = 0;
  CHECK(p->init(&c.ctx, c.hash, &mask, "bench", 1, c.nranks, c.rank, logger) == 0);
  descr6_t d;
  memset(&d, 0, sizeof d);
  d.type = EV_COLL; d.rank = c.rank; d.coll.c.func = "AllReduce"; d.coll.c.count = 1 << 20;
  d.coll.c.datatype = "ncclFloat32"; d.coll.c.nChannels = 4; d.coll.c.nWarps = 16; d.coll.c.algo = "RING";
  d.coll.c.proto = "SIMPLE"; d.coll.c.sendBuff = (void*)0x10000; d.coll.c.recvBuff = (void*)0x20000;
  sargs_t a;
  a.transSize = 65536;
  for (long i = 0; i < 10000; i++) { /* warm-up: ring registration, string interning */
    void* h = NULL;
    p->startEvent(c.ctx, &h, &d);
    p->recordEventState(h, ST_SEND_WAIT, &a);
    p->stopEvent(h);
  }
  pthread_barrier_wait(j->b);
  uint64_t w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  for (long i = 0; i < j->iters; i++) {
    void* h = NULL;
    d.coll.c.seqNumber = (uint64_t)i;
    p->startEvent(c.ctx, &h, &d);
    p->recordEventState(h, ST_SEND_WAIT, &a);
    p->stopEvent(h);
  }
  j->wall_ns = (double)(now_ns(CLOCK_MONOTONIC) - w0) / (double)j->iters;
  j->cpu_ns = (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / (double)j->iters;
  /* Operations on a communicator of their own: the triples above never completed (1024 open). */
  comm_t c2 = {.hash = 0xBE7D, .rank = j->t, .nranks = 64, .dev = j->t};
  CHECK(p->init(&c2.ctx, c2.hash, &mask, "bench-ops", 1, c2.nranks, c2.rank, logger) == 0);
  descr6_t one = d, kch;
  one.coll.c.nChannels = 1;
  one.rank = c2.rank;
  memset(&kch, 0, sizeof kch);
  kch.type = EV_KERNEL_CH; kch.rank = c2.rank;
  sargs_t ka;
  for (long i = 0; i < 10000; i++) bench_op(p, c2.ctx, &one, &kch, &ka, (uint64_t)i);
  pthread_barrier_wait(j->b);
  c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  for (long i = 0; i < j->iters; i++) bench_op(p, c2.ctx, &one, &kch, &ka, (uint64_t)(i + 10000));
  j->op_cpu_ns = (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / (double)j->iters;
  pthread_barrier_wait(j->b);
  CHECK(p->finalize(c2.ctx) == 0);
  CHECK(p->finalize(c.ctx) == 0);
  return NULL;
}

static void bench_run(const char* name, const prof_t* p, long iters, int nthreads) {
  pthread_t t[64];
  bench_job j[64];
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, (unsigned)nthreads);
  for (int i = 0; i < nthreads; i++) {
    j[i] = (bench_job){p, iters, i, &b, 0, 0, 0};
    CHECK(pthread_create(&t[i], NULL, bench_worker, &j[i]) == 0);
  }
  double wall = 0, cpu = 0, op = 0;
  for (int i = 0; i < nthreads; i++) {
    pthread_join(t[i], NULL);
    wall += j[i].wall_ns;
    cpu += j[i].cpu_ns;
    op += j[i].op_cpu_ns;
  }
  pthread_barrier_destroy(&b);
  wall /= nthreads;
  cpu /= nthreads;
  op /= nthreads;
  printf("BENCH impl=%s threads=%d iters=%ld triple_wall_ns=%.1f triple_cpu_ns=%.1f event_cpu_ns=%.1f "
         "op_cpu_ns=%.1f op_event_cpu_ns=%.1f\n",
         name, nthreads, iters, wall, cpu, cpu / 3.0, op, op / 5.0);
}

static void bench(long iters, int nthreads) {
  CHECK(nthreads >= 1 && nthreads <= 64);
  for (int round = 0; round < 2; round++) { /* round 0 warms caches and page tables */
    if (round == 1) printf("BENCH-ROUND measured\n");
    bench_run("empty", &noop_table, iters, 1);
    bench_run("commlens", P, iters, 1);
    bench_run("empty", &noop_table, iters, nthreads);
    bench_run("commlens", P, iters, nthreads);
  }
}
