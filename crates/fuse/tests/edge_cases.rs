//! Edge cases for both aligners: empty inputs, nothing alignable (all gaps),
//! one side much longer, identical sequences, many streams with no partner,
//! and conversion from the canonical table.

use commlens_core::{DataType, OpKind, RedOp};
use commlens_fuse::align::needleman_wunsch::{needleman_wunsch, NwStep};
use commlens_fuse::synth::{generate, MegatronConfig};
use commlens_fuse::{
    align_rank, align_rank_thesis, AlignConfig, KernelEntry, KernelKind, LogEntry, MatchShape,
};

fn logs(kinds: &[OpKind]) -> Vec<LogEntry> {
    kinds.iter().map(|&k| LogEntry::of_kind(k)).collect()
}

fn kernels(kinds: &[OpKind]) -> Vec<KernelEntry> {
    kinds
        .iter()
        .enumerate()
        .map(|(i, &k)| KernelEntry {
            start_ns: i as i64 * 100,
            end_ns: i as i64 * 100 + 50,
            ..KernelEntry::of_kind(KernelKind::Op(k))
        })
        .collect()
}

#[test]
fn empty_sequences() {
    let cfg = AlignConfig::default();
    let a = align_rank(&[], &[], &cfg);
    assert!(a.matches.is_empty() && a.unmatched_logs.is_empty() && a.unmatched_kernels.is_empty());
    let l = logs(&[OpKind::AllReduce; 3]);
    let a = align_rank(&l, &[], &cfg);
    assert_eq!(a.unmatched_logs, vec![0, 1, 2]);
    let k = kernels(&[OpKind::AllReduce; 2]);
    let a = align_rank(&[], &k, &cfg);
    assert_eq!(a.unmatched_kernels, vec![0, 1]);
    assert_eq!(align_rank_thesis(&l, &[]).unmatched_logs.len(), 3);
    assert_eq!(align_rank_thesis(&[], &k).unmatched_kernels.len(), 2);
    assert!(needleman_wunsch(&[], &[]).steps.is_empty());
}

#[test]
fn all_gaps_when_nothing_is_compatible() {
    let l = logs(&[OpKind::AllGather; 50]);
    let k = kernels(&[OpKind::Broadcast; 40]);
    let a = align_rank(&l, &k, &AlignConfig::default());
    assert!(a.matches.is_empty());
    assert_eq!(
        (a.unmatched_logs.len(), a.unmatched_kernels.len()),
        (50, 40)
    );
    let nw = needleman_wunsch(
        &k.iter().map(|k| k.kind).collect::<Vec<_>>(),
        &[OpKind::AllGather; 50],
    );
    assert_eq!(nw.n_matches(), 0);
    // The thesis scorer prefers gaps to mismatches here too (−15·2 < 2·−5 per pair at best).
    assert_eq!(nw.n_mismatches(), 0);
    assert!(nw
        .steps
        .iter()
        .all(|s| matches!(s, NwStep::NsysGap { .. } | NwStep::NcclGap { .. })));
}

#[test]
fn one_side_much_longer() {
    // 2000 records, 20 kernels somewhere in the middle (a short trace capture).
    let mut l = logs(&[OpKind::AllReduce; 990]);
    l.extend(logs(&[OpKind::Broadcast, OpKind::ReduceScatter].repeat(10)));
    l.extend(logs(&[OpKind::AllReduce; 990]));
    let k = kernels(&[OpKind::Broadcast, OpKind::ReduceScatter].repeat(10));
    let a = align_rank(&l, &k, &AlignConfig::default());
    assert_eq!(a.matches.len(), 20);
    for m in &a.matches {
        assert!((990..1010).contains(&m.logs()[0]), "{m:?}");
    }
    // And the other way round: 1000 kernels, 10 records.
    let l = logs(&[OpKind::Broadcast; 10]);
    let k = kernels(&[OpKind::AllGather; 1000]);
    let a = align_rank(&l, &k, &AlignConfig::default());
    assert!(a.matches.is_empty() && a.unmatched_kernels.len() == 1000);
}

#[test]
fn identical_sequences_align_on_the_diagonal() {
    let kinds: Vec<OpKind> = (0..3000)
        .map(|i| {
            [
                OpKind::AllReduce,
                OpKind::AllGather,
                OpKind::ReduceScatter,
                OpKind::Broadcast,
            ][i % 4]
        })
        .collect();
    let (l, k) = (logs(&kinds), kernels(&kinds));
    let a = align_rank(&l, &k, &AlignConfig::default());
    assert_eq!(a.matches.len(), kinds.len());
    assert!(a
        .matches
        .iter()
        .all(|m| m.logs() == [m.kernel] && m.shape == MatchShape::OneToOne));
    assert!(a.matches.iter().all(|m| m.confidence > 0.8));
    let t = align_rank_thesis(&l[..500], &k[..500]);
    assert!(t.matches.iter().all(|m| m.logs() == [m.kernel]) && t.matches.len() == 500);
}

#[test]
fn sequential_and_parallel_runs_agree() {
    let cfg = MegatronConfig {
        seed: 11,
        kernel_drop: 0.2,
        log_drop: 0.2,
        ..MegatronConfig::default()
    };
    for r in generate(&cfg) {
        let par = align_rank(&r.logs, &r.kernels, &AlignConfig::default());
        let seq = align_rank(
            &r.logs,
            &r.kernels,
            &AlignConfig {
                parallel: false,
                ..AlignConfig::default()
            },
        );
        assert_eq!(par, seq);
        let whole = align_rank(
            &r.logs,
            &r.kernels,
            &AlignConfig {
                per_stream: false,
                ..AlignConfig::default()
            },
        );
        assert_eq!(whole.streams.len(), 1);
    }
}

#[test]
fn kernel_names_and_core_records_feed_the_aligner() {
    let mut l = LogEntry::of_kind(OpKind::AllReduce);
    l.dtype = Some(DataType::Float32);
    l.redop = Some(RedOp::Sum);
    let good = KernelEntry::from_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 3, 10, 20);
    let wrong_type = KernelEntry::from_name("ncclDevKernel_AllReduce_Sum_f16_RING_LL", 3, 0, 5);
    // The record agrees with the second kernel on datatype; the first differs.
    let a = align_rank(&[l], &[wrong_type, good], &AlignConfig::default());
    assert_eq!(a.matches.len(), 1);
    assert_eq!(a.matches[0].kernel, 1);
    assert_eq!(a.unmatched_kernels, vec![0]);
}

#[test]
fn known_clock_offset_enforces_causality() {
    // Two identical records at t = 1000 and 2000 (record clock); two kernels at
    // 500 and 2500 (kernel clock = record clock + 0). Without the offset the
    // first record takes the first kernel; with it, that kernel started before
    // any record and must stay unmatched.
    let mut l = logs(&[OpKind::AllGather, OpKind::AllGather]);
    l[0].cpu_ts_ns = Some(1_000);
    l[1].cpu_ts_ns = Some(2_000);
    let mut k = kernels(&[OpKind::AllGather, OpKind::AllGather]);
    k[0].start_ns = 500;
    k[1].start_ns = 2_500;
    let free = align_rank(&l, &k, &AlignConfig::default());
    assert_eq!(free.matches.len(), 2);
    let causal = AlignConfig {
        clock_offset_ns: Some(0),
        causality_tolerance_ns: 100,
        ..AlignConfig::default()
    };
    let a = align_rank(&l, &k, &causal);
    assert_eq!(a.matches.len(), 1);
    assert_eq!(a.unmatched_kernels, vec![0]);
    assert_eq!(a.matches[0].kernel, 1);
}
