//! Tests of the production aligner's emission and transition scores.
use super::*;
use commlens_core::{DataType, Protocol, RedOp};

fn ar(dtype: DataType) -> LogEntry {
    LogEntry {
        dtype: Some(dtype),
        redop: Some(RedOp::Sum),
        ..LogEntry::of_kind(OpKind::AllReduce)
    }
}

#[test]
fn emission_uses_shared_features_only() {
    let logs = [
        ar(DataType::Bfloat16),
        LogEntry::of_kind(OpKind::Send),
        ar(DataType::Float32),
    ];
    let mut k0 = KernelEntry::of_kind(KernelKind::Op(OpKind::AllReduce));
    k0.dtype = Some(DataType::Bfloat16);
    k0.redop = Some(RedOp::Sum);
    k0.proto = Some(Protocol::Ll);
    let k1 = KernelEntry::of_kind(KernelKind::Op(OpKind::SendRecv));
    let kernels = [k0, k1];
    let (li, ki) = ([0u32, 1, 2], [0u32, 1]);
    let s = Scorer::new(&logs, &kernels, &li, &ki, FeatureWeights::default(), true);
    assert_eq!(s.e1(0, 0), 3.0 + 1.0 + 1.0); // proto unknown on the record side
    assert_eq!(s.e1(1, 1), 3.0);
    assert_eq!(s.e1(1, 0), NEG);
    assert_eq!(s.e1(2, 0), 3.0 - 3.0 + 1.0);
    assert!(!s.batch_ok(2) && !s.batch_ok(1));
    assert_eq!(s.p2p_run(1), 1);
}

#[test]
fn learned_priors_follow_the_counts() {
    let c = PassCounts {
        n_logs: 200,
        n_kernels: 100,
        one: 5,
        batch: 95,
        ..Default::default()
    };
    let (p, batching) = Priors::learn(&c);
    assert!(batching && p.batch > p.one);
    let c = PassCounts {
        n_logs: 100,
        n_kernels: 100,
        one: 90,
        batch: 5,
        ..Default::default()
    };
    let (p, batching) = Priors::learn(&c);
    assert!(!batching && p.one > p.batch);
}
