#!/usr/bin/env bash
# Issue #16's three reader figures on a steadier machine than the 2-core CI VM
# (the device host: 16 cores), old and new binaries alternated in one run.
# Needs, carried under target/devbench/: nccl-400mb-pids.log.gz (gzip of
# scripts/bench's generated 400 MB log), commlens-{base,new} and
# bench_parse-{base,new} (release builds of the two commits).
# Also the two figures with the process pinned to 2 cores and 1 core
# (taskset), the closest this host comes to the 2-core CI machine.
# Usage (device): bash scripts/bench_device.sh [ROUNDS]
set -euo pipefail
d=target/devbench; rounds=${1:-5}
log=/tmp/nccl-400mb-pids.log
gunzip -c $d/nccl-400mb-pids.log.gz > $log
size=$(stat -c %s $log); cat $log > /dev/null  # page cache warm
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cores); log $size bytes"
t() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1; e=$(date +%s.%N); awk -v s=$s -v e=$e 'BEGIN{printf "%.4f", e-s}'; }
declare -A best
c2=2,3; c1=2; [ "$(nproc)" -ge 4 ] || { c2=0,1; c1=0; }  # the first two cores left to the rest of the host
declare -A all
med() { echo $1 | tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
put() { local k=$1 v=$2; all[$k]="${all[$k]:-} $v"; if [ -z "${best[$k]:-}" ] || awk -v a=$v -v b=${best[$k]} 'BEGIN{exit !(a<b)}'; then best[$k]=$v; fi; }
for r in $(seq $rounds); do
  put wc "$(t wc -l $log)"
  for v in base new; do
    put reader-$v "$(t $d/bench_parse-$v --child-parse $log)"
    put one-$v "$(RAYON_NUM_THREADS=1 t $d/commlens-$v stats $log --format json)"
    put two-$v "$(RAYON_NUM_THREADS=2 t $d/commlens-$v stats $log --format json)"
    put all-$v "$(t $d/commlens-$v stats $log --format json)"
    # the 2-core CI machine as closely as this host allows: the process pinned to two (one) cores
    put pin2-$v "$(t taskset -c $c2 $d/commlens-$v stats $log --format json)"
    put pin1-$v "$(t taskset -c $c1 $d/commlens-$v stats $log --format json)"
  done
done
for v in base new; do "$d/commlens-$v" stats $log --format json 2>/dev/null | md5sum | sed "s/^/stats json md5 $v: /"; done
echo "best of $rounds, seconds: $(for k in "${!best[@]}"; do printf '%s=%s ' $k ${best[$k]}; done)"
for v in base new; do
  awk -v n=$size -v w=${best[wc]} -v r=${best[reader-$v]} -v o=${best[one-$v]} -v t=${best[two-$v]} -v a=${best[all-$v]} -v c=$(nproc) -v v=$v -v p2=${best[pin2-$v]} -v p1=${best[pin1-$v]} 'BEGIN{
    printf "%s: figure 3 reader one core %.2f GB/s; figure 2 stats 2 cores / 1 core %.2f; figure 1 stats on 2 cores / wc -l %.2f (on all %d cores %.2f); wc -l %.2f GB/s\n",
      v, n/r/1e9, o/t, w/t, c, w/a, n/w/1e9
    printf "%s, pinned (taskset, 2 cores as on CI): figure 1 %.2f; figure 2 %.2f (1 core %.3f s, 2 cores %.3f s)\n", v, w/p2, p1/p2, p1, p2 }'
done
# The host is shared too: the medians of the same runs, beside the bests.
for v in base new; do
  awk -v w=$(med "${all[wc]}") -v p2=$(med "${all[pin2-$v]}") -v p1=$(med "${all[pin1-$v]}") -v o=$(med "${all[one-$v]}") -v t=$(med "${all[two-$v]}") -v v=$v 'BEGIN{
    printf "%s, medians: pinned figure 1 %.2f, figure 2 %.2f (1 core %.3f s, 2 cores %.3f s); unpinned figure 2 %.2f\n", v, w/p2, p1/p2, p1, p2, o/t }'
done
