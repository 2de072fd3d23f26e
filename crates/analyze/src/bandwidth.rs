//! Bandwidth of every operation that has a GPU span, against the limit the
//! hardware allows (thesis §4.2.5, nccl-tests `doc/PERFORMANCE.md`).
//!
//! Per operation: `algbw = S / duration` and `busbw = algbw × factor`, with
//! `S` and `factor` taken from one of two conventions the caller picks:
//!
//! | kind | nccl-tests `S` | nccl-tests factor | thesis `S` | thesis γ |
//! |---|---|---|---|---|
//! | AllReduce | bytes | 2(n−1)/n | bytes | 2(n−1)/n ring, **2 tree** |
//! | AllGather, ReduceScatter | **bytes × n** | (n−1)/n | bytes | (n−1)/n |
//! | AllToAll, Gather, Scatter | bytes × n | (n−1)/n | bytes | (n−1)/n ¹ |
//! | Broadcast, Reduce | bytes | 1 | bytes | 1 ¹ |
//! | Send, Recv, SendRecv | bytes | 1 | bytes | 1 |
//!
//! `bytes` is `CollOp::bytes` = count × sizeof(dtype), where NCCL's count is
//! the per-rank send count (AllGather), the per-rank receive count
//! (ReduceScatter) and the per-peer count (AllToAll); nccl-tests' `S` is
//! therefore the whole buffer for every collective, while the thesis (eq. 4.9
//! and 4.10) divides the logged bytes as they are. ¹ Rows the thesis does not
//! list follow nccl-tests' factor. The thesis's γ = 2 for tree AllReduce is
//! what NCCL's tuner uses for non-ring algorithms; nccl-tests uses 2(n−1)/n
//! whatever the algorithm. Other algorithms (NVLS, CollNet, PAT) or an
//! unknown one get the ring factor.
//!
//! Limits come from the communicator's slowest link `B` (eq. 4.12, reused
//! from [`crate::bottleneck`]). nccl-tests: busbw cannot exceed `B`, so
//! `theo_busbw = B`, `theo_algbw = B / factor`. Thesis (eqs. 4.13–4.14):
//! `theo_algbw = B × α`, `theo_busbw = B × β` with α = (n−1)/n, β = 2(n−1)/n
//! (ring AllReduce), α = 1, β = 2 (tree), α = β = (n−1)/n (AllGather, …),
//! α = β = 1 (Broadcast, point-to-point); the thesis's α and β are not
//! consistent with its γ, so its bus and algorithm efficiencies differ (its
//! Fig. 4.2 example: 54.2 % and 72.2 %; nccl-tests: 81.2 % for both).
//! `efficiency = busbw / theo_busbw` and `algo_efficiency = algbw /
//! theo_algbw`, as fractions. A factor of 0 (a collective on one rank) moves
//! no bytes over any link: busbw is 0 and the limits and efficiencies are
//! `None`. A span of zero or negative length gives no bandwidth at all.
//!
//! Aggregates (median, p10, p90 with linear interpolation between closest
//! ranks) are per (logical communicator, kind) and per (kind, power-of-two
//! message-size bucket of `CollOp::bytes`, as [`crate::stats::size_bucket`]).

use crate::bottleneck::bottleneck;
use crate::stats::{bucket_floor, size_bucket};
use commlens_core::model::{DevIdx, LogicalCommIdx};
use commlens_core::{Algorithm, LinkKind, OpKind, OpTable};
use serde::Serialize;
use std::collections::BTreeMap;

/// Which definitions of `S`, bus factor and limits to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum BusConvention {
    /// nccl-tests (and NCCL Inspector): whole-buffer `S`, `2(n−1)/n` for
    /// every AllReduce, limit `busbw ≤ B`.
    #[default]
    NcclTests,
    /// The thesis (§4.2.5): logged bytes, γ = 2 for tree AllReduce, α/β limits.
    Thesis,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct BandwidthOptions {
    pub convention: BusConvention,
    /// When a communicator's bottleneck is unknown (one member, or no pair
    /// with a known link), use the slowest NVL/PCI/SYS/NET link of all logged
    /// topologies, the thesis's conservative estimate.
    pub estimate_unknown: bool,
}

/// Identity of an operation: `table.per_rank[dev].op(index)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct OpRef {
    pub dev: DevIdx,
    pub index: u32,
}

/// The bandwidth figures of one operation (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Metrics {
    /// `S`: bytes divided by the duration.
    pub algo_bytes: u64,
    pub bus_factor: f64,
    pub algbw_gb_s: Option<f64>,
    pub busbw_gb_s: Option<f64>,
    pub theo_algbw_gb_s: Option<f64>,
    pub theo_busbw_gb_s: Option<f64>,
    /// `busbw / theo_busbw` (fraction).
    pub efficiency: Option<f64>,
    /// `algbw / theo_algbw` (fraction).
    pub algo_efficiency: Option<f64>,
}

/// The enrichment record of one operation with a GPU span.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpBandwidth {
    pub op: OpRef,
    pub comm: Option<LogicalCommIdx>,
    pub kind: OpKind,
    /// Communicator size used in the factors.
    pub nranks: u32,
    pub bytes: u64,
    pub duration_ns: i64,
    pub m: Metrics,
}

/// `S` of an operation of `bytes` on `n` ranks.
pub fn algo_bytes(kind: OpKind, bytes: u64, n: u32, conv: BusConvention) -> u64 {
    match (conv, kind) {
        (
            BusConvention::NcclTests,
            OpKind::AllGather | OpKind::ReduceScatter | OpKind::AllToAll | OpKind::Gather | OpKind::Scatter,
        ) => bytes.saturating_mul(n.max(1) as u64),
        _ => bytes,
    }
}

fn is_tree(algo: Option<Algorithm>) -> bool {
    algo == Some(Algorithm::Tree)
}

/// `busbw / algbw`.
pub fn bus_factor(kind: OpKind, n: u32, algo: Option<Algorithm>, conv: BusConvention) -> f64 {
    let n = n.max(1) as f64;
    match kind {
        OpKind::AllReduce if conv == BusConvention::Thesis && is_tree(algo) => 2.0,
        OpKind::AllReduce => 2.0 * (n - 1.0) / n,
        OpKind::AllGather | OpKind::ReduceScatter | OpKind::AllToAll | OpKind::Gather | OpKind::Scatter => {
            (n - 1.0) / n
        }
        OpKind::Broadcast | OpKind::Reduce | OpKind::Send | OpKind::Recv | OpKind::SendRecv => 1.0,
    }
}

/// `(theo_algbw, theo_busbw)` for a slowest link of `bottleneck_gb_s`;
/// `None` when the operation moves nothing over links (factor 0).
pub fn limits(
    kind: OpKind,
    n: u32,
    algo: Option<Algorithm>,
    conv: BusConvention,
    bottleneck_gb_s: f64,
) -> Option<(f64, f64)> {
    let factor = bus_factor(kind, n, algo, conv);
    if factor <= 0.0 || bottleneck_gb_s.is_nan() || bottleneck_gb_s <= 0.0 {
        return None;
    }
    let b = bottleneck_gb_s;
    Some(match conv {
        BusConvention::NcclTests => (b / factor, b),
        BusConvention::Thesis => {
            let nf = n.max(1) as f64;
            let ring = (nf - 1.0) / nf;
            let (alpha, beta) = match kind {
                OpKind::AllReduce if is_tree(algo) => (1.0, 2.0),
                OpKind::AllReduce => (ring, 2.0 * ring),
                OpKind::Broadcast | OpKind::Reduce | OpKind::Send | OpKind::Recv | OpKind::SendRecv => (1.0, 1.0),
                _ => (ring, ring),
            };
            (b * alpha, b * beta)
        }
    })
}

/// Every figure of one operation. `duration_ns ≤ 0` gives no bandwidths;
/// `bottleneck_gb_s = None` gives no limits.
pub fn metrics(
    kind: OpKind,
    bytes: u64,
    n: u32,
    algo: Option<Algorithm>,
    duration_ns: i64,
    bottleneck_gb_s: Option<f64>,
    conv: BusConvention,
) -> Metrics {
    let s = algo_bytes(kind, bytes, n, conv);
    let factor = bus_factor(kind, n, algo, conv);
    let algbw = (duration_ns > 0).then(|| s as f64 / duration_ns as f64); // bytes/ns = GB/s
    let busbw = algbw.map(|a| a * factor);
    let lim = bottleneck_gb_s.and_then(|b| limits(kind, n, algo, conv, b));
    let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if y > 0.0 => Some(x / y),
        _ => None,
    };
    Metrics {
        algo_bytes: s,
        bus_factor: factor,
        algbw_gb_s: algbw,
        busbw_gb_s: busbw,
        theo_algbw_gb_s: lim.map(|l| l.0),
        theo_busbw_gb_s: lim.map(|l| l.1),
        efficiency: ratio(busbw, lim.map(|l| l.1)),
        algo_efficiency: ratio(algbw, lim.map(|l| l.0)),
    }
}

/// p10, median and p90 of a set of values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub p10: f64,
    pub median: f64,
    pub p90: f64,
}

/// Quantile `q` ∈ [0, 1] of sorted values, linear between closest ranks.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let pos = q.clamp(0.0, 1.0) * last as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64))
}

impl Spread {
    /// Sorts `values` (NaNs last) and takes p10/median/p90; `None` when empty.
    pub fn of(values: &mut [f64]) -> Option<Spread> {
        values.sort_by(f64::total_cmp);
        Some(Spread { p10: quantile(values, 0.1)?, median: quantile(values, 0.5)?, p90: quantile(values, 0.9)? })
    }
}

/// One row per (logical communicator, kind).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommBandwidthRow {
    /// `None` for handles that were not grouped into a logical communicator.
    pub comm: Option<LogicalCommIdx>,
    pub name: String,
    pub nranks: u32,
    pub kind: OpKind,
    /// Operations with a positive duration (the ones the spreads describe).
    pub ops: u64,
    pub zero_duration: u64,
    pub bytes: u64,
    pub bottleneck_gb_s: Option<f64>,
    pub link: Option<LinkKind>,
    /// The bottleneck is the all-topology estimate, not this communicator's.
    pub estimated: bool,
    pub busbw: Option<Spread>,
    pub algbw: Option<Spread>,
    pub efficiency: Option<Spread>,
}

/// One row per (kind, message-size bucket).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeBandwidthRow {
    pub kind: OpKind,
    /// Bucket `[lo, 2·lo)` of `CollOp::bytes`.
    pub lo_bytes: u64,
    pub ops: u64,
    pub busbw: Option<Spread>,
    pub algbw: Option<Spread>,
    pub efficiency: Option<Spread>,
}

/// Everything this module computes for a table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BandwidthReport {
    pub convention: BusConvention,
    /// Records of the operations with a GPU span, sorted by [`OpRef`].
    pub ops: Vec<OpBandwidth>,
    pub comms: Vec<CommBandwidthRow>,
    pub sizes: Vec<SizeBandwidthRow>,
    pub ops_without_span: u64,
    pub zero_duration: u64,
    /// Of `zero_duration`: spans that end before they start (implausible;
    /// flagged, no bandwidth computed).
    pub negative_duration: u64,
}

impl BandwidthReport {
    /// The record of one operation, if it had a GPU span.
    pub fn get(&self, r: OpRef) -> Option<&OpBandwidth> {
        self.ops.binary_search_by_key(&r, |o| o.op).ok().map(|i| &self.ops[i])
    }
}

/// Slowest NVL/PCI/SYS/NET link over all topologies (thesis's estimate for
/// communicators of unknown membership).
pub fn estimated_bottleneck(t: &OpTable) -> Option<(f64, LinkKind)> {
    t.topologies
        .iter()
        .flat_map(|topo| topo.links.iter())
        .filter(|l| matches!(l.kind, LinkKind::Nvl | LinkKind::Pci | LinkKind::Sys | LinkKind::Net))
        .filter(|l| l.bw_gb_s > 0.0)
        .map(|l| (l.bw_gb_s, l.kind))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

#[derive(Default)]
struct Acc {
    ops: u64,
    zero: u64,
    bytes: u64,
    busbw: Vec<f64>,
    algbw: Vec<f64>,
    eff: Vec<f64>,
}

impl Acc {
    fn add(&mut self, r: &OpBandwidth) {
        self.bytes = self.bytes.saturating_add(r.bytes);
        match (r.m.algbw_gb_s, r.m.busbw_gb_s) {
            (Some(a), Some(b)) => {
                self.ops += 1;
                self.algbw.push(a);
                self.busbw.push(b);
                if let Some(e) = r.m.efficiency {
                    self.eff.push(e);
                }
            }
            _ => self.zero += 1,
        }
    }
}

/// Computes the records and aggregates of every operation with a GPU span.
pub fn analyze(t: &OpTable, opts: &BandwidthOptions) -> BandwidthReport {
    let conv = opts.convention;
    let estimate = if opts.estimate_unknown { estimated_bottleneck(t) } else { None };
    // Per logical communicator that has a timed operation (the pairwise
    // bottleneck is quadratic in members): (bottleneck, link, estimated).
    let mut timed = vec![false; t.logical.len()];
    for op in t.ops().filter(|o| o.gpu.is_some()) {
        if let Some(l) = t.comms.get(op.comm.ix()).and_then(|c| c.logical) {
            timed[l.ix()] = true;
        }
    }
    let limits_of: Vec<Option<(f64, LinkKind, bool)>> = (0..t.logical.len())
        .map(|i| {
            let many = timed[i] && t.logical[i].members.len() > 1;
            let own = if many { bottleneck(t, LogicalCommIdx(i as u32)) } else { None };
            match own {
                Some(b) => Some((b.bw_gb_s, b.link, false)),
                None => estimate.map(|(bw, link)| (bw, link, true)),
            }
        })
        .collect();
    let mut ops = Vec::new();
    let mut without_span = 0u64;
    for (d, rank_ops) in t.per_rank.iter().enumerate() {
        for (i, op) in rank_ops.iter().enumerate() {
            let Some(span) = op.gpu else {
                without_span += 1;
                continue;
            };
            // No size, no bandwidth (an unknown size is not 0 B).
            if op.size().is_none() {
                continue;
            }
            let member = t.comms.get(op.comm.ix());
            let logical = member.and_then(|c| c.logical);
            let n =
                logical.map(|l| t.logical[l.ix()].nranks).or_else(|| member.and_then(|c| c.nranks)).unwrap_or(1).max(1);
            let b = match logical {
                Some(l) => limits_of[l.ix()].map(|x| x.0),
                None => estimate.map(|e| e.0),
            };
            let duration_ns = span.end_ns.saturating_sub(span.start_ns);
            ops.push(OpBandwidth {
                op: OpRef { dev: DevIdx(d as u32), index: i as u32 },
                comm: logical,
                kind: op.kind,
                nranks: n,
                bytes: op.bytes,
                duration_ns,
                m: metrics(op.kind, op.bytes, n, op.algo, duration_ns, b, conv),
            });
        }
    }
    let mut by_comm: BTreeMap<(Option<LogicalCommIdx>, OpKind), Acc> = BTreeMap::new();
    let mut by_size: BTreeMap<(OpKind, u8), Acc> = BTreeMap::new();
    for r in &ops {
        by_comm.entry((r.comm, r.kind)).or_default().add(r);
        by_size.entry((r.kind, size_bucket(r.bytes))).or_default().add(r);
    }
    let zero_duration = ops.iter().filter(|r| r.m.algbw_gb_s.is_none()).count() as u64;
    let comms = by_comm
        .into_iter()
        .map(|((comm, kind), mut a)| {
            let lim = comm.and_then(|l| limits_of[l.ix()]).or(if comm.is_none() {
                estimate.map(|(bw, link)| (bw, link, true))
            } else {
                None
            });
            CommBandwidthRow {
                comm,
                name: comm.map_or_else(|| "(no logical communicator)".to_string(), |l| t.logical[l.ix()].name.clone()),
                nranks: comm.map_or(1, |l| t.logical[l.ix()].nranks),
                kind,
                ops: a.ops,
                zero_duration: a.zero,
                bytes: a.bytes,
                bottleneck_gb_s: lim.map(|x| x.0),
                link: lim.map(|x| x.1),
                estimated: lim.is_some_and(|x| x.2),
                busbw: Spread::of(&mut a.busbw),
                algbw: Spread::of(&mut a.algbw),
                efficiency: Spread::of(&mut a.eff),
            }
        })
        .collect();
    let sizes = by_size
        .into_iter()
        .map(|((kind, bucket), mut a)| SizeBandwidthRow {
            kind,
            lo_bytes: bucket_floor(bucket),
            ops: a.ops,
            busbw: Spread::of(&mut a.busbw),
            algbw: Spread::of(&mut a.algbw),
            efficiency: Spread::of(&mut a.eff),
        })
        .collect();
    let negative_duration = ops.iter().filter(|r| r.duration_ns < 0).count() as u64;
    BandwidthReport {
        convention: conv,
        ops,
        comms,
        sizes,
        ops_without_span: without_span,
        zero_duration,
        negative_duration,
    }
}

#[cfg(test)]
#[path = "bandwidth_tests.rs"]
mod tests;
