//! Emission and transition scores of the production aligner.
//!
//! Scores are log-likelihood ratios in nats-like units. A pair's *emission*
//! [`Scorer::e1`] sums the evidence of every feature both sides carry:
//!
//! | feature | agree | disagree | compared when |
//! |---|---|---|---|
//! | kind | `kind` (SendRecv kernel ↔ Send/Recv record counts as agreement); `generic` for a Generic kernel | forbidden | always |
//! | datatype, redop | `+attr` | `−attr_mismatch` | both known and the kind reduces (AllReduce, ReduceScatter, Reduce); other kernels' names carry no or dummy (`Sum_int8`) values |
//! | algorithm, protocol | `+tune` | `−tune_mismatch` | both known, not point-to-point |
//! | bytes | `+bytes` | `−bytes_mismatch` | kernel side carries a size; agree within 1% (a p2p group's total against a SendRecv kernel) |
//! | timing | `timing_bonus − |r|/σ` (floored at `timing_floor` = −6: a pair whose every other feature agrees must beat leaving both unmatched even when its lag is far off — on real Kineto traces the CPU-call-to-launch lag of large AllToAlls varies by milliseconds; at −12 the fused recall there was 0.6) | | a launch-time lag model exists; `r` = kernel launch − record time − predicted lag |
//! | timing, earlier p2p group member | as above, a lag longer than predicted by up to the group's own enqueue span (≤ 1 ms) counted as on time | | the kernel is launched at the group's end |
//! | timing (start only) | | `−(|r|/σ − 1)` when the kernel would start `σ` before the lower envelope | only GPU start times exist |
//! | causality | | forbidden | a clock offset is configured and the kernel starts before the record (beyond a tolerance) |
//! | consensus | `+consensus` | `−consensus` (× 0.4 beside a launch-time lag model) | [`super::align_run`] placed the record's call on a kernel of this rank (or a stand-in) by its peers' kernels |
//! | opCount (p2p groups) | `+op_count_same` per member | `−op_count_differs` | both members of a fused group carry one |
//!
//! *Transitions* ([`Priors`]) are log-probabilities of a kernel explaining one
//! record, two (2:1 batching) or a point-to-point group of `t`, and of a record or
//! a kernel left unmatched; the gap scores also depend on where the gap is
//! (lost `opCount`s, stream idle time: [`super::gaps`]). The first pass uses fixed values (2:1 favoured only
//! when the stream [looks batched](Scorer::looks_batched)); later passes use
//! values learned from the first (hard EM).

use super::gaps;
use super::lag::LagModel;
use super::signature::{KernelSig, LogSig, GENERIC, NO_BYTES, NO_TIME, SEND_RECV};
use super::MAX_GROUP;
use crate::entry::{KernelEntry, KernelKind, LogEntry};
use commlens_core::OpKind;

/// Score of a forbidden step.
pub const NEG: f32 = -1.0e9;

/// Weights of the feature evidence (see the module table).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FeatureWeights {
    pub kind: f32,
    pub generic: f32,
    pub attr: f32,
    pub attr_mismatch: f32,
    pub tune: f32,
    pub tune_mismatch: f32,
    pub bytes: f32,
    pub bytes_mismatch: f32,
    pub timing_bonus: f32,
    pub timing_floor: f32,
    /// Per extra member of a p2p group: same `opCount` as the member before it / a different one.
    pub op_count_same: f32,
    pub op_count_differs: f32,
    /// The record's peers place it on this kernel / on another one ([`super::consensus`]).
    pub consensus: f32,
}

impl Default for FeatureWeights {
    fn default() -> Self {
        FeatureWeights {
            kind: 3.0,
            generic: 0.5,
            attr: 1.0,
            attr_mismatch: 3.0,
            tune: 0.5,
            tune_mismatch: 1.5,
            bytes: 2.0,
            bytes_mismatch: 4.0,
            timing_bonus: 2.0,
            timing_floor: -6.0,
            op_count_same: 1.0,
            op_count_differs: 4.0,
            consensus: 2.5,
        }
    }
}

/// Transition log-probabilities.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Priors {
    /// A collective kernel explains one record.
    pub one: f32,
    /// A collective kernel explains two identical consecutive records.
    pub batch: f32,
    /// A SendRecv kernel explains a group of `t` point-to-point records (index `t`).
    pub fuse: [f32; MAX_GROUP + 1],
    pub log_gap: f32,
    pub kernel_gap: f32,
}

impl Priors {
    /// Values of the first pass: gaps 10%; 2:1 batching favoured when the stream
    /// looks batched ([`Scorer::looks_batched`]), else possible only with strong
    /// evidence (two records agreeing on more than their kind).
    pub fn first_pass(batched: bool) -> Priors {
        let mut fuse = [NEG; MAX_GROUP + 1];
        fuse[1] = 0.5f32.ln();
        fuse[2] = 0.4f32.ln();
        for f in fuse.iter_mut().skip(3) {
            *f = 0.05f32.ln();
        }
        let (one, batch) = if batched {
            (0.1f32, 0.9f32)
        } else {
            (0.998f32, 0.002f32)
        };
        Priors {
            one: one.ln(),
            batch: batch.ln(),
            fuse,
            log_gap: 0.1f32.ln(),
            kernel_gap: 0.1f32.ln(),
        }
    }

    /// Learns the priors from the first pass's counts (Laplace-smoothed). Batching
    /// is decided per stream, as the thesis observed it (systematic per rank):
    /// if at least half of the collective kernels took two records, the stream
    /// batches and a lone record per kernel becomes the unlikely case.
    pub fn learn(c: &PassCounts) -> (Priors, bool) {
        let coll = (c.one + c.batch) as f32;
        let frac_batch = (c.batch as f32 + 0.5) / (coll + 1.0);
        let batching = frac_batch >= 0.5;
        let (one, batch) = if batching {
            (0.05f32, 0.95f32)
        } else {
            (0.995f32, 0.005f32)
        };
        let p2p_total: usize = c.fuse.iter().sum();
        let mut fuse = [NEG; MAX_GROUP + 1];
        for (t, f) in fuse.iter_mut().enumerate().skip(1) {
            *f = ((c.fuse[t] as f32 + 0.5) / (p2p_total as f32 + 0.5 * MAX_GROUP as f32)).ln();
        }
        let rate = |x: usize, total: usize| {
            ((x as f32 + 1.0) / (total as f32 + 2.0))
                .clamp(0.005, 0.5)
                .ln()
        };
        let pr = Priors {
            one: one.ln(),
            batch: batch.ln(),
            fuse,
            log_gap: rate(c.unmatched_logs, c.n_logs),
            kernel_gap: rate(c.unmatched_kernels, c.n_kernels),
        };
        (pr, batching)
    }
}

/// Counts of one pass over one stream, the input of [`Priors::learn`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassCounts {
    pub n_logs: usize,
    pub n_kernels: usize,
    pub one: usize,
    pub batch: usize,
    /// `fuse[t]`: point-to-point groups of `t` records.
    pub fuse: [usize; MAX_GROUP + 1],
    pub unmatched_logs: usize,
    pub unmatched_kernels: usize,
}

/// Scores steps of one stream. Positions `i`/`j` index the stream's records and
/// kernels (`log_idx`, `kern_idx`), which index the caller's slices.
pub struct Scorer<'a> {
    logs: &'a [LogEntry],
    kernels: &'a [KernelEntry],
    log_idx: &'a [u32],
    kern_idx: &'a [u32],
    pub w: FeatureWeights,
    pub priors: Priors,
    pub lag: Option<LagModel>,
    /// `(offset, tolerance)`: kernel clock = record clock + offset.
    pub causality: Option<(i64, i64)>,
    /// `batch_ok[i]`: records `i−1` and `i` may be one batched kernel.
    batch_ok: Vec<bool>,
    /// `p2p_run[i]`: consecutive point-to-point records ending at `i` (capped).
    p2p_run: Vec<u8>,
    /// Records per matched kernel (2 on a batching stream), for end credits.
    pub logs_per_kernel: f32,
    ls: Vec<LogSig>,
    ks: Vec<KernelSig>,
    oc_link: Vec<f32>,
    /// Lost `opCount`s per row ([`super::gaps::kernel_gap_rows`]).
    pub(super) kgap_rows: Vec<u8>,
    /// Added to the record-gap prior per column ([`super::gaps::log_gap_cols`]).
    pub(super) lgap_cols: Vec<f32>,
    /// Per record, the caller's kernel index its peers place it on
    /// ([`super::consensus`]); [`NO_HINT`] where they say nothing; empty without peers.
    pub hints: Vec<u32>,
    /// Weight of a hint: `w.consensus`, less where a two-sided launch-time
    /// model already places records ([`Scorer::set_lag`]).
    hint_weight: f32,
}

/// Longest time the records of one point-to-point group take to enqueue
/// (torch's `batch_isend_irecv` spends tens of µs per call).
pub const P2P_GROUP_SPAN_NS: i64 = 1_000_000;

/// Share of the hint weight kept beside a launch-time lag model.
const LAUNCHED_HINT_SHARE: f32 = 0.4;

/// No consensus hint for a record.
pub const NO_HINT: u32 = u32::MAX;

impl<'a> Scorer<'a> {
    pub fn new(
        logs: &'a [LogEntry],
        kernels: &'a [KernelEntry],
        log_idx: &'a [u32],
        kern_idx: &'a [u32],
        w: FeatureWeights,
        allow_batching: bool,
    ) -> Scorer<'a> {
        let l = |i: usize| &logs[log_idx[i] as usize];
        let batch_ok = (0..log_idx.len())
            .map(|i| allow_batching && i > 0 && batchable(l(i - 1), l(i)))
            .collect();
        let mut p2p_run = Vec::with_capacity(log_idx.len());
        let mut run = 0u8;
        for i in 0..log_idx.len() {
            run = if l(i).kind.is_p2p() {
                (run + 1).min(MAX_GROUP as u8)
            } else {
                0
            };
            p2p_run.push(run);
        }
        Scorer {
            logs,
            kernels,
            log_idx,
            kern_idx,
            w,
            priors: Priors::first_pass(false),
            lag: None,
            causality: None,
            logs_per_kernel: 1.0,
            batch_ok,
            p2p_run,
            oc_link: (0..log_idx.len())
                .map(
                    |i| match (i.checked_sub(1).and_then(|p| l(p).op_count), l(i).op_count) {
                        (Some(a), Some(b)) if a == b => w.op_count_same,
                        (Some(_), Some(_)) => -w.op_count_differs,
                        _ => 0.0,
                    },
                )
                .collect(),
            ls: log_idx
                .iter()
                .map(|&i| LogSig::of(&logs[i as usize]))
                .collect(),
            ks: kern_idx
                .iter()
                .map(|&j| KernelSig::of(&kernels[j as usize]))
                .collect(),
            kgap_rows: Vec::new(),
            lgap_cols: Vec::new(),
            hints: Vec::new(),
            hint_weight: w.consensus,
        }
        .with_gap_evidence()
    }

    fn with_gap_evidence(mut self) -> Self {
        self.kgap_rows =
            gaps::kernel_gap_rows(self.n_logs(), |i| &self.logs[self.log_idx[i] as usize]);
        let ends: Vec<i64> = (0..self.n_kernels())
            .map(|j| self.kernel(j).end_ns)
            .collect();
        self.lgap_cols = gaps::log_gap_cols(&self.ks, &ends);
        self
    }

    /// Sets the lag model; a two-sided (launch-time) one places records by
    /// itself, and the peers' hints count for `LAUNCHED_HINT_SHARE` of their weight.
    pub fn set_lag(&mut self, lag: Option<LagModel>) {
        let two_sided = lag.as_ref().is_some_and(|l| !l.one_sided);
        self.hint_weight = self.w.consensus * if two_sided { LAUNCHED_HINT_SHARE } else { 1.0 };
        self.lag = lag;
    }

    pub fn n_logs(&self) -> usize {
        self.log_idx.len()
    }

    pub fn n_kernels(&self) -> usize {
        self.kern_idx.len()
    }

    #[inline]
    pub fn log(&self, i: usize) -> &LogEntry {
        &self.logs[self.log_idx[i] as usize]
    }

    #[inline]
    pub fn kernel(&self, j: usize) -> &KernelEntry {
        &self.kernels[self.kern_idx[j] as usize]
    }

    #[inline]
    pub fn batch_ok(&self, i: usize) -> bool {
        self.batch_ok[i]
    }

    #[inline]
    pub fn p2p_run(&self, i: usize) -> usize {
        self.p2p_run[i] as usize
    }

    /// Whether the stream looks 2:1 batched before any alignment: at least 70% of
    /// its collective records pair up with an identical neighbour, and there are
    /// at least 1.4 collective records per collective kernel.
    pub fn looks_batched(&self) -> bool {
        let coll_logs = (0..self.n_logs())
            .filter(|&i| !self.log(i).kind.is_p2p())
            .count();
        let coll_kernels = (0..self.n_kernels())
            .filter(|&j| !matches!(self.kernel(j).kind, KernelKind::Op(OpKind::SendRecv)))
            .count();
        let mut paired = 0;
        let mut i = 1;
        while i < self.n_logs() {
            if self.batch_ok[i] {
                paired += 2;
                i += 2;
            } else {
                i += 1;
            }
        }
        coll_logs > 0 && paired * 10 >= coll_logs * 7 && coll_logs * 10 >= coll_kernels * 14
    }

    /// Whether kernel `j` can host a fused point-to-point group.
    #[inline]
    pub fn kernel_hosts_p2p(&self, j: usize) -> bool {
        let k = self.ks[j].kind;
        k == SEND_RECV || k == GENERIC
    }

    /// Evidence that record `i` and kernel `j` are the same operation; [`NEG`] if impossible.
    #[inline(always)]
    pub fn e1(&self, i: usize, j: usize) -> f32 {
        self.e1_with(i, j, 0)
    }

    /// [`Self::e1`] of member `i` of a point-to-point group ending at record
    /// `last`: the group's kernel is launched when the group ends, so an
    /// earlier member's lag may exceed the model by the time the rest of the
    /// group took to enqueue (up to [`P2P_GROUP_SPAN_NS`]; records further
    /// apart are not one group and are timed as they are).
    #[inline(always)]
    pub fn e1_member(&self, i: usize, last: usize, j: usize) -> f32 {
        let (a, b) = (self.ls[i].ts, self.ls[last].ts);
        let allowance = if a != NO_TIME && b != NO_TIME && (0..=P2P_GROUP_SPAN_NS).contains(&(b - a)) { b - a } else { 0 };
        self.e1_with(i, j, allowance)
    }

    #[inline(always)]
    fn e1_with(&self, i: usize, j: usize, allowance: i64) -> f32 {
        let (l, k) = (&self.ls[i], &self.ks[j]);
        let w = &self.w;
        let mut s = if k.kind == GENERIC {
            w.generic
        } else if k.kind == l.kind || (k.kind == SEND_RECV && l.p2p) {
            w.kind
        } else {
            return NEG;
        };
        if l.reduces {
            s += agree(l.dtype, k.dtype, w.attr, w.attr_mismatch)
                + agree(l.redop, k.redop, w.attr, w.attr_mismatch);
        }
        if !l.p2p {
            s += agree(l.algo, k.algo, w.tune, w.tune_mismatch)
                + agree(l.proto, k.proto, w.tune, w.tune_mismatch);
            s += self.size_term(l.bytes, k.bytes);
        }
        if let Some(&h) = self.hints.get(i) {
            if h != NO_HINT {
                s += if h == self.kern_idx[j] {
                    self.hint_weight
                } else {
                    -self.hint_weight
                };
            }
        }
        if l.ts != NO_TIME {
            if let Some((offset, tol)) = self.causality {
                if k.start.saturating_sub(offset) < l.ts.saturating_sub(tol) {
                    return NEG;
                }
            }
            if let Some(lag) = &self.lag {
                s += self.timing(lag, i, k, l.ts, allowance);
            }
        }
        s
    }

    /// Size agreement (within 1%) when both sides carry one.
    #[inline]
    fn size_term(&self, log_bytes: u64, kernel_bytes: u64) -> f32 {
        if log_bytes == NO_BYTES || kernel_bytes == NO_BYTES {
            0.0
        } else if log_bytes.abs_diff(kernel_bytes) <= log_bytes.max(kernel_bytes) / 100 {
            self.w.bytes
        } else {
            -self.w.bytes_mismatch
        }
    }

    /// Size agreement of point-to-point records `first..=last` with kernel `j`,
    /// whose size is the group's total.
    fn p2p_size_term(&self, first: usize, last: usize, j: usize) -> f32 {
        let k = self.ks[j].bytes;
        if k == NO_BYTES {
            return 0.0;
        }
        let total = self.ls[first..=last]
            .iter()
            .try_fold(0u64, |acc, l| (l.bytes != NO_BYTES).then(|| acc + l.bytes));
        self.size_term(total.unwrap_or(NO_BYTES), k)
    }

    /// Timing evidence of record `i` (CPU time `ts`) against kernel `k`.
    #[inline]
    fn timing(&self, lag: &LagModel, i: usize, k: &KernelSig, ts: i64, allowance: i64) -> f32 {
        let pred = lag.pred_ns[i];
        let t = if lag.from_launch { k.launch } else { k.start };
        if t == NO_TIME || !pred.is_finite() {
            return 0.0;
        }
        // A lag longer than predicted by up to `allowance` is as expected.
        let excess = (t - ts) as f64 - pred;
        let excess = if excess > 0.0 { (excess - allowance as f64).max(0.0) } else { excess };
        let r = (excess * lag.inv_sigma) as f32;
        if lag.one_sided {
            if r < -1.0 {
                (r + 1.0).max(self.w.timing_floor)
            } else {
                0.0
            }
        } else {
            (self.w.timing_bonus - r.abs()).max(self.w.timing_floor)
        }
    }

    /// Kernel time the lag model uses (launch or start).
    pub fn kernel_time(&self, j: usize, from_launch: bool) -> Option<i64> {
        let k = self.kernel(j);
        if from_launch {
            k.launch_ns
        } else {
            Some(k.start_ns)
        }
    }

    /// Upper bound of kernel `j`'s emission against any record (kind and every
    /// feature the kernel carries agreeing).
    pub fn kernel_bound(&self, j: usize) -> f32 {
        let k = &self.ks[j];
        let w = &self.w;
        let known = |c: u8| f32::from(u8::from(c != 0));
        let mut s = if k.kind == GENERIC {
            w.generic
        } else if k.kind == SEND_RECV {
            w.kind
        } else {
            // Datatype and reduction op are only present on reducing kernels' names.
            w.kind
                + w.attr * (known(k.dtype) + known(k.redop))
                + w.tune * (known(k.algo) + known(k.proto))
        };
        if k.bytes != NO_BYTES {
            s += w.bytes;
        }
        if self.lag.as_ref().is_some_and(|l| !l.one_sided) {
            s += w.timing_bonus;
        }
        s
    }

    /// Upper bound of record `i`'s emission against any kernel.
    pub fn log_bound(&self, i: usize) -> f32 {
        let l = &self.ls[i];
        let w = &self.w;
        let known = |c: u8| f32::from(u8::from(c != 0));
        let mut s = w.kind;
        if l.reduces {
            s += w.attr * (known(l.dtype) + known(l.redop));
        }
        if !l.p2p {
            s += w.tune * (known(l.algo) + known(l.proto));
        }
        if self.lag.as_ref().is_some_and(|l| !l.one_sided) && l.ts != NO_TIME {
            s += w.timing_bonus;
        }
        s
    }

    /// One record `i`, kernel `j`, given `e = e1(i, j)`.
    #[inline]
    pub fn one(&self, e: f32, i: usize, j: usize) -> f32 {
        if self.ls[i].p2p {
            self.priors.fuse[1] + e + self.p2p_size_term(i, i, j)
        } else {
            self.priors.one + e
        }
    }

    /// Records `i−1` and `i` batched into kernel `j`, given `e = e1(i, j)`
    /// (caller checks [`Self::batch_ok`]).
    #[inline]
    pub fn batch(&self, e: f32, i: usize, j: usize) -> f32 {
        self.priors.batch + self.e1(i - 1, j) + e
    }

    /// Point-to-point records `first ..= last` fused into kernel `j`, given the
    /// sum of their emissions and opCount links (caller checks the run).
    #[inline]
    pub fn fuse(&self, first: usize, last: usize, j: usize, sum: f32) -> f32 {
        self.priors.fuse[last + 1 - first] + sum + self.p2p_size_term(first, last, j)
    }

    /// Evidence that records `i−1` and `i` belong to one group: same opCount
    /// (`+op_count_same`), different (`−op_count_differs`), unknown (0).
    #[inline]
    pub fn op_count_link(&self, i: usize) -> f32 {
        self.oc_link[i]
    }
}

/// Kinds whose datatype and reduction op are real (not dummies) in kernel names.
#[inline]
pub fn reduces(kind: OpKind) -> bool {
    matches!(
        kind,
        OpKind::AllReduce | OpKind::ReduceScatter | OpKind::Reduce
    )
}

/// Evidence of two feature codes (0 = unknown).
#[inline]
fn agree(a: u8, b: u8, plus: f32, minus: f32) -> f32 {
    if a == 0 || b == 0 {
        0.0
    } else if a == b {
        plus
    } else {
        -minus
    }
}

/// Two consecutive records that one batched kernel may stand for: same
/// collective on the same communicator, every feature known on both equal (the
/// thesis's 2:1 ranks log each collective twice, with consecutive `opCount`s;
/// point-to-point records are never doubled; a tuning line may be missing on
/// one of the two).
fn batchable(a: &LogEntry, b: &LogEntry) -> bool {
    fn same<T: PartialEq>(x: Option<T>, y: Option<T>) -> bool {
        match (x, y) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        }
    }
    // Records lost between them (an `opCount` jump) belong to other kernels.
    let adjacent = match (a.op_count, b.op_count) {
        (Some(x), Some(y)) => y <= x + 1,
        _ => true,
    };
    !a.kind.is_p2p()
        && adjacent
        && a.kind == b.kind
        && a.comm == b.comm
        && same(a.dtype, b.dtype)
        && same(a.redop, b.redop)
        && same(a.bytes, b.bytes)
        && same(a.algo, b.algo)
        && same(a.proto, b.proto)
}

#[cfg(test)]
#[path = "features_tests.rs"]
mod tests;
