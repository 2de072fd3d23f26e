//! The bridge from the readers' model (`commlens_ingest::kineto::RankTrace`)
//! to `overlap::Span`s, shared by the `overlap_kineto` example and the
//! real-trace tests (the analysis crate does not depend on the readers; a
//! caller converts).
//!
//! Besides the plain conversion it can reproduce the two things HTA does to
//! a trace before any analysis, so figures can be compared with it:
//! * with two or more `ProfilerStep`s, only kernels launched before the start
//!   of the last step are kept (HTA `include_last_profiler_step=False`);
//! * when timestamps have fractional microseconds, starts are rounded up and
//!   ends down to whole microseconds (HTA `round_down_time_stamps`).

use commlens_analyze::overlap::{Class, Span};
use commlens_ingest::kineto::{ComputeKernel, KernelClass, KernelTrace, RangeKind, RankTrace};
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, Default)]
pub struct SpanOptions {
    /// Keep only activity whose launch call started before this time.
    pub launched_before_ns: Option<i64>,
    /// Round starts up and ends down to whole microseconds.
    pub round_us: bool,
    /// Count non-NCCL communication kernels as communication (HTA counts
    /// them as computation).
    pub other_comm_is_comm: bool,
}

/// `ProfilerStep` ranges of the rank's process, in start order.
pub fn steps(trace: &KernelTrace, rank: &RankTrace) -> Vec<(i64, i64)> {
    let all: Vec<_> = trace.ranges.iter().filter(|r| r.kind == RangeKind::ProfilerStep).collect();
    let own: Vec<_> = all.iter().filter(|r| r.pid == rank.pid).collect();
    let pick = if own.is_empty() { all.iter().collect::<Vec<_>>() } else { own };
    pick.iter().map(|r| (r.start_ns, r.end_ns)).collect()
}

/// What HTA would do with this rank (see the module doc).
pub fn hta_options(trace: &KernelTrace, rank: &RankTrace) -> SpanOptions {
    let distinct_steps = {
        let mut names: Vec<u32> =
            trace.ranges.iter().filter(|r| r.kind == RangeKind::ProfilerStep).map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        names.len()
    };
    let launched_before_ns = (distinct_steps >= 2).then(|| steps(trace, rank).iter().map(|s| s.0).max()).flatten();
    let frac = |t: i64| t % 1000 != 0;
    let round_us = rank.kernels.iter().any(|k| frac(k.start_ns) || frac(k.end_ns))
        || rank.compute.iter().any(|k| frac(k.start_ns) || frac(k.end_ns()));
    SpanOptions { launched_before_ns, round_us, other_comm_is_comm: false }
}

/// The rank's activity as spans, and the names their ids index: the
/// compute names first, then each distinct NCCL kernel name.
pub fn rank_spans(rank: &RankTrace, o: &SpanOptions) -> (Vec<Span>, Vec<String>) {
    let mut names: Vec<String> = rank.compute_names.iter().map(|n| n.name.clone()).collect();
    let mut nccl_ids: HashMap<&str, u32> = HashMap::new();
    let round = |a: i64, b: i64| {
        if o.round_us {
            (a.div_euclid(1000) * 1000 + if a.rem_euclid(1000) != 0 { 1000 } else { 0 }, b.div_euclid(1000) * 1000)
        } else {
            (a, b)
        }
    };
    let keep = |launch: Option<i64>| o.launched_before_ns.is_none_or(|cut| launch.is_some_and(|l| l < cut));
    let mut out = Vec::with_capacity(rank.kernels.len() + rank.compute.len());
    for k in rank.kernels.iter().filter(|k| keep(k.launch.map(|l| l.ts_ns))) {
        let next = names.len() as u32;
        let name = *nccl_ids.entry(k.name.as_str()).or_insert(next);
        if name == next {
            names.push(k.name.clone());
        }
        let (start_ns, end_ns) = round(k.start_ns, k.end_ns);
        out.push(Span { start_ns, end_ns, name, class: Class::Communication });
    }
    for k in rank.compute.iter().filter(|k| keep(k.launch_ns())) {
        let (start_ns, end_ns) = round(k.start_ns, k.end_ns());
        out.push(Span { start_ns, end_ns, name: k.name, class: class_of(rank, k, o) });
    }
    (out, names)
}

fn class_of(rank: &RankTrace, k: &ComputeKernel, o: &SpanOptions) -> Class {
    match rank.compute_names[k.name as usize].class {
        KernelClass::Computation => Class::Computation,
        KernelClass::Memory => Class::Memory,
        KernelClass::OtherComm if o.other_comm_is_comm => Class::Communication,
        KernelClass::OtherComm => Class::Computation,
        KernelClass::Other => Class::Other,
    }
}
