//! The kernel-trace model shared by both GPU-trace readers ([`crate::kineto`]
//! and [`crate::nsys`]): what one trace file says about NCCL, before it is
//! turned into the canonical `OpTable` (see [`super::table`]).
//!
//! A [`KernelTrace`] is one input file. It holds, per rank ([`RankTrace`]: one
//! process driving one GPU), the NCCL kernels in start order, the CPU-side
//! collective calls in start order (Kineto only), the links between the
//! two, and every other GPU activity as compact [`ComputeKernel`]s; per
//! file, the NVTX / `ProfilerStep#` ranges, the process groups and the
//! job's world size; and what the reader counted and warned about.
//!
//! Times are nanoseconds in the source's own clock (`*_ns`); add
//! [`KernelTrace::base_time_ns`] to get Unix-epoch nanoseconds. Kineto puts
//! CPU and GPU events in one clock; nsys kernels are in the GPU clock domain
//! as nsys exports it.
//!
//! The model lives under `kineto/` for file-ownership reasons only: nothing
//! in it is Kineto-specific, and `crate::nsys` re-exports it.

use crate::kernel_name::KernelName;
use commlens_core::{DataType, NcclVersion, OpKind, SourceKind};
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;

/// One trace file, reduced to what concerns NCCL.
#[derive(Debug, Clone, Serialize)]
pub struct KernelTrace {
    pub source: SourceKind,
    /// The file (or the label given to a reader).
    pub path: String,
    /// Kineto `schemaVersion`, nsys `EXPORT_SCHEMA_VERSION`.
    pub source_version: Option<String>,
    /// Add to every `*_ns` field to get Unix-epoch ns (Kineto
    /// `baseTimeNanoseconds`, nsys `TARGET_INFO_SESSION_START_TIME.utcEpochNs`);
    /// 0 when the source does not say.
    pub base_time_ns: i64,
    /// Job size (`distributedInfo.world_size`).
    pub world_size: Option<u32>,
    pub nccl_version: Option<NcclVersion>,
    /// `distributedInfo.backend` (`nccl`).
    pub backend: Option<String>,
    /// Process groups from `distributedInfo.pg_config`, plus groups named only
    /// by operation metadata (`Process Group Name` / `Process Group Ranks`).
    pub process_groups: Vec<ProcessGroup>,
    pub ranks: Vec<RankTrace>,
    /// NVTX push/pop and start/end ranges (nsys), `ProfilerStep#N` (Kineto);
    /// in start order.
    pub ranges: Vec<Range>,
    /// Interned range and domain names; [`Range::name`] indexes it.
    pub names: Vec<String>,
    pub stats: TraceStats,
    /// Things a user should see (the CLI prints them): partial files, kernels
    /// on several devices, non-NCCL communication kernels, capped ranges.
    pub warnings: Vec<String>,
}

/// One rank: a process and the GPU it drives.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RankTrace {
    /// Global rank (`distributedInfo.rank`, nsys `MPI_RANKS`), when known.
    pub rank: Option<u32>,
    /// Host process id (Kineto: pid of the CPU events; nsys: `PROCESSES.pid`).
    pub pid: u32,
    pub host: Option<String>,
    /// CUDA device as the source numbers it (Kineto `device`, nsys `deviceId`).
    pub device: Option<u32>,
    pub gpu_name: Option<String>,
    /// PCI bus id as NCCL prints it (`0000:17:00.0` → `0x17000`).
    pub bus_id: Option<u64>,
    /// NCCL kernels, in start order.
    pub kernels: Vec<NcclKernel>,
    /// CPU-side collective calls (Kineto `record_param_comms` and `nccl:*`
    /// ops), in start order. Includes `wait` calls (`kind == None`).
    pub cpu_ops: Vec<CpuCollective>,
    /// CPU op ↔ kernel links made by the profiler's own ids, in kernel order.
    pub links: Vec<Link>,
    /// Every other GPU activity of the rank (compute kernels, memcpy, memset,
    /// communication kernels that bypass NCCL), in start order, 24 bytes
    /// each: what overlap and kernel-breakdown analyses need, nothing more.
    pub compute: Vec<ComputeKernel>,
    /// Interned names of [`RankTrace::compute`] with their class; indexed by
    /// [`ComputeKernel::name`]. One entry per distinct name, not per kernel.
    pub compute_names: Vec<ComputeName>,
}

/// One non-NCCL GPU activity, kept compactly (24 bytes) because a rank runs
/// hundreds of thousands of them per iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ComputeKernel {
    pub start_ns: i64,
    /// Duration, saturating at `u32::MAX` ns (4.29 s): longer kernels are
    /// not a thing a training step runs, and the cap keeps the record small.
    pub dur_ns: u32,
    /// Start minus the start of its launch call, saturating;
    /// [`ComputeKernel::NO_LAUNCH`] when the launch was not recorded.
    pub launch_lag_ns: u32,
    /// CUDA stream (Kineto `stream`, nsys `streamId`), truncated to 32 bits.
    pub stream: u32,
    /// Index into [`RankTrace::compute_names`].
    pub name: u32,
}

impl ComputeKernel {
    pub const NO_LAUNCH: u32 = u32::MAX;

    pub fn end_ns(&self) -> i64 {
        self.start_ns + self.dur_ns as i64
    }

    /// Start of the launch call on the CPU, when recorded.
    pub fn launch_ns(&self) -> Option<i64> {
        (self.launch_lag_ns != Self::NO_LAUNCH).then(|| self.start_ns - self.launch_lag_ns as i64)
    }
}

/// What a non-NCCL GPU activity is, from its name alone (so every source
/// classifies alike; the rules follow HolisticTraceAnalysis's kernel types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum KernelClass {
    /// Any other kernel.
    Computation,
    /// `Memcpy…`, `Memset…`, `dma…` (copies and fills, kernels or engines).
    Memory,
    /// A communication kernel that is not NCCL's (symmetric memory
    /// `multimem_all_reduce`, custom all-reduce, …) or an `nccl…Kernel` name
    /// our NCCL parser does not know.
    OtherComm,
    /// Neither compute nor memory for HTA: names with `Sync` or an inner `Memcpy`.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComputeName {
    pub name: String,
    pub class: KernelClass,
}

impl KernelClass {
    /// Classifies a GPU activity name that is not an NCCL kernel.
    pub fn of(name: &str, scratch: &mut Vec<u8>) -> KernelClass {
        let b = name.as_bytes();
        if b.starts_with(b"Memcpy") || b.starts_with(b"Memset") || b.starts_with(b"dma") {
            return KernelClass::Memory;
        }
        // HTA's communication pattern is `^nccl.*Kernel`.
        if (b.starts_with(b"nccl") && name.contains("Kernel")) || crate::kernel_name::is_other_comm_kernel(b, scratch) {
            return KernelClass::OtherComm;
        }
        if name.contains("Sync") || name.contains("Memcpy") {
            return KernelClass::Other;
        }
        KernelClass::Computation
    }
}

/// Per-rank interner of compute-kernel names: a lookup by `&str` allocates
/// only the first time a name is seen.
#[derive(Default, Debug, Clone)]
pub(crate) struct ComputeNames {
    pub names: Vec<ComputeName>,
    index: std::collections::HashMap<Box<str>, u32>,
    scratch: Vec<u8>,
}

impl ComputeNames {
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        let class = KernelClass::of(s, &mut self.scratch);
        self.names.push(ComputeName { name: s.to_string(), class });
        self.index.insert(s.into(), i);
        i
    }
}

/// Saturating `i64` → `u32` for durations and lags (negative → 0).
pub(crate) fn sat_u32(v: i64) -> u32 {
    v.clamp(0, u32::MAX as i64 - 1) as u32
}

/// One execution of an NCCL kernel.
#[derive(Debug, Clone, Serialize)]
pub struct NcclKernel {
    pub start_ns: i64,
    pub end_ns: i64,
    pub stream: u64,
    /// CUDA correlation id (links the kernel to its launch call).
    pub correlation: Option<u64>,
    /// Kineto `External id` of the kernel (old Kineto writes the correlation id here).
    pub external_id: Option<u64>,
    pub device: Option<u32>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub static_smem_bytes: Option<u32>,
    pub dynamic_smem_bytes: Option<u32>,
    /// Shared memory in total (Kineto `shared memory`; nsys static + dynamic).
    pub shared_mem_bytes: u32,
    pub registers: u32,
    /// The name as the source wrote it (demangled where available).
    pub name: String,
    pub parsed: KernelName,
    /// Collective metadata the profiler attached to the kernel itself (newer Kineto).
    pub meta: Option<Box<CollMeta>>,
    /// The CPU call that launched it.
    pub launch: Option<Launch>,
    /// Index into [`RankTrace::cpu_ops`] of the linked CPU collective.
    pub cpu_op: Option<u32>,
    /// Ordinal of the event in the source (Kineto event index, nsys row number).
    pub event: u64,
    /// Network bytes the rank's proxy moved while this kernel was the
    /// latest on its process, from NVTX marks that name their size (the
    /// `nccl_nvtx` fork's `ncclNetIsend()`/`ncclNetRecvTest()` ranges with
    /// `Data_Size`); `None` when the source has no such marks.
    pub net: Option<NetBytes>,
}

/// Bytes sent and received over NCCL's network transport during one kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NetBytes {
    pub sent: u64,
    pub received: u64,
    /// Transfers counted (sends plus completed receives).
    pub transfers: u32,
}

/// The CPU-side launch of a kernel (`cudaLaunchKernel`, `cuLaunchKernelEx`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Launch {
    pub tid: u64,
    pub ts_ns: i64,
}

/// One CPU-side collective call: a `record_param_comms` op with the `nccl:*`
/// annotation nested in it, or a `nccl:*` op alone.
#[derive(Debug, Clone, Serialize)]
pub struct CpuCollective {
    pub ts_ns: i64,
    pub dur_ns: i64,
    pub tid: u64,
    /// `record_param_comms` or the `nccl:*` name when it stands alone.
    pub name: String,
    /// The nested `nccl:*` annotation (`nccl:all_reduce`).
    pub annotation: Option<String>,
    pub external_id: Option<u64>,
    pub annotation_external_id: Option<u64>,
    /// From `Collective name`, else from the annotation; `None` for `wait` and
    /// calls without either.
    pub kind: Option<OpKind>,
    pub meta: CollMeta,
    /// Indices into [`RankTrace::kernels`] of the kernels it launched; for a
    /// call of a coalesced group (`batch_isend_irecv`: the `send`/`recv` calls
    /// launch nothing, the closing `nccl:coalesced` launches one kernel for
    /// all), the group's kernels, which the closing call then gives up.
    pub kernels: Vec<u32>,
    pub event: u64,
}

/// Collective metadata of `record_param_comms` (or of the kernel event).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CollMeta {
    /// `Collective name` as written (`allreduce`, `_allgather_base`, `wait`).
    pub collective: Option<String>,
    pub in_nelems: Option<u64>,
    pub out_nelems: Option<u64>,
    pub dtype: Option<DataType>,
    /// `dtype` (or `Input type`) as written.
    pub dtype_name: Option<String>,
    pub group_size: Option<u32>,
    pub pg_name: Option<String>,
    pub pg_desc: Option<String>,
    pub pg_ranks: Option<Vec<u32>>,
    /// `Rank`: the caller's rank for collectives; for `send`/`recv`, PyTorch
    /// writes the peer here instead (see [`CollMeta::peer`]).
    pub rank: Option<u32>,
    /// `Dst Rank` of a `send`, `Src Rank` of a `recv`: the peer's rank in
    /// the process group (NCCL's `peer`).
    pub peer: Option<u32>,
    /// `Seq`: the process group's sequence number of the call.
    pub seq: Option<u64>,
}

/// A CPU op ↔ kernel link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Link {
    /// Index into [`RankTrace::cpu_ops`].
    pub cpu: u32,
    /// Index into [`RankTrace::kernels`].
    pub kernel: u32,
    pub via: LinkVia,
}

/// How a link was made; both come from ids the profiler recorded, not from
/// matching on names or times of separate streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum LinkVia {
    /// The kernel's `External id` is the CPU op's (newer Kineto).
    ExternalId,
    /// The kernel's correlation id names a launch call that ran inside the
    /// CPU op on the same thread (older Kineto, whose kernels repeat the
    /// correlation id as `External id`).
    LaunchNesting,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessGroup {
    pub name: String,
    pub desc: Option<String>,
    /// Global ranks of the members, in group order (empty when unknown).
    pub ranks: Vec<u32>,
    pub size: Option<u32>,
    /// `backend_config` (`cuda:nccl`).
    pub backend: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum RangeKind {
    /// NVTX `nvtxRangePush/Pop` (thread-local, nested).
    PushPop,
    /// NVTX `nvtxRangeStart/End` (may cross threads).
    StartEnd,
    /// Kineto `ProfilerStep#N` (one training iteration).
    ProfilerStep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Range {
    pub pid: u32,
    pub tid: u64,
    pub start_ns: i64,
    pub end_ns: i64,
    pub kind: RangeKind,
    /// Index into [`KernelTrace::names`].
    pub name: u32,
    /// NVTX domain name, index into [`KernelTrace::names`].
    pub domain: Option<u32>,
}

/// What the reader saw, for the report and for loud failures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TraceStats {
    /// Trace events (Kineto) or kernel rows (nsys) read.
    pub events: u64,
    /// GPU kernels of any kind.
    pub gpu_kernels: u64,
    pub nccl_kernels: u64,
    /// NCCL kernels whose name has no known collective (`Generic`, unknown word).
    pub kernels_without_kind: u64,
    /// Communication kernels that are not NCCL's, by name (first 120 bytes).
    pub other_comm_kernels: Vec<(String, u64)>,
    pub cpu_collectives: u64,
    /// Kernel launch calls seen (Kineto `cuda_runtime`/`cuda_driver`, nsys runtime rows).
    pub launches: u64,
    pub linked_kernels: u64,
    /// Ranges dropped beyond the reader's cap.
    pub ranges_dropped: u64,
    /// Malformed events (Kineto) or rows (nsys) skipped, by reason, with
    /// the first one named; the rest of the file is kept.
    pub skipped: Skipped,
}

/// Malformed events or rows a reader skipped instead of failing the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub total: u64,
    /// (reason, count), in order of first appearance; at most
    /// [`Skipped::MAX_REASONS`] reasons, the rest counted under the last.
    pub by_reason: Vec<(String, u64)>,
    /// The first skipped event or row (Kineto: `traceEvents[i]` and its
    /// name; nsys: table and rowid) with its reason.
    pub first: Option<String>,
}

impl Skipped {
    pub const MAX_REASONS: usize = 16;

    /// Counts one skipped item; `first` names it with its problem (called
    /// for the first item only).
    pub(crate) fn add(&mut self, reason: &str, first: impl FnOnce() -> String) {
        self.add_n(reason, 1, first);
    }

    pub(crate) fn add_n(&mut self, reason: &str, n: u64, first: impl FnOnce() -> String) {
        if n == 0 {
            return;
        }
        self.total += n;
        if self.first.is_none() {
            self.first = Some(first());
        }
        if let Some(e) = self.by_reason.iter_mut().find(|(r, _)| r == reason) {
            e.1 += n;
        } else if self.by_reason.len() < Self::MAX_REASONS {
            self.by_reason.push((reason.to_string(), n));
        } else if let Some(e) = self.by_reason.last_mut() {
            e.0 = "other reasons".to_string();
            e.1 += n;
        }
    }

    /// The reader warning (`unit`: `events`, `rows`), when anything was skipped.
    pub fn warning(&self, unit: &str) -> Option<String> {
        if self.total == 0 {
            return None;
        }
        let reasons: Vec<String> = self.by_reason.iter().map(|(r, n)| format!("{n} {r}")).collect();
        Some(format!(
            "skipped {} malformed {unit} ({}); the first: {}",
            self.total,
            reasons.join("; "),
            self.first.as_deref().unwrap_or("?")
        ))
    }
}

impl KernelTrace {
    pub fn n_kernels(&self) -> usize {
        self.ranks.iter().map(|r| r.kernels.len()).sum()
    }

    /// Name of a range or domain.
    pub fn name(&self, i: u32) -> &str {
        self.names.get(i as usize).map_or("?", String::as_str)
    }
}

impl NcclKernel {
    /// The kernel details the canonical table keeps (correlation 0 when unknown).
    pub fn info(&self) -> commlens_core::model::KernelInfo {
        commlens_core::model::KernelInfo {
            name: self.name.clone(),
            grid: self.grid,
            block: self.block,
            shared_mem_bytes: self.shared_mem_bytes,
            registers: self.registers,
            correlation_id: self.correlation.unwrap_or(0),
        }
    }
}

impl RankTrace {
    /// Ground-truth pairs (CPU op index, kernel index) recorded by the
    /// profiler itself, in kernel order. A CPU op that launched several
    /// kernels appears once per kernel. Empty for sources without CPU ops.
    pub fn correlation_pairs(&self) -> Vec<(usize, usize)> {
        self.links.iter().map(|l| (l.cpu as usize, l.kernel as usize)).collect()
    }
}

/// Reader options shared by both trace readers.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// Return a trace without NCCL kernels (with a warning) instead of
    /// failing with [`TraceError::NoNcclKernels`].
    pub allow_no_kernels: bool,
    /// Ranges kept per file; more are counted in [`TraceStats::ranges_dropped`]
    /// with a warning (a run annotated with `emit_nvtx` has one per operator).
    pub max_ranges: usize,
    /// Wall time the SQL of one nsys export may take before the file is
    /// given up as pathological ([`TraceError::Sqlite`] naming it): 600 s,
    /// or `COMMLENS_NSYS_TIME_LIMIT_S` seconds (fractions allowed).
    pub query_time_limit: std::time::Duration,
}

impl Default for TraceOptions {
    fn default() -> Self {
        let limit = std::env::var("COMMLENS_NSYS_TIME_LIMIT_S")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .unwrap_or(600.0);
        TraceOptions {
            allow_no_kernels: false,
            max_ranges: 1 << 20,
            query_time_limit: std::time::Duration::from_secs_f64(limit.min(1e9)),
        }
    }
}

/// Why a trace could not be read.
#[derive(Debug)]
pub enum TraceError {
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Malformed JSON (a truncated file is not an error: what was read is kept, with a warning).
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        msg: String,
    },
    Sqlite {
        path: PathBuf,
        msg: String,
    },
    /// Neither a Chrome trace nor an nsys export.
    NotATrace {
        path: PathBuf,
        reason: String,
    },
    /// The file was read but holds no NCCL kernel: a loud failure, never an
    /// empty result. `summary` says what was there instead.
    NoNcclKernels {
        path: PathBuf,
        summary: String,
    },
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            TraceError::Json { path, line, column, msg } => {
                write!(f, "{}:{line}:{column}: not a readable Chrome trace: {msg}", path.display())
            }
            TraceError::Sqlite { path, msg } => write!(f, "{}: SQLite: {msg}", path.display()),
            TraceError::NotATrace { path, reason } => write!(f, "{}: not a GPU trace: {reason}", path.display()),
            TraceError::NoNcclKernels { path, summary } => write!(
                f,
                "{}: no NCCL kernels found (neither ncclDevKernel_* nor ncclKernel_*): {summary}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for TraceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TraceError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Order-preserving string interner for range and domain names.
#[derive(Default)]
pub(crate) struct Names {
    pub names: Vec<String>,
    index: std::collections::HashMap<String, u32>,
}

impl Names {
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// Appends the standard warning for communication kernels that bypass NCCL.
pub(crate) fn warn_other_comm(stats: &TraceStats, warnings: &mut Vec<String>) {
    let n: u64 = stats.other_comm_kernels.iter().map(|(_, c)| c).sum();
    if n > 0 {
        let names: Vec<&str> = stats.other_comm_kernels.iter().take(3).map(|(s, _)| s.as_str()).collect();
        warnings.push(format!(
            "{n} communication kernels that are not NCCL's (e.g. {}) are counted but not analyzed",
            names.join("; ")
        ));
    }
}

const OTHER_NAMES: &str = "(further names)";

/// Counts one non-NCCL communication kernel by (truncated) name, keeping at
/// most 31 names and a bucket for the rest.
pub(crate) fn count_other_comm(stats: &mut TraceStats, name: &str, n: u64) {
    let mut end = name.len().min(120);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let short = &name[..end];
    let list = &mut stats.other_comm_kernels;
    if let Some(e) = list.iter_mut().find(|(s, _)| s == short) {
        e.1 += n;
    } else if list.len() < 31 {
        list.push((short.to_string(), n));
    } else if let Some(e) = list.iter_mut().find(|(s, _)| s == OTHER_NAMES) {
        e.1 += n;
    } else {
        list.push((OTHER_NAMES.to_string(), n));
    }
}
