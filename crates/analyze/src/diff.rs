//! Run-to-run comparison for CI: what changed between two runs, and whether
//! any change is a regression beyond a threshold.
//!
//! Owns [`RunProfile`] (the comparable figures of one run: operation mix and
//! volumes, bus bandwidth per parallelism class × kind, per kind × message
//! size, wall span, iteration time and straggler lateness when the caller
//! knows them) and [`diff`], which pairs figures by name and judges each
//! change by its direction: lower bandwidth and longer times are regressions,
//! volumes and counts are reported as changes (a different model is not a
//! slowdown, but the user sees it). Communicators are keyed by what they are
//! (`TP AllReduce`, `DP ReduceScatter`), never by pointers, so two runs of the
//! same job compare even though every address differs.

use crate::bandwidth::{self, BandwidthOptions, Spread};
use crate::classify;
use crate::stats::size_bucket;
use commlens_core::OpTable;
use serde::Serialize;
use std::collections::BTreeMap;

/// Which way a figure should move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Better {
    Higher,
    Lower,
    /// A change is reported, never a regression by itself.
    Neither,
}

/// One comparable figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    pub value: f64,
    pub unit: &'static str,
    pub better: Better,
    /// Samples behind a median (bandwidth), so tiny samples can be ignored.
    pub samples: u64,
}

/// The comparable figures of one run, keyed by a stable name.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunProfile {
    pub label: String,
    pub figures: BTreeMap<String, Figure>,
}

/// Smallest number of operations behind a bandwidth median for it to be compared.
pub const MIN_BW_SAMPLES: u64 = 3;

impl RunProfile {
    /// Figures of a table: counts and bytes per kind, busbw medians per
    /// class × kind and per kind × size bucket (ops with GPU spans only), and
    /// the longest per-rank span of operation times.
    pub fn of_table(label: &str, t: &OpTable) -> RunProfile {
        let mut p = RunProfile { label: label.to_string(), figures: BTreeMap::new() };
        let mut per_kind: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new();
        for op in t.ops() {
            let e = per_kind.entry(op.kind.name()).or_default();
            e.0 += 1;
            e.1 += op.bytes;
        }
        let ranks = t.per_rank.iter().filter(|o| !o.is_empty()).count().max(1) as f64;
        for (k, (n, b)) in &per_kind {
            p.put(format!("{k} ops per rank"), *n as f64 / ranks, "ops", Better::Neither, *n);
            p.put(format!("{k} bytes per rank"), *b as f64 / ranks, "B", Better::Neither, *n);
        }
        let class: Vec<String> = {
            let mut v = vec![String::new(); t.logical.len()];
            for c in classify::infer(t).comms {
                v[c.comm.ix()] = format!("{} ({} ranks)", c.class.label(), c.evidence.nranks);
            }
            v
        };
        let bw = bandwidth::analyze(t, &BandwidthOptions::default());
        // Pool per (class, kind): several communicators of one class (e.g. the
        // TP groups of every stage) are one figure.
        let mut pooled: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut by_size: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for o in &bw.ops {
            let Some(v) = o.m.busbw_gb_s else { continue };
            let cls = o.comm.map_or("?".to_string(), |c| class[c.ix()].clone());
            pooled.entry(format!("busbw {cls} {}", o.kind.name())).or_default().push(v);
            let lo = crate::stats::bucket_floor(size_bucket(o.bytes));
            by_size.entry(format!("busbw {} {}", o.kind.name(), size_label(lo))).or_default().push(v);
        }
        for (k, mut v) in pooled.into_iter().chain(by_size) {
            let n = v.len() as u64;
            if let Some(s) = Spread::of(&mut v) {
                p.put(k, s.median, "GB/s", Better::Higher, n);
            }
        }
        if let Some(span) = longest_rank_span(t) {
            p.put("run span (longest rank)".into(), span as f64, "ns", Better::Lower, 1);
        }
        p
    }

    /// Adds or replaces a figure (callers add iteration time, straggler lateness…).
    pub fn put(&mut self, name: String, value: f64, unit: &'static str, better: Better, samples: u64) {
        if value.is_finite() {
            self.figures.insert(name, Figure { value, unit, better, samples });
        }
    }
}

fn size_label(lo: u64) -> String {
    match lo {
        0 => "0 B".into(),
        b if b >= 1 << 30 => format!("≥{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("≥{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("≥{} KiB", b >> 10),
        b => format!("≥{b} B"),
    }
}

fn longest_rank_span(t: &OpTable) -> Option<i64> {
    t.per_rank
        .iter()
        .filter_map(|ops| {
            let times = ops.iter().filter_map(|o| o.gpu.map(|g| (g.start_ns, g.end_ns)).or(o.cpu_ts_ns.map(|c| (c, c))));
            let (lo, hi) = times.fold((i64::MAX, i64::MIN), |(lo, hi), (s, e)| (lo.min(s), hi.max(e)));
            // Garbled timestamps can lie further apart than i64 holds.
            hi.checked_sub(lo).filter(|&d| d > 0)
        })
        .max()
}

/// Settings of [`diff`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiffOptions {
    /// Relative change (fraction) beyond which a change in the bad direction is a regression.
    pub threshold: f64,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions { threshold: 0.05 }
    }
}

/// One compared figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffRow {
    pub name: String,
    pub unit: &'static str,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// (b − a) / |a|, when both exist and a ≠ 0.
    pub change: Option<f64>,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    Same,
    Improved,
    Regressed,
    /// Changed beyond the threshold in a figure that has no good direction.
    Changed,
    /// Only in one run.
    Missing,
}

/// The comparison of two profiles.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffReport {
    pub a: String,
    pub b: String,
    pub threshold: f64,
    pub rows: Vec<DiffRow>,
}

impl DiffReport {
    pub fn regressions(&self) -> impl Iterator<Item = &DiffRow> {
        self.rows.iter().filter(|r| r.verdict == Verdict::Regressed)
    }
}

/// Compares every figure the two runs have (by name); `b` is the new run.
pub fn diff(a: &RunProfile, b: &RunProfile, opts: &DiffOptions) -> DiffReport {
    let mut names: Vec<&String> = a.figures.keys().chain(b.figures.keys()).collect();
    names.sort();
    names.dedup();
    let rows = names
        .into_iter()
        .map(|n| {
            let fa = a.figures.get(n);
            let fb = b.figures.get(n);
            let f = fa.or(fb).expect("name from one of the maps");
            let change = match (fa, fb) {
                (Some(x), Some(y)) if x.value != 0.0 => Some((y.value - x.value) / x.value.abs()),
                (Some(x), Some(y)) if x.value == y.value => Some(0.0),
                _ => None,
            };
            let tiny = |g: Option<&Figure>| g.is_some_and(|g| g.unit == "GB/s" && g.samples < MIN_BW_SAMPLES);
            let verdict = match (fa, fb, change) {
                (None, _, _) | (_, None, _) => Verdict::Missing,
                _ if tiny(fa) || tiny(fb) => Verdict::Same,
                (_, _, None) => Verdict::Changed,
                (_, _, Some(c)) if c.abs() <= opts.threshold => Verdict::Same,
                (_, _, Some(c)) => match (f.better, c > 0.0) {
                    (Better::Neither, _) => Verdict::Changed,
                    (Better::Higher, true) | (Better::Lower, false) => Verdict::Improved,
                    _ => Verdict::Regressed,
                },
            };
            DiffRow { name: n.clone(), unit: f.unit, a: fa.map(|x| x.value), b: fb.map(|x| x.value), change, verdict }
        })
        .collect();
    DiffReport { a: a.label.clone(), b: b.label.clone(), threshold: opts.threshold, rows }
}

#[cfg(test)]
#[path = "diff_tests.rs"]
mod tests;
