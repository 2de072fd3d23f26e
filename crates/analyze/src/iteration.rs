//! Training iterations: which operations belong to which iteration, and what
//! each iteration communicated (operations and bytes per kind and, with a
//! classification, per parallelism type).
//!
//! **From ranges** (NVTX ranges or Kineto `ProfilerStep#N`, passed by the
//! caller as `(start_ns, end_ns, name)` on the clock of `CollOp::cpu_ts_ns`):
//! iteration `i` holds the operations whose CPU enqueue time (else GPU start)
//! lies in `[start, end)` of the i-th range in start order, on every rank.
//! Operations before the first range are warm-up, the others outside are tail.
//!
//! **From the operation pattern** (no ranges): every rank's sequence of
//! tokens `(communicator handle, kind, bytes)` is searched for its period,
//! the length `p` for which `token[i] == token[i+p]` holds over the longest
//! stretch (ties: the smallest `p`) with at least two repetitions; that
//! stretch holds the iterations, what precedes it is warm-up (communicator
//! start-up barriers), what follows is tail (shutdown, a cut-off iteration).
//! Candidate periods are the most frequent distances between occurrences of
//! a token, at lags 1 to 8 (a token seen once per iteration, such as a DP
//! gradient bucket or the gradient-norm reduction, gives `p` at lag 1; one
//! seen q ≤ 8 times per iteration gives it at lag q). Where the warm-up ends
//! with an operation equal to the iteration's last one (a start-up barrier
//! and the gradient-norm reduction), the stretch starts one earlier; the
//! iteration is then placed as late as the stretch allows, so warm-up keeps
//! it. Any placement of `p` consecutive operations inside the stretch holds
//! the same operations, so counts and bytes per iteration do not depend on
//! it; only time bounds do. Limits: iterations must repeat exactly (same
//! sizes; a run whose iterations differ finds none, or a shorter period),
//! and an iteration made of identical micro-batch blocks with nothing at its
//! end is indistinguishable from its micro-batch; give ranges then.
//! Iterations are numbered per rank and summed across ranks by number; the
//! count is the most common count over ranks.

use crate::classify::{Classification, Parallelism};
use commlens_core::model::{DevIdx, LogicalCommIdx};
use commlens_core::{CollOp, OpKind, OpTable};
use rayon::prelude::*;
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// How iterations were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum IterationMethod {
    Ranges,
    Pattern,
    /// No rank showed a repeating pattern.
    None,
}

/// Operations and bytes of one kind or parallelism type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Totals<K> {
    pub key: K,
    pub ops: u64,
    pub bytes: u64,
}

/// One iteration summed over ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IterationStat {
    pub index: usize,
    /// The range's name (ranges mode).
    pub name: Option<String>,
    /// Range bounds, or the earliest operation time and latest operation
    /// end (GPU end, else CPU time) over the ranks.
    pub start_ns: Option<i64>,
    pub end_ns: Option<i64>,
    /// Ranks with this iteration.
    pub ranks: u32,
    pub ops: u64,
    pub bytes: u64,
    pub by_kind: Vec<Totals<OpKind>>,
    /// Empty without a classification.
    pub by_parallelism: Vec<Totals<Parallelism>>,
}

/// What was found on one rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankIterations {
    pub dev: DevIdx,
    pub global_rank: Option<u32>,
    /// Operations per iteration (pattern mode).
    pub period_ops: Option<usize>,
    pub iterations: usize,
    /// Index of the first operation of the first iteration (pattern mode).
    pub first_op: Option<usize>,
    pub warmup_ops: u64,
    pub warmup_bytes: u64,
    pub tail_ops: u64,
    pub tail_bytes: u64,
    /// Bytes of each of its iterations.
    pub iteration_bytes: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IterationReport {
    pub method: IterationMethod,
    /// Most common number of iterations over ranks (ranges mode: the ranges).
    pub count: usize,
    pub iterations: Vec<IterationStat>,
    pub ranks: Vec<RankIterations>,
}

/// Iterations from `ranges` when given, else from each rank's operation
/// pattern (see the module docs).
pub fn detect_iterations(table: &OpTable, ranges: Option<&[(i64, i64, &str)]>) -> IterationReport {
    detect_iterations_with(table, ranges, None)
}

/// [`detect_iterations`] with per-parallelism totals from a classification.
pub fn detect_iterations_with(
    table: &OpTable,
    ranges: Option<&[(i64, i64, &str)]>,
    classification: Option<&Classification>,
) -> IterationReport {
    let t = table;
    let class_of: Vec<Option<Parallelism>> = (0..t.logical.len())
        .map(|i| classification.and_then(|c| c.class_of(LogicalCommIdx(i as u32))))
        .collect();
    let class = |op: &CollOp| {
        t.comms.get(op.comm.ix()).and_then(|c| c.logical).and_then(|l| class_of[l.ix()]).unwrap_or(Parallelism::Other)
    };
    // Per rank: the iteration of each operation (None = outside) and what was found.
    let sorted: Option<Vec<(i64, i64, &str)>> = ranges.map(|r| {
        let mut v = r.to_vec();
        v.sort_by_key(|x| (x.0, x.1));
        v
    });
    let per_rank: Vec<(RankIterations, Vec<Option<u32>>)> = match &sorted {
        Some(r) => (0..t.per_rank.len()).into_par_iter().map(|d| by_ranges(t, d, r)).collect(),
        None => (0..t.per_rank.len()).into_par_iter().map(|d| by_pattern(t, d)).collect(),
    };
    let count = match ranges {
        Some(r) => r.len(),
        None => {
            let mut freq: BTreeMap<usize, usize> = BTreeMap::new();
            for (r, _) in per_rank.iter().filter(|(r, _)| r.iterations > 0) {
                *freq.entry(r.iterations).or_default() += 1;
            }
            freq.iter().max_by_key(|(k, n)| (**n, **k)).map_or(0, |(k, _)| *k)
        }
    };
    let method = match (ranges.is_some(), count) {
        (true, _) => IterationMethod::Ranges,
        (false, 0) => IterationMethod::None,
        _ => IterationMethod::Pattern,
    };
    let n_iter = per_rank.iter().map(|r| r.0.iterations).max().unwrap_or(0).max(count);
    #[derive(Default)]
    struct Acc {
        ranks: u32,
        start: Option<i64>,
        end: Option<i64>,
        kinds: BTreeMap<OpKind, (u64, u64)>,
        classes: BTreeMap<Parallelism, (u64, u64)>,
    }
    let mut accs: Vec<Acc> = (0..n_iter).map(|_| Acc::default()).collect();
    for (d, (_, assign)) in per_rank.iter().enumerate() {
        let mut seen = vec![false; n_iter];
        for (op, it) in t.per_rank[d].iter().zip(assign) {
            let Some(it) = it.map(|i| i as usize) else { continue };
            let a = &mut accs[it];
            if !seen[it] {
                seen[it] = true;
                a.ranks += 1;
            }
            if let Some(s) = op.cpu_ts_ns.or(op.gpu.map(|g| g.start_ns)) {
                a.start = Some(a.start.map_or(s, |x| x.min(s)));
            }
            if let Some(e) = op.gpu.map(|g| g.end_ns).or(op.cpu_ts_ns) {
                a.end = Some(a.end.map_or(e, |x| x.max(e)));
            }
            let k = a.kinds.entry(op.kind).or_default();
            (k.0, k.1) = (k.0 + 1, k.1.saturating_add(op.bytes));
            if classification.is_some() {
                let c = a.classes.entry(class(&op)).or_default();
                (c.0, c.1) = (c.0 + 1, c.1.saturating_add(op.bytes));
            }
        }
    }
    let iterations = accs
        .into_iter()
        .enumerate()
        .map(|(index, a)| {
            let range = sorted.as_ref().map(|r| r[index]);
            IterationStat {
                index,
                name: range.map(|r| r.2.to_string()),
                start_ns: range.map(|r| r.0).or(a.start),
                end_ns: range.map(|r| r.1).or(a.end),
                ranks: a.ranks,
                ops: a.kinds.values().map(|v| v.0).sum(),
                bytes: a.kinds.values().map(|v| v.1).sum(),
                by_kind: a.kinds.into_iter().map(|(key, (ops, bytes))| Totals { key, ops, bytes }).collect(),
                by_parallelism: a.classes.into_iter().map(|(key, (ops, bytes))| Totals { key, ops, bytes }).collect(),
            }
        })
        .collect();
    IterationReport { method, count, iterations, ranks: per_rank.into_iter().map(|r| r.0).collect() }
}

fn rank_info(t: &OpTable, d: usize) -> RankIterations {
    RankIterations {
        dev: DevIdx(d as u32),
        global_rank: t.devices.get(d).and_then(|x| x.global_rank),
        period_ops: None,
        iterations: 0,
        first_op: None,
        warmup_ops: 0,
        warmup_bytes: 0,
        tail_ops: 0,
        tail_bytes: 0,
        iteration_bytes: Vec::new(),
    }
}

/// Fills the warm-up, tail and per-iteration figures from an assignment.
fn tally(t: &OpTable, d: usize, info: &mut RankIterations, assign: &[Option<u32>], first: Option<usize>) {
    info.iteration_bytes = vec![0; info.iterations];
    for (i, (op, it)) in t.per_rank[d].iter().zip(assign).enumerate() {
        match it {
            Some(it) => info.iteration_bytes[*it as usize] += op.bytes,
            None if first.is_none_or(|f| i < f) => (info.warmup_ops, info.warmup_bytes) = (info.warmup_ops + 1, info.warmup_bytes + op.bytes),
            None => (info.tail_ops, info.tail_bytes) = (info.tail_ops + 1, info.tail_bytes + op.bytes),
        }
    }
}

fn by_ranges(t: &OpTable, d: usize, ranges: &[(i64, i64, &str)]) -> (RankIterations, Vec<Option<u32>>) {
    let ops = &t.per_rank[d];
    let assign: Vec<Option<u32>> = ops
        .iter()
        .map(|op| {
            let time = op.cpu_ts_ns.or(op.gpu.map(|g| g.start_ns))?;
            // Ranges are sorted by start; the last one starting at or before `time`
            // that still contains it (nested ranges: the innermost latest start).
            let upto = ranges.partition_point(|r| r.0 <= time);
            ranges[..upto].iter().rposition(|r| time < r.1).map(|i| i as u32)
        })
        .collect();
    let mut info = rank_info(t, d);
    info.iterations = ranges.len();
    let first_range = ranges.first().map(|r| r.0);
    // Warm-up: outside every range and before the first one starts.
    let first = ops.iter().position(|op| op.cpu_ts_ns.or(op.gpu.map(|g| g.start_ns)).zip(first_range).is_some_and(|(x, f)| x >= f));
    tally(t, d, &mut info, &assign, Some(first.unwrap_or(ops.len())));
    (info, assign)
}

/// The longest stretch `[a, e)` over which `tok` has period `p`.
fn periodic_stretch(tok: &[u32], p: usize) -> (usize, usize) {
    let (mut best, mut run_start) = ((0, 0), 0);
    for i in 0..tok.len().saturating_sub(p) {
        if tok[i] != tok[i + p] {
            run_start = i + 1;
        } else if i + 1 - run_start > best.1 - best.0 {
            best = (run_start, i + 1);
        }
    }
    if best.1 == best.0 {
        (0, 0)
    } else {
        (best.0, best.1 + p)
    }
}

/// `(period, first op, iterations)` of a token sequence.
pub(crate) fn find_period(tok: &[u32]) -> Option<(usize, usize, usize)> {
    let n = tok.len();
    if n < 2 {
        return None;
    }
    const LAGS: usize = 8;
    // Positions of each token's last LAGS occurrences, and per (token, lag)
    // the histogram of distances.
    let mut recent: HashMap<u32, Vec<usize>> = HashMap::default();
    let mut hist: HashMap<(u32, usize, usize), u32> = HashMap::default();
    for (i, &x) in tok.iter().enumerate() {
        let r = recent.entry(x).or_default();
        for (lag, &j) in r.iter().rev().enumerate() {
            *hist.entry((x, lag + 1, i - j)).or_default() += 1;
        }
        r.push(i);
        if r.len() > LAGS {
            r.remove(0);
        }
    }
    // Mode distance per (token, lag).
    let mut mode: HashMap<(u32, usize), (u32, usize)> = HashMap::default();
    for (&(x, lag, gap), &c) in &hist {
        let m = mode.entry((x, lag)).or_insert((0, 0));
        if (c, std::cmp::Reverse(gap)) > (m.0, std::cmp::Reverse(m.1)) {
            *m = (c, gap);
        }
    }
    let mut cands: Vec<usize> = mode.values().map(|m| m.1).filter(|&p| 2 * p <= n).collect();
    cands.sort_unstable();
    cands.dedup();
    let mut best: Option<(usize, usize, usize)> = None; // (coverage, p, a)
    for p in cands {
        let (a, e) = periodic_stretch(tok, p);
        let cover = e - a;
        if cover >= 2 * p && best.is_none_or(|b| cover > b.0) {
            best = Some((cover, p, a));
        }
    }
    let (cover, p, a) = best?;
    let k = cover / p;
    // Place the iterations as late as the stretch allows (see the module docs).
    Some((p, a + (cover - k * p), k))
}

fn by_pattern(t: &OpTable, d: usize) -> (RankIterations, Vec<Option<u32>>) {
    let ops = &t.per_rank[d];
    let mut ids: HashMap<(u32, OpKind, u64), u32> = HashMap::default();
    let tok: Vec<u32> = ops
        .iter()
        .map(|o| {
            let next = ids.len() as u32;
            *ids.entry((o.comm.0, o.kind, o.bytes)).or_insert(next)
        })
        .collect();
    let mut info = rank_info(t, d);
    let found = find_period(&tok);
    let assign: Vec<Option<u32>> = match found {
        Some((p, first, k)) => {
            (info.period_ops, info.first_op, info.iterations) = (Some(p), Some(first), k);
            (0..ops.len()).map(|i| (i >= first && i < first + k * p).then(|| ((i - first) / p) as u32)).collect()
        }
        None => vec![None; ops.len()],
    };
    tally(t, d, &mut info, &assign, found.map(|f| f.1));
    (info, assign)
}

#[cfg(test)]
#[path = "iteration_tests.rs"]
mod tests;
