//! Glue between analyses and trace export: per-operation bandwidth figures,
//! the communicator's parallelism class and, when given, the collective
//! model's expectation (`expected_us`, `expected_busbw_gb_s`,
//! `efficiency_vs_model`), as extra slice arguments.

use commlens_analyze::bandwidth::{self, BandwidthOptions, BandwidthReport, OpRef};
use commlens_analyze::classify::{self, Parallelism};
use commlens_core::model::DevIdx;
use commlens_core::{CollOp, OpTable};
use commlens_export::{ArgValue, Enrich};

pub struct Enrichment<'t> {
    table: &'t OpTable,
    bw: BandwidthReport,
    /// Where each operation sits, by (communicator, `comm_seq`), which no
    /// two operations share: for `Enrich::args`, which sees only the
    /// operation. Built on first use; the exporters call `args_at`, which
    /// is told the position, so they never build it.
    refs: std::sync::OnceLock<std::collections::HashMap<(u32, u64), (u32, u32)>>,
    class: Vec<Option<Parallelism>>,
    /// Per device, per operation: confidence of the fusion match, when fused.
    confidence: Option<&'t [Vec<Option<f32>>]>,
    /// The collective model's figures per operation (`crate::expected`).
    expected: Option<&'t crate::expected::Expected<'t>>,
}

impl<'t> Enrichment<'t> {
    pub fn new(table: &'t OpTable) -> Self {
        let bw = bandwidth::analyze(table, &BandwidthOptions::default());
        if bw.negative_duration > 0 {
            eprintln!(
                "warning: {} operations end before they start (GPU span end < start): implausible, no bandwidth computed for them",
                bw.negative_duration
            );
        }
        let mut class = vec![None; table.logical.len()];
        for c in classify::infer(table).comms {
            class[c.comm.ix()] = Some(c.class);
        }
        Enrichment { table, bw, refs: std::sync::OnceLock::new(), class, confidence: None, expected: None }
    }

    /// The bandwidth figures every operation is judged by (for the model's
    /// measured side, so both use one computation).
    pub fn bandwidth(&self) -> &BandwidthReport {
        &self.bw
    }

    /// Adds the collective model's expectation of each operation.
    pub fn with_expected(mut self, e: &'t crate::expected::Expected<'t>) -> Self {
        self.expected = Some(e);
        self
    }

    /// Adds each operation's fusion confidence (`commlens_fuse::FuseReport::confidence`).
    pub fn with_confidence(mut self, c: &'t [Vec<Option<f32>>]) -> Self {
        self.confidence = Some(c);
        self
    }

    /// Bandwidth figures and class of one operation, as the trace arguments
    /// say them (for other sinks: Parquet columns).
    pub fn op_figures(&self, d: usize, i: usize) -> OpFigures {
        let b = self.bw.get(OpRef { dev: DevIdx(d as u32), index: i as u32 });
        let op = &self.table.per_rank[d].op(i);
        OpFigures {
            algbw_gb_s: b.and_then(|b| b.m.algbw_gb_s),
            busbw_gb_s: b.and_then(|b| b.m.busbw_gb_s),
            efficiency: b.and_then(|b| b.m.efficiency),
            parallelism: self.class_label(op),
            confidence: self.confidence.and_then(|c| c.get(d)?.get(i).copied().flatten()),
        }
    }
}

/// Per-operation figures for column sinks.
pub struct OpFigures {
    pub algbw_gb_s: Option<f64>,
    pub busbw_gb_s: Option<f64>,
    pub efficiency: Option<f64>,
    pub parallelism: Option<String>,
    pub confidence: Option<f32>,
}

/// NVTX / profiler-step ranges of kernel traces, for the exporters' ranges
/// process (rank from the trace's `distributedInfo` or its process), in the
/// fused table's clock (epoch ns when the trace gives its base time). NCCL's
/// own per-operation NVTX ranges (domain `NCCL`, `ncclAllReduce`…) are left
/// out: the operations are drawn already.
pub fn trace_ranges(traces: &[commlens_ingest::kineto::KernelTrace]) -> Vec<commlens_export::TimeRange> {
    let mut out = Vec::new();
    for t in traces {
        let name = |i: u32| t.names.get(i as usize).map_or("", |s| s.as_str());
        for r in &t.ranges {
            let (n, domain) = (name(r.name), r.domain.map_or("", name));
            if domain.eq_ignore_ascii_case("nccl") || n.starts_with("nccl") {
                continue;
            }
            let rank = t.ranks.iter().find(|x| x.pid == r.pid).and_then(|x| x.rank);
            out.push(commlens_export::TimeRange {
                name: n.to_string(),
                start_ns: t.base_time_ns + r.start_ns,
                end_ns: t.base_time_ns + r.end_ns,
                rank,
            });
        }
    }
    out
}

impl Enrichment<'_> {
    /// Where `op` (an operation of the table) sits: its rank and index there.
    fn op_ref(&self, op: &CollOp) -> Option<OpRef> {
        let refs = self.refs.get_or_init(|| {
            let mut m = std::collections::HashMap::new();
            for (d, ops) in self.table.per_rank.iter().enumerate() {
                for (i, o) in ops.iter().enumerate() {
                    m.entry((o.comm.0, o.comm_seq)).or_insert((d as u32, i as u32));
                }
            }
            m
        });
        if let Some(&(d, i)) = refs.get(&(op.comm.0, op.comm_seq)) {
            if self.table.per_rank[d as usize].op(i as usize) == *op {
                return Some(OpRef { dev: DevIdx(d), index: i });
            }
        }
        // A table whose sequence numbers repeat (hand-built ones): search the rank.
        let i = self.table.per_rank.get(op.dev.ix())?.iter().position(|o| o == *op)?;
        Some(OpRef { dev: op.dev, index: i as u32 })
    }

    fn args_of(&self, at: Option<OpRef>, op: &CollOp) -> Vec<(&'static str, ArgValue)> {
        let mut out = Vec::new();
        if let Some(p) = self.class_label(op) {
            out.push(("parallelism", ArgValue::Str(p)));
        }
        let r = at.as_ref();
        if let (Some(c), Some(r)) = (self.confidence, r) {
            if let Some(v) = c.get(r.dev.ix()).and_then(|v| v.get(r.index as usize)).copied().flatten() {
                out.push(("fusion confidence", ArgValue::Float(v as f64)));
            }
        }
        if let Some(x) = r.zip(self.expected).and_then(|(r, e)| e.get(r.dev.ix(), r.index as usize)) {
            out.push(("expected_us", ArgValue::Float(x.time_us)));
            out.push(("expected_busbw_gb_s", ArgValue::Float(x.busbw_gb_s)));
            if let Some(v) = x.efficiency {
                out.push(("efficiency_vs_model", ArgValue::Float(v)));
            }
        }
        let Some(b) = r.and_then(|r| self.bw.get(*r)) else {
            return out;
        };
        out.push(("bus factor", ArgValue::Float(b.m.bus_factor)));
        let f = |name, v: Option<f64>, out: &mut Vec<(&'static str, ArgValue)>| {
            if let Some(v) = v {
                out.push((name, ArgValue::Float(v)));
            }
        };
        f("algbw GB/s", b.m.algbw_gb_s, &mut out);
        f("busbw GB/s", b.m.busbw_gb_s, &mut out);
        f("theoretical algbw GB/s", b.m.theo_algbw_gb_s, &mut out);
        f("theoretical busbw GB/s", b.m.theo_busbw_gb_s, &mut out);
        f("efficiency", b.m.efficiency, &mut out);
        if let Some(row) = b.comm.and_then(|l| self.bw.comms.iter().find(|r| r.comm == Some(l))) {
            if let (Some(bn), Some(link)) = (row.bottleneck_gb_s, row.link) {
                out.push(("bottleneck", ArgValue::Str(format!("{} {bn:.1} GB/s", link.name()))));
            }
        }
        out
    }
}

impl Enrich for Enrichment<'_> {
    fn args(&self, op: &CollOp) -> Vec<(&'static str, ArgValue)> {
        self.args_of(self.op_ref(op), op)
    }

    fn args_at(&self, d: usize, i: usize, op: &CollOp) -> Vec<(&'static str, ArgValue)> {
        self.args_of(Some(OpRef { dev: DevIdx(d as u32), index: i as u32 }), op)
    }

    fn class_label(&self, op: &CollOp) -> Option<String> {
        let l = self.table.comms.get(op.comm.ix())?.logical?;
        self.class.get(l.ix()).copied().flatten().map(|c| c.label().to_string())
    }
}

/// Iteration ranges of the traces (`ProfilerStep#N`, or NVTX ranges whose
/// name says iteration/step) in the table's clock (epoch ns when the trace
/// gives its base time, as the table's spans are). Every rank records its own
/// copy of an iteration; copies with the same name become one job-wide range
/// from the first start to the last end.
pub fn iteration_ranges(traces: &[commlens_ingest::kineto::KernelTrace]) -> Vec<(i64, i64, String)> {
    let mut by_name: std::collections::HashMap<String, (i64, i64)> = std::collections::HashMap::new();
    for t in traces {
        for r in &t.ranges {
            let name = t.names.get(r.name as usize).map_or("", |s| s.as_str());
            let lower = name.to_ascii_lowercase();
            if lower.starts_with("profilerstep") || lower.contains("iteration") || lower.starts_with("step") {
                let (s, e) = (t.base_time_ns + r.start_ns, t.base_time_ns + r.end_ns);
                let x = by_name.entry(name.to_string()).or_insert((s, e));
                *x = (x.0.min(s), x.1.max(e));
            }
        }
    }
    let mut out: Vec<(i64, i64, String)> = by_name.into_iter().map(|(n, (s, e))| (s, e, n)).collect();
    out.sort();
    out
}

/// Iteration time and straggler figures for `diff`.
pub fn add_timing_figures(
    p: &mut commlens_analyze::diff::RunProfile,
    t: &OpTable,
    traces: &[commlens_ingest::kineto::KernelTrace],
) {
    use commlens_analyze::diff::Better;
    let ranges = iteration_ranges(traces);
    let r: Vec<(i64, i64, &str)> = ranges.iter().map(|(s, e, n)| (*s, *e, n.as_str())).collect();
    let it = commlens_analyze::iteration::detect_iterations(t, (!r.is_empty()).then_some(&r[..]));
    let mut durs: Vec<f64> = it
        .iterations
        .iter()
        .filter_map(|x| Some((x.end_ns? - x.start_ns?) as f64))
        .filter(|d| *d > 0.0)
        .collect();
    if let Some(s) = commlens_analyze::bandwidth::Spread::of(&mut durs) {
        p.put("iteration time (median)".into(), s.median, "ns", Better::Lower, durs.len() as u64);
    }
    if it.count > 0 {
        let bytes: u64 = it.iterations.iter().map(|x| x.bytes).sum();
        p.put("bytes per iteration (all ranks)".into(), bytes as f64 / it.count as f64, "B", Better::Neither, it.count as u64);
    }
    let s = crate::sections::straggler_report(t);
    if let Some(worst) = s.ranks.iter().map(|r| r.mean_lateness_ns).max_by(f64::total_cmp) {
        if s.gpu_instances > 0 {
            p.put("straggler: worst mean lateness".into(), worst, "ns", Better::Lower, s.gpu_instances);
        }
    }
    let ov = crate::sections::overlap_rows(traces);
    let shares: Vec<f64> = ov.iter().filter_map(|(_, r)| r.overlap_pct).collect();
    if !shares.is_empty() {
        p.put("comm/compute overlap (mean over ranks)".into(), shares.iter().sum::<f64>() / shares.len() as f64, "%", Better::Higher, shares.len() as u64);
        let exposed = ov.iter().map(|(_, r)| r.exposed_comm_ns as f64).fold(0.0, f64::max);
        p.put("exposed communication (worst rank)".into(), exposed, "ns", Better::Lower, ov.len() as u64);
    }
    if s.gpu_instances > 0 {
        p.put("slow ranks flagged".into(), s.slow_ranks().len() as f64, "ranks", Better::Lower, s.gpu_instances);
    }
}
