//! Fusion of a whole run: an assembled NCCL-log table and the kernel traces of
//! the same job become one table whose operations carry their GPU spans and
//! kernel details.
//!
//! Owns the three steps around the per-rank aligner:
//!
//! 1. **pairing** ([`pair_ranks`]): which trace rank is which table device. By
//!    process id first (a Kineto trace's `pid` and an nsys process are the very
//!    processes that wrote the log), then the global rank the trace names, then
//!    host and CUDA device. Trace ranks and devices left over are reported,
//!    never guessed at.
//! 2. **alignment**: [`crate::align_run`] over the paired ranks together (in
//!    parallel): each rank's records of a logical communicator are tied to its
//!    peers' through the table's logical communicators, so a kernel one trace
//!    lost is placed by its peers' kernels.
//! 3. **attachment**: each matched log record gets its kernel's [`GpuSpan`] and
//!    `KernelInfo` (a batched or fused kernel is attached to every record it
//!    executed); the match's confidence is kept beside the table, unmatched
//!    records and kernels are counted and listed.
//!
//! GPU spans are put in Unix-epoch ns when the trace gives its base time
//! (`KernelTrace::base_time_ns`, as `kineto::to_op_table` does), else they stay
//! in the trace's clock; synchronisation across ranks is the analysis's job
//! (`analyze::clock`).

use crate::align::{align_run, AlignConfig, Alignment, MatchShape, RankInput};
use crate::entry::{KernelEntry, KernelKind, LogEntry};
use commlens_core::model::DevIdx;
use commlens_core::{GpuSpan, OpTable};
use commlens_ingest::kineto::{KernelTrace, NcclKernel, RankTrace};
use std::fmt;

/// Settings of [`fuse_traces`].
#[derive(Debug, Clone, Default)]
pub struct FuseConfig {
    pub align: AlignConfig,
    /// Ignore kernel launch times even when the trace has them (for experiments).
    pub ignore_launch_times: bool,
}

/// How a trace rank was paired with a table device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairedBy {
    /// Same process id (and host, when both name one).
    Pid,
    /// The global rank the trace names (Kineto `distributedInfo.rank`), on
    /// the same host when both sides name one.
    GlobalRank,
    /// Same host and CUDA device.
    Device,
}

impl fmt::Display for PairedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PairedBy::Pid => "pid",
            PairedBy::GlobalRank => "global rank",
            PairedBy::Device => "host+device",
        })
    }
}

/// One trace rank paired with one table device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pairing {
    pub dev: DevIdx,
    /// Index into the `traces` slice and into that trace's `ranks`.
    pub trace: usize,
    pub rank: usize,
    pub by: PairedBy,
}

/// A kernel no log record explains.
#[derive(Debug, Clone, PartialEq)]
pub struct UnmatchedKernel {
    pub name: String,
    pub stream: u64,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// What fusion found on one paired rank.
#[derive(Debug, Clone, PartialEq)]
pub struct RankFusion {
    pub pairing: Pairing,
    pub label: String,
    pub n_logs: usize,
    pub n_kernels: usize,
    /// Log records that received a kernel.
    pub matched_logs: usize,
    /// Kernels that explain at least one record.
    pub matched_kernels: usize,
    /// Matches of two identical records on one kernel (2:1 batching).
    pub batched: usize,
    /// Matches of a Send/Recv group on one SendRecv kernel.
    pub fused_p2p: usize,
    /// Mean confidence of the matches (0 when none).
    pub mean_confidence: f64,
    /// Matches with confidence below [`LOW_CONFIDENCE`].
    pub low_confidence: usize,
    /// Indices into the device's `per_rank` operations left without a kernel.
    pub unmatched_logs: Vec<u32>,
    pub unmatched_kernels: Vec<UnmatchedKernel>,
}

/// Confidence under which a match is counted as doubtful in the summary.
pub const LOW_CONFIDENCE: f32 = 0.5;

/// The result of [`fuse_traces`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FuseReport {
    pub ranks: Vec<RankFusion>,
    /// Table devices with operations that no trace rank was paired with.
    pub unpaired_devices: Vec<DevIdx>,
    /// Trace ranks paired with no device: (trace index, rank index, label).
    pub unpaired_trace_ranks: Vec<(usize, usize, String)>,
    /// Per device, per operation (parallel to `table.per_rank`): the confidence
    /// of the match that gave the operation its kernel, `None` when unmatched.
    pub confidence: Vec<Vec<Option<f32>>>,
}

impl FuseReport {
    pub fn matched_logs(&self) -> usize {
        self.ranks.iter().map(|r| r.matched_logs).sum()
    }
    pub fn total_logs(&self) -> usize {
        self.ranks.iter().map(|r| r.n_logs).sum()
    }
    pub fn matched_kernels(&self) -> usize {
        self.ranks.iter().map(|r| r.matched_kernels).sum()
    }
    pub fn total_kernels(&self) -> usize {
        self.ranks.iter().map(|r| r.n_kernels).sum()
    }
}

/// Why fusion could not run at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FuseError {
    /// No trace rank could be paired with any device of the table.
    NothingPaired { devices: usize, trace_ranks: usize },
}

impl fmt::Display for FuseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FuseError::NothingPaired { devices, trace_ranks } => write!(
                f,
                "no trace rank matches a rank of the NCCL logs ({devices} ranks in the logs, {trace_ranks} in the traces): \
                 pairing uses the process id, then the global rank, then host and CUDA device; \
                 are the logs and traces from the same run?"
            ),
        }
    }
}

impl std::error::Error for FuseError {}

/// Pairs trace ranks with table devices (see the module docs for the order).
/// Each device and each trace rank is used at most once.
pub fn pair_ranks(table: &OpTable, traces: &[KernelTrace]) -> Vec<Pairing> {
    let mut dev_used = vec![false; table.devices.len()];
    let mut out = Vec::new();
    let all: Vec<(usize, usize)> = traces
        .iter()
        .enumerate()
        .flat_map(|(t, tr)| (0..tr.ranks.len()).map(move |r| (t, r)))
        .collect();
    let mut rank_used = vec![false; all.len()];
    for by in [PairedBy::Pid, PairedBy::GlobalRank, PairedBy::Device] {
        for (i, &(t, r)) in all.iter().enumerate() {
            if rank_used[i] {
                continue;
            }
            let rt = &traces[t].ranks[r];
            let found = (0..table.devices.len())
                .filter(|&d| !dev_used[d] && !table.per_rank[d].is_empty())
                .filter(|&d| pairs_by(table, DevIdx(d as u32), rt, by))
                .collect::<Vec<_>>();
            // Ambiguity (one process driving several GPUs without a device in the
            // trace) is resolved by a later, stricter rule or left unpaired.
            if let [d] = found[..] {
                dev_used[d] = true;
                rank_used[i] = true;
                out.push(Pairing { dev: DevIdx(d as u32), trace: t, rank: r, by });
            }
        }
    }
    out.sort_by_key(|p| p.dev.0);
    out
}

fn pairs_by(table: &OpTable, d: DevIdx, rt: &RankTrace, by: PairedBy) -> bool {
    let dev = &table.devices[d.ix()];
    let proc = &table.processes[dev.proc.ix()];
    let host_ok = |h: &Option<String>| h.as_deref().is_none_or(|h| hosts_agree(h, &proc.host));
    match by {
        PairedBy::Pid => {
            rt.pid != 0
                && rt.pid == proc.pid
                && host_ok(&rt.host)
                && match (rt.device, dev.cuda_dev) {
                    (Some(a), Some(b)) => a == b,
                    _ => true,
                }
        }
        PairedBy::GlobalRank => rt.rank.is_some() && rt.rank == dev.global_rank && host_ok(&rt.host),
        PairedBy::Device => {
            rt.host.as_deref().is_some_and(|h| hosts_agree(h, &proc.host))
                && rt.device.is_some()
                && rt.device == dev.cuda_dev
        }
    }
}

/// Host names agree when equal or when one is the other's first label
/// (`node01` vs `node01.cluster.local`).
fn hosts_agree(a: &str, b: &str) -> bool {
    let short = |s: &str| s.split('.').next().unwrap_or(s).to_ascii_lowercase();
    short(a) == short(b)
}

/// Converts a trace kernel into the aligner's input, its times shifted by `base_ns`.
pub fn kernel_entry(k: &NcclKernel, base_ns: i64, use_launch: bool) -> KernelEntry {
    let mut e = KernelEntry::of_kind(k.parsed.kind.map_or(KernelKind::Generic, KernelKind::Op));
    e.dtype = k.parsed.dtype;
    e.redop = k.parsed.redop;
    e.algo = k.parsed.algo;
    e.proto = k.parsed.proto;
    e.stream = k.stream;
    e.start_ns = base_ns + k.start_ns;
    e.end_ns = base_ns + k.end_ns;
    e.launch_ns = if use_launch { k.launch.map(|l| base_ns + l.ts_ns) } else { None };
    e
}

/// One paired rank's aligner inputs: records, kernels, `(handle, logical communicator)`.
type RankOwned = (Vec<LogEntry>, Vec<KernelEntry>, Vec<(u64, u64)>);

/// Aligns every paired rank and attaches the kernels to the table's operations.
/// Operations that already carry a GPU span (a plugin source) keep it.
pub fn fuse_traces(table: &mut OpTable, traces: &[KernelTrace], cfg: &FuseConfig) -> Result<FuseReport, FuseError> {
    let pairings = pair_ranks(table, traces);
    if pairings.is_empty() {
        return Err(FuseError::NothingPaired {
            devices: table.per_rank.iter().filter(|o| !o.is_empty()).count(),
            trace_ranks: traces.iter().map(|t| t.ranks.len()).sum(),
        });
    }
    let inputs: Vec<RankOwned> = pairings
        .iter()
        .map(|p| {
            let ops = &table.per_rank[p.dev.ix()];
            let logs = LogEntry::from_coll_ops(ops);
            let kernels = traces[p.trace].ranks[p.rank]
                .kernels
                .iter()
                .map(|k| kernel_entry(k, traces[p.trace].base_time_ns, !cfg.ignore_launch_times))
                .collect();
            // `LogEntry::comm` is the handle index; its logical communicator ties the members.
            let mut handles = std::collections::HashSet::new();
            let groups: Vec<(u64, u64)> = ops
                .iter()
                .filter(|o| handles.insert(o.comm.0))
                .filter_map(|o| Some((u64::from(o.comm.0), u64::from(table.comm(o.comm).logical?.0))))
                .collect();
            (logs, kernels, groups)
        })
        .collect();
    let refs: Vec<RankInput> = inputs
        .iter()
        .map(|(l, k, g)| RankInput {
            logs: l,
            kernels: k,
            comm_groups: g,
        })
        .collect();
    let alignments = align_run(&refs, &cfg.align);

    let mut report = FuseReport {
        confidence: table.per_rank.iter().map(|o| vec![None; o.len()]).collect(),
        ..FuseReport::default()
    };
    for (p, a) in pairings.iter().zip(&alignments) {
        let tr = &traces[p.trace];
        let r = attach(table, &mut report.confidence[p.dev.ix()], p, &tr.ranks[p.rank], tr.base_time_ns, a);
        report.ranks.push(r);
    }
    let paired_dev: Vec<bool> = {
        let mut v = vec![false; table.devices.len()];
        pairings.iter().for_each(|p| v[p.dev.ix()] = true);
        v
    };
    report.unpaired_devices = (0..table.devices.len())
        .filter(|&d| !paired_dev[d] && !table.per_rank[d].is_empty())
        .map(|d| DevIdx(d as u32))
        .collect();
    for (t, tr) in traces.iter().enumerate() {
        for (r, rt) in tr.ranks.iter().enumerate() {
            if !pairings.iter().any(|p| p.trace == t && p.rank == r) {
                let label = format!("{} rank {} pid {}", tr.path, rt.rank.map_or("?".into(), |x| x.to_string()), rt.pid);
                report.unpaired_trace_ranks.push((t, r, label));
            }
        }
    }
    Ok(report)
}

fn attach(
    table: &mut OpTable,
    confidence: &mut [Option<f32>],
    p: &Pairing,
    rank: &RankTrace,
    base: i64,
    a: &Alignment,
) -> RankFusion {
    let label = table.device_label(p.dev);
    let ops = &mut table.per_rank[p.dev.ix()];
    let mut out = RankFusion {
        pairing: *p,
        label,
        n_logs: ops.len(),
        n_kernels: rank.kernels.len(),
        matched_logs: 0,
        matched_kernels: a.matches.len(),
        batched: 0,
        fused_p2p: 0,
        mean_confidence: 0.0,
        low_confidence: 0,
        unmatched_logs: a.unmatched_logs.clone(),
        unmatched_kernels: a
            .unmatched_kernels
            .iter()
            .map(|&k| {
                let k = &rank.kernels[k as usize];
                UnmatchedKernel { name: k.name.clone(), stream: k.stream, start_ns: base + k.start_ns, end_ns: base + k.end_ns }
            })
            .collect(),
    };
    let mut conf_sum = 0.0;
    for m in &a.matches {
        let k = &rank.kernels[m.kernel as usize];
        match m.shape {
            MatchShape::Batched => out.batched += 1,
            MatchShape::FusedP2p => out.fused_p2p += 1,
            MatchShape::OneToOne => {}
        }
        conf_sum += m.confidence as f64;
        if m.confidence < LOW_CONFIDENCE {
            out.low_confidence += 1;
        }
        for &l in m.logs() {
            out.matched_logs += 1;
            confidence[l as usize] = Some(m.confidence);
            ops.update(l as usize, |op| {
                if op.gpu.is_none() {
                    op.gpu = Some(GpuSpan { start_ns: base + k.start_ns, end_ns: base + k.end_ns });
                }
                if op.kernel.is_none() {
                    op.kernel = Some(std::sync::Arc::new(k.info()));
                }
            });
        }
    }
    if !a.matches.is_empty() {
        out.mean_confidence = conf_sum / a.matches.len() as f64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_agree_on_first_label() {
        assert!(hosts_agree("node01", "node01.cluster.local"));
        assert!(hosts_agree("NODE01", "node01"));
        assert!(!hosts_agree("node01", "node02"));
    }
}
