//! Where gaps belong: evidence, from each side's own order and timing, of
//! where the other side lost entries. Used by [`super::window_dp`] to price a
//! gap by its position instead of uniformly, which is what places drops in a
//! periodic run (`AllGather ReduceScatter AllGather …`) when no timing links the
//! two sides.
//!
//! * **Records → kernels without a record** ([`kernel_gap_rows`]): NCCL's
//!   per-communicator `opCount` numbers the operations (point-to-point
//!   records of one group share it). A jump in it between two records of one
//!   communicator says that records were lost there, so their kernels (which
//!   are in the trace) will be left unmatched between those records' kernels;
//!   where it does not jump, a kernel without a record is only the rare
//!   unlogged kernel. Communicators whose counts do not increase (some NCCL
//!   versions print `opCount 0` on every call) give no evidence.
//! * **Kernels → records without a kernel** ([`log_gap_cols`]): a kernel lost
//!   from the trace still ran, on its stream, between its neighbours; the
//!   stream is idle for at least its duration there, and its launch call took
//!   CPU time between theirs. So a record left without a kernel is more likely
//!   where the idle time (and, when the trace has launch calls, the launch
//!   interval) between two consecutive kernels is long for their pair of kinds
//!   (the median over the stream is the reference), and less likely where it
//!   is short.

use super::features::Scorer;
use super::signature::{KernelSig, NO_TIME};
use crate::entry::LogEntry;

/// Score added to a kernel gap where records were lost (`opCount` jumps).
pub const OPEN_ROW: f32 = 3.0;
/// Score added to a kernel gap beyond what the counts explain.
pub const CLOSED_ROW: f32 = -2.0;
/// Weights of the idle-time and launch-interval evidence, and its clamp.
const W_IDLE: f32 = 1.0;
const W_LAUNCH: f32 = 1.0;
const CLAMP: (f32, f32) = (-1.5, 3.0);
/// Fewest transitions of a kind pair for its median to be a reference.
const MIN_PAIRS: usize = 4;

/// Runs of kernel gaps whose scores [`Scorer::kernel_gaps`] tabulates (+1).
pub const KGAP_TABLE: usize = 9;

/// Highest score of a gap (a gap is never as good as a certain event).
const MAX_GAP: f32 = -0.22;

/// Gap scores by position, for [`super::window_dp`].
impl Scorer<'_> {
    /// Score of the `run`-th consecutive kernel left unmatched between records
    /// `row − 1` and `row`. Where `opCount`s were lost there, the kernels of
    /// the lost records are expected: with `A` of them (lost counts over
    /// records per kernel, rounded down: on a 2:1 stream one lost count is
    /// mostly one copy of a pair) each present with probability `p` (one minus
    /// the record-gap rate), the `r`-th gap scores `ln((A−r+1)/r · p/(1−p))`,
    /// the log-ratio of `r` to `r−1` lost-record kernels, so that leaving them
    /// matched to something else costs. Beyond `A` the gap has its prior, and
    /// where no count was lost it is dearer than that; without usable counts
    /// it is the prior.
    #[inline]
    pub fn kernel_gap_at(&self, row: usize, run: usize) -> f32 {
        let base = self.priors.kernel_gap;
        let d = match self.kgap_rows.get(row).copied() {
            None | Some(UNKNOWN_ROW) => return base,
            Some(0) => return base + CLOSED_ROW,
            Some(d) => f32::from(d),
        };
        let a = (d / self.logs_per_kernel + 0.25).floor();
        let r = run as f32;
        if r > a {
            return base;
        }
        let p = (1.0 - self.priors.log_gap.exp()).clamp(0.5, 0.95);
        ((a - r + 1.0) / r * p / (1.0 - p))
            .ln()
            .clamp(base, OPEN_ROW)
    }

    /// [`Self::kernel_gap_at`] for runs `1..KGAP_TABLE` of one row, in
    /// `out[run]` (computed once per row by the dynamic program).
    pub fn kernel_gaps(&self, row: usize, out: &mut [f32; KGAP_TABLE]) {
        let base = self.priors.kernel_gap;
        let flat = match self.kgap_rows.get(row).copied() {
            None | Some(UNKNOWN_ROW) => Some(base),
            Some(0) => Some(base + CLOSED_ROW),
            Some(_) => None,
        };
        match flat {
            Some(g) => out.fill(g),
            None => {
                for (r, o) in out.iter_mut().enumerate().skip(1) {
                    *o = self.kernel_gap_at(row, r);
                }
            }
        }
    }

    /// Score of a record left unmatched between kernels `col − 1` and `col`.
    #[inline]
    pub fn log_gap_at(&self, col: usize) -> f32 {
        let adj = if self.idle_evidence() {
            self.lgap_cols.get(col).copied().unwrap_or(0.0)
        } else {
            0.0
        };
        (self.priors.log_gap + adj).min(MAX_GAP)
    }

    /// [`Self::log_gap_at`] for columns `from .. from + len`, into `out`.
    pub fn log_gaps(&self, from: usize, len: usize, out: &mut Vec<f32>) {
        out.clear();
        let base = self.priors.log_gap;
        if self.idle_evidence() {
            out.extend(
                (from..from + len)
                    .map(|c| (base + self.lgap_cols.get(c).copied().unwrap_or(0.0)).min(MAX_GAP)),
            );
        } else {
            out.resize(len, base.min(MAX_GAP));
        }
    }

    /// A two-sided launch-time model places records by itself; the idle-time
    /// evidence is for streams without one.
    fn idle_evidence(&self) -> bool {
        self.lag.as_ref().is_none_or(|l| l.one_sided)
    }
}

/// Allowance of a row without usable counts: every kernel gap at the prior.
pub const UNKNOWN_ROW: u8 = u8::MAX;

/// Per row `i` (`0..=n`: between record `i−1` and record `i`), how many
/// kernels may be left unmatched there cheaply: the number of `opCount`s the
/// record's communicator skipped since its previous record (since 0 for its
/// first record), 0 where it skipped none, [`UNKNOWN_ROW`] without usable
/// counts. `l(i)` is the stream's record `i`.
pub fn kernel_gap_rows<'a>(n: usize, l: impl Fn(usize) -> &'a LogEntry) -> Vec<u8> {
    let mut out = vec![UNKNOWN_ROW; n + 1];
    // Per communicator: (comm, last opCount, previous record position, pairs, bad pairs).
    let mut comms: Vec<(u64, u64, Option<usize>, usize, usize)> = Vec::new();
    // (row span start, row, skipped counts, comm slot) per record.
    let mut spans: Vec<(usize, usize, u64, usize)> = Vec::with_capacity(n);
    for i in 0..n {
        let e = l(i);
        let Some(oc) = e.op_count else { continue };
        let slot = match comms.iter().position(|c| c.0 == e.comm) {
            Some(s) => s,
            None => {
                comms.push((e.comm, 0, None, 0, 0));
                comms.len() - 1
            }
        };
        let c = &mut comms[slot];
        let skipped = match c.2 {
            // Counts start at 0: a first record at 5 follows five lost ones.
            None => oc,
            Some(prev) => {
                c.3 += 1;
                let p2p_pair = e.kind.is_p2p() && l(prev).kind.is_p2p();
                if oc < c.1 || (oc == c.1 && !p2p_pair) {
                    c.4 += 1;
                }
                oc.saturating_sub(c.1 + 1)
            }
        };
        spans.push((c.2.map_or(0, |p| p + 1), i, skipped, slot));
        c.1 = oc;
        c.2 = Some(i);
    }
    for (lo, i, skipped, slot) in spans {
        let (pairs, bad) = (comms[slot].3, comms[slot].4);
        if pairs < MIN_PAIRS || bad * 20 > pairs {
            continue;
        }
        if skipped > 0 {
            // The lost records lie anywhere between the two records of this communicator.
            let a = skipped.min(u64::from(UNKNOWN_ROW) - 1) as u8;
            for r in &mut out[lo..=i] {
                *r = if *r == UNKNOWN_ROW { a } else { (*r).max(a) };
            }
        } else if out[i] == UNKNOWN_ROW {
            out[i] = 0;
        }
    }
    out
}

/// Per column `j` (`0..=m`: between kernel `j−1` and kernel `j` of the stream,
/// in start order), the score added to leaving a record unmatched there: the
/// clamped log-ratio of the idle time (and launch interval) between the two
/// kernels to the stream's median for their pair of kinds (for a rare pair:
/// for the later kernel's kind). 0 at both ends and without a reference.
pub fn log_gap_cols(ks: &[KernelSig], end_ns: &[i64]) -> Vec<f32> {
    let m = ks.len();
    let mut out = vec![0.0f32; m + 1];
    if m < 2 {
        return out;
    }
    let pair = |j: usize| (u16::from(ks[j - 1].kind) << 8) | u16::from(ks[j].kind);
    let idle = |j: usize| (ks[j].start - end_ns[j - 1]).max(0) as f64;
    let launch = |j: usize| {
        let (a, b) = (ks[j - 1].launch, ks[j].launch);
        (a != NO_TIME && b != NO_TIME && b >= a).then(|| (b - a) as f64)
    };
    // Scale: half the median kernel duration (a lost kernel needs about that much room).
    let mut durs: Vec<f64> = (0..m)
        .map(|j| (end_ns[j] - ks[j].start).max(0) as f64)
        .collect();
    let eps = (0.5 * median(&mut durs)).max(1_000.0);
    // References: per pair of kinds, else per kind of the later kernel.
    let into = |j: usize| u16::from(ks[j].kind);
    let idle_ref = [
        reference(m, &pair, &|j| Some(idle(j))),
        reference(m, &into, &|j| Some(idle(j))),
    ];
    let launch_ref = [reference(m, &pair, &launch), reference(m, &into, &launch)];
    let find = |r: &[Vec<(u16, f64)>; 2], j: usize| {
        lookup(&r[0], pair(j)).or_else(|| lookup(&r[1], into(j)))
    };
    let ratio =
        |x: f64, r: f64, eps: f64| (((x + eps) / (r + eps)).ln() as f32).clamp(CLAMP.0, CLAMP.1);
    for (j, o) in out.iter_mut().enumerate().take(m).skip(1) {
        let mut h = 0.0f32;
        if let Some(r) = find(&idle_ref, j) {
            h += W_IDLE * ratio(idle(j), r, eps);
        }
        if let (Some(x), Some(r)) = (launch(j), find(&launch_ref, j)) {
            h += W_LAUNCH * ratio(x, r, 1_000.0);
        }
        *o = h;
    }
    out
}

/// Median of `value(j)` per key `pair(j)`, for keys seen at least [`MIN_PAIRS`] times.
fn reference(
    m: usize,
    pair: &dyn Fn(usize) -> u16,
    value: &dyn Fn(usize) -> Option<f64>,
) -> Vec<(u16, f64)> {
    let mut v: Vec<(u16, f64)> = (1..m)
        .filter_map(|j| value(j).map(|x| (pair(j), x)))
        .collect();
    v.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut out = Vec::new();
    let mut x = 0;
    while x < v.len() {
        let mut y = x;
        while y < v.len() && v[y].0 == v[x].0 {
            y += 1;
        }
        if y - x >= MIN_PAIRS {
            out.push((v[x].0, v[(x + y) / 2].1));
        }
        x = y;
    }
    out
}

fn lookup(r: &[(u16, f64)], key: u16) -> Option<f64> {
    r.binary_search_by_key(&key, |e| e.0).ok().map(|x| r[x].1)
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mid = v.len() / 2;
    *v.select_nth_unstable_by(mid, |a, b| a.total_cmp(b)).1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{KernelEntry, KernelKind};
    use commlens_core::OpKind;

    fn rec(kind: OpKind, comm: u64, oc: u64) -> LogEntry {
        LogEntry {
            comm,
            op_count: Some(oc),
            ..LogEntry::of_kind(kind)
        }
    }

    #[test]
    fn op_count_jumps_open_rows() {
        let ocs = [0u64, 1, 2, 4, 5, 6, 9, 10];
        let logs: Vec<LogEntry> = ocs.iter().map(|&o| rec(OpKind::AllGather, 1, o)).collect();
        let rows = kernel_gap_rows(logs.len(), |i| &logs[i]);
        assert_eq!((rows[3], rows[6]), (1, 2));
        assert_eq!((rows[0], rows[4]), (0, 0));
        assert_eq!(rows[8], UNKNOWN_ROW);
        // Point-to-point records of one group share a count; a constant count is no evidence.
        let p2p = [rec(OpKind::Send, 2, 0), rec(OpKind::Recv, 2, 0)];
        let all: Vec<LogEntry> = (0..6)
            .flat_map(|_| p2p)
            .enumerate()
            .map(|(x, mut e)| {
                e.op_count = Some(x as u64 / 2);
                e
            })
            .collect();
        let rows = kernel_gap_rows(all.len(), |i| &all[i]);
        assert!(rows[..12].iter().all(|&r| r == 0), "{rows:?}");
        let zero: Vec<LogEntry> = (0..8).map(|_| rec(OpKind::AllReduce, 1, 0)).collect();
        assert!(kernel_gap_rows(8, |i| &zero[i])
            .iter()
            .all(|&r| r == UNKNOWN_ROW));
    }

    #[test]
    fn long_idle_time_for_its_kinds_invites_a_record_gap() {
        // AG (compute 200 µs) RS (2 µs) AG …; one RS→AG transition is 150 µs long.
        let mut ks = Vec::new();
        let mut t = 0i64;
        for x in 0..20 {
            let kind = if x % 2 == 0 {
                OpKind::AllGather
            } else {
                OpKind::ReduceScatter
            };
            let gap = match (x % 2, x) {
                (_, 0) => 0,
                (1, _) => 200_000,
                (_, 10) => 150_000,
                _ => 2_000,
            };
            t += gap;
            ks.push(KernelEntry {
                start_ns: t,
                end_ns: t + 15_000,
                ..KernelEntry::of_kind(KernelKind::Op(kind))
            });
            t += 15_000;
        }
        let sigs: Vec<KernelSig> = ks.iter().map(KernelSig::of).collect();
        let ends: Vec<i64> = ks.iter().map(|k| k.end_ns).collect();
        let cols = log_gap_cols(&sigs, &ends);
        assert!(cols[10] > 2.0, "{cols:?}");
        assert!(cols[8].abs() < 0.1 && cols[9].abs() < 0.1);
        assert_eq!((cols[0], cols[20]), (0.0, 0.0));
    }
}
