#!/usr/bin/env python3
"""Driver of scripts/bench-hta: replicates the 8-rank DLRM Kineto set, runs
HolisticTraceAnalysis (HTA) on a trace folder, and compares its figures and
/usr/bin/time -v measurements with commlens' overlap_kineto example.

Subcommands:
  replicate SRC_DIR DST_DIR N   copies SRC's rank files into DST as N ranks
                                (rank r of copy k becomes r + k*len(SRC)),
                                rewriting distributedInfo.rank/world_size
  hta DIR                       runs HTA's comm/comp overlap and kernel-type
                                breakdown; prints one JSON document
  compare LABEL HTA_OUT HTA_TIME CL_OUT CL_TIME
                                prints times, memory, ratios and agreement
"""
import json
import os
import re
import sys


def replicate(src, dst, n):
    files = sorted(f for f in os.listdir(src) if ".json" in f)
    os.makedirs(dst, exist_ok=True)
    docs = []
    for f in files:
        with open(os.path.join(src, f)) as fh:
            docs.append(json.load(fh))
    base = len(docs)
    for k in range(n // base):
        for doc in docs:
            info = doc["distributedInfo"]
            rank = info["rank"] + k * base
            out = dict(doc)
            out["distributedInfo"] = dict(info, rank=rank, world_size=n)
            with open(os.path.join(dst, f"rank{rank:03d}.pt.trace.json"), "w") as fh:
                json.dump(out, fh)


def run_hta(trace_dir):
    import logging

    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    ta = TraceAnalysis(trace_dir=trace_dir)
    overlap = ta.get_comm_comp_overlap(visualize=False)
    kinds, _ = ta.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
    out = {
        "overlap_pct": {str(int(r)): float(p) for r, p in zip(overlap["rank"], overlap["comp_comm_overlap_pctg"])},
        # HTA reports microseconds summed over ranks.
        "kernel_types_us": {str(k): int(v) for k, v in zip(kinds["kernel_type"], kinds["sum"])},
    }
    print(json.dumps(out))


def time_v(path):
    text = open(path).read()
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text).group(1)
    secs = 0.0
    for part in wall.split(":"):
        secs = secs * 60 + float(part)
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    return secs, rss_kb / 1024.0


def compare(label, hta_out, hta_time, cl_out, cl_time):
    hta = json.loads(open(hta_out).read().strip().splitlines()[-1])
    lines = [json.loads(l) for l in open(cl_out) if l.strip()]
    ranks = {str(l["rank"]): l for l in lines if "file" in l}
    total = [l for l in lines if "file" not in l][0]
    worst, missing = 0.0, []
    for r, p in hta["overlap_pct"].items():
        ours = ranks.get(r, {}).get("overlap_pct")
        if ours is None or p != p:  # HTA NaN: no communication
            missing.append(r)
            continue
        worst = max(worst, abs(ours - p))
    kinds_worst = 0.0
    hta_total = sum(hta["kernel_types_us"].values()) or 1
    for k, us in hta["kernel_types_us"].items():
        ours_us = total["kernel_types_ns"].get(k, 0) / 1000.0
        kinds_worst = max(kinds_worst, abs(ours_us - us) / hta_total * 100)
    (ht, hm), (ct, cm) = time_v(hta_time), time_v(cl_time)
    agree = worst <= 0.5 and not missing and kinds_worst <= 0.5
    print(f"{label}: ranks HTA {len(hta['overlap_pct'])} commlens {len(ranks)}")
    print(f"  wall  HTA {ht:8.2f} s   commlens {ct:8.3f} s   speed-up {ht / max(ct, 1e-3):7.1f}x")
    print(f"  peak  HTA {hm:8.1f} MiB commlens {cm:8.1f} MiB  memory ratio {cm / hm:7.3f}")
    print(f"  overlap %: max |commlens - HTA| = {worst:.3f} pp over {len(hta['overlap_pct'])} ranks"
          f"{'; no figure for ranks ' + ','.join(missing) if missing else ''}")
    print(f"  kernel-type breakdown: max difference {kinds_worst:.3f} % of HTA's total")
    print(f"  same answers (within 0.5 pp): {'yes' if agree else 'NO'}")
    for r in sorted(hta["overlap_pct"], key=int)[:8]:
        print(f"    rank {r:>3}: HTA {hta['overlap_pct'][r]:6.2f}%  commlens {ranks.get(r, {}).get('overlap_pct', float('nan')):6.2f}%")
    return agree


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "replicate":
        replicate(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "hta":
        run_hta(sys.argv[2])
    elif cmd == "compare":
        sys.exit(0 if compare(*sys.argv[2:7]) else 1)
    else:
        sys.exit(__doc__)
