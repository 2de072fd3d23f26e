//! The production aligner: [`align_rank`] for one rank, [`align_ranks`] for many
//! (in parallel).
//!
//! Per rank: [`super::streams::plan`] pairs log queues with trace streams; each
//! stream is aligned on its own (streams in parallel) by [`super::window_dp`]:
//!
//! 1. **first pass**, features only, fixed priors (causality enforced if a clock
//!    offset is configured); from its counts each stream learns its priors:
//!    whether it batches 2:1, its gap rates, its p2p group sizes (hard EM);
//! 2. **rank clock**: clocks are per process, so one relation serves all
//!    streams. With kernel launch times, every first-pass match votes for the
//!    lags to the kernels within ±24 positions of its partner and the densest
//!    bin is the offset (robust to first-pass stretches that are shifted); when
//!    records and launches both count from the Unix epoch (timestamped log,
//!    trace with a base time) each kernel votes instead for the lags to the
//!    compatible records just before its launch, so a first pass shifted by
//!    whole iterations (a periodic job traced for a few of them) cannot
//!    mislead it, and the spread is that of every kernel's best lag; with
//!    GPU start times only, the lower envelope of the lags;
//! 3. **timed passes** (`timing_passes`, default 1): the lag model of each
//!    stream ([`super::lag`]) is fitted around the rank clock on the previous
//!    pass's matches, and the stream is aligned again with timing scored.
//!
//! **Confidence** of a match: `σ(ē − 1.5) / (1 + a)`, where `ē` is the mean
//! emission of its records against its kernel (all shared features, timing
//! included) and `a` the number of *rivals* whose emission is within 1 of the
//! match's own: unmatched kernels (records) between the neighbouring matches
//! within 8 positions, or, when any unmatched entry lies within 64 positions
//! (the stretch up to it could be shifted by moving the gap), any kernel
//! within 8 positions. A fully described, timed pair with no rival scores ≈ 1; a pair in
//! a periodic run near drops that timing cannot resolve scores ≈ 0.2 or less.

use super::features::{FeatureWeights, PassCounts, Priors, Scorer, NEG};
use super::lag;
use super::streams::{self, StreamTask};
use super::window_dp::{self, Group, WindowParams};
use super::{Alignment, Match, MatchShape, StreamReport, MAX_GROUP};
use crate::entry::{KernelEntry, LogEntry};
use rayon::prelude::*;

/// Settings of [`align_rank`]; [`Default`] is what commlens uses.
#[derive(Debug, Clone, PartialEq)]
pub struct AlignConfig {
    /// Align each trace stream with its log queues (else the whole rank as one sequence).
    pub per_stream: bool,
    /// Smallest profile similarity at which a log queue is paired with a stream.
    pub min_stream_similarity: f32,
    /// Allow two identical records to share one kernel (2:1 batching).
    pub allow_batching: bool,
    /// Score timing when records and kernels carry times.
    pub use_timing: bool,
    /// Timing passes after the feature-only pass (each refits the lag model).
    pub timing_passes: usize,
    /// Known offset `kernel clock − record clock`: enforces that no kernel starts
    /// before its record (minus `causality_tolerance_ns`).
    pub clock_offset_ns: Option<i64>,
    pub causality_tolerance_ns: i64,
    pub window: WindowParams,
    pub weights: FeatureWeights,
    /// Matched pairs on each side of the running median of the lag model.
    pub lag_half_window: usize,
    /// Floor of the lag residual spread (timestamps are often printed in µs).
    pub min_lag_sigma_ns: f64,
    /// Run streams (and ranks) on the rayon pool.
    pub parallel: bool,
}

impl Default for AlignConfig {
    fn default() -> Self {
        AlignConfig {
            per_stream: true,
            min_stream_similarity: 0.2,
            allow_batching: true,
            use_timing: true,
            timing_passes: 1,
            clock_offset_ns: None,
            causality_tolerance_ns: 1_000,
            window: WindowParams::default(),
            weights: FeatureWeights::default(),
            lag_half_window: 7,
            min_lag_sigma_ns: 2_000.0,
            parallel: true,
        }
    }
}

/// Aligns one rank's log records (in log order) with its kernels (any order).
pub fn align_rank(logs: &[LogEntry], kernels: &[KernelEntry], cfg: &AlignConfig) -> Alignment {
    align_rank_hinted(logs, kernels, &[], cfg)
}

/// [`align_rank`] with, per record, the kernel its peers place it on
/// (`hints[i]`, [`super::features::NO_HINT`] for none; empty: no hints).
pub(super) fn align_rank_hinted(
    logs: &[LogEntry],
    kernels: &[KernelEntry],
    hints: &[u32],
    cfg: &AlignConfig,
) -> Alignment {
    let tasks = streams::plan(logs, kernels, cfg.per_stream, cfg.min_stream_similarity);
    let mut work: Vec<StreamWork> = tasks
        .iter()
        .map(|t| {
            let mut s = Scorer::new(
                logs,
                kernels,
                &t.log_idx,
                &t.kern_idx,
                cfg.weights,
                cfg.allow_batching,
            );
            s.causality = cfg.clock_offset_ns.map(|o| (o, cfg.causality_tolerance_ns));
            if !hints.is_empty() {
                s.hints = t.log_idx.iter().map(|&i| hints[i as usize]).collect();
            }
            StreamWork {
                task: t,
                scorer: s,
                groups: Vec::new(),
                batching: false,
            }
        })
        .collect();
    for_each(&mut work, cfg.parallel, |w| w.first_pass(cfg));
    // Clocks are per rank: one offset serves all its streams.
    let clock = if cfg.use_timing {
        rank_clock(&work, cfg)
    } else {
        None
    };
    for_each(&mut work, cfg.parallel, |w| {
        w.timed_passes(clock.as_ref(), cfg)
    });
    let mut all = Vec::with_capacity(work.iter().map(|w| w.groups.len()).sum());
    let mut reports = Vec::with_capacity(work.len());
    for w in &work {
        all.extend(to_matches(
            &w.scorer,
            &w.task.log_idx,
            &w.task.kern_idx,
            &w.groups,
        ));
        reports.push(w.report());
    }
    let mut a = Alignment::from_matches(all, logs.len(), kernels.len());
    a.streams = reports;
    a
}

/// Aligns several ranks, each `(records, kernels)`, in parallel when configured.
pub fn align_ranks(ranks: &[(&[LogEntry], &[KernelEntry])], cfg: &AlignConfig) -> Vec<Alignment> {
    let run = |r: &(&[LogEntry], &[KernelEntry])| align_rank(r.0, r.1, cfg);
    if cfg.parallel {
        ranks.par_iter().map(run).collect()
    } else {
        ranks.iter().map(run).collect()
    }
}

fn for_each<T: Send>(items: &mut [T], parallel: bool, f: impl Fn(&mut T) + Sync + Send) {
    if parallel {
        items.par_iter_mut().for_each(f);
    } else {
        items.iter_mut().for_each(f);
    }
}

/// The rank's clock relation, fitted on the first pass of all its streams.
enum RankClock {
    /// Kernels carry launch times: `(offset, spread)` of `launch − record time`.
    Launch((f64, f64)),
    /// Only GPU start times: lower envelope of `start − record time`.
    Start(f64),
}

struct StreamWork<'a> {
    task: &'a StreamTask,
    scorer: Scorer<'a>,
    groups: Vec<Group>,
    batching: bool,
}

impl StreamWork<'_> {
    /// Features only; then priors (and batching) learned from the result.
    fn first_pass(&mut self, cfg: &AlignConfig) {
        let s = &mut self.scorer;
        let batched = cfg.allow_batching && s.looks_batched();
        s.priors = Priors::first_pass(batched);
        s.logs_per_kernel = if batched { 2.0 } else { 1.0 };
        self.groups = window_dp::align_stream(s, &cfg.window);
        let c = counts(s, &self.groups);
        let (priors, batching) = Priors::learn(&c);
        s.priors = priors;
        self.batching = batching;
        if !self.groups.is_empty() {
            let matched = (c.n_logs - c.unmatched_logs) as f32;
            s.logs_per_kernel = (matched / self.groups.len() as f32).clamp(1.0, MAX_GROUP as f32);
        }
    }

    /// Learned priors and, with a clock, timing; the lag is refitted before each pass.
    fn timed_passes(&mut self, clock: Option<&RankClock>, cfg: &AlignConfig) {
        let clock = clock.filter(|_| has_times(&self.scorer));
        for _ in 0..if clock.is_some() {
            cfg.timing_passes.max(1)
        } else {
            1
        } {
            let s = &self.scorer;
            let lag = clock.map(|c| match *c {
                RankClock::Launch(off) => {
                    let pts = lag_points(s, &self.groups, true);
                    lag::fit_launch(
                        &pts,
                        off,
                        s.n_logs(),
                        cfg.lag_half_window,
                        cfg.min_lag_sigma_ns,
                        LAG_MIN_POINTS,
                    )
                }
                RankClock::Start(env) => lag::fit_envelope(env, s.n_logs(), cfg.min_lag_sigma_ns),
            });
            self.scorer.set_lag(lag);
            self.groups = window_dp::align_stream(&self.scorer, &cfg.window);
        }
    }

    fn report(&self) -> StreamReport {
        let (mut n_batched, mut n_fused) = (0, 0);
        for g in &self.groups {
            match g.shape {
                MatchShape::Batched => n_batched += 1,
                MatchShape::FusedP2p => n_fused += 1,
                MatchShape::OneToOne => {}
            }
        }
        let s = &self.scorer;
        StreamReport {
            kernel_stream: self.task.kernel_stream,
            log_keys: self.task.log_keys.clone(),
            similarity: self.task.similarity,
            n_logs: s.n_logs(),
            n_kernels: s.n_kernels(),
            n_matches: self.groups.len(),
            n_batched,
            n_fused,
            batching: self.batching,
            lag_sigma_ns: s.lag.as_ref().map(|l| l.sigma_ns),
        }
    }
}

fn counts(s: &Scorer, groups: &[Group]) -> PassCounts {
    let (n_logs, n_kernels) = (s.n_logs(), s.n_kernels());
    let mut c = PassCounts {
        n_logs,
        n_kernels,
        ..PassCounts::default()
    };
    let mut matched_logs = 0;
    for g in groups {
        matched_logs += g.n as usize;
        let p2p = s.log(g.first as usize).kind.is_p2p();
        match g.shape {
            MatchShape::Batched => c.batch += 1,
            _ if p2p => c.fuse[(g.n as usize).min(MAX_GROUP)] += 1,
            _ => c.one += 1,
        }
    }
    c.unmatched_logs = n_logs - matched_logs;
    c.unmatched_kernels = n_kernels - groups.len();
    c
}

fn has_times(s: &Scorer) -> bool {
    let n = s.n_logs();
    let timed = (0..n).filter(|&i| s.log(i).cpu_ts_ns.is_some()).count();
    n > 0 && timed * 2 >= n
}

/// `(record position, kernel time − record time)` of every match (the last
/// record of a group: the launch follows it).
fn lag_points(s: &Scorer, groups: &[Group], from_launch: bool) -> Vec<(u32, f64)> {
    groups
        .iter()
        .filter_map(|g| {
            let last = (g.first + u32::from(g.n) - 1) as usize;
            let ts = s.log(last).cpu_ts_ns?;
            Some((
                last as u32,
                (s.kernel_time(g.j as usize, from_launch)? - ts) as f64,
            ))
        })
        .collect()
}

/// Fits the rank's clock relation on the first pass of its timed streams.
fn rank_clock(work: &[StreamWork], cfg: &AlignConfig) -> Option<RankClock> {
    let timed: Vec<&StreamWork> = work.iter().filter(|w| has_times(&w.scorer)).collect();
    let m: usize = timed.iter().map(|w| w.scorer.n_kernels()).sum();
    let launched: usize = timed
        .iter()
        .map(|w| {
            (0..w.scorer.n_kernels())
                .filter(|&j| w.scorer.kernel(j).launch_ns.is_some())
                .count()
        })
        .sum();
    if m == 0 {
        return None;
    }
    if launched * 2 < m {
        let mut lags: Vec<f64> = timed
            .iter()
            .flat_map(|w| lag_points(&w.scorer, &w.groups, false))
            .map(|p| p.1)
            .collect();
        return lag::envelope(&mut lags).map(RankClock::Start);
    }
    // Both clocks absolute (a log timestamped in epoch time, a trace with its
    // base time): the offset is near zero by construction, and each kernel
    // votes for the lags to the compatible records just before its launch. A
    // feature-only first pass cannot be trusted there: a periodic job traced
    // for a few iterations aligns as well on any of them (a shift of whole
    // iterations, seconds of lag, beyond the reach of the neighbourhood votes).
    if let Some(off) = absolute_offset(&timed, cfg) {
        return Some(RankClock::Launch(off));
    }
    // Votes: each match proposes the lags to the kernels around its partner.
    let total: usize = timed.iter().map(|w| w.groups.len()).sum();
    let stride = (total / MAX_VOTING_GROUPS).max(1);
    let mut votes = Vec::new();
    for w in &timed {
        let s = &w.scorer;
        for g in w.groups.iter().step_by(stride) {
            let last = (g.first + u32::from(g.n) - 1) as usize;
            let Some(ts) = s.log(last).cpu_ts_ns else {
                continue;
            };
            let j = g.j as usize;
            for jj in j.saturating_sub(VOTE_REACH)..(j + VOTE_REACH + 1).min(s.n_kernels()) {
                if let Some(t) = s.kernel(jj).launch_ns {
                    votes.push((t - ts) as f64);
                }
            }
        }
    }
    lag::launch_offset(&votes, cfg.min_lag_sigma_ns).map(RankClock::Launch)
}

/// Times from 2001-09-09 on (ns): a clock that counts from the Unix epoch.
const EPOCH_MIN_NS: i64 = 1_000_000_000_000_000_000;
/// On absolute clocks, how far before its launch a record is looked for
/// (enqueue to launch: µs, up to a group's end) and after it (clock error of
/// the hosts' synchronisation).
const ABS_BEFORE_NS: i64 = 1_000_000_000;
const ABS_AFTER_NS: i64 = 50_000_000;
/// Compatible records voted for per kernel, nearest first, on each side.
const ABS_CANDIDATES: usize = 16;
/// Kernels voting (sampled evenly beyond).
const ABS_MAX_KERNELS: usize = 4_096;

/// The launch-clock offset voted on absolute clocks, when records and
/// launches both count from the Unix epoch and a clear share of the kernels
/// (a quarter) has a compatible record at the voted lag; `None` otherwise.
fn absolute_offset(timed: &[&StreamWork], cfg: &AlignConfig) -> Option<(f64, f64)> {
    let (mut votes, mut voters) = (Vec::new(), Vec::new());
    let mut sampled = 0usize;
    let total: usize = timed.iter().map(|w| w.scorer.n_kernels()).sum();
    let stride = total.div_ceil(ABS_MAX_KERNELS).max(1);
    for (w_ix, w) in timed.iter().enumerate() {
        let s = &w.scorer;
        let mut by_time: Vec<(i64, usize)> = (0..s.n_logs()).filter_map(|i| Some((s.log(i).cpu_ts_ns?, i))).collect();
        if by_time.first().is_none_or(|t| t.0 < EPOCH_MIN_NS) {
            continue;
        }
        by_time.sort_unstable();
        for j in (0..s.n_kernels()).step_by(stride) {
            let Some(t) = s.kernel(j).launch_ns.filter(|&t| t >= EPOCH_MIN_NS) else { continue };
            sampled += 1;
            let at = by_time.partition_point(|x| x.0 <= t);
            let compatible = |&&(ts, i): &&(i64, usize)| s.e1(i, j) > NEG / 2.0 && ts >= t - ABS_BEFORE_NS && ts <= t + ABS_AFTER_NS;
            let before = by_time[..at].iter().rev().filter(compatible).take(ABS_CANDIDATES);
            let after = by_time[at..].iter().filter(compatible).take(ABS_CANDIDATES);
            for &(ts, _) in before.chain(after) {
                votes.push((t - ts) as f64);
                voters.push((w_ix, j));
            }
        }
    }
    let (mode, _) = lag::launch_offset(&votes, cfg.min_lag_sigma_ns)?;
    // Per kernel, its vote nearest the mode. The spread of those residuals is
    // the lag's real spread (tens of µs where processes share CPUs), which the
    // votes inside the mode's bin alone understate; kernels near the mode
    // support it.
    let mut best: std::collections::HashMap<(usize, usize), f64> = std::collections::HashMap::new();
    for (v, k) in votes.iter().zip(&voters) {
        let r = (v - mode).abs();
        best.entry(*k).and_modify(|b| *b = b.min(r)).or_insert(r);
    }
    let mut res: Vec<f64> = best.into_values().collect();
    let support = res.iter().filter(|&&r| r <= ABS_SUPPORT_NS).count();
    if support * 4 < sampled {
        return None;
    }
    res.retain(|&r| r <= ABS_SUPPORT_NS);
    let spread = (1.4826 * lag::median(&mut res)).max(cfg.min_lag_sigma_ns);
    Some((mode, spread))
}

/// Least distance from the voted lag at which a kernel's vote supports it.
const ABS_SUPPORT_NS: f64 = 50_000.0;

const LAG_MIN_POINTS: usize = 8;
const MAX_VOTING_GROUPS: usize = 20_000;
const VOTE_REACH: usize = 24;

const ALT_REACH: usize = 8;
const SHIFT_REACH: usize = 64;
const ALT_MARGIN: f32 = 1.0;

/// Prefix counts of unmatched positions (`out[i]` = unmatched among `0..i`).
fn unmatched_prefix(n: usize, matched: impl Iterator<Item = usize>) -> Vec<u32> {
    let mut used = vec![false; n];
    for i in matched {
        used[i] = true;
    }
    let mut out = Vec::with_capacity(n + 1);
    out.push(0u32);
    for (i, u) in used.iter().enumerate() {
        out.push(out[i] + u32::from(!u));
    }
    out
}

fn to_matches(s: &Scorer, log_idx: &[u32], kern_idx: &[u32], groups: &[Group]) -> Vec<Match> {
    let (nl, nk) = (s.n_logs(), s.n_kernels());
    let free_l = unmatched_prefix(
        nl,
        groups
            .iter()
            .flat_map(|g| g.first as usize..(g.first + u32::from(g.n)) as usize),
    );
    let free_k = unmatched_prefix(nk, groups.iter().map(|g| g.j as usize));
    let count = |p: &[u32], lo: usize, hi: usize| p[hi.min(p.len() - 1)] - p[lo.min(p.len() - 1)];
    let mut out = Vec::with_capacity(groups.len());
    let mut members = [0u32; MAX_GROUP];
    for (x, g) in groups.iter().enumerate() {
        let (j, first, n) = (g.j as usize, g.first as usize, g.n as usize);
        let own: Vec<f32> = (first..first + n).map(|i| s.e1(i, j)).collect();
        let mean = own.iter().sum::<f32>() / n as f32;
        let min_own = own.iter().copied().fold(f32::INFINITY, f32::min);
        // Rivals among the free kernels and records between the neighbouring matches.
        let jp = if x > 0 {
            groups[x - 1].j as usize + 1
        } else {
            0
        };
        let jn = groups.get(x + 1).map_or(nk, |h| h.j as usize);
        let mut free_alts = (jp.max(j.saturating_sub(ALT_REACH))..jn.min(j + ALT_REACH + 1))
            .filter(|&jj| jj != j && s.e1(first, jj) >= own[0] - ALT_MARGIN)
            .count();
        let ip = if x > 0 {
            (groups[x - 1].first + u32::from(groups[x - 1].n)) as usize
        } else {
            0
        };
        let inext = groups.get(x + 1).map_or(nl, |h| h.first as usize);
        free_alts += (ip.max(first.saturating_sub(ALT_REACH))..inext.min(first + n + ALT_REACH))
            .filter(|&ii| (ii < first || ii >= first + n) && s.e1(ii, j) >= min_own - ALT_MARGIN)
            .count();
        // With an unmatched entry nearby, the stretch up to it may be shifted
        // (moving the gap to its other end): every kernel around that scores as
        // well is a rival.
        let shiftable = count(
            &free_l,
            first.saturating_sub(SHIFT_REACH),
            first + n + SHIFT_REACH,
        ) > 0
            || count(&free_k, j.saturating_sub(SHIFT_REACH), j + SHIFT_REACH + 1) > 0;
        let shift_alts = if shiftable {
            (j.saturating_sub(ALT_REACH)..(j + ALT_REACH + 1).min(nk))
                .filter(|&jj| jj != j && s.e1(first, jj) >= own[0] - ALT_MARGIN)
                .count()
        } else {
            0
        };
        let alts = free_alts.max(shift_alts);
        let base = 1.0 / (1.0 + (-(mean - 1.5)).exp());
        let conf = (base / (1.0 + alts as f32)).clamp(0.0, 1.0);
        for (m, i) in members.iter_mut().zip(first..first + n) {
            *m = log_idx[i];
        }
        out.push(Match::new(kern_idx[j], &members[..n], g.shape, conf));
    }
    out
}
