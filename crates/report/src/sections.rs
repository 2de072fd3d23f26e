//! Glue from analyses to the HTML report's model (`commlens_export::report`):
//! each function turns one analysis result into one report section. No
//! figures are computed here beyond reshaping (grouping, labelling).

// The bridge from trace ranks to overlap spans is shared with the analysis
// crate's real-trace tests and HTA benchmark example (analyze does not depend
// on the readers, so the bridge lives beside its users).
#[path = "../../analyze/examples/overlap_kineto/spans.rs"]
#[allow(dead_code)] // `hta_options` serves the benchmark, not the CLI
mod overlap_spans;

use commlens_analyze::bandwidth::{self, BandwidthOptions};
use commlens_analyze::classify::Classification;
use commlens_analyze::clock::{self, ClockOptions};
use commlens_analyze::iteration;
use commlens_analyze::overlap::{self, OverlapReport};
use commlens_ingest::kineto::KernelTrace;
use commlens_analyze::straggler::{self, StragglerConfig, StragglerReport};
use commlens_analyze::volume::RankRole;
use commlens_analyze::stats::{bucket_floor, Aggregate};
use commlens_core::{OpKind, OpTable};
use rayon::prelude::*;
use commlens_export::human_bytes;
use commlens_export::report::{
    Bandwidth, BandwidthSeries, BwPoint, Figure, IterationHeat, KindCounts, Limit, ModelRow, ModelTable, OpMix,
    OpMixRow, Overlap, OverlapRow, RankBytes, RankVolume, ReportTable, SizeHistogram, StragglerRow, Stragglers,
};
use std::collections::{BTreeMap, HashMap};

/// Kinds present in the table, in `OpKind::ALL` order.
fn kinds_present(agg: &Aggregate) -> Vec<OpKind> {
    OpKind::ALL.iter().copied().filter(|k| agg.cells.keys().any(|(_, _, x)| x == k)).collect()
}

/// Key figures for the header tiles.
pub fn summary(t: &OpTable, agg: &Aggregate) -> Vec<Figure> {
    let total = agg.total();
    let ranks = t.per_rank.iter().filter(|o| !o.is_empty()).count();
    let timed: usize = t.per_rank.iter().map(|r| r.count_gpu()).sum();
    vec![
        Figure::new("ranks", ranks.to_string()),
        Figure { detail: Some(format!("{} with GPU timing", timed)), ..Figure::new("operations", total.ops.to_string()) },
        Figure::new("bytes (all ranks)", human_bytes(total.bytes)),
        Figure::new("logical communicators", t.logical.len().to_string()),
        Figure::new("hosts", {
            let mut h: Vec<&str> = t.processes.iter().map(|p| p.host.as_str()).collect();
            h.sort_unstable();
            h.dedup();
            h.len().to_string()
        }),
    ]
}

pub fn op_mix(agg: &Aggregate) -> OpMix {
    let rows = kinds_present(agg)
        .into_iter()
        .map(|k| {
            let (count, bytes) = agg
                .cells
                .iter()
                .filter(|((_, _, x), _)| *x == k)
                .fold((0, 0), |(n, b), (_, c)| (n + c.ops, b + c.bytes));
            OpMixRow { kind: k.name().to_string(), count, bytes }
        })
        .collect();
    OpMix { rows, notes: Vec::new() }
}

pub fn rank_volume(t: &OpTable, agg: &Aggregate) -> RankVolume {
    let kinds = kinds_present(agg);
    let mut devs: Vec<usize> = (0..t.devices.len()).filter(|&d| !t.per_rank[d].is_empty()).collect();
    devs.sort_by_key(|&d| (t.devices[d].global_rank.unwrap_or(u32::MAX), d));
    // Bytes per (device, kind) in one pass over the cells (not one pass per device).
    let mut by_dev_kind: HashMap<(usize, OpKind), u64> = HashMap::new();
    for ((dv, _, k), c) in &agg.cells {
        let e = by_dev_kind.entry((dv.ix(), *k)).or_default();
        *e = e.wrapping_add(c.bytes);
    }
    let ranks = devs
        .into_iter()
        .map(|d| {
            let bytes = kinds.iter().map(|k| by_dev_kind.get(&(d, *k)).copied().unwrap_or(0)).collect();
            let rank = t.devices[d].global_rank.map_or_else(|| t.device_label(commlens_core::model::DevIdx(d as u32)), |r| r.to_string());
            RankBytes { rank, bytes }
        })
        .collect();
    RankVolume { kinds: kinds.iter().map(|k| k.name().to_string()).collect(), ranks, notes: Vec::new() }
}

pub fn size_histogram(agg: &Aggregate) -> SizeHistogram {
    let kinds = kinds_present(agg);
    let mut buckets: Vec<u8> = agg.sizes.keys().map(|(_, b)| *b).collect();
    buckets.sort_unstable();
    buckets.dedup();
    let series = kinds
        .iter()
        .map(|k| KindCounts {
            kind: k.name().to_string(),
            counts: buckets.iter().map(|b| agg.sizes.get(&(*k, *b)).copied().unwrap_or(0)).collect(),
        })
        .collect();
    SizeHistogram {
        buckets: buckets
            .iter()
            .map(|b| if *b == commlens_analyze::stats::UNKNOWN_BUCKET { "unknown".into() } else { human_bytes(bucket_floor(*b)) })
            .collect(),
        series,
        notes: vec!["buckets are powers of two of the logged bytes (count × datatype size)".into()],
    }
}

/// Bus bandwidth of every timed operation against its size, with the
/// communicators' bottleneck links as limits and, when given, measured
/// baselines (each operation against the curve of its kind and closest job
/// size, at its size). `None` without GPU spans.
pub fn bandwidth(t: &OpTable, baselines: &[crate::baseline::Baseline]) -> Option<Bandwidth> {
    let bw = bandwidth::analyze(t, &BandwidthOptions::default());
    let mut per_kind: BTreeMap<OpKind, Vec<BwPoint>> = BTreeMap::new();
    let mut used = vec![false; baselines.len()];
    for o in &bw.ops {
        if let Some(v) = o.m.busbw_gb_s {
            let nranks = o.comm.map(|l| t.logical[l.ix()].nranks);
            let base = crate::baseline::pick(baselines, o.kind, nranks);
            let vs_baseline = base.and_then(|b| b.at(o.bytes)).map(|x| v / x);
            if let (Some(b), Some(_)) = (base, vs_baseline) {
                if let Some(i) = baselines.iter().position(|x| std::ptr::eq(x, b)) {
                    used[i] = true;
                }
            }
            per_kind.entry(o.kind).or_default().push(BwPoint {
                bytes: o.bytes,
                busbw_gb_s: v,
                efficiency: o.m.efficiency,
                vs_baseline,
            });
        }
    }
    if per_kind.is_empty() {
        return None;
    }
    let mut limits: Vec<Limit> = Vec::new();
    for r in &bw.comms {
        if let (Some(b), Some(link)) = (r.bottleneck_gb_s, r.link) {
            let label = format!("{} bottleneck ({}{})", link.name(), r.name, if r.estimated { ", estimated" } else { "" });
            if !limits.iter().any(|l| l.gb_s == b) {
                limits.push(Limit { label, gb_s: b });
            }
        }
    }
    let mut notes = Vec::new();
    if bw.negative_duration > 0 {
        notes.push(format!(
            "{} operations end before they start (implausible GPU spans): no bandwidth computed for them",
            bw.negative_duration
        ));
    }
    if bw.ops_without_span > 0 {
        notes.push(format!("{} operations without a GPU span are not drawn", bw.ops_without_span));
    }
    for (b, u) in baselines.iter().zip(&used) {
        if !u {
            notes.push(format!("{}: compared with no operation (no operation of its kind within its sizes, or a curve of a closer job size was used)", b.label));
        }
    }
    Some(Bandwidth {
        series: per_kind.into_iter().map(|(k, points)| BandwidthSeries { kind: k.name().to_string(), points }).collect(),
        limits,
        convention: "nccl-tests (busbw = algbw × bus factor)".into(),
        notes,
        baselines: baselines.iter().map(crate::baseline::Baseline::to_curve).collect(),
    })
}

/// The parallelism of each logical communicator, with its evidence.
pub fn classification_table(c: &Classification) -> ReportTable {
    ReportTable {
        title: "Communicators and their parallelism".into(),
        headers: vec!["communicator".into(), "ranks".into(), "class".into(), "why".into(), "traffic".into()],
        right_aligned: vec![false, true, false, false, false],
        rows: c
            .comms
            .iter()
            .map(|x| {
                vec![
                    x.name.clone(),
                    x.evidence.nranks.to_string(),
                    x.class.label().to_string(),
                    x.reason.clone(),
                    x.evidence.summary(),
                ]
            })
            .collect(),
        notes: Vec::new(),
    }
}

/// The iterations of a table ([`iteration::detect_iterations`]) by the
/// traces' ranges, else by the repeated operation pattern: what
/// the heat map and [`anomaly_report`] use, computed once for both.
pub fn iteration_report(t: &OpTable, ranges: &[(i64, i64, String)]) -> iteration::IterationReport {
    let r: Vec<(i64, i64, &str)> = ranges.iter().map(|(s, e, n)| (*s, *e, n.as_str())).collect();
    iteration::detect_iterations(t, (!r.is_empty()).then_some(&r[..]))
}

/// Bytes per rank per iteration, as a heat map, from an [`iteration_report`].
pub fn iterations_of(t: &OpTable, rep: &iteration::IterationReport) -> Option<IterationHeat> {
    let width = rep.ranks.iter().map(|x| x.iteration_bytes.len()).max().unwrap_or(0);
    if rep.count < 2 || width < 2 {
        return None;
    }
    let mut rows = Vec::new();
    let mut values = Vec::new();
    for x in &rep.ranks {
        rows.push(x.global_rank.map_or_else(|| t.device_label(x.dev), |r| format!("rank {r}")));
        values.push((0..width).map(|i| x.iteration_bytes.get(i).map(|b| *b as f64 / 1e6)).collect());
    }
    Some(IterationHeat {
        rows,
        cols: (1..=width).map(|i| i.to_string()).collect(),
        values,
        value_label: "MB communicated".into(),
        notes: vec![format!("{} iterations found by {:?}", rep.count, rep.method)],
    })
}

/// Straggler analysis on clock-synchronised spans (CPU timestamps when there
/// are no spans, flagged in the notes).
pub fn straggler_report(t: &OpTable) -> StragglerReport {
    let cfg = if t.per_rank.iter().any(|r| r.any_gpu()) {
        StragglerConfig::with_clock(&clock::synchronize(t, &ClockOptions::default()), t.devices.len())
    } else {
        StragglerConfig::default()
    };
    straggler::analyze_stragglers(t, &cfg)
}

pub fn stragglers(t: &OpTable, s: &StragglerReport) -> Option<Stragglers> {
    let instances = s.gpu_instances + s.cpu_instances;
    if instances == 0 || s.ranks.len() < 2 {
        return None;
    }
    let rows = s
        .ranks
        .iter()
        .map(|r| StragglerRow {
            rank: r.global_rank.map_or_else(|| t.device_label(r.dev), |g| format!("rank {g}")),
            times_last: r.last,
            mean_lateness_ns: r.mean_lateness_ns,
        })
        .collect();
    let mut notes = Vec::new();
    if s.cpu_timestamps {
        notes.push(format!("{} instances timed by CPU enqueue timestamps (no GPU spans): lateness includes host-side delays", s.cpu_instances));
    }
    for x in s.slow.iter().filter(|x| x.flagged) {
        notes.push(format!(
            "slow rank {}: bus bandwidth {:.1} GB/s against its peers' {:.1} GB/s in {} of {} windows",
            x.global_rank.map_or_else(|| t.device_label(x.dev), |g| g.to_string()),
            x.busbw_gb_s,
            x.peers_median_gb_s,
            x.low,
            x.windows
        ));
    }
    Some(Stragglers { instances, rows, notes })
}

/// Theory beside observation for the model section.
pub fn model(cmp: &[commlens_analyze::volume::VolumeComparison], theory: &[commlens_analyze::volume::VolumeRow]) -> ModelTable {
    let rows = theory
        .iter()
        .map(|row| {
            let obs = cmp.iter().find(|x| x.parallelism == row.parallelism && x.role == row.role && !x.ranks.is_empty());
            ModelRow {
                parallelism: match row.role {
                    RankRole::All => row.parallelism.label().to_string(),
                    r => format!("{} ({r:?})", row.parallelism.label()),
                },
                kind: row.kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
                theory_bytes: Some(row.total_bytes.round() as u64),
                observed_bytes: obs.map(|o| o.observed_moved_mean.round() as u64),
            }
        })
        .collect();
    ModelTable { rows, notes: vec!["observed = mean bytes each rank's links carry (ring factors applied), per parallelism type".into()] }
}

/// Compute/communication overlap per trace rank (HTA's definition), with the
/// traces' ProfilerStep ranges as iterations. Ranks without compute kernels
/// are left out; `None` when no rank has any.
pub fn overlap_rows(traces: &[KernelTrace]) -> Vec<(String, OverlapReport)> {
    let mut out = Vec::new();
    for t in traces {
        for rank in &t.ranks {
            if rank.compute.is_empty() {
                continue;
            }
            let (spans, _) = overlap_spans::rank_spans(rank, &overlap_spans::SpanOptions::default());
            let steps = overlap_spans::steps(t, rank);
            let rep = overlap::comm_comp_overlap(spans, (!steps.is_empty()).then_some(&steps[..]));
            let label = rank.rank.map_or_else(|| format!("pid {}", rank.pid), |r| format!("rank {r}"));
            out.push((label, rep));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

pub fn overlap_section(rows: &[(String, OverlapReport)]) -> Option<Overlap> {
    if rows.is_empty() {
        return None;
    }
    let mut notes = vec!["overlap share = time with an NCCL kernel and a compute kernel both running ÷ time with an NCCL kernel running (HolisticTraceAnalysis's definition)".to_string()];
    let exposed: Vec<String> = rows
        .iter()
        .filter(|(_, r)| !r.iterations.is_empty())
        .map(|(l, r)| {
            let per: Vec<String> = r.iterations.iter().map(|i| format!("{:.2}", i.exposed_comm_ns as f64 / 1e6)).collect();
            format!("{l}: {} ms", per.join(" / "))
        })
        .collect();
    if !exposed.is_empty() {
        notes.push(format!("exposed communication per iteration — {}", exposed.join("; ")));
    }
    Some(Overlap {
        rows: rows
            .iter()
            .map(|(l, r)| OverlapRow { rank: l.clone(), comm_ns: r.comm_ns.max(0) as u64, overlapped_ns: r.overlap_ns.max(0) as u64 })
            .collect(),
        notes,
    })
}

/// The strategy each communicator's traffic shows (thesis §5.3 signatures).
pub fn signature_table(t: &OpTable, c: &Classification) -> ReportTable {
    let sigs = commlens_analyze::signature::recognize_with(t, c);
    ReportTable {
        title: "Parallelism signatures (recognized from the traffic alone)".into(),
        headers: vec!["communicator".into(), "strategy".into(), "confidence".into(), "evidence".into()],
        right_aligned: vec![false, false, true, false],
        rows: sigs
            .iter()
            .map(|s| vec![s.name.clone(), s.strategy.to_string(), format!("{:.2}", s.confidence), s.evidence.join("; ")])
            .collect(),
        notes: Vec::new(),
    }
}

/// Operations and bytes per parallelism type (every logical communicator
/// classified, its members' traffic summed), per operation kind.
pub fn parallelism_table(t: &OpTable, c: &Classification) -> ReportTable {
    let class_of: Vec<&'static str> = (0..t.logical.len())
        .map(|i| c.class_of(commlens_core::model::LogicalCommIdx(i as u32)).map_or("unclassified", |p| p.label()))
        .collect();
    // Per communicator handle, its class as an index into `labels` (a few distinct ones).
    let mut labels: Vec<&'static str> = Vec::new();
    let comm_class: Vec<usize> = t
        .comms
        .iter()
        .map(|c| {
            let class = c.logical.map_or("unclassified", |l| class_of[l.ix()]);
            labels.iter().position(|&x| x == class).unwrap_or_else(|| {
                labels.push(class);
                labels.len() - 1
            })
        })
        .collect();
    // (class, kind) → (ops, bytes) counted per rank on rayon's threads into
    // flat arrays, then summed (sums of counts do not depend on the order).
    const KINDS: usize = OpKind::ALL.len();
    let kind_ix = |k: OpKind| OpKind::ALL.iter().position(|&x| x == k).expect("every kind is in OpKind::ALL");
    let zero = || vec![(0u64, 0u64); labels.len() * KINDS];
    let sums = t
        .per_rank
        .par_iter()
        .fold(zero, |mut acc, ops| {
            for op in ops {
                let e = &mut acc[comm_class[op.comm.ix()] * KINDS + kind_ix(op.kind)];
                e.0 += 1;
                e.1 = e.1.wrapping_add(op.bytes);
            }
            acc
        })
        .reduce(zero, |mut a, b| {
            for (x, y) in a.iter_mut().zip(b) {
                x.0 += y.0;
                x.1 = x.1.wrapping_add(y.1);
            }
            a
        });
    // In (class, kind) name order, as the table lists them.
    let mut rows: BTreeMap<(&'static str, &'static str), (u64, u64)> = BTreeMap::new();
    for (i, &(n, b)) in sums.iter().enumerate().filter(|(_, s)| s.0 > 0) {
        rows.insert((labels[i / KINDS], OpKind::ALL[i % KINDS].name()), (n, b));
    }
    let total: u64 = rows.values().map(|v| v.1).sum::<u64>().max(1);
    ReportTable {
        title: "Traffic per parallelism type".into(),
        headers: vec!["parallelism".into(), "operation".into(), "operations".into(), "bytes".into(), "share of bytes".into()],
        right_aligned: vec![false, false, true, true, true],
        rows: rows
            .into_iter()
            .map(|((class, kind), (n, b))| {
                vec![class.to_string(), kind.to_string(), n.to_string(), human_bytes(b), format!("{:.1}%", 100.0 * b as f64 / total as f64)]
            })
            .collect(),
        notes: vec!["bytes as logged (count × datatype size), all ranks".into()],
    }
}

/// Anomalies of a table (`commlens_analyze::anomaly`), with step changes over the
/// iterations the traces' ranges (or the repeated operation pattern) give.
pub fn anomaly_report(t: &OpTable, traces: &[KernelTrace]) -> commlens_analyze::anomaly::AnomalyReport {
    let ranges = crate::enrich::iteration_ranges(traces);
    anomaly_report_with(t, &iteration_report(t, &ranges))
}

/// [`anomaly_report`] over iterations already found ([`iteration_report`]).
pub fn anomaly_report_with(t: &OpTable, iters: &iteration::IterationReport) -> commlens_analyze::anomaly::AnomalyReport {
    commlens_analyze::anomaly::detect_anomalies(t, Some(iters), &Default::default())
}

/// Ranks as compact runs: `0-3,8,10-11`; long lists cut with their count.
pub fn rank_runs(ranks: &[Option<u32>]) -> String {
    let mut known: Vec<u32> = ranks.iter().flatten().copied().collect();
    known.sort_unstable();
    known.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < known.len() {
        let mut j = i;
        while j + 1 < known.len() && known[j + 1] == known[j] + 1 {
            j += 1;
        }
        parts.push(if j > i { format!("{}-{}", known[i], known[j]) } else { known[i].to_string() });
        i = j + 1;
    }
    let unknown = ranks.len() - ranks.iter().flatten().count();
    if unknown > 0 {
        parts.push(format!("{unknown} of unknown rank"));
    }
    if parts.len() > 8 {
        format!("{},… ({} ranks)", parts[..6].join(","), ranks.len())
    } else {
        parts.join(",")
    }
}

/// UTC date and time of epoch nanoseconds (proleptic Gregorian, days → civil date).
fn utc(ns: i64) -> String {
    let (secs, frac) = (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
    let (days, s) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:06}", s / 3600, s / 60 % 60, s % 60, frac / 1000)
}

/// When an anomaly happened: UTC for epoch times (after 2001), else seconds into the trace.
pub fn anomaly_time(ns: i64) -> String {
    if ns >= 1_000_000_000_000_000_000 {
        format!("{} UTC", utc(ns))
    } else {
        format!("{:.6} s", ns as f64 / 1e9)
    }
}

/// The report's anomaly section: the first `top` anomalies, charts of the histories that
/// hold them, and what the rule looked at. `None` without timed operations.
pub fn anomaly_section(rep: &commlens_analyze::anomaly::AnomalyReport, top: usize) -> Option<commlens_export::report::AnomalySection> {
    use commlens_export::report::{AnomalyRow, AnomalySection, AnomalySeries};
    if rep.timed_ops == 0 {
        return None;
    }
    let c = &rep.config;
    let intro = format!(
        "{} of {} operations have a GPU span; {} collective instances in {} histories (communicator × kind × size bucket) of at least {} \
         were judged, {} lone operations (point-to-point, or one timed member: their kernel time is mostly waiting) counted, not judged. An anomaly is at least {}× its history's median duration, {:.0} robust deviations (1.4826·MAD) and {} above it, \
         with its bus bandwidth as far below; a step change is a lasting {}× rise of the per-iteration median (iterations: {:?}). \
         Largest score seen: {}.",
        rep.timed_ops,
        rep.ops,
        rep.judged,
        rep.histories_judged,
        c.min_history,
        rep.lone,
        c.min_ratio,
        c.z_threshold,
        commlens_export::report::scale::fmt_ns(c.min_excess_ns as f64),
        c.change_min_effect,
        rep.iterations,
        rep.largest_score.map_or_else(|| "none".into(), |s| format!("{s:.1} ({})", rep.largest_where.as_deref().unwrap_or("?"))),
    );
    let rows = rep
        .anomalies
        .iter()
        .take(top)
        .map(|a| AnomalyRow {
            time: anomaly_time(a.time_ns),
            time_ns: a.time_ns,
            rule: a.rule.label().into(),
            comm: a.comm_name.clone(),
            kind: a.kind.name().into(),
            bytes: a.bytes,
            ranks: rank_runs(&a.ranks),
            iteration: a.iteration,
            observed_ns: a.observed_ns,
            expected_ns: a.expected_ns,
            score: a.score,
        })
        .collect();
    let mut series: Vec<AnomalySeries> = rep
        .series
        .iter()
        .map(|s| AnomalySeries {
            label: format!("{} {} {}", s.comm_name, s.kind.name(), s.bucket_lo_bytes.map_or_else(|| "size unknown".into(), |b| format!("≥{}", human_bytes(b)))),
            points: s.medians_ns.clone(),
            change_at: s.change_at,
            marked: rep
                .anomalies
                .iter()
                .filter(|a| a.comm_name == s.comm_name && a.kind == s.kind && a.bucket_lo_bytes == s.bucket_lo_bytes && a.rule != commlens_analyze::anomaly::Rule::StepChange)
                .filter_map(|a| a.iteration)
                .collect(),
        })
        .collect();
    series.sort_by_key(|s| std::cmp::Reverse(s.marked.len() + usize::from(s.change_at.is_some())));
    let mut notes = Vec::new();
    if rep.late_arrivals > 0 {
        let late: Vec<String> = rep.late_ranks.iter().take(3).map(|(r, n)| format!("rank {} ×{n}", r.map_or("?".into(), |r| r.to_string()))).collect();
        notes.push(format!(
            "{} instances had members waiting far longer than the transfer took: one rank arrived late ({}); not listed here — see the Stragglers section",
            rep.late_arrivals,
            late.join(", ")
        ));
    }
    Some(AnomalySection { intro, rows, more: rep.anomalies.len().saturating_sub(top) as u64, series, notes })
}
