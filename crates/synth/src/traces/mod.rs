//! Synthetic GPU captures of a generated run, with the exact log ↔ kernel mapping.
//!
//! Owns the public surface of trace generation: [`TraceConfig`] (what NCCL and the profilers
//! are made to do between the log and the kernels), [`generate_traces`], the result
//! [`GeneratedTraces`] (the NCCL logs that go with the traces, every GPU kernel per rank, and
//! the [`TraceTruth`] that alignment is scored against) and [`drop_log_ops`], the log-side drop
//! used for "NCCL drops" scenarios.
//!
//! Submodules: `logside` (the logs as the traced run wrote them: grad-bucket all-reduces
//! issued during backward, 2:1 batched records), `timeline` (the GPU discrete-event replay of
//! the simulation: compute and NCCL kernels per stream, iteration ranges), `names` (kernel
//! names and launch configurations by NCCL version), `drops` (kernel and log-record drops),
//! `nsys_writer` (one `nsys export --type sqlite` file per node), `kineto_writer` (one PyTorch
//! profiler Chrome trace per rank).
//!
//! The thesis's count mismatches (Tables 4.1/4.2) are reproduced on demand: each Send/Recv
//! group runs as one `SendRecv` kernel (`fuse_sendrecv`); one rank per tensor-parallel group
//! logs every collective twice with consecutive `opCount`s (`batching`); kernels without a log
//! record and records without a kernel come from the two drop fractions.

mod drops;
mod kineto_writer;
mod logside;
mod names;
mod nsys_writer;
mod timeline;

pub use drops::{drop_log_ops, DroppedLogOp};
pub(crate) use timeline::{NCCL_LAUNCH_SPREAD_US, NCCL_LAUNCH_US};

use crate::config::{ConfigError, RunConfig};
use crate::rng::SplitMix64;
use crate::{GeneratedFile, GeneratedRun};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What happens between the NCCL log and the GPU kernels of the synthetic capture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceConfig {
    /// Seed of the trace-side randomness (launch latencies, drops); the run has its own.
    pub seed: u64,
    /// Each Send/Recv group (one `opCount`) runs as ONE SendRecv kernel, as NCCL does;
    /// `false` gives one kernel per Send/Recv record.
    pub fuse_sendrecv: bool,
    /// 2:1 batching of thesis Tables 4.1/4.2: tensor-parallel rank 0 of every TP group (one
    /// rank per TP group, none when tp = 1) logs each collective twice, one kernel per pair.
    pub batching: bool,
    /// Megatron's `--overlap-grad-reduce`: each data-parallel gradient all-reduce is issued
    /// during the last backward pass (one bucket per compute step at its end) instead of after
    /// it, so its kernel overlaps backward compute. Moves those records in the logs.
    pub overlap_grad_reduce: bool,
    /// Fraction of NCCL kernels removed from the traces, per rank (exact count, rounded).
    pub drop_kernels: f64,
    /// Fraction of op records removed from the logs, per rank (exact count, rounded).
    pub drop_log_ops: f64,
    /// Also emit compute kernels (GEMMs, elementwise, optimizer) on the compute stream.
    pub compute_kernels: bool,
    /// Write `MPI_RANKS` into the nsys exports (as when the job is launched through MPI/srun);
    /// without it a node file with several processes has no global ranks.
    pub nsys_mpi_ranks: bool,
    /// Clock error of node k's trace files: node k's clock reads `k × node_clock_skew_ns`
    /// ahead of true time (the epoch base the nsys and Kineto files record is off by that
    /// much, as with unsynchronised host clocks). The truth keeps true times.
    #[serde(default)]
    pub node_clock_skew_ns: i64,
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig {
            seed: 7,
            fuse_sendrecv: true,
            batching: false,
            overlap_grad_reduce: true,
            drop_kernels: 0.0,
            drop_log_ops: 0.0,
            compute_kernels: true,
            nsys_mpi_ranks: true,
            node_clock_skew_ns: 0,
        }
    }
}

/// One op record of a log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogOpRef {
    /// Global rank (= the log file's process).
    pub rank: usize,
    /// Communicator name (`TP0`, `DP1`, ...; [`crate::CommTruth::name`]).
    pub comm: String,
    /// `opCount` as written in this record (hex in the log).
    pub op_count: u64,
    /// `AllReduce`, `Send`, ...
    pub kind: String,
    /// Index among the rank's op records before log drops.
    pub seq: usize,
    /// Index among the op records actually written (after drops); `None` when dropped.
    pub index: Option<usize>,
    /// Time of the record, microseconds since the epoch.
    pub t_us: u64,
}

/// One NCCL kernel and the log records it executes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelTruth {
    pub rank: usize,
    /// Demangled kernel name.
    pub name: String,
    /// Unix-epoch nanoseconds.
    pub start_ns: i64,
    pub end_ns: i64,
    /// CUDA stream id (nsys `streamId`, Kineto `stream`).
    pub stream: u32,
    /// CUDA correlation id (per process).
    pub correlation: u64,
    /// The records (one; two on a batching rank; every Send/Recv of a fused group).
    pub ops: Vec<LogOpRef>,
    /// Index, among the rank's Kineto CPU-side collectives in start order, of the
    /// `record_param_comms` op that launched it (the profiler's link).
    pub cpu_op: usize,
}

/// The known mapping of a synthetic capture.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceTruth {
    /// Per rank, every op record in log order (dropped ones included, `index == None`).
    pub log_ops: Vec<Vec<LogOpRef>>,
    /// Per rank, the NCCL kernels in the traces, in start order (unique start times).
    pub kernels: Vec<Vec<KernelTruth>>,
    /// Kernels removed by `drop_kernels` (their records remain in the logs).
    pub dropped_kernels: Vec<KernelTruth>,
    /// Per rank, the number of compute kernels in the traces.
    pub compute_kernels: Vec<usize>,
    /// Per rank, the Kineto CPU-side collectives (`record_param_comms`), one per launch unit
    /// and per Send/Recv record.
    pub cpu_ops: Vec<usize>,
    /// Ranks whose logs carry 2:1 batched records.
    pub batching_ranks: Vec<usize>,
    /// Per rank, the `ProfilerStep#N` / NVTX iteration ranges (epoch ns).
    pub iterations: Vec<Vec<(i64, i64)>>,
    /// Per rank, nanoseconds during which an NCCL kernel and a compute kernel both run.
    pub overlap_ns: Vec<i64>,
}

impl TraceTruth {
    /// NCCL kernels in the traces, all ranks.
    pub fn n_kernels(&self) -> usize {
        self.kernels.iter().map(Vec::len).sum()
    }

    /// The known mapping as a lookup: (global rank, index of the record in the written
    /// log) → correlation id of the kernel that executes it. Records whose kernel was
    /// dropped, and dropped records, are absent.
    pub fn kernel_of_record(&self) -> std::collections::HashMap<(usize, usize), u64> {
        let mut m = std::collections::HashMap::new();
        for k in self.kernels.iter().flatten() {
            for o in &k.ops {
                if let Some(i) = o.index {
                    m.insert((o.rank, i), k.correlation);
                }
            }
        }
        m
    }
}

/// One GPU kernel of the capture (NCCL or compute), as both writers emit it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceKernel {
    /// Demangled name.
    pub name: String,
    /// Short name (nsys `shortName`: the name up to its parameter list).
    pub short_name: String,
    /// Unix-epoch nanoseconds.
    pub start_ns: i64,
    pub end_ns: i64,
    pub stream: u32,
    pub correlation: u64,
    /// `cudaLaunchKernel` call on the main thread, epoch ns.
    pub launch_ns: i64,
    pub launch_end_ns: i64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub static_smem: u32,
    pub dynamic_smem: u32,
    pub registers: u32,
    /// Index into the rank's `TraceTruth::kernels` for NCCL kernels.
    pub nccl: Option<usize>,
}

/// A CPU-side op of the Kineto trace: a `record_param_comms` with its `nccl:*` annotation,
/// or a compute operator (`aten::*`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct CpuOp {
    pub start_ns: i64,
    pub end_ns: i64,
    pub name: String,
    /// For collectives: PyTorch's collective name (`allreduce`, `broadcast`, `send`, ...).
    pub collective: Option<&'static str>,
    pub annotation: Option<&'static str>,
    pub in_nelems: u64,
    pub out_nelems: u64,
    pub dtype: &'static str,
    /// Index into the layout's communicators.
    pub comm: usize,
    /// The process group's sequence number of this call on this rank.
    pub seq: u64,
    /// Index into the rank's kernel list of the kernel launched inside it.
    pub kernel: Option<usize>,
}

/// Everything of one rank's capture.
#[derive(Clone, Debug)]
pub(crate) struct RankCapture {
    pub pid: u32,
    pub host: String,
    pub node: usize,
    pub dev: usize,
    pub bus_id: u64,
    /// All kernels, start order.
    pub kernels: Vec<TraceKernel>,
    /// CPU ops, start order.
    pub cpu_ops: Vec<CpuOp>,
    /// NVTX ranges (push/pop on the main thread): (start, end, text, NCCL domain?).
    pub nvtx: Vec<(i64, i64, String, bool)>,
}

/// Process-group description for `distributedInfo.pg_config` and the CPU ops' metadata.
#[derive(Clone, Debug)]
pub(crate) struct PgInfo {
    pub name: String,
    pub desc: String,
    pub ranks: Vec<usize>,
}

/// The synthetic capture of a run: logs, traces and their mapping.
#[derive(Clone, Debug)]
pub struct GeneratedTraces {
    /// The run as [`crate::generate`] makes it (logs before any trace-side change, truth).
    pub run: GeneratedRun,
    /// The per-process NCCL logs of the traced run (grad-bucket moves, batching and log
    /// drops applied), same names as `run.files`. Use these with the traces.
    pub logs: Vec<GeneratedFile>,
    /// The known mapping.
    pub truth: TraceTruth,
    pub(crate) ranks: Vec<RankCapture>,
    pub(crate) pgs: Vec<PgInfo>,
    pub(crate) nccl_version: String,
    pub(crate) start_epoch_ns: i64,
    pub(crate) node_clock_skew_ns: i64,
}

impl GeneratedTraces {
    /// How far the clock of `rank`'s node reads ahead of true time in the trace files.
    pub fn clock_error_ns(&self, rank: usize) -> i64 {
        self.ranks[rank].node as i64 * self.node_clock_skew_ns
    }

    /// All kernels of a rank (NCCL and compute), start order.
    pub fn kernels(&self, rank: usize) -> &[TraceKernel] {
        &self.ranks[rank].kernels
    }

    /// Writes one nsys SQLite export per node (`report_<host>.sqlite`); returns the paths.
    pub fn write_nsys(&self, dir: &Path, cfg: &TraceConfig) -> std::io::Result<Vec<PathBuf>> {
        nsys_writer::write(self, dir, cfg)
    }

    /// Writes one Kineto trace per rank (`rank<r>.<host>_<pid>.pt.trace.json[.gz]`).
    pub fn write_kineto(&self, dir: &Path, gzip: bool) -> std::io::Result<Vec<PathBuf>> {
        kineto_writer::write(self, dir, gzip)
    }

    /// Writes the logs of the traced run into `dir`; returns the paths.
    pub fn write_logs(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let mut out = Vec::new();
        for f in &self.logs {
            let p = dir.join(&f.name);
            std::fs::write(&p, &f.contents)?;
            out.push(p);
        }
        Ok(out)
    }
}

/// Generates a run (exactly as [`crate::generate`] does) and its synthetic GPU captures.
pub fn generate_traces(cfg: &RunConfig, tcfg: &TraceConfig) -> Result<GeneratedTraces, ConfigError> {
    for (name, f) in [("drop_kernels", tcfg.drop_kernels), ("drop_log_ops", tcfg.drop_log_ops)] {
        if !(0.0..=1.0).contains(&f) {
            return Err(ConfigError(format!("{name} must be within 0..=1")));
        }
    }
    let (run, layout, out) = crate::generate_full(cfg)?;
    let mut rng = SplitMix64::new(tcfg.seed ^ 0x7472_6163_6573);
    let logs = logside::build(cfg, tcfg, &layout, &out);
    let gpu = timeline::run(cfg, tcfg, &layout, &out, &logs, &mut rng.fork(1));
    let files: Vec<GeneratedFile> = logs
        .iter()
        .enumerate()
        .map(|(r, l)| GeneratedFile {
            name: run.files[r].name.clone(),
            contents: crate::writer::render_file(&l.lines, &layout, r, cfg.timestamps),
        })
        .collect();
    let assembled = drops::assemble(cfg, tcfg, &layout, &out, &logs, gpu, files, &mut rng.fork(2));
    let pgs = layout
        .comms
        .iter()
        .enumerate()
        .map(|(i, c)| PgInfo {
            // PyTorch numbers process groups in creation order ("0" is the default group).
            name: i.to_string(),
            desc: names::pg_desc(c.kind.label()).to_string(),
            ranks: c.members.clone(),
        })
        .collect();
    Ok(GeneratedTraces {
        run,
        logs: assembled.logs,
        truth: assembled.truth,
        ranks: assembled.ranks,
        pgs,
        nccl_version: cfg.nccl_version.clone(),
        start_epoch_ns: cfg.start_epoch_s as i64 * 1_000_000_000,
        node_clock_skew_ns: tcfg.node_clock_skew_ns,
    })
}
