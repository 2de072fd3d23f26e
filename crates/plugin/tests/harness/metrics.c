/* Metrics scenario of the fake-NCCL harness (included by scenarios.c).
 *
 *   metrics W SNAPDIR   one process drives four devices: world (hash 0xA11A11, rank = device) and a 2-rank
 *                       pair "tp" (hash 0x7E57, devices 0 and 1). Every round is one AllReduce of 1 Mi floats
 *                       (4 MiB) on each communicator, whose kernels the fake GPU timers say took 2 ms, except
 *                       on the slowed world rank 2 (8 ms) in phases A and B:
 *                         A: W rounds (one window) with rank 2 slowed, plus a Send/Recv pair on tp and a small
 *                            AllGather on world;                                      -> SNAPDIR/snap-a.prom
 *                         B: W more slowed rounds (the second low window)             -> snap-b.prom
 *                         C: 2 W rounds with rank 2 back to normal (recovery)         -> snap-c.prom
 *                         D: one world AllReduce enqueued on all four ranks, kernels started on two, never done
 *                                                                                     -> snap-d.prom
 *                       Snapshots are taken with commlens_profiler_write_metrics() and copied from
 *                       $COMMLENS_PLUGIN_PROM_DIR. Then "READY port=P" (the metrics port the plugin logged) and
 *                       the harness waits for a line on stdin (the Rust test scrapes meanwhile) before it
 *                       finalizes everything and checks that the metrics file is gone ("REMOVED 1").
 *
 * Durations come from the GPU timers (pTimer) of KernelCh start and KernelChStop, which is what the plugin
 * prefers; the CPU times the proxy sees them at are microseconds apart here. */
#include <dirent.h>

/* The one commlens-*.prom file in $COMMLENS_PLUGIN_PROM_DIR ("" when none). */
static void prom_file(char* out, size_t len) {
  const char* dir = getenv("COMMLENS_PLUGIN_PROM_DIR");
  CHECK(dir != NULL);
  out[0] = 0;
  DIR* d = opendir(dir);
  CHECK(d != NULL);
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (!strncmp(e->d_name, "commlens-", 9) && n > 5 && !strcmp(e->d_name + n - 5, ".prom")) {
      CHECK(out[0] == 0); /* one process, one file */
      snprintf(out, len, "%s/%s", dir, e->d_name);
    }
  }
  closedir(d);
}

static void snapshot(const char* snapdir, const char* name) {
  CHECK(metrics_fn() >= 1);
  char src[4096], dst[4096], buf[65536];
  prom_file(src, sizeof src);
  CHECK(src[0] != 0);
  snprintf(dst, sizeof dst, "%s/%s", snapdir, name);
  FILE* in = fopen(src, "rb");
  FILE* out = fopen(dst, "wb");
  CHECK(in && out);
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) CHECK(fwrite(buf, 1, n, out) == n);
  fclose(in);
  CHECK(fclose(out) == 0);
}

/* Every channel of ops[i] runs [gpu0, gpu0 + dur[i]] on the fake GPU clock. */
static void timed_complete(op_t* ops, int n, const uint64_t* dur) {
  uint64_t gpu0 = now_ns(CLOCK_MONOTONIC) + GPU_SKEW;
  void* k[64][8];
  sargs_t a;
  for (int i = 0; i < n; i++)
    for (int ch = 0; ch < ops[i].nch; ch++) {
      descr6_t d;
      memset(&d, 0, sizeof d);
      d.type = EV_KERNEL_CH; d.parentObj = ops[i].handle; d.rank = ops[i].c->rank;
      d.kernelCh.channelId = (uint8_t)ch; d.kernelCh.pTimer = gpu0;
      k[i][ch] = start(ops[i].c->ctx, &d);
    }
  for (int i = 0; i < n; i++)
    for (int ch = 0; ch < ops[i].nch; ch++) {
      a.pTimer = gpu0 + dur[i];
      rec(k[i][ch], ST_KERNEL_CH_STOP, &a);
      stop(k[i][ch]);
    }
}

static void allreduce_round(comm_t** cs, int n, int slowed_dev, uint64_t slow_factor) {
  op_t ops[8];
  uint64_t dur[8];
  for (int i = 0; i < n; i++) {
    set_op(&ops[i], cs[i], K_COLL, "AllReduce", 1 << 20, "ncclFloat32", 1 << 20, "ncclFloat32", 0, -1, 2);
    dur[i] = 2000000ull * (cs[i]->dev == slowed_dev ? slow_factor : 1);
  }
  run_group(ops, n, n > 1 ? 2 : 1);
  timed_complete(ops, n, dur);
}

static void rounds(comm_t** world, comm_t** tp, int count, uint64_t slow_factor) {
  for (int r = 0; r < count; r++) {
    allreduce_round(world, 4, 2, slow_factor);
    allreduce_round(tp, 2, -1, 1);
  }
}

static void metrics_scenario(int window, const char* snapdir) {
  comm_t W[4], T[2];
  for (int i = 0; i < 4; i++) {
    W[i] = (comm_t){.hash = 0xA11A11, .rank = i, .nranks = 4, .dev = i};
    comm_init(P, &W[i], "world", 0x7FFF);
  }
  for (int i = 0; i < 2; i++) {
    T[i] = (comm_t){.hash = 0x7E57, .rank = i, .nranks = 2, .dev = i};
    comm_init(P, &T[i], "tp", 0x7FFF);
  }
  comm_t* world[4] = {&W[0], &W[1], &W[2], &W[3]};
  comm_t* tp[2] = {&T[0], &T[1]};

  /* A: one window with device 2 four times slower, and a few operations of other kinds. */
  rounds(world, tp, window, 4);
  op_t p2p[2];
  uint64_t p2p_dur[2] = {500000, 500000};
  set_op(&p2p[0], &T[0], K_SEND, "Send", 65536, "ncclFloat16", 65536, "ncclFloat16", 0, 1, 1);
  set_op(&p2p[1], &T[1], K_RECV, "Recv", 65536, "ncclFloat16", 65536, "ncclFloat16", 0, 0, 1);
  run_group(p2p, 2, 2);
  timed_complete(p2p, 2, p2p_dur);
  op_t ag[4];
  uint64_t ag_dur[4] = {30000, 30000, 30000, 30000};
  for (int i = 0; i < 4; i++)
    set_op(&ag[i], &W[i], K_COLL, "AllGather", 1024, "ncclFloat32", 1024, "ncclFloat32", 0, -1, 1);
  run_group(ag, 4, 2);
  timed_complete(ag, 4, ag_dur);
  snapshot(snapdir, "snap-a.prom");

  /* B: the second slow window starts the episode. */
  rounds(world, tp, window, 4);
  snapshot(snapdir, "snap-b.prom");

  /* C: two normal windows end it. */
  rounds(world, tp, 2 * window, 1);
  snapshot(snapdir, "snap-c.prom");

  /* D: an AllReduce in flight: enqueued everywhere, kernels started on devices 0 and 1 only. */
  op_t open[4];
  for (int i = 0; i < 4; i++)
    set_op(&open[i], &W[i], K_COLL, "AllReduce", 1 << 20, "ncclFloat32", 1 << 20, "ncclFloat32", 0, -1, 2);
  run_group(open, 4, 2);
  for (int i = 0; i < 2; i++) kch_open(&open[i], 0);
  usleep(20 * 1000); /* so the oldest operation's age is visibly above zero */
  snapshot(snapdir, "snap-d.prom");

  printf("READY port=%d\n", atomic_load(&metrics_port));
  char line[64];
  (void)!fgets(line, sizeof line, stdin); /* EOF (no stdin) goes on at once */

  finalize_all(T, 2);
  finalize_all(W, 4);
  char left[4096];
  prom_file(left, sizeof left);
  printf("REMOVED %d\n", left[0] == 0);
}
