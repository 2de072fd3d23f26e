/* Fake-NCCL harness for commlens-plugin: dlopens the plugin like NCCL does and replays NCCL's
 * profiler call sequences without a GPU.
 *
 *   fake_nccl PLUGIN.so replay        one process, 4 devices: concurrent init, ncclGroup batching,
 *                                     p2p ring, proxy ops/steps/net events on a proxy thread, CE,
 *                                     ProxyCtrl, a foreign PXN parent, NULL state args, unknown
 *                                     events/states, the v4/v5/v7 tables, a caught panic,
 *                                     on-demand flush, dlclose + dlopen + reuse
 *   fake_nccl PLUGIN.so stress T N    T threads at once (init, N blocking AllReduce each, finalize)
 *                                     while another thread flushes on demand
 *   fake_nccl PLUGIN.so drops N       N start/stop pairs into a tiny buffer with no writer
 *   fake_nccl PLUGIN.so fork          a child forked after init exits normally / inits its own comm
 *   fake_nccl PLUGIN.so unload R      R rounds of dlopen, init, events on a thread, finalize, dlclose
 *   fake_nccl PLUGIN.so bench N T     ns per start/record/stop triple, plugin vs an empty table
 *   fake_nccl PLUGIN.so hang-join|hang-ring|hang-timeout|hang-signal
 *                                     stalled collectives and in-flight dumps (hang.c)
 *   fake_nccl PLUGIN.so metrics W DIR one slowed rank, live metrics snapshots into DIR (metrics.c)
 *
 * Prints "EMITTED starts=… stops=… states=… null_handles=…" (what the plugin must have
 * recorded) and exits non-zero on any failed check. */
#define _GNU_SOURCE
#include "fake_nccl.h"
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "harness: check failed at line %d: %s\n", __LINE__, #c); exit(3); } } while (0)
#define GPU_SKEW 50000000000ull /* the fake GPU globaltimer runs 50 s ahead of CLOCK_MONOTONIC */

/* ---- fake CUDA driver: the plugin asks it which device a communicator runs on ---- */
static __thread int fake_dev = -1;
__attribute__((visibility("default"))) int cuCtxGetDevice(int* dev) {
  if (fake_dev < 0) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
  *dev = fake_dev;
  return 0;
}
__attribute__((visibility("default"))) int cuDeviceGetAttribute(int* v, int attr, int dev) {
  if (attr == 33) { *v = 0x10 + dev; return 0; } /* PCI bus id */
  if (attr == 34 || attr == 50) { *v = 0; return 0; }
  return 1;
}

static atomic_long n_start, n_stop, n_state, n_null;
static const prof_t* P;            /* the v6 table: what NCCL 2.29/2.30 picks */
static const prof_t *P5, *P7;
static const prof4_t* P4;
static int expect_mask;
static int (*flush_fn)(void);
static int (*path_fn)(char*, size_t);
static int (*dump_fn)(void);
static int (*metrics_fn)(void);
static atomic_int metrics_port = -1; /* from the plugin's "metrics at http://ADDR:PORT/metrics" log line */
static atomic_int hang_dumps; /* "wrote … in-flight dump(s)" messages the plugin logged */

static uint64_t now_ns(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void logger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags; (void)file; (void)line;
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[nccl log %d] %s\n", level, msg);
  if (strstr(msg, "in-flight dump(s)")) atomic_fetch_add(&hang_dumps, 1);
  const char* url = strstr(msg, "metrics at ") ? strstr(msg, "http://") : NULL;
  if (url) {
    const char* colon = strchr(url + 7, ':');
    if (colon) atomic_store(&metrics_port, atoi(colon + 1));
  }
}

/* NCCL's wrappers: start always, stop/record only for non-NULL handles. */
static void* start_t(const prof_t* p, void* ctx, void* d) {
  void* h = NULL;
  CHECK(p->startEvent(ctx, &h, d) == 0);
  atomic_fetch_add(&n_start, 1);
  if (!h) atomic_fetch_add(&n_null, 1);
  return h;
}
static void stop_t(const prof_t* p, void* h) {
  if (!h) return;
  CHECK(p->stopEvent(h) == 0);
  atomic_fetch_add(&n_stop, 1);
}
static void rec_t(const prof_t* p, void* h, int st, sargs_t* a) {
  if (!h) return;
  CHECK(p->recordEventState(h, st, a) == 0);
  atomic_fetch_add(&n_state, 1);
}
static void* start(void* ctx, descr6_t* d) { return start_t(P, ctx, d); }
static void stop(void* h) { stop_t(P, h); }
static void rec(void* h, int st, sargs_t* a) { rec_t(P, h, st, a); }

typedef struct { void* ctx; uint64_t hash; int rank, nranks, dev; uint64_t seq[8]; } comm_t;

static void comm_init(const prof_t* p, comm_t* c, const char* name, int valid) {
  int mask = -1;
  fake_dev = c->dev;
  CHECK(p->init(&c->ctx, c->hash, &mask, name, 1, c->nranks, c->rank, logger) == 0);
  fake_dev = -1;
  CHECK(c->ctx != NULL);
  CHECK(mask == (expect_mask & valid));
}

static int slot(const char* f) {
  static const char* names[] = {"AllReduce", "AllGather", "Broadcast", "ReduceScatter", "Reduce"};
  for (int i = 0; i < 5; i++) if (!strcmp(f, names[i])) return i;
  return 7;
}

enum { K_COLL, K_SEND, K_RECV };
typedef struct {
  comm_t* c; int kind; const char* func; size_t ucount; const char* udtype; size_t ccount; const char* cdtype;
  int root, peer, nch; void* handle;
} op_t;

/* Sequences (a) and (b) of the reference: one GroupApi (deferred to the first enqueue), the API
 * events, then per communicator KernelLaunch, Group and the Coll/P2p task events. */
static void run_group(op_t* ops, int n, int depth) {
  descr6_t d;
  void* api[64];
  memset(&d, 0, sizeof d);
  d.type = EV_GROUP_API; d.rank = ops[0].c->rank; d.groupApi.groupDepth = depth;
  void* g = start(ops[0].c->ctx, &d);
  rec(g, ST_GROUP_START_API_STOP, NULL);
  for (int i = 0; i < n; i++) {
    op_t* o = &ops[i];
    memset(&d, 0, sizeof d);
    d.parentObj = g; d.rank = o->c->rank;
    void* stream = (void*)(uintptr_t)(0x5000 + o->c->dev);
    if (o->kind == K_COLL) {
      d.type = EV_COLL_API;
      d.collApi.func = o->func; d.collApi.count = o->ucount; d.collApi.datatype = o->udtype;
      d.collApi.root = o->root; d.collApi.stream = stream;
    } else {
      d.type = EV_P2P_API;
      d.p2pApi.func = o->func; d.p2pApi.count = o->ucount; d.p2pApi.datatype = o->udtype; d.p2pApi.stream = stream;
    }
    api[i] = start(o->c->ctx, &d);
    stop(api[i]);
  }
  rec(g, ST_GROUP_END_API_START, NULL);
  for (int i = 0; i < n; i++) {
    comm_t* c = ops[i].c;
    int first = 1;
    for (int j = 0; j < i; j++) if (ops[j].c == c) first = 0;
    if (!first) continue;
    memset(&d, 0, sizeof d);
    d.type = EV_KERNEL_LAUNCH; d.parentObj = g; d.rank = c->rank; d.kernelLaunch.stream = (void*)(uintptr_t)(0x5000 + c->dev);
    stop(start(c->ctx, &d));
    memset(&d, 0, sizeof d);
    d.type = EV_GROUP; d.rank = c->rank;
    void* grp = start(c->ctx, &d);
    for (int j = i; j < n; j++) {
      op_t* o = &ops[j];
      if (o->c != c) continue;
      memset(&d, 0, sizeof d);
      d.parentObj = api[j]; d.rank = c->rank;
      if (o->kind == K_COLL) {
        d.type = EV_COLL;
        d.coll.c.seqNumber = c->seq[slot(o->func)]++; d.coll.c.func = o->func;
        d.coll.c.sendBuff = (void*)0x10000; d.coll.c.recvBuff = (void*)0x20000; d.coll.c.count = o->ccount;
        d.coll.c.root = o->root; d.coll.c.datatype = o->cdtype; d.coll.c.nChannels = (uint8_t)o->nch;
        d.coll.c.nWarps = 16; d.coll.c.algo = "RING"; d.coll.c.proto = "SIMPLE"; d.coll.parentGroup = grp;
      } else {
        d.type = EV_P2P;
        d.p2p.p.func = o->func; d.p2p.p.buff = (void*)0x30000; d.p2p.p.datatype = o->udtype;
        d.p2p.p.count = o->ucount; d.p2p.p.peer = o->peer; d.p2p.p.nChannels = (uint8_t)o->nch; d.p2p.parentGroup = grp;
      }
      o->handle = start(c->ctx, &d);
      stop(o->handle);
    }
    stop(grp);
  }
  stop(g);
}

/* The proxy thread's view: KernelCh per channel (GPU timers), then ProxyOps with steps and
 * net-plugin events. Channel ch runs [gpu0 + 100ch, gpu0 + 100ch + 1000 + ch]. */
static void proxy_part(op_t* o, int nops, int nsteps, int net) {
  comm_t* c = o->c;
  descr6_t d;
  sargs_t a;
  uint64_t gpu0 = now_ns(CLOCK_MONOTONIC) + GPU_SKEW - 5000;
  for (int ch = 0; ch < o->nch; ch++) {
    memset(&d, 0, sizeof d);
    d.type = EV_KERNEL_CH; d.parentObj = o->handle; d.rank = c->rank;
    d.kernelCh.channelId = (uint8_t)ch; d.kernelCh.pTimer = gpu0 + 100 * ch;
    void* k = start(c->ctx, &d);
    a.pTimer = gpu0 + 100 * ch + 1000 + ch;
    rec(k, ST_KERNEL_CH_STOP, &a);
    stop(k);
  }
  for (int i = 0; i < nops; i++) {
    int send = i == 0;
    memset(&d, 0, sizeof d);
    d.type = EV_PROXY_OP; d.parentObj = o->handle; d.rank = c->rank;
    d.proxyOp.pid = getpid(); d.proxyOp.peer = (c->rank + 1) % c->nranks; d.proxyOp.nSteps = nsteps;
    d.proxyOp.chunkSize = 65536; d.proxyOp.isSend = send;
    void* op = start(c->ctx, &d);
    memset(&a, 0, sizeof a);
    rec(op, ST_PROXY_OP_IN_PROGRESS_V4, &a);
    for (int s = 0; s < nsteps; s++) {
      memset(&d, 0, sizeof d);
      d.type = EV_PROXY_STEP; d.parentObj = op; d.rank = c->rank; d.proxyStep.step = s;
      void* st = start(c->ctx, &d);
      a.transSize = 0;
      if (send) {
        rec(st, ST_SEND_GPU_WAIT, &a); rec(st, ST_SEND_PEER_WAIT_V4, &a); a.transSize = 65536; rec(st, ST_SEND_WAIT, &a);
      } else {
        rec(st, ST_RECV_WAIT, &a); a.transSize = 65536; rec(st, ST_RECV_FLUSH_WAIT, &a); rec(st, ST_RECV_GPU_WAIT, &a);
      }
      if (net) {
        net_ib_v1_t ib = {.type = 1, .qp = {.device = c->dev, .wr_id = 77, .opcode = send ? 2 : 4, .qpNum = 900 + s, .length = 65536}};
        memset(&d, 0, sizeof d);
        d.type = EV_NET_PLUGIN; d.parentObj = st; d.rank = c->rank; d.netPlugin.id = (1 << 16) | 1; d.netPlugin.data = &ib;
        void* np = start(c->ctx, &d);
        a.data = &ib;
        rec(np, ST_NET_UPDATE, &a);
        stop(np);
      }
      stop(st);
    }
    stop(op);
  }
}

typedef struct { op_t* ops; int n, nops, nsteps, net; } proxy_job;
static void* proxy_thread(void* arg) {
  proxy_job* j = arg;
  for (int i = 0; i < j->n; i++) proxy_part(&j->ops[i], j->nops, j->nsteps, j->net);
  return NULL;
}
/* Proxy events come from another thread, after the parents were stopped. */
static void on_proxy_thread(op_t* ops, int n, int nops, int nsteps, int net) {
  proxy_job j = {ops, n, nops, nsteps, net};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, proxy_thread, &j) == 0);
  CHECK(pthread_join(t, NULL) == 0);
}

typedef struct { comm_t* c; pthread_barrier_t* b; int finalize; } init_job;
static void* init_thread(void* arg) {
  init_job* j = arg;
  pthread_barrier_wait(j->b);
  if (j->finalize) CHECK(P->finalize(j->c->ctx) == 0);
  else comm_init(P, j->c, "world", 0x7FFF);
  return NULL;
}
/* ncclCommInitAll / grouped init: NCCL runs each init on its own thread, all at once. */
static void concurrently(comm_t* cs, int n, int finalize) {
  pthread_t t[64];
  init_job j[64];
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, (unsigned)n);
  for (int i = 0; i < n; i++) {
    j[i] = (init_job){&cs[i], &b, finalize};
    CHECK(pthread_create(&t[i], NULL, init_thread, &j[i]) == 0);
  }
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&b);
}

#include "scenarios.c"
