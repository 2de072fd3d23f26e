#!/usr/bin/env bash
# Real NCCL capture for commlens test data, run on a one-GPU device machine:
# four ranks of scripts/gpu/capture_job.py share the GPU (a distinct
# NCCL_HOSTID per rank, the socket transport over loopback; NCCL >= 2.30 would
# also allow NCCL_MULTI_RANK_GPU_ENABLE). Writes, under $1 (default $OUT):
# NCCL_DEBUG=INFO logs, the commlens plugin's .clp files and hang dumps,
# Kineto traces and truth.json, packed as capture.tgz.
# Needs the plugin built beforehand and carried: .devcarry/libcommlens_plugin.so
set -uo pipefail
out=${1:-$OUT}
dir=$(mktemp -d)/capture
mkdir -p "$dir/logs" "$dir/plugin" "$dir/kineto"
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), torch.cuda.get_device_name(0))"
nvidia-smi -L
# MPS lets the four ranks' kernels run side by side instead of time-sliced;
# without it the job still runs, slower.
if command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d; then
  python3 -c "import torch; torch.ones(1).cuda(); print('MPS ok')" || { echo quit | nvidia-cuda-mps-control; echo "MPS off"; }
fi
plugin=$PWD/.devcarry/libcommlens_plugin.so
test -f "$plugin" || { echo "no plugin at $plugin"; exit 1; }
export MASTER_ADDR=127.0.0.1 MASTER_PORT=29531 WORLD_SIZE=${CAPTURE_WORLD:-4} CAPTURE_DIR=$dir/kineto CAPTURE_EP_GROUP=${CAPTURE_EP_GROUP:-1}
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL,P2P,NET,GRAPH,TUNING,ENV,PROFILE
export NCCL_DEBUG_FILE=$dir/logs/nccl.%h.%p.log
# Timestamps on every line (NCCL >= 2.26) let logs be fused with the Kineto
# traces by time; CAPTURE_LOG_TIMESTAMPS=0 leaves them out (fusion by order only).
if [ "${CAPTURE_LOG_TIMESTAMPS:-1}" = 1 ]; then
  export NCCL_DEBUG_TIMESTAMP_FORMAT="%s.%6f" NCCL_DEBUG_TIMESTAMP_LEVELS=ALL
fi
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_NET=Socket NCCL_SHM_DISABLE=1
export NCCL_PROFILER_PLUGIN=$plugin COMMLENS_PLUGIN_DIR=$dir/plugin COMMLENS_PLUGIN_HANG_TIMEOUT_S=2
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1
pids=()
for r in $(seq 0 $((WORLD_SIZE - 1))); do
  RANK=$r LOCAL_RANK=0 NCCL_HOSTID=capture-host$r timeout 300 python3 scripts/gpu/capture_job.py > "$dir/stdout.$r" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
echo "job exit $rc"
tail -n 5 "$dir"/stdout.* ; grep -h "Loaded\|commlens" "$dir"/logs/*.log | head -8
mv "$dir/kineto/truth.json" "$dir/" 2>/dev/null
du -sh "$dir"/*; ls -la "$dir"/plugin "$dir"/logs
tar czf "$out/capture.tgz" -C "$(dirname "$dir")" capture
ls -la "$out"
exit $rc
