/* Scenarios of the fake-NCCL harness (included by fake_nccl.c). */

static void set_op(op_t* o, comm_t* c, int kind, const char* func, size_t ucount, const char* udtype, size_t ccount,
                   const char* cdtype, int root, int peer, int nch) {
  *o = (op_t){c, kind, func, ucount, udtype, ccount, cdtype, root, peer, nch, NULL};
}

/* A copy-engine AllGather (v6): CollApi parent, CeColl with CeSync/CeBatch children, no states. */
static void ce_allgather(comm_t* c) {
  descr6_t d;
  memset(&d, 0, sizeof d);
  d.type = EV_GROUP_API; d.rank = c->rank; d.groupApi.groupDepth = 1;
  void* g = start(c->ctx, &d);
  rec(g, ST_GROUP_START_API_STOP, NULL);
  memset(&d, 0, sizeof d);
  d.type = EV_COLL_API; d.parentObj = g; d.rank = c->rank;
  d.collApi.func = "AllGather"; d.collApi.count = 256; d.collApi.datatype = "ncclFloat32"; d.collApi.stream = (void*)0x5000;
  void* api = start(c->ctx, &d);
  memset(&d, 0, sizeof d);
  d.type = EV_CE_COLL; d.parentObj = api; d.rank = c->rank;
  d.ceColl.seqNumber = c->seq[slot("AllGather")]++; d.ceColl.func = "AllGather"; d.ceColl.count = 1024;
  d.ceColl.datatype = "ncclInt8"; d.ceColl.syncStrategy = "barrier"; d.ceColl.batchSize = 4; d.ceColl.numBatches = 2;
  d.ceColl.ceSeqNum = 11; d.ceColl.stream = (void*)0x5000;
  void* ce = start(c->ctx, &d);
  memset(&d, 0, sizeof d);
  d.type = EV_CE_SYNC; d.parentObj = ce; d.rank = c->rank; d.ceCollSync.isComplete = 1; d.ceCollSync.nRanks = c->nranks;
  stop(start(c->ctx, &d));
  memset(&d, 0, sizeof d);
  d.type = EV_CE_BATCH; d.parentObj = ce; d.rank = c->rank; d.ceCollBatch.numOps = 3; d.ceCollBatch.totalBytes = 4096;
  stop(start(c->ctx, &d));
  stop(ce);
  stop(api);
  rec(g, ST_GROUP_END_API_START, NULL);
  stop(g);
}

/* ProxyCtrl sequences (c): sleep/wakeup, append/appendEnd, idle, active. */
static void proxy_ctrl(comm_t* c) {
  descr6_t d;
  sargs_t a = {0};
  memset(&d, 0, sizeof d);
  d.type = EV_PROXY_CTRL; d.rank = c->rank;
  void* h = start(c->ctx, &d);
  rec(h, ST_CTRL_SLEEP, &a); rec(h, ST_CTRL_WAKEUP, &a); stop(h);
  h = start(c->ctx, &d);
  rec(h, ST_CTRL_APPEND, &a); a.appendedProxyOps = 3; rec(h, ST_CTRL_APPEND_END, &a); stop(h);
  h = start(c->ctx, &d); rec(h, ST_CTRL_IDLE, &a); stop(h);
  h = start(c->ctx, &d); rec(h, ST_CTRL_ACTIVE, &a); stop(h);
}

/* PXN: a proxy op posted by another process. Its context and parent are poison pointers
 * (non-canonical: any dereference faults); only its children's parent is ours. */
static void pxn(void) {
  void* poison_ctx = (void*)(uintptr_t)0xdead000000000badull;
  descr6_t d;
  sargs_t a = {0};
  memset(&d, 0, sizeof d);
  d.type = EV_PROXY_OP; d.parentObj = (void*)(uintptr_t)0xbadc0ffee0ddf00dull; d.rank = 5;
  d.proxyOp.pid = getpid() + 4242; d.proxyOp.channelId = 3; d.proxyOp.peer = 1; d.proxyOp.nSteps = 1;
  d.proxyOp.chunkSize = 4096; d.proxyOp.isSend = 1;
  void* op = start(poison_ctx, &d);
  rec(op, ST_PROXY_OP_IN_PROGRESS_V4, &a);
  memset(&d, 0, sizeof d);
  d.type = EV_PROXY_STEP; d.parentObj = op; d.rank = 5; d.proxyStep.step = 0;
  void* st = start(poison_ctx, &d);
  a.transSize = 4096;
  rec(st, ST_SEND_WAIT, &a);
  stop(st);
  stop(op);
  memset(&d, 0, sizeof d);
  d.type = EV_KERNEL_CH; d.parentObj = (void*)(uintptr_t)0xbadc0ffee0ddf00eull; d.rank = 5; d.kernelCh.pTimer = 1;
  void* k = start(poison_ctx, &d);
  rec(k, ST_KERNEL_CH_STOP, NULL);
  stop(k);
}

static void nulls_and_unknowns(comm_t* c) {
  descr6_t d;
  sargs_t a;
  memset(&d, 0, sizeof d);
  d.type = EV_GROUP_API; d.groupApi.groupDepth = 1; /* NULL context */
  void* h = start(NULL, &d);
  rec(h, ST_GROUP_START_API_STOP, NULL);
  stop(h);
  memset(&d, 0, sizeof d);
  d.type = 1ull << 20; d.rank = c->rank; /* an event type this plugin does not know */
  h = start(c->ctx, &d);
  a.pTimer = 123;
  rec(h, 99, &a); /* and a state it does not know */
  stop(h);
  memset(&d, 0, sizeof d);
  d.type = EV_PROXY_STEP; d.rank = c->rank;
  h = start(c->ctx, &d);
  rec(h, ST_SEND_WAIT, NULL); /* NULL args where NCCL would give some */
  stop(h);
  memset(&d, 0, sizeof d);
  d.type = EV_KERNEL_CH; d.rank = c->rank;
  h = start(c->ctx, &d);
  rec(h, ST_KERNEL_CH_STOP, NULL);
  stop(h);
  /* Calls NCCL never makes: NULL handle, NULL descriptor. Nothing may be recorded. */
  CHECK(P->stopEvent(NULL) == 0);
  CHECK(P->recordEventState(NULL, ST_SEND_WAIT, &a) == 0);
  void* out = NULL;
  CHECK(P->startEvent(c->ctx, &out, NULL) == 4);
  CHECK(P->startEvent(c->ctx, NULL, &d) == 4);
}

/* The v4 table (NCCL 2.27): no API events, one-byte type, init(ctx, mask, name, hash, …). */
static void v4_coll(void) {
  const prof_t* p = (const prof_t*)P4;
  comm_t c = {.hash = 0x4444, .rank = 0, .nranks = 2, .dev = 0};
  int mask = -1;
  fake_dev = c.dev;
  CHECK(P4->init(&c.ctx, &mask, "v4comm", c.hash, 1, c.nranks, c.rank, logger) == 0);
  fake_dev = -1;
  CHECK(mask == (expect_mask & 0xFF));
  descr4_t d;
  sargs_t a;
  memset(&d, 0, sizeof d);
  d.type = EV_GROUP; d.rank = 0;
  void* g = start_t(p, c.ctx, &d);
  memset(&d, 0, sizeof d);
  d.type = EV_COLL; d.parentObj = g; d.coll.seqNumber = 0; d.coll.func = "AllReduce"; d.coll.count = 64;
  d.coll.datatype = "ncclFloat32"; d.coll.nChannels = 1; d.coll.nWarps = 8; d.coll.algo = "TREE"; d.coll.proto = "LL";
  void* coll = start_t(p, c.ctx, &d);
  stop_t(p, coll);
  stop_t(p, g);
  uint64_t gpu0 = now_ns(CLOCK_MONOTONIC) + GPU_SKEW - 5000;
  memset(&d, 0, sizeof d);
  d.type = EV_KERNEL_CH; d.parentObj = coll; d.kernelCh.pTimer = gpu0;
  void* k = start_t(p, c.ctx, &d);
  a.pTimer = gpu0 + 1000;
  rec_t(p, k, ST_KERNEL_CH_STOP, &a);
  stop_t(p, k);
  CHECK(P4->finalize(c.ctx) == 0);
}

/* The v5 table: a Send through the v5 entry points (no KernelCh: no GPU time). */
static void v5_send(void) {
  comm_t c = {.hash = 0x5555, .rank = 0, .nranks = 2, .dev = 2};
  comm_init(P5, &c, "v5comm", 0xFFF);
  descr6_t d;
  memset(&d, 0, sizeof d);
  d.type = EV_GROUP_API; d.groupApi.groupDepth = 1;
  void* g = start_t(P5, c.ctx, &d);
  memset(&d, 0, sizeof d);
  d.type = EV_P2P_API; d.parentObj = g; d.p2pApi.func = "Send"; d.p2pApi.count = 100; d.p2pApi.datatype = "ncclInt32";
  void* api = start_t(P5, c.ctx, &d);
  stop_t(P5, api);
  memset(&d, 0, sizeof d);
  d.type = EV_P2P; d.parentObj = api; d.p2p.p.func = "Send"; d.p2p.p.count = 100; d.p2p.p.datatype = "ncclInt32";
  d.p2p.p.peer = 1; d.p2p.p.nChannels = 2;
  stop_t(P5, start_t(P5, c.ctx, &d));
  stop_t(P5, g);
  CHECK(P5->finalize(c.ctx) == 0);
}

/* The v7 table: user tags, kernel variant, a kernel phase. */
static void v7_coll(void) {
  comm_t c = {.hash = 0x7777, .rank = 1, .nranks = 2, .dev = 1};
  comm_init(P7, &c, "v7comm", 0xFFFF);
  descr7_t d;
  sargs_t a;
  memset(&d, 0, sizeof d);
  d.type = EV_GROUP_API; d.rank = 1; d.groupApi.groupDepth = 1;
  void* g = start_t(P7, c.ctx, &d);
  memset(&d, 0, sizeof d);
  d.type = EV_COLL_API; d.parentObj = g; d.rank = 1; d.collApi.func = "ReduceScatter"; d.collApi.count = 128;
  d.collApi.datatype = "ncclBfloat16"; d.collApi.userTag = 0x1234;
  void* api = start_t(P7, c.ctx, &d);
  stop_t(P7, api);
  memset(&d, 0, sizeof d);
  d.type = EV_COLL; d.parentObj = api; d.rank = 1; d.coll.c.func = "ReduceScatter"; d.coll.c.count = 128;
  d.coll.c.datatype = "ncclBfloat16"; d.coll.c.nChannels = 1; d.coll.c.algo = "NVLS"; d.coll.c.proto = "SIMPLE";
  d.coll.kernelVariant = "SymLL"; d.coll.isSymColl = 1; d.coll.userTag = 0x1234;
  void* coll = start_t(P7, c.ctx, &d);
  stop_t(P7, coll);
  stop_t(P7, g);
  uint64_t gpu0 = now_ns(CLOCK_MONOTONIC) + GPU_SKEW - 5000;
  memset(&d, 0, sizeof d);
  d.type = EV_KERNEL_CH; d.parentObj = coll; d.rank = 1; d.kernelCh.pTimer = gpu0;
  void* k = start_t(P7, c.ctx, &d);
  memset(&d, 0, sizeof d);
  d.type = EV_KERNEL_PHASE; d.parentObj = k; d.rank = 1; d.kernelPhase.phaseId = 1; d.kernelPhase.phaseName = "compute";
  d.kernelPhase.pTimer = gpu0 + 10;
  void* ph = start_t(P7, c.ctx, &d);
  a.pTimer = gpu0 + 900;
  rec_t(P7, ph, ST_KERNEL_PHASE_STOP, &a);
  stop_t(P7, ph);
  a.pTimer = gpu0 + 1000;
  rec_t(P7, k, ST_KERNEL_CH_STOP, &a);
  stop_t(P7, k);
  CHECK(P7->finalize(c.ctx) == 0);
}

static long file_size(const char* path) {
  struct stat s;
  return stat(path, &s) == 0 ? (long)s.st_size : -1;
}

static void resolve(void* lib) {
  P = dlsym(lib, "ncclProfiler_v6");
  P5 = dlsym(lib, "ncclProfiler_v5");
  P7 = dlsym(lib, "ncclProfiler_v7");
  P4 = dlsym(lib, "ncclProfiler_v4");
  flush_fn = (int (*)(void))dlsym(lib, "commlens_profiler_flush");
  path_fn = (int (*)(char*, size_t))dlsym(lib, "commlens_profiler_output_path");
  dump_fn = (int (*)(void))dlsym(lib, "commlens_profiler_dump_inflight");
  metrics_fn = (int (*)(void))dlsym(lib, "commlens_profiler_write_metrics");
  CHECK(P && P5 && P7 && P4 && flush_fn && path_fn && dump_fn && metrics_fn);
  CHECK(!strcmp(P->name, "commlens") && P4->name == P->name);
}

static void replay(const char* so, void* lib) {
  comm_t W[4], S[2];
  for (int i = 0; i < 4; i++) W[i] = (comm_t){.hash = 0xA11A11, .rank = i, .nranks = 4, .dev = i};
  concurrently(W, 4, 0);
  S[0] = (comm_t){.hash = 0x5151, .rank = 0, .nranks = 2, .dev = 1};
  S[1] = (comm_t){.hash = 0x5151, .rank = 1, .nranks = 2, .dev = 3};
  comm_init(P, &S[0], "split", 0x7FFF);
  comm_init(P, &S[1], "split", 0x7FFF);
  op_t ops[8];
  for (int r = 0; r < 3; r++) { /* (b): grouped AllReduce over the 4 devices, with proxy steps and net events */
    for (int i = 0; i < 4; i++) set_op(&ops[i], &W[i], K_COLL, "AllReduce", 4096, "ncclFloat32", 4096, "ncclFloat32", 0, -1, 2);
    run_group(ops, 4, 2);
    on_proxy_thread(ops, 4, 2, 2, 1);
  }
  char path[4096];
  CHECK(flush_fn() == 0);
  CHECK(path_fn(path, sizeof path) > 0);
  CHECK(path_fn(path, 4) == -1);
  long size1 = file_size(path);
  CHECK(size1 > 1000); /* the header plus three groups' records are on disk */
  printf("PATH %s\n", path);
  for (int r = 0; r < 2; r++) /* (a): blocking AllGather, Coll count in bytes */
    for (int i = 0; i < 4; i++) {
      set_op(&ops[0], &W[i], K_COLL, "AllGather", 1000, "ncclFloat32", 4000, "ncclInt8", 0, -1, 1);
      run_group(ops, 1, 1);
      on_proxy_thread(ops, 1, 0, 0, 0);
    }
  for (int r = 0; r < 2; r++) { /* p2p ring */
    for (int i = 0; i < 4; i++) {
      set_op(&ops[2 * i], &W[i], K_SEND, "Send", 256, "ncclFloat32", 256, "ncclFloat32", 0, (i + 1) % 4, 1);
      set_op(&ops[2 * i + 1], &W[i], K_RECV, "Recv", 256, "ncclFloat32", 256, "ncclFloat32", 0, (i + 3) % 4, 1);
    }
    run_group(ops, 8, 2);
    on_proxy_thread(ops, 8, 0, 0, 0);
  }
  for (int i = 0; i < 2; i++) set_op(&ops[i], &S[i], K_COLL, "Broadcast", 512, "ncclFloat16", 1024, "ncclInt8", 1, -1, 1);
  run_group(ops, 2, 2);
  on_proxy_thread(ops, 2, 1, 1, 0);
  ce_allgather(&W[0]);
  proxy_ctrl(&W[0]);
  pxn();
  nulls_and_unknowns(&W[1]);
  v4_coll();
  v5_send();
  v7_coll();
  const char* ps = getenv("COMMLENS_PLUGIN_TEST_PANIC_STATE");
  if (ps) { /* the panic is caught inside the plugin and reported as ncclInternalError */
    descr6_t d;
    memset(&d, 0, sizeof d);
    d.type = EV_PROXY_STEP;
    void* h = start(W[2].ctx, &d);
    sargs_t a = {0};
    CHECK(P->recordEventState(h, atoi(ps), &a) == 3);
    stop(h);
  }
  CHECK(flush_fn() == 0);
  CHECK(file_size(path) > size1);
  concurrently(W, 4, 1);
  CHECK(P->finalize(S[0].ctx) == 0);
  CHECK(P->finalize(S[1].ctx) == 0);
  /* NCCL dlcloses after the last finalize and dlopens afresh for a later communicator. */
  const prof_t* before = P;
  CHECK(dlclose(lib) == 0);
  lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  CHECK(lib != NULL);
  resolve(lib);
  printf("REOPEN same_image=%d\n", P == before);
  comm_t R = {.hash = 0x9999, .rank = 0, .nranks = 2, .dev = 3};
  comm_init(P, &R, "again", 0x7FFF);
  set_op(&ops[0], &R, K_COLL, "AllReduce", 64, "ncclFloat32", 64, "ncclFloat32", 0, -1, 1);
  run_group(ops, 1, 1);
  proxy_part(&ops[0], 0, 0, 0);
  CHECK(P->finalize(R.ctx) == 0);
  CHECK(dlclose(lib) == 0);
}

typedef struct { int t, nthreads, iters; pthread_barrier_t* b; } stress_job;
static atomic_int stress_done;
static void* stress_worker(void* arg) {
  stress_job* j = arg;
  comm_t c = {.hash = 0xABCD, .rank = j->t, .nranks = j->nthreads, .dev = j->t};
  pthread_barrier_wait(j->b);
  comm_init(P, &c, "stress", 0x7FFF);
  pthread_barrier_wait(j->b);
  op_t o;
  for (int i = 0; i < j->iters; i++) {
    set_op(&o, &c, K_COLL, "AllReduce", 1024, "ncclFloat32", 1024, "ncclFloat32", 0, -1, 1);
    run_group(&o, 1, 1);
    proxy_part(&o, 1, 1, 0);
  }
  pthread_barrier_wait(j->b);
  CHECK(P->finalize(c.ctx) == 0);
  return NULL;
}
static void* flusher(void* arg) {
  (void)arg;
  while (!atomic_load(&stress_done)) {
    CHECK(flush_fn() == 0);
    usleep(1000);
  }
  return NULL;
}
static void stress(int nthreads, int iters) {
  pthread_t t[256], f;
  stress_job j[256];
  pthread_barrier_t b;
  CHECK(nthreads <= 256);
  pthread_barrier_init(&b, NULL, (unsigned)nthreads);
  CHECK(pthread_create(&f, NULL, flusher, NULL) == 0);
  for (int i = 0; i < nthreads; i++) {
    j[i] = (stress_job){i, nthreads, iters, &b};
    CHECK(pthread_create(&t[i], NULL, stress_worker, &j[i]) == 0);
  }
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  atomic_store(&stress_done, 1);
  pthread_join(f, NULL);
  pthread_barrier_destroy(&b);
}

static void drops(int n) {
  comm_t c = {.hash = 0xD0D0, .rank = 0, .nranks = 2, .dev = 0};
  comm_init(P, &c, "drops", 0x7FFF);
  descr6_t d;
  memset(&d, 0, sizeof d);
  d.type = EV_COLL; d.coll.c.func = "AllReduce"; d.coll.c.datatype = "ncclFloat32"; d.coll.c.count = 8;
  for (int i = 0; i < n; i++) {
    d.coll.c.seqNumber = (uint64_t)i;
    stop(start(c.ctx, &d));
  }
  CHECK(P->finalize(c.ctx) == 0);
}

/* A worker forked after init (a DataLoader worker, say) that exits normally: it must not
 * write the parent's buffered records or END into the parent's file; a communicator it
 * creates itself gets a file of its own. */
static void forking(void) {
  comm_t c = {.hash = 0xF0F0, .rank = 0, .nranks = 2, .dev = 0};
  comm_init(P, &c, "parent", 0x7FFF);
  descr6_t d;
  memset(&d, 0, sizeof d);
  d.type = EV_COLL; d.coll.c.func = "AllReduce"; d.coll.c.datatype = "ncclFloat32"; d.coll.c.count = 8;
  for (int i = 0; i < 10; i++) stop(start(c.ctx, &d));
  fflush(stdout);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    comm_t cc = {.hash = 0xC0C0, .rank = 0, .nranks = 2, .dev = 1};
    comm_init(P, &cc, "child", 0x7FFF);
    d.coll.c.func = "Broadcast";
    stop(start(cc.ctx, &d));
    CHECK(P->finalize(cc.ctx) == 0);
    exit(0);
  }
  int st = 0;
  CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  for (int i = 0; i < 10; i++) stop(start(c.ctx, &d));
  CHECK(P->finalize(c.ctx) == 0);
}

/* NCCL dlcloses the plugin after the last finalize. With every thread that recorded events or
 * started the writer gone, the image really unloads (the writer was joined at the last
 * finalize, the exit handler runs), and the next dlopen starts from fresh statics: a new
 * session, a new file. */
static void* unload_worker(void* arg) {
  op_t* o = arg;
  run_group(o, 1, 1);
  proxy_part(o, 0, 0, 0);
  return NULL;
}
static void unload_cycles(const char* so, int rounds) {
  for (int r = 0; r < rounds; r++) {
    void* lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL);
    resolve(lib);
    comm_t c = {.hash = 0x0100 + (uint64_t)r, .rank = 0, .nranks = 2, .dev = 0};
    concurrently(&c, 1, 0); /* init on its own thread, as NCCL's async init jobs do */
    op_t o;
    set_op(&o, &c, K_COLL, "AllReduce", 64, "ncclFloat32", 64, "ncclFloat32", 0, -1, 1);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, unload_worker, &o) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    concurrently(&c, 1, 1);
    CHECK(dlclose(lib) == 0);
    void* still = dlopen(so, RTLD_NOW | RTLD_NOLOAD);
    printf("UNLOADED %d\n", still == NULL);
    if (still) dlclose(still);
  }
}

#include "bench.c"
#include "hang.c"
#include "metrics.c"

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 3) { fprintf(stderr, "usage: %s PLUGIN.so replay|stress T N|drops N|fork|unload R|bench N T|hang-MODE|metrics W DIR\n", argv[0]); return 2; }
  const char* m = getenv("COMMLENS_PLUGIN_MASK");
  expect_mask = m ? (int)strtol(m, NULL, 0) : 0x1F4F;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror()); return 2; }
  resolve(lib);
  const char* mode = argv[2];
  if (!strcmp(mode, "replay")) replay(argv[1], lib);
  else if (!strcmp(mode, "stress") && argc == 5) stress(atoi(argv[3]), atoi(argv[4]));
  else if (!strcmp(mode, "drops") && argc == 4) drops(atoi(argv[3]));
  else if (!strcmp(mode, "fork")) forking();
  else if (!strcmp(mode, "unload") && argc == 4) { CHECK(dlclose(lib) == 0); unload_cycles(argv[1], atoi(argv[3])); }
  else if (!strcmp(mode, "bench") && argc == 5) { bench(atol(argv[3]), atoi(argv[4])); return 0; }
  else if (!strncmp(mode, "hang-", 5)) hang(mode + 5);
  else if (!strcmp(mode, "metrics") && argc == 5) metrics_scenario(atoi(argv[3]), argv[4]);
  else { fprintf(stderr, "unknown mode %s\n", mode); return 2; }
  printf("EMITTED starts=%ld stops=%ld states=%ld null_handles=%ld\n", atomic_load(&n_start), atomic_load(&n_stop),
         atomic_load(&n_state), atomic_load(&n_null));
  return 0;
}
