//! Examples shown under each subcommand's `--help` (`after_help`), kept out
//! of `main.rs` so the argument definitions stay readable.

pub const STATS: &str = "Examples:
  commlens stats run/logs/                       # a folder of NCCL_DEBUG=INFO logs
  commlens stats rank0.log.gz --format json      # gzip is read transparently
  commlens stats all_reduce_perf.out             # nccl-tests results
  commlens stats traces.tar.gz                   # an archive, read as unpacked
  zcat run.log.gz | commlens stats -             # standard input";

pub const TOPO: &str = "Examples:
  commlens topo run/logs/                        # topology dump in the logs, bottleneck per communicator
  commlens topo nccl_topo.xml --format csv       # NCCL_TOPO_DUMP_FILE output";

pub const TRACE: &str = "Examples:
  commlens trace fused/fused.parquet -o trace/   # then open trace/trace.pftrace in ui.perfetto.dev
  commlens trace plugin-out/ -o trace/           # the commlens profiler plugin's files";

pub const HANG: &str = "Examples:
  commlens hang examples/hang-dumps              # a sample set: rank 3 never joined
  commlens hang $COMMLENS_PLUGIN_DIR --format json";

pub const FUSE: &str = "Examples:
  commlens fuse --nccl-log logs/ --nsys node0.sqlite node1.sqlite -o fused/
  commlens fuse --nccl-log logs/ --kineto kineto/ -o fused/ --clock-sync rank";

pub const DIFF: &str = "Examples:
  commlens diff before/logs after/logs           # exit 1 when a figure regressed
  commlens diff a.parquet b.parquet --threshold 10 --format csv
  commlens diff old_all_reduce.out new_all_reduce.out   # two nccl-tests runs, per size";

pub const REPORT: &str = "Examples:
  commlens report run/logs/ -o report.html
  commlens report fused/fused.parquet --model model.conf --baseline all_reduce_perf.out";

pub const MODEL: &str = "Examples:
  commlens model examples/demo-model.conf              # theory only
  commlens model examples/demo-model.conf run/logs/    # theory vs observed
Equation numbers refer to Borzyk, \"Understanding LLM Communication\" (master thesis, Heidelberg 2026).";

pub const EXPORT: &str = "Examples:
  commlens export run/logs/ -o run.parquet
  duckdb -c \"SELECT kind, sum(bytes) FROM 'run.parquet' GROUP BY kind\"
  commlens export logs/$(hostname)/ -o ds/ --partition host   # on every node
  commlens report ds/ -o report.html                # all nodes' shards";

pub const CLUSTER: &str = "Examples:
  commlens cluster list
  commlens cluster show dgx-h100 --nic 8x400g
  commlens cluster show run/logs/                # the cluster a run ran on";

pub const SIMULATE: &str = "Examples:
  commlens simulate examples/demo-model.conf --cluster dgx-h100 -o sim/
  commlens simulate workload.txt --gpus 1024 --mode flow -o sim/     # AICB / SimAI workload
  commlens simulate run/logs --scale-network 2 -o sim/               # what if the network were 2x faster
  commlens simulate gpt.conf --sweep nic=8x100g,8x200g,8x400g -o sim/  # one run per NIC speed, on every core";

pub const DEMO: &str = "Examples:
  commlens demo                                  # into a temporary folder
  commlens demo -o demo/                         # keep the generated run and report";

pub const PREDICT: &str = "Examples:
  commlens predict all_reduce --cluster dgx-h100 --nodes 16 -b 8 -e 8G -f 2
  commlens predict --against all_reduce_perf.out --format json
  commlens predict all_gather --algo pccl --nodes 64";

pub const PLAN: &str = "Examples:
  commlens plan --model gpt3-175b --cluster dgx-h100 --gpus 1024
  commlens plan examples/demo-model.conf --gpus 4 --cluster dgx-a100 --explain 1
  commlens plan --model llama-65b --gpus 1024 --fix family=megatron --format json";

pub const WATCH: &str = "Examples:
  commlens watch $COMMLENS_PLUGIN_DIR            # live view; q or Ctrl-C quits
  ssh node0 -t commlens watch /scratch/clp       # works over ssh (plain ANSI redraw)
  commlens watch clp/ --once                     # one snapshot of the files as they are now
  commlens watch clp/ --interval 5 --format json | jq .comms   # one JSON object per snapshot";
