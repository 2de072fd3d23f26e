//! The production aligner's dynamic program: a sliding window over one
//! stream's records and kernels, with memory independent of stream length.
//!
//! Each window holds `L` records and `K ≈ L·(kernels/records) + slack` kernels
//! from the last committed point. It is solved exactly inside a band of ±`band`
//! kernels around the expected slope (scores and traceback matrices of
//! `(L+1)·(K+1)` cells, reused across windows) with a free end (the
//! path may stop on the last row or column), and only the part of the optimal
//! path in the first `commit` fraction of both sides is kept: the rest of the
//! window is look-ahead that keeps the committed part from being fooled at the
//! edge. The next window starts where the committed path ends; the last window
//! ends in the corner. Time is O((n+m)·K/commit), memory O(L·K).
//!
//! Moves into cell `(i, j)` (records `< i`, kernels `< j` consumed): one record
//! with one kernel; two records with one kernel (2:1 batching); `t ≤ MAX_GROUP`
//! point-to-point records with one SendRecv kernel; a record alone; a kernel
//! alone (scored by its position and its run on the row: two states per
//! cell, see `Mats`). A one-to-one match right after another match earns a small bonus
//! (contiguous matches win among otherwise equal alignments). Ties prefer, in
//! order: one-to-one, batch, fusion, kernel gap, record gap.
//!
//! When the committed part is mostly gaps (a burst of drops longer than the
//! window or the band, e.g. a trace that stops for a while), the window and the
//! band double and the window is solved again, up to `max_growth`.

use super::features::{Scorer, NEG};
use super::gaps::KGAP_TABLE;
use super::{MatchShape, MAX_GROUP};

/// Window geometry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowParams {
    /// Records per window.
    pub logs: usize,
    /// Extra kernels beyond the proportional share.
    pub slack: usize,
    /// Fraction of each side committed per window.
    pub commit: f32,
    /// Half-width of the band of cells computed around the expected slope.
    pub band: usize,
    /// Largest factor a window may grow by when its committed part is mostly gaps.
    pub max_growth: usize,
    /// Matched share of consumed entries below which a window grows.
    pub min_density: f32,
}

impl Default for WindowParams {
    fn default() -> Self {
        WindowParams {
            logs: 96,
            slack: 32,
            commit: 0.66,
            band: 32,
            max_growth: 16,
            min_density: 0.25,
        }
    }
}

/// One kernel and the records it explains, in stream positions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Group {
    /// Kernel position in the stream.
    pub j: u32,
    /// First record position; the group is `first .. first + n`.
    pub first: u32,
    pub n: u8,
    pub shape: MatchShape,
}

const MV_ONE: u8 = 1;
const MV_BATCH: u8 = 2;
const MV_KGAP: u8 = 3;
/// Longest run of kernel gaps on one row whose length is tracked.
const MAX_KRUN: u8 = 250;
const MV_LGAP: u8 = 4;
const MV_FUSE: u8 = 10; // + t

/// Aligns one stream; returns the groups in order.
pub fn align_stream(s: &Scorer, p: &WindowParams) -> Vec<Group> {
    let (n, m) = (s.n_logs(), s.n_kernels());
    let mut out = Vec::with_capacity(n.min(m));
    if n == 0 || m == 0 {
        return out;
    }
    let ratio = (m as f64 / n as f64).clamp(0.125, 8.0);
    let mut mats = Mats::default();
    let mut path: Vec<(u8, u32, u32)> = Vec::new();
    // End credits: what an entry left for later is expected to earn. A match's
    // score goes half to its kernel, half to its records; an entry that the
    // counts say cannot all be matched earns its gap cost for the excess share.
    let lam = s.logs_per_kernel;
    let p_log = (lam * m as f32 / n as f32).min(1.0);
    let p_kernel = (n as f32 / (lam * m as f32)).min(1.0);
    let (lgap, kgap) = (s.priors.log_gap, s.priors.kernel_gap);
    let credit = Credit {
        kernel: &|j| p_kernel * 0.5 * lam * s.kernel_bound(j) + (1.0 - p_kernel) * kgap,
        log: &|i| p_log * 0.5 * s.log_bound(i) + (1.0 - p_log) * lgap,
    };
    let (mut i0, mut j0) = (0usize, 0usize);
    while i0 < n && j0 < m {
        let mut growth = 1usize;
        let (ci, cj) = loop {
            let bl = p.logs.max(4) * growth;
            let bk = (bl as f64 * ratio).ceil() as usize + p.slack * growth;
            let (il, jl) = ((n - i0).min(bl), (m - j0).min(bk));
            let last = i0 + il == n && j0 + jl == m;
            // The band follows the expected slope (the last window must reach its corner).
            // Consecutive rows' bands must overlap for every cell band to be reachable.
            let slope = if last && il > 0 {
                jl as f64 / il as f64
            } else {
                ratio
            };
            let band = (p.band * growth).max(slope.ceil() as usize + 1);
            fill(s, (i0, j0), (il, jl), (slope, band), &mut mats);
            let end = if last {
                (il, jl)
            } else {
                best_end(&mats, (i0, j0), (il, jl), &credit)
            };
            traceback(&mats, jl + 1, end, &mut path);
            let lim_i = if last {
                usize::MAX
            } else {
                ((il as f32 * p.commit) as usize).max(1)
            };
            let lim_j = if last {
                usize::MAX
            } else {
                ((jl as f32 * p.commit) as usize).max(1)
            };
            let kept = path
                .iter()
                .take_while(|&&(_, i, j)| (i as usize) < lim_i && (j as usize) < lim_j)
                .count();
            let kept = kept.max(1).min(path.len());
            let (mut consumed, mut matched) = (0usize, 0usize);
            for &(mv, _, _) in &path[..kept] {
                let (lc, kc) = move_size(mv);
                consumed += lc + kc;
                if is_match(mv) {
                    matched += lc + kc;
                }
            }
            let sparse = consumed >= 8 && (matched as f32) < p.min_density * consumed as f32;
            if !last && sparse && growth < p.max_growth {
                growth *= 2;
                continue;
            }
            let (mut ci, mut cj) = (0usize, 0usize);
            for &(mv, i, j) in &path[..kept] {
                let (lc, kc) = move_size(mv);
                let shape = match mv {
                    MV_ONE => Some(MatchShape::OneToOne),
                    MV_BATCH => Some(MatchShape::Batched),
                    x if is_match(x) => Some(MatchShape::FusedP2p),
                    _ => None,
                };
                if let Some(shape) = shape {
                    out.push(Group {
                        j: (j0 + j as usize) as u32,
                        first: (i0 + i as usize) as u32,
                        n: lc as u8,
                        shape,
                    });
                }
                ci = i as usize + lc;
                cj = j as usize + kc;
            }
            break (ci, cj);
        };
        i0 += ci;
        j0 += cj;
    }
    out
}

const RUN_BONUS: f32 = 0.25;

#[inline]
fn is_match(mv: u8) -> bool {
    mv == MV_ONE || mv == MV_BATCH || mv > MV_FUSE
}

/// (records, kernels) a move consumes.
fn move_size(mv: u8) -> (usize, usize) {
    match mv {
        MV_ONE => (1, 1),
        MV_BATCH => (2, 1),
        MV_KGAP => (0, 1),
        MV_LGAP => (1, 0),
        x => ((x - MV_FUSE) as usize, 1),
    }
}

/// The window's matrices, reused across windows. Two states per cell (as in
/// Gotoh's affine gaps): `m`, the best path whose last move is not a kernel
/// gap, and `k`, the best path whose last move is one, with the length of its
/// run of kernel gaps on the row (gap scores depend on it, see
/// [`Scorer::kernel_gap_at`]); keeping them apart keeps a path that enters a
/// row by a match from losing its cheap gaps to one that entered by gaps.
#[derive(Default)]
struct Mats {
    c: Vec<Cell>,
    /// Record-gap score per column of the window.
    lgap: Vec<f32>,
}

/// One cell of both states, side by side (one cache line serves a neighbour).
#[derive(Clone, Copy)]
struct Cell {
    m: f32,
    k: f32,
    /// Move of the `m` path.
    bm: u8,
    /// Run length of the `k` path (1: it left the `m` state of the cell before).
    bk: u8,
}

const FORBIDDEN: Cell = Cell {
    m: NEG,
    k: NEG,
    bm: 0,
    bk: 0,
};

impl Mats {
    /// Makes room for `cells` cells (contents unspecified).
    fn grow(&mut self, cells: usize) {
        if self.c.len() < cells {
            self.c.resize(cells, FORBIDDEN);
        }
    }

    /// Forbids cells `row + lo ..= row + hi` (none when `lo > hi`).
    fn reset(&mut self, row: usize, lo: usize, hi: usize) {
        if lo > hi {
            return;
        }
        self.c[row + lo..=row + hi].fill(FORBIDDEN);
    }

    #[inline]
    fn h(&self, c: usize) -> f32 {
        self.c[c].m.max(self.c[c].k)
    }

    /// Score of the best path into cell `c` as seen by a one-to-one match
    /// after it (which earns the run bonus after a match), and whether it is
    /// the `k` state.
    #[inline]
    fn before_one(&self, c: usize) -> (f32, bool) {
        let m = self.c[c].m
            + if is_match(self.c[c].bm) {
                RUN_BONUS
            } else {
                0.0
            };
        if self.c[c].k > m {
            (self.c[c].k, true)
        } else {
            (m, false)
        }
    }
}

/// Fills the window's matrices inside the band `|j − slope·i| ≤ band` (cells
/// outside stay forbidden).
fn fill(
    s: &Scorer,
    (i0, j0): (usize, usize),
    (il, jl): (usize, usize),
    (slope, band): (f64, usize),
    x: &mut Mats,
) {
    let w = jl + 1;
    x.grow((il + 1) * w);
    // Only the cells a row's moves read are reset (stale values elsewhere are
    // never read): the band, one cell before it, the cells later rows' many-to-one
    // moves reach beyond it, the last row and the last column (free ends).
    let reach = (slope * MAX_GROUP as f64).ceil() as usize + 2;
    x.reset(0, 0, (band + reach).min(jl));
    x.reset(il * w, 0, jl);
    for i in 0..=il {
        x.reset(i * w, jl, jl);
    }
    s.log_gaps(j0, jl + 1, &mut x.lgap);
    let mut ktab = [0f32; KGAP_TABLE];
    x.c[0].m = 0.0;
    for j in 1..=jl.min(band) {
        let (prev, run) = if j == 1 {
            (x.c[0].m, 1)
        } else {
            (x.c[j - 1].k, (x.c[j - 1].bk + 1).min(MAX_KRUN))
        };
        x.c[j].k = prev + s.kernel_gap_at(i0, usize::from(run));
        x.c[j].bk = run;
    }
    for i in 1..=il {
        let gi = i0 + i - 1;
        let row = i * w;
        let up = (i - 1) * w;
        let centre = (i as f64 * slope).round() as usize;
        let (lo, hi) = (centre.saturating_sub(band), (centre + band).min(jl));
        x.reset(row, lo.saturating_sub(1), (hi + reach).min(jl));
        if lo == 0 {
            x.c[row].m = x.h(up) + x.lgap[0];
            x.c[row].bm = MV_LGAP;
        }
        s.kernel_gaps(i0 + i, &mut ktab);
        let batch = i >= 2 && s.batch_ok(gi);
        let p2p = s.p2p_run(gi).min(i).min(MAX_GROUP);
        for j in lo.max(1)..=hi {
            let gj = j0 + j - 1;
            // Continuing a run of matches earns a small bonus (greedy bookkeeping,
            // as the thesis's sequence bonus): among equally good alignments the
            // one with contiguous matches and grouped gaps wins.
            let e = s.e1(gi, gj);
            let mut best = x.before_one(up + j - 1).0 + s.one(e, gi, gj);
            let mut mv = MV_ONE;
            // Every many-to-one move contains record `gi` with kernel `gj`.
            if e > NEG * 0.5 {
                if batch {
                    let c = x.h((i - 2) * w + j - 1) + s.batch(e, gi, gj);
                    if c > best {
                        best = c;
                        mv = MV_BATCH;
                    }
                }
                if p2p >= 2 && s.kernel_hosts_p2p(gj) {
                    let mut sum = e;
                    for t in 2..=p2p {
                        let first = gi + 1 - t;
                        sum += s.e1_member(first, gi, gj) + s.op_count_link(first + 1);
                        let c = x.h((i - t) * w + j - 1) + s.fuse(first, gi, gj, sum);
                        if c > best {
                            best = c;
                            mv = MV_FUSE + t as u8;
                        }
                    }
                }
            }
            let c = x.h(up + j) + x.lgap[j];
            if c > best {
                best = c;
                mv = MV_LGAP;
            }
            x.c[row + j].m = best;
            x.c[row + j].bm = mv;
            // Kernel gap: a new run from the `m` state, or one more in the `k` run.
            let run = (x.c[row + j - 1].bk + 1).min(MAX_KRUN);
            let g1 = ktab[1];
            let gk = match ktab.get(usize::from(run)) {
                Some(&g) => g,
                None => s.kernel_gap_at(i0 + i, usize::from(run)),
            };
            let from_m = x.c[row + j - 1].m + g1;
            let from_k = x.c[row + j - 1].k + gk;
            (x.c[row + j].k, x.c[row + j].bk) = if from_k > from_m {
                (from_k, run)
            } else {
                (from_m, 1)
            };
        }
    }
}

/// Expected later earnings of a record / a kernel left unconsumed (stream positions).
struct Credit<'a> {
    kernel: &'a dyn Fn(usize) -> f32,
    log: &'a dyn Fn(usize) -> f32,
}

/// Best cell on the last row or the last column (free end), each credited with
/// what the window entries it leaves unconsumed are expected to earn later
/// (half of a match's score to the kernel, half to its records, so that ending
/// before or after a correct match is neutral; gap costs for the share the
/// counts leave unmatched). Without the credit a path could skip a
/// weak match at its start and take a strong one at its end for free, and the
/// shift would propagate window after window.
fn best_end(
    x: &Mats,
    (i0, j0): (usize, usize),
    (il, jl): (usize, usize),
    credit: &Credit,
) -> (usize, usize) {
    let w = jl + 1;
    let mut best = (il, jl);
    let mut score = x.h(il * w + jl);
    let mut acc = 0.0f32;
    for j in (0..jl).rev() {
        acc += (credit.kernel)(j0 + j);
        if x.h(il * w + j) + acc > score {
            score = x.h(il * w + j) + acc;
            best = (il, j);
        }
    }
    let mut acc = 0.0f32;
    for i in (0..il).rev() {
        acc += (credit.log)(i0 + i);
        if x.h(i * w + jl) + acc > score {
            score = x.h(i * w + jl) + acc;
            best = (i, jl);
        }
    }
    best
}

/// Moves from (0, 0) to `end` in order, each with its start cell.
fn traceback(x: &Mats, w: usize, end: (usize, usize), path: &mut Vec<(u8, u32, u32)>) {
    path.clear();
    let (mut i, mut j) = end;
    let mut in_k = x.c[i * w + j].k > x.c[i * w + j].m;
    while i > 0 || j > 0 {
        let c = i * w + j;
        if in_k {
            in_k = x.c[c].bk > 1;
            j -= 1;
            path.push((MV_KGAP, i as u32, j as u32));
            continue;
        }
        let mv = x.c[c].bm;
        debug_assert!(mv != 0, "traceback left the band at ({i}, {j})");
        let (lc, kc) = move_size(mv);
        i -= lc;
        j -= kc;
        path.push((mv, i as u32, j as u32));
        let p = i * w + j;
        in_k = if mv == MV_ONE {
            x.before_one(p).1
        } else {
            x.c[p].k > x.c[p].m
        };
    }
    path.reverse();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::align::features::FeatureWeights;
    use crate::entry::{KernelEntry, KernelKind, LogEntry};
    use commlens_core::OpKind;

    fn run(logs: &[LogEntry], kernels: &[KernelEntry], p: &WindowParams) -> Vec<Group> {
        let li: Vec<u32> = (0..logs.len() as u32).collect();
        let ki: Vec<u32> = (0..kernels.len() as u32).collect();
        let s = Scorer::new(logs, kernels, &li, &ki, FeatureWeights::default(), true);
        align_stream(&s, p)
    }

    #[test]
    fn long_identical_runs_span_many_windows() {
        let kinds = [OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter];
        let logs: Vec<LogEntry> = (0..1000).map(|i| LogEntry::of_kind(kinds[i % 3])).collect();
        let kernels: Vec<KernelEntry> = (0..1000)
            .map(|i| KernelEntry::of_kind(KernelKind::Op(kinds[i % 3])))
            .collect();
        let p = WindowParams {
            logs: 16,
            slack: 8,
            ..WindowParams::default()
        };
        let g = run(&logs, &kernels, &p);
        assert_eq!(g.len(), 1000);
        assert!(g
            .iter()
            .enumerate()
            .all(|(x, g)| g.j as usize == x && g.first as usize == x));
    }

    #[test]
    fn a_gap_longer_than_the_window_is_bridged() {
        // 200 Broadcast records with no kernels, then AllReduce on both sides.
        let mut logs: Vec<LogEntry> = (0..200)
            .map(|_| LogEntry::of_kind(OpKind::Broadcast))
            .collect();
        logs.extend((0..50).map(|_| LogEntry::of_kind(OpKind::AllReduce)));
        let kernels: Vec<KernelEntry> = (0..50)
            .map(|_| KernelEntry::of_kind(KernelKind::Op(OpKind::AllReduce)))
            .collect();
        let p = WindowParams {
            logs: 16,
            slack: 8,
            ..WindowParams::default()
        };
        let g = run(&logs, &kernels, &p);
        assert_eq!(g.len(), 50);
        assert!(g.iter().all(|g| g.first >= 200));
    }
}
