//! The five alignment validation tests of thesis §4.3.1, run on both aligners.
//! The thesis-faithful Needleman-Wunsch must reproduce the thesis's reported
//! results; the production aligner must reach the same conclusions in its own
//! terms (it never pairs different kinds, and it explains duplicated records as
//! 2:1 batching instead of skipping them).

use commlens_core::OpKind;
use commlens_fuse::align::needleman_wunsch::{
    needleman_wunsch, needleman_wunsch_with, NwAlignment, NwParams, NwStep,
};
use commlens_fuse::synth::validation::{self, ValidationCase};
use commlens_fuse::{align_rank, AlignConfig, Alignment, KernelKind, MatchShape};

fn thesis(case: &ValidationCase) -> NwAlignment {
    let nw = needleman_wunsch(&case.nsys, &case.nccl);
    println!(
        "{:<26} thesis-faithful: {} matches, {} mismatches, {} gaps, max gap run {}, score {:.2}   (thesis: {})",
        case.name,
        nw.n_matches(),
        nw.n_mismatches(),
        nw.n_gaps(),
        nw.max_gap_run(),
        nw.score,
        case.thesis_result
    );
    nw
}

fn production(case: &ValidationCase) -> Alignment {
    let (logs, kernels) = case.entries();
    let a = align_rank(&logs, &kernels, &AlignConfig::default());
    println!(
        "{:<26} production: {} matches over {} records, {} records and {} kernels unmatched",
        case.name,
        a.matches.len(),
        a.n_matched_logs(),
        a.unmatched_logs.len(),
        a.unmatched_kernels.len()
    );
    // Never a pair of different kinds.
    for m in &a.matches {
        for &l in m.logs() {
            let (lk, kk) = (case.nccl[l as usize], case.nsys[m.kernel as usize]);
            assert!(
                kk == KernelKind::Op(lk),
                "{}: {lk:?} paired with {kk:?}",
                case.name
            );
        }
    }
    a
}

#[test]
fn asymmetric_penalty() {
    let case = validation::asymmetric_penalty();
    let nw = thesis(&case);
    assert_eq!((nw.n_matches(), nw.n_mismatches(), nw.n_gaps()), (3, 0, 2));
    let a = production(&case);
    assert_eq!(a.matches.len(), 3);
    assert_eq!(
        (a.unmatched_logs.clone(), a.unmatched_kernels.clone()),
        (vec![2], vec![2])
    );
}

#[test]
fn false_positive_prevention() {
    let case = validation::false_positive_prevention();
    let in_segment_2 =
        |pairs: &[(usize, usize)]| pairs.iter().filter(|p| (4..8).contains(&p.1)).count();
    // Literal eq. 4.2 with charged end gaps: scattering beats the exact segment
    // (−22.5 against −27), so one match of four lands in segment 2. The
    // thesis reports ≥ 75%; see the module notes of `align::needleman_wunsch`.
    let nw = thesis(&case);
    let pairs = nw.matched_pairs();
    assert_eq!(pairs.len(), 4);
    assert_eq!(in_segment_2(&pairs), 1, "{pairs:?}");
    assert!((nw.score - (-22.5)).abs() < 1e-9);
    // With free log end gaps (the trace as a window of the log) it passes.
    let free = NwParams {
        free_log_end_gaps: true,
        ..NwParams::default()
    };
    let nw = needleman_wunsch_with(&case.nsys, &case.nccl, &free);
    assert_eq!(
        in_segment_2(&nw.matched_pairs()),
        4,
        "{:?}",
        nw.matched_pairs()
    );
    // The production aligner finds the exact segment.
    let a = production(&case);
    let pairs: Vec<(usize, usize)> = a
        .matches
        .iter()
        .map(|m| (m.kernel as usize, m.logs()[0] as usize))
        .collect();
    assert_eq!(pairs.len(), 4);
    assert!(4 * in_segment_2(&pairs) >= 3 * pairs.len(), "{pairs:?}");
}

#[test]
fn consecutive_duplication() {
    let case = validation::consecutive_duplication();
    let nw = thesis(&case);
    assert_eq!((nw.n_matches(), nw.n_mismatches()), (5, 0));
    let skipped = nw
        .steps
        .iter()
        .filter(|s| matches!(s, NwStep::NcclGap { .. }))
        .count();
    assert_eq!(2 * skipped, case.nccl.len(), "50% of the records skipped");
    // Production: every kernel explains both of its records (2:1 batching).
    let a = production(&case);
    assert_eq!(a.matches.len(), 5);
    assert!(a
        .matches
        .iter()
        .all(|m| m.shape == MatchShape::Batched && m.logs().len() == 2));
    assert!(a.unmatched_logs.is_empty() && a.unmatched_kernels.is_empty());
}

#[test]
fn sequence_bonus() {
    let case = validation::sequence_bonus();
    let nw = thesis(&case);
    let pairs = nw.matched_pairs();
    assert_eq!(pairs.len(), case.nsys.len());
    assert!(pairs.iter().all(|&(i, j)| i == j));
    let a = production(&case);
    assert_eq!(a.matches.len(), case.nsys.len());
    assert!(a.matches.iter().all(|m| m.logs() == [m.kernel]));
}

#[test]
fn adaptive_gap_penalty() {
    let case = validation::adaptive_gap_penalty();
    let nw = thesis(&case);
    assert_eq!((nw.n_matches(), nw.n_mismatches()), (4, 0));
    assert!(nw.max_gap_run() <= 2, "max gap run {}", nw.max_gap_run());
    // With free log end gaps the first AllReduce is skipped for free instead.
    let free = NwParams {
        free_log_end_gaps: true,
        ..NwParams::default()
    };
    assert!(needleman_wunsch_with(&case.nsys, &case.nccl, &free).max_gap_run() > 2);
    let a = production(&case);
    assert_eq!(a.matches.len(), 4);
    let unmatched: Vec<OpKind> = a
        .unmatched_logs
        .iter()
        .map(|&l| case.nccl[l as usize])
        .collect();
    assert_eq!(
        unmatched,
        vec![OpKind::Broadcast, OpKind::Send, OpKind::Recv]
    );
    assert_eq!(a.unmatched_kernels.len(), 1);
}
