"""A small Megatron-shaped training step on real NCCL, for commlens test data.

One process per rank (launched by scripts/gpu/capture.sh, which sets RANK,
WORLD_SIZE, the NCCL debug/profiler variables and, when several ranks share one
GPU, a distinct NCCL_HOSTID per rank). World 4 = TP 2 x DP 2: TP groups {0,1},
{2,3}; DP groups {0,2}, {1,3}. World 8 adds PP 2 (Megatron's rank order):
stage 0 sends two micro-batches' activations to stage 1 and gets two
gradients back each iteration. Each iteration: two TP all-reduces, a sequence-
parallel all-gather + reduce-scatter pair, a TP send/recv exchange, a world
all-to-all (expert dispatch), a DP gradient all-reduce, plus matrix products as
compute. Ground truth injected on purpose, and written to truth.json:
  - rank SLOW_RANK sleeps SLOW_MS before its DP all-reduce from iteration
    SLOW_FROM on: it arrives last, the others wait (a straggler);
  - at the end rank SLOW_RANK sleeps STALL_S before one last world all-reduce,
    longer than the plugin's hang timeout, so ranks 0-2 stall in it and write
    in-flight dumps naming the rank that never arrived (then it arrives and the
    job ends normally).
Iterations PROF_FROM..PROF_TO are recorded by torch.profiler (Kineto JSON).
"""
import json, os, sys, time
import torch
import torch.distributed as dist

ITERS, PROF_FROM, PROF_TO = 16, 3, 8
SLOW_RANK, SLOW_MS, SLOW_FROM = 3, 25, 10
STALL_S = float(os.environ.get("CAPTURE_STALL_S", "6"))

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
out = os.environ["CAPTURE_DIR"]
torch.cuda.set_device(0)
dev = torch.device("cuda", 0)
dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
# Megatron's order: rank = pp_rank * (TP * DP) + dp_rank * TP + tp_rank, with
# TP = DP = 2 and PP = WORLD_SIZE / 4 (1 or 2). Every rank creates every group,
# in the same order (torch's new_group is collective).
TP, DP = 2, 2
PP = world // (TP * DP)
assert PP in (1, 2) and world == TP * DP * PP, "WORLD_SIZE must be 4 or 8"
tp_lists = [[p * 4 + d * 2, p * 4 + d * 2 + 1] for p in range(PP) for d in range(DP)]
dp_lists = [[p * 4 + t, p * 4 + 2 + t] for p in range(PP) for t in range(TP)]
pp_lists = [[d * 2 + t, 4 + d * 2 + t] for d in range(DP) for t in range(TP)] if PP == 2 else []
tp_groups = [dist.new_group(g) for g in tp_lists]
dp_groups = [dist.new_group(g) for g in dp_lists]
pp_groups = [dist.new_group(g) for g in pp_lists]
# CAPTURE_EP_GROUP=1: the all-to-all runs on a group of its own ("ep", all
# ranks). Its self send/recv desynchronise NCCL 2.28's KernelCh accounting on
# the communicator that runs it; on its own group the world keeps true timers.
ep = dist.new_group(list(range(world))) if os.environ.get("CAPTURE_EP_GROUP") == "1" else None
mine = lambda lists, groups: next(g for l, g in zip(lists, groups) if rank in l)
tp = mine(tp_lists, tp_groups)
dp = mine(dp_lists, dp_groups)
pp_rank = rank // (TP * DP)
if PP == 2:
    ppg = mine(pp_lists, pp_groups)
    pp_peer = next(r for l in pp_lists if rank in l for r in l if r != rank)
tp_peer = rank ^ 1

hidden, seq = 512, 512
x = torch.randn(seq, hidden, device=dev, dtype=torch.bfloat16)
w = torch.randn(hidden, hidden, device=dev, dtype=torch.bfloat16)
grads = torch.randn(2 * 1024 * 1024, device=dev, dtype=torch.bfloat16)  # 4 MiB
shard = torch.empty(seq // 2, hidden, device=dev, dtype=torch.bfloat16)
full = torch.empty(seq, hidden, device=dev, dtype=torch.bfloat16)
a2a_in = torch.randn(world * 64 * 1024, device=dev, dtype=torch.float32)  # 1 MiB
a2a_out = torch.empty_like(a2a_in)
p2p_send = torch.randn(256 * 1024, device=dev, dtype=torch.bfloat16)  # 512 KiB
p2p_recv = torch.empty_like(p2p_send)

# Parameters from rank 0, once. CAPTURE_BCAST=0 uses an all-reduce instead (an
# experiment on NCCL 2.28's KernelCh accounting after a broadcast on the world).
if os.environ.get("CAPTURE_BCAST", "1") == "1":
    dist.broadcast(w, src=0)
else:
    dist.all_reduce(w)


def step(it):
    h = x @ w
    dist.all_reduce(h, group=tp)  # attention output
    h = h @ w
    dist.all_reduce(h, group=tp)  # MLP output
    dist.all_gather_into_tensor(full, h[: seq // 2].contiguous(), group=tp)  # SP gather
    dist.reduce_scatter_tensor(shard, full, group=tp)  # SP scatter
    ops = [dist.P2POp(dist.isend, p2p_send, tp_peer), dist.P2POp(dist.irecv, p2p_recv, tp_peer)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    if PP == 2:
        # Two micro-batches through two stages: activations forward, gradients back.
        for _ in range(2):
            if pp_rank == 0:
                dist.send(p2p_send, pp_peer, group=ppg)
            else:
                dist.recv(p2p_recv, pp_peer, group=ppg)
        for _ in range(2):
            if pp_rank == 1:
                dist.send(p2p_send, pp_peer, group=ppg)
            else:
                dist.recv(p2p_recv, pp_peer, group=ppg)
    dist.all_to_all_single(a2a_out, a2a_in, group=ep)  # expert dispatch (world, or ep)
    if rank == SLOW_RANK and it >= SLOW_FROM:
        torch.cuda.synchronize()
        time.sleep(SLOW_MS / 1000)
    dist.all_reduce(grads, group=dp)  # gradients


for it in range(PROF_FROM):
    step(it)
torch.cuda.synchronize()
act = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=act, record_shapes=True) as prof:
    for it in range(PROF_FROM, PROF_TO):
        with torch.profiler.record_function(f"ProfilerStep#{it}"):
            step(it)
        torch.cuda.synchronize()
prof.export_chrome_trace(os.path.join(out, f"kineto-rank{rank}.json"))
for it in range(PROF_TO, ITERS):
    step(it)
torch.cuda.synchronize()
dist.barrier()
if rank == SLOW_RANK:
    time.sleep(STALL_S)
stall = torch.ones(1024, device=dev)
dist.all_reduce(stall)  # the stalled collective: rank SLOW_RANK arrives STALL_S late
torch.cuda.synchronize()
if rank == 0:
    truth = {"world": world, "tp_groups": tp_lists, "dp_groups": dp_lists, "pp_groups": pp_lists, "iterations": ITERS,
             "profiled_iterations": [PROF_FROM, PROF_TO], "slow_rank": SLOW_RANK, "slow_ms": SLOW_MS,
             "slow_from_iteration": SLOW_FROM, "stall_rank": SLOW_RANK, "stall_s": STALL_S,
             "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
             "gpu": torch.cuda.get_device_name(0), "a2a_group": "ep" if ep is not None else "world",
             "log_timestamps": bool(os.environ.get("NCCL_DEBUG_TIMESTAMP_FORMAT"))}
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
dist.destroy_process_group()
