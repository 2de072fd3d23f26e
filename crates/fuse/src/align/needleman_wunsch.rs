//! Thesis-faithful Needleman-Wunsch (thesis §4.2.2, eqs. 4.1–4.3): global
//! alignment of the op-name sequence of the kernels ("Nsys", rows) with that of
//! the log records ("NCCL", columns), O(n·m) time and O(n·m) bytes of traceback.
//!
//! Scoring, as the thesis states it:
//! * weight (eq. 4.1): 1.0 AllReduce; 2.0 ReduceScatter, AllGather, Broadcast;
//!   0.5 Send, Recv, SendRecv;
//! * match (eq. 4.3): `+5·w(n)`; mismatch: `−15·(w(n)+w(l))/2`;
//! * gap (eq. 4.2): `−5·(1 + 0.3·r)`, `r` = gaps already in the current run;
//! * sequence bonus `+1` for a match that follows a match of the same op.
//!
//! Interpretations the thesis leaves open (stated here, tested in `tests/`):
//! * Names match only when equal: `Send`/`Recv` never match `SendRecv` (the thesis
//!   handles fusion with gaps); `ncclDevKernel_Generic` matches nothing. Kinds
//!   outside the thesis alphabet (Reduce, AllToAll, …) weigh 1.0.
//! * A gap run is a run of consecutive gaps *in the same sequence*; a match or a
//!   gap in the other sequence ends it. This is the reading under which the
//!   thesis's adaptive-gap test ("max run ≤ 2") holds. Run length and the
//!   sequence bonus depend on the path, so each cell carries the run length and
//!   last move of its best path (the greedy bookkeeping a direct implementation
//!   does); the result is optimal for that bookkeeping, not for an affine model.
//! * The gap costs quoted in the thesis's test (−5, −9.88, −12.844) and the
//!   "GAP_RUN_MULTIPLIER = 1.3" contradict eq. 4.2; eq. 4.2 is used (−5, −6.5, −8).
//! * **End gaps are charged** (global alignment, as §2.5 defines it). Under this
//!   literal reading four of the five validation tests give the thesis's
//!   reported results, but the false-positive test cannot: the exact segment
//!   scores −27 (two runs of four log gaps at the ends) while scattering the
//!   matches over segments 1–3 to break the gap runs scores −22.5, so one match
//!   of four lands in segment 2 (the thesis reports ≥ 75%). Any gap cost
//!   that grows with the run favours scattering there. With
//!   [`NwParams::free_log_end_gaps`] (the trace as a window of the log) that test
//!   passes but the adaptive-gap test then skips the first AllReduce for free
//!   (gap run 4). No single reading reproduces all five; `tests/validation.rs`
//!   pins both behaviours.
//! * Ties prefer diagonal, then a kernel gap, then a log gap.
//! * Mismatched pairs are reported but not fused (they are not matches).

use super::{Alignment, Match, MatchShape};
use crate::entry::{KernelEntry, KernelKind, LogEntry};
use commlens_core::OpKind;

/// The scoring constants; [`Default`] is the thesis's parameter set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NwParams {
    pub match_score: f64,
    pub mismatch_penalty: f64,
    pub gap_penalty: f64,
    /// Growth of the gap cost per gap already in the run (eq. 4.2: 0.3).
    pub gap_run_factor: f64,
    pub sequence_bonus: f64,
    /// Log records before the first and after the last kernel cost nothing
    /// (the trace covers a window of the log). See the module notes.
    pub free_log_end_gaps: bool,
}

impl Default for NwParams {
    fn default() -> Self {
        NwParams {
            match_score: 5.0,
            mismatch_penalty: -15.0,
            gap_penalty: -5.0,
            gap_run_factor: 0.3,
            sequence_bonus: 1.0,
            free_log_end_gaps: false,
        }
    }
}

/// One column of the alignment. `nsys` indexes the kernel sequence, `nccl` the log sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NwStep {
    Match {
        nsys: usize,
        nccl: usize,
    },
    Mismatch {
        nsys: usize,
        nccl: usize,
    },
    /// A kernel with no log record.
    NsysGap {
        nsys: usize,
    },
    /// A log record with no kernel.
    NcclGap {
        nccl: usize,
    },
}

/// The optimal global alignment and its score.
#[derive(Debug, Clone, PartialEq)]
pub struct NwAlignment {
    /// Columns from first to last.
    pub steps: Vec<NwStep>,
    pub score: f64,
}

impl NwAlignment {
    pub fn n_matches(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, NwStep::Match { .. }))
            .count()
    }

    pub fn n_mismatches(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, NwStep::Mismatch { .. }))
            .count()
    }

    pub fn n_gaps(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, NwStep::NsysGap { .. } | NwStep::NcclGap { .. }))
            .count()
    }

    /// Longest run of consecutive gaps in one sequence (the thesis's "gap run").
    pub fn max_gap_run(&self) -> usize {
        let (mut best, mut run, mut last) = (0, 0, 0u8);
        for s in &self.steps {
            let dir = match s {
                NwStep::NsysGap { .. } => 1,
                NwStep::NcclGap { .. } => 2,
                _ => 0,
            };
            run = if dir != 0 && dir == last {
                run + 1
            } else {
                usize::from(dir != 0)
            };
            last = dir;
            best = best.max(run);
        }
        best
    }

    /// Matched (kernel, log) index pairs in order.
    pub fn matched_pairs(&self) -> Vec<(usize, usize)> {
        self.steps
            .iter()
            .filter_map(|s| match *s {
                NwStep::Match { nsys, nccl } => Some((nsys, nccl)),
                _ => None,
            })
            .collect()
    }
}

/// Eq. 4.1. Kinds outside the thesis alphabet weigh 1.0 (our choice).
pub fn weight(kind: KernelKind) -> f64 {
    match kind {
        KernelKind::Op(OpKind::AllReduce) => 1.0,
        KernelKind::Op(OpKind::ReduceScatter | OpKind::AllGather | OpKind::Broadcast) => 2.0,
        KernelKind::Op(OpKind::Send | OpKind::Recv | OpKind::SendRecv) => 0.5,
        _ => 1.0,
    }
}

const MV_NONE: u8 = 0;
const MV_MATCH: u8 = 1;
const MV_MISMATCH: u8 = 2;
const MV_UP: u8 = 3; // kernel (row) consumed alone: NsysGap
const MV_LEFT: u8 = 4; // log (column) consumed alone: NcclGap

#[derive(Clone, Copy)]
struct Cell {
    score: f64,
    mv: u8,
    run: u32,
}

/// Aligns kernels (`nsys`) with log records (`nccl`) by op name under the thesis
/// scoring with [`NwParams::default`].
pub fn needleman_wunsch(nsys: &[KernelKind], nccl: &[OpKind]) -> NwAlignment {
    needleman_wunsch_with(nsys, nccl, &NwParams::default())
}

/// [`needleman_wunsch`] with explicit constants.
pub fn needleman_wunsch_with(nsys: &[KernelKind], nccl: &[OpKind], p: &NwParams) -> NwAlignment {
    let (n, m) = (nsys.len(), nccl.len());
    let width = m + 1;
    let mut dirs = vec![MV_NONE; (n + 1) * width];
    let gap = |r: u32| p.gap_penalty * (1.0 + p.gap_run_factor * f64::from(r));
    let extend = |pred: &Cell, dir: u8| -> (f64, u32) {
        let r = if pred.mv == dir { pred.run } else { 0 };
        (pred.score + gap(r), r + 1)
    };
    let mut prev = vec![
        Cell {
            score: 0.0,
            mv: MV_NONE,
            run: 0
        };
        width
    ];
    for j in 1..width {
        let (s, r) = extend(&prev[j - 1], MV_LEFT);
        let s = if p.free_log_end_gaps { 0.0 } else { s };
        prev[j] = Cell {
            score: s,
            mv: MV_LEFT,
            run: r,
        };
        dirs[j] = MV_LEFT;
    }
    let mut cur = prev.clone();
    for i in 1..=n {
        let kernel = nsys[i - 1];
        let wk = weight(kernel);
        let (s, r) = extend(&prev[0], MV_UP);
        cur[0] = Cell {
            score: s,
            mv: MV_UP,
            run: r,
        };
        dirs[i * width] = MV_UP;
        for j in 1..width {
            let log = nccl[j - 1];
            let is_match = kernel == KernelKind::Op(log);
            let d = &prev[j - 1];
            let diag = if is_match {
                let same_run = d.mv == MV_MATCH && i >= 2 && nsys[i - 2] == kernel;
                d.score + p.match_score * wk + if same_run { p.sequence_bonus } else { 0.0 }
            } else {
                d.score + p.mismatch_penalty * (wk + weight(KernelKind::Op(log))) / 2.0
            };
            let (up, up_run) = extend(&prev[j], MV_UP);
            let (left, left_run) = extend(&cur[j - 1], MV_LEFT);
            let cell = if diag >= up && diag >= left {
                Cell {
                    score: diag,
                    mv: if is_match { MV_MATCH } else { MV_MISMATCH },
                    run: 0,
                }
            } else if up >= left {
                Cell {
                    score: up,
                    mv: MV_UP,
                    run: up_run,
                }
            } else {
                Cell {
                    score: left,
                    mv: MV_LEFT,
                    run: left_run,
                }
            };
            dirs[i * width + j] = cell.mv;
            cur[j] = cell;
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    // The end: the corner, or with free trailing log gaps the best cell of the last row.
    let mut end = m;
    if p.free_log_end_gaps {
        for j in (0..m).rev() {
            if prev[j].score > prev[end].score {
                end = j;
            }
        }
    }
    let score = prev[end].score;
    let mut steps: Vec<NwStep> = (end..m)
        .rev()
        .map(|nccl| NwStep::NcclGap { nccl })
        .collect();
    let (mut i, mut j) = (n, end);
    while i > 0 || j > 0 {
        match dirs[i * width + j] {
            MV_MATCH => {
                steps.push(NwStep::Match {
                    nsys: i - 1,
                    nccl: j - 1,
                });
                i -= 1;
                j -= 1;
            }
            MV_MISMATCH => {
                steps.push(NwStep::Mismatch {
                    nsys: i - 1,
                    nccl: j - 1,
                });
                i -= 1;
                j -= 1;
            }
            MV_UP => {
                steps.push(NwStep::NsysGap { nsys: i - 1 });
                i -= 1;
            }
            _ => {
                steps.push(NwStep::NcclGap { nccl: j - 1 });
                j -= 1;
            }
        }
    }
    steps.reverse();
    NwAlignment { steps, score }
}

/// The thesis's whole pipeline for one rank: kernels ordered by start time (its
/// `ORDER BY Kernel.start`), records in log order, one global alignment of names.
/// Every match has confidence 1 (the thesis assigns none).
pub fn align_rank_thesis(logs: &[LogEntry], kernels: &[KernelEntry]) -> Alignment {
    let mut order: Vec<u32> = (0..kernels.len() as u32).collect();
    order.sort_by_key(|&k| (kernels[k as usize].start_ns, k));
    let nsys: Vec<KernelKind> = order.iter().map(|&k| kernels[k as usize].kind).collect();
    let nccl: Vec<OpKind> = logs.iter().map(|l| l.kind).collect();
    let nw = needleman_wunsch(&nsys, &nccl);
    let matches = nw
        .matched_pairs()
        .into_iter()
        .map(|(k, l)| Match::new(order[k], &[l as u32], MatchShape::OneToOne, 1.0))
        .collect();
    Alignment::from_matches(matches, logs.len(), kernels.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use OpKind::*;

    fn k(ops: &[OpKind]) -> Vec<KernelKind> {
        ops.iter().map(|&o| KernelKind::Op(o)).collect()
    }

    #[test]
    fn scores_follow_the_equations() {
        let nw = needleman_wunsch(&k(&[AllReduce]), &[AllReduce]);
        assert_eq!(nw.score, 5.0);
        let nw = needleman_wunsch(&k(&[AllGather, AllGather]), &[AllGather, AllGather]);
        assert_eq!(nw.score, 10.0 + 10.0 + 1.0);
        // Three log gaps in one run: −5, −6.5, −8 (when end gaps are charged).
        let nw = needleman_wunsch(
            &k(&[Broadcast]),
            &[AllReduce, AllReduce, AllReduce, Broadcast],
        );
        assert!((nw.score - (-19.5 + 10.0)).abs() < 1e-9);
        let window = NwParams {
            free_log_end_gaps: true,
            ..NwParams::default()
        };
        let nw = needleman_wunsch_with(
            &k(&[Broadcast]),
            &[AllReduce, AllReduce, AllReduce, Broadcast],
            &window,
        );
        assert_eq!(nw.score, 10.0);
        assert_eq!(nw.steps.len(), 4);
        // Kernel gaps in one run: −5, −6.5.
        let nw = needleman_wunsch(&k(&[AllReduce, AllReduce]), &[]);
        assert!((nw.score - (-11.5)).abs() < 1e-9);
        // Send vs Broadcast: mismatch −15·(0.5+2)/2 = −18.75 loses to two gaps (−10).
        let nw = needleman_wunsch(&k(&[Broadcast]), &[Send]);
        assert_eq!((nw.n_mismatches(), nw.n_gaps()), (0, 2));
        assert_eq!(nw.score, -10.0);
    }

    #[test]
    fn empty_inputs() {
        assert!(needleman_wunsch(&[], &[]).steps.is_empty());
        let nw = needleman_wunsch(&k(&[SendRecv, SendRecv]), &[]);
        assert_eq!(
            nw.steps,
            vec![NwStep::NsysGap { nsys: 0 }, NwStep::NsysGap { nsys: 1 }]
        );
    }

    #[test]
    fn generic_and_fused_never_match() {
        let nw = needleman_wunsch(
            &[KernelKind::Generic, KernelKind::Op(SendRecv)],
            &[AllReduce, Send],
        );
        assert_eq!(nw.n_matches(), 0);
    }
}
