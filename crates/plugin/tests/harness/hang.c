/* Hang scenarios of the fake-NCCL harness (included by scenarios.c). One process drives four
 * devices (ranks) whose collectives stop at different points; the plugin's in-flight dumps are
 * then taken in each of the three ways a user gets them:
 *
 *   hang-join     world W (global rank = device) and TP0 (TP rank = 3 - device). After four
 *                 completed TP collectives (AllReduce, AllReduce, AllGather, AllReduce), TP
 *                 ranks 0-2 enter AllReduce #5 and its kernel starts; TP rank 3 (device 0)
 *                 never enqueues it. A world AllReduce waits behind it on devices 1-3.
 *                 commlens_profiler_dump_inflight().
 *   hang-ring     all four ranks enter AllReduce #3 (2 channels started); the proxy posted
 *                 12, 12, 3, 12 of 16 steps (needs ProxyStep in COMMLENS_PLUGIN_MASK).
 *                 commlens_profiler_dump_inflight().
 *   hang-timeout  two devices; stall 1: an AllReduce whose kernels never finish, dumped on
 *                 request at once, then once by COMMLENS_PLUGIN_HANG_TIMEOUT_S (and not again
 *                 while it lasts); it then completes; stall 2: an AllGather rank 1 never joins,
 *                 dumped again by the timeout.
 *   hang-selfp2p  NCCL 2.28 with torch's all-to-all: each of four ranks sends to and receives
 *                 from every rank, itself included; the self pair never gets KernelCh events
 *                 (no dump may follow: NOSPURIOUS line) and from then on NCCL hands each
 *                 KernelCh of the world communicator an earlier work's timers, at once. Ranks
 *                 0-2 then enter a world AllReduce rank 3 joins only later: their KernelCh
 *                 starts and stops at once, their ProxyOps wait; the timeout must dump it.
 *   hang-signal   all four enter an AllReduce on 4 channels and stop 3, 3, 3, 1 of them;
 *                 raise(SIGUSR1) with a handler of our own installed before the plugin's, which
 *                 must still run (chained) and be back in place after the last finalize.
 *
 * Prints DUMPED/TIMEOUT_DUMPS/FIRST_DUMP_AFTER_MS/CHAINED/RESTORED lines for the Rust side. */

static void* kch_open(op_t* o, int ch) {
  descr6_t d;
  memset(&d, 0, sizeof d);
  d.type = EV_KERNEL_CH; d.parentObj = o->handle; d.rank = o->c->rank; d.kernelCh.channelId = (uint8_t)ch;
  d.kernelCh.pTimer = now_ns(CLOCK_MONOTONIC) + GPU_SKEW;
  return start(o->c->ctx, &d);
}

static void kch_close(void* k) {
  sargs_t a;
  a.pTimer = now_ns(CLOCK_MONOTONIC) + GPU_SKEW;
  rec(k, ST_KERNEL_CH_STOP, &a);
  stop(k);
}

/* One collective on n communicator handles, grouped (one plan per handle). */
static void coll_on(comm_t** cs, int n, const char* func, int nch, op_t* ops) {
  int ag = !strcmp(func, "AllGather");
  for (int i = 0; i < n; i++)
    set_op(&ops[i], cs[i], K_COLL, func, 1024, "ncclFloat32", ag ? 4096 : 1024, ag ? "ncclInt8" : "ncclFloat32", 0,
           -1, nch);
  run_group(ops, n, n > 1 ? 2 : 1);
}

/* Every channel's kernel starts and stops: the collective completes. */
static void complete_all(op_t* ops, int n) {
  for (int i = 0; i < n; i++) proxy_part(&ops[i], 0, 0, 0);
}

/* A ProxyOp of nsteps steps of which the proxy posted `posted`. */
static void proxy_posted(op_t* o, int nsteps, int posted) {
  descr6_t d;
  sargs_t a = {0};
  memset(&d, 0, sizeof d);
  d.type = EV_PROXY_OP; d.parentObj = o->handle; d.rank = o->c->rank; d.proxyOp.pid = getpid();
  d.proxyOp.peer = (o->c->rank + 1) % o->c->nranks; d.proxyOp.nSteps = nsteps; d.proxyOp.chunkSize = 65536;
  d.proxyOp.isSend = 1;
  void* op = start(o->c->ctx, &d);
  rec(op, ST_PROXY_OP_IN_PROGRESS_V4, &a);
  for (int s = 0; s < posted; s++) {
    memset(&d, 0, sizeof d);
    d.type = EV_PROXY_STEP; d.parentObj = op; d.rank = o->c->rank; d.proxyStep.step = s;
    void* st = start(o->c->ctx, &d);
    a.transSize = 65536;
    rec(st, ST_SEND_WAIT, &a);
    stop(st);
  }
}

static int wait_dumps(int n, int max_ms) {
  for (int i = 0; i < max_ms && atomic_load(&hang_dumps) < n; i++) usleep(1000);
  return atomic_load(&hang_dumps);
}

/* World (rank = device) and a 4-rank communicator `hash` whose rank order is reversed or not. */
static void four_ranks(comm_t* W, comm_t* T, uint64_t hash, const char* name, int reversed) {
  for (int i = 0; i < 4; i++) {
    W[i] = (comm_t){.hash = 0xA11A11, .rank = i, .nranks = 4, .dev = i};
    comm_init(P, &W[i], "world", 0x7FFF);
  }
  for (int i = 0; i < 4; i++) {
    T[i] = (comm_t){.hash = hash, .rank = reversed ? 3 - i : i, .nranks = 4, .dev = i};
    comm_init(P, &T[i], name, 0x7FFF);
  }
}

static void finalize_all(comm_t* cs, int n) {
  for (int i = 0; i < n; i++) CHECK(P->finalize(cs[i].ctx) == 0);
}

static void hang_join(void) {
  comm_t W[4], T[4];
  op_t ops[4], wops[4];
  four_ranks(W, T, 0x7E57, "TP0", 1);
  comm_t* tp[4] = {&T[0], &T[1], &T[2], &T[3]};
  const char* history[4] = {"AllReduce", "AllReduce", "AllGather", "AllReduce"};
  for (int r = 0; r < 4; r++) {
    coll_on(tp, 4, history[r], 2, ops);
    complete_all(ops, 4);
  }
  comm_t* joined[3] = {&T[1], &T[2], &T[3]}; /* TP ranks 2, 1, 0 */
  coll_on(joined, 3, "AllReduce", 2, ops);
  for (int i = 0; i < 3; i++)
    for (int ch = 0; ch < 2; ch++) kch_open(&ops[i], ch);
  comm_t* behind[3] = {&W[1], &W[2], &W[3]};
  coll_on(behind, 3, "AllReduce", 2, wops);
  int n = dump_fn();
  printf("DUMPED %d\n", n);
  CHECK(n == 4);
  finalize_all(T, 4);
  finalize_all(W, 4);
}

static void hang_ring(void) {
  comm_t W[4], T[4];
  op_t ops[4];
  int posted[4] = {12, 12, 3, 12};
  four_ranks(W, T, 0x121A6, "ring", 0);
  comm_t* all[4] = {&T[0], &T[1], &T[2], &T[3]};
  for (int r = 0; r < 2; r++) {
    coll_on(all, 4, "AllReduce", 2, ops);
    complete_all(ops, 4);
  }
  coll_on(all, 4, "AllReduce", 2, ops);
  for (int i = 0; i < 4; i++) {
    for (int ch = 0; ch < 2; ch++) kch_open(&ops[i], ch);
    proxy_posted(&ops[i], 16, posted[i]);
  }
  int n = dump_fn();
  printf("DUMPED %d\n", n);
  CHECK(n == 4);
  finalize_all(T, 4);
  finalize_all(W, 4);
}

static void hang_timeout(void) {
  comm_t T[2];
  op_t ops[2];
  void* k[2];
  for (int i = 0; i < 2; i++) {
    T[i] = (comm_t){.hash = 0x71E0, .rank = i, .nranks = 2, .dev = i};
    comm_init(P, &T[i], "pair", 0x7FFF);
  }
  comm_t* both[2] = {&T[0], &T[1]};
  uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  coll_on(both, 2, "AllReduce", 1, ops);
  for (int i = 0; i < 2; i++) k[i] = kch_open(&ops[i], 0);
  CHECK(dump_fn() == 2); /* an early request does not keep the timeout from dumping it */
  CHECK(wait_dumps(2, 10000) == 2);
  printf("FIRST_DUMP_AFTER_MS %d\n", (int)((now_ns(CLOCK_MONOTONIC) - t0) / 1000000));
  usleep(600 * 1000); /* the stall goes on: no second timeout dump for it */
  CHECK(atomic_load(&hang_dumps) == 2);
  for (int i = 0; i < 2; i++) kch_close(k[i]);
  coll_on(both, 1, "AllGather", 1, ops); /* rank 1 never joins */
  kch_open(&ops[0], 0);
  CHECK(wait_dumps(3, 10000) == 3);
  usleep(100 * 1000);
  printf("TIMEOUT_DUMPS %d\n", atomic_load(&hang_dumps) - 1);
  finalize_all(T, 2);
}

/* A ProxyOp the proxy posted and, when `done`, finished. */
static void* proxy_op_open(op_t* o, int peer) {
  descr6_t d;
  memset(&d, 0, sizeof d);
  d.type = EV_PROXY_OP; d.parentObj = o->handle; d.rank = o->c->rank; d.proxyOp.pid = getpid();
  d.proxyOp.peer = peer; d.proxyOp.nSteps = 6; d.proxyOp.chunkSize = 65536; d.proxyOp.isSend = 1;
  return start(o->c->ctx, &d);
}

static void hang_selfp2p(void) {
  comm_t W[4];
  op_t a2a[8], ops[4];
  void* px[4][2];
  for (int i = 0; i < 4; i++) {
    W[i] = (comm_t){.hash = 0x5E1F, .rank = i, .nranks = 4, .dev = i};
    comm_init(P, &W[i], "world", 0x7FFF);
  }
  for (int r = 0; r < 4; r++) { /* ncclAlltoAll: one group of Send/Recv per peer, the own rank first */
    for (int k = 0; k < 4; k++) {
      int peer = (r + k) % 4;
      set_op(&a2a[2 * k], &W[r], K_SEND, "Send", 65536, "ncclFloat32", 65536, "ncclFloat32", 0, peer, 2);
      set_op(&a2a[2 * k + 1], &W[r], K_RECV, "Recv", 65536, "ncclFloat32", 65536, "ncclFloat32", 0, peer, 2);
    }
    run_group(a2a, 8, 1);
    for (int k = 2; k < 8; k++) proxy_part(&a2a[k], 0, 0, 0); /* the self pair (0, 1) gets none */
  }
  usleep(600 * 1000); /* twice the timeout with nothing really open */
  printf("NOSPURIOUS %d\n", atomic_load(&hang_dumps) == 0);
  comm_t* first3[3] = {&W[0], &W[1], &W[2]};
  coll_on(first3, 3, "AllReduce", 1, ops);
  for (int i = 0; i < 3; i++) {
    px[i][0] = proxy_op_open(&ops[i], (i + 1) % 4);
    px[i][1] = proxy_op_open(&ops[i], (i + 3) % 4);
    kch_close(kch_open(&ops[i], 0)); /* an earlier work's timers, delivered at once */
  }
  CHECK(wait_dumps(1, 10000) == 1);
  printf("DUMPED %d\n", atomic_load(&hang_dumps));
  comm_t* last[1] = {&W[3]}; /* rank 3 arrives: everyone's transfers finish */
  coll_on(last, 1, "AllReduce", 1, &ops[3]);
  px[3][0] = proxy_op_open(&ops[3], 0);
  px[3][1] = proxy_op_open(&ops[3], 2);
  kch_close(kch_open(&ops[3], 0));
  for (int i = 0; i < 4; i++) { stop(px[i][0]); stop(px[i][1]); }
  finalize_all(W, 4);
}

static atomic_int usr1_seen;
static void on_usr1(int sig) {
  (void)sig;
  atomic_fetch_add(&usr1_seen, 1);
}

static void hang_signal(void) {
  struct sigaction sa, cur;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0); /* before the plugin's first init */
  comm_t W[4], T[4];
  op_t ops[4];
  int stopped[4] = {3, 3, 3, 1};
  four_ranks(W, T, 0x5167, "sig", 0);
  comm_t* all[4] = {&T[0], &T[1], &T[2], &T[3]};
  coll_on(all, 4, "AllReduce", 4, ops);
  complete_all(ops, 4);
  coll_on(all, 4, "AllReduce", 4, ops);
  for (int i = 0; i < 4; i++)
    for (int ch = 0; ch < 4; ch++) {
      void* kh = kch_open(&ops[i], ch);
      if (ch < stopped[i]) kch_close(kh);
    }
  CHECK(raise(SIGUSR1) == 0);
  CHECK(atomic_load(&usr1_seen) == 1); /* chained synchronously */
  CHECK(wait_dumps(1, 10000) == 1);
  finalize_all(T, 4);
  finalize_all(W, 4);
  CHECK(sigaction(SIGUSR1, NULL, &cur) == 0);
  printf("RESTORED %d\n", cur.sa_handler == on_usr1);
  CHECK(raise(SIGUSR1) == 0);
  printf("CHAINED %d\n", atomic_load(&usr1_seen));
  CHECK(atomic_load(&hang_dumps) == 1);
}

static void hang(const char* which) {
  if (!strcmp(which, "join")) hang_join();
  else if (!strcmp(which, "ring")) hang_ring();
  else if (!strcmp(which, "timeout")) hang_timeout();
  else if (!strcmp(which, "signal")) hang_signal();
  else if (!strcmp(which, "selfp2p")) hang_selfp2p();
  else { fprintf(stderr, "unknown hang scenario %s\n", which); exit(2); }
}
