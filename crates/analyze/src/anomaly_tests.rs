//! Unit checks of the anomaly rules on hand-built tables: a slow instance reported once with
//! its ranks, a late rank counted (not listed), a MAD of zero, tiny kernels, short histories,
//! unknown sizes, Send/Recv pairs and a step change over iterations.

use super::*;
use crate::clock::tests::Builder;
use crate::iteration::detect_iterations;
use commlens_core::model::CommIdx;
use commlens_core::DataType;

const BASE: i64 = 1_766_081_200_000_000_000;
const COUNT: u64 = 1 << 20;

fn at(i: usize) -> i64 {
    BASE + i as i64 * 1_000_000
}

/// Four ranks, one communicator; instance `i` member `r` starts `arrive(i, r)` ns after
/// `at(i)` and every member ends `transfer(i)` ns after the last arrival.
fn table(
    n: usize,
    dtype: DataType,
    arrive: impl Fn(usize, usize) -> i64,
    transfer: impl Fn(usize) -> i64,
) -> OpTable {
    let mut b = Builder::new();
    let devs: Vec<DevIdx> = (0..4)
        .map(|r| b.device("h0", 0x1000 * (r as u64 + 1), r))
        .collect();
    let (_, h) = b.comm(&devs, 7);
    for i in 0..n {
        let last = (0..4).map(|r| arrive(i, r)).max().unwrap();
        for (r, &c) in h.iter().enumerate() {
            b.op(
                c,
                OpKind::AllReduce,
                dtype,
                COUNT,
                Some((at(i) + arrive(i, r), at(i) + last + transfer(i))),
            );
        }
    }
    b.t
}

/// A small deterministic wiggle (±2 %) so the MAD is not zero.
fn wiggle(i: usize, base: i64) -> i64 {
    base + ((i * 7919) % 41) as i64 * base / 1000 - base / 50
}

#[test]
fn slow_instance_is_reported_once_with_its_ranks() {
    let t = table(
        40,
        DataType::Bfloat16,
        |i, r| (r as i64) * 200 + (i % 3) as i64 * 50,
        |i| if i == 23 { 300_000 } else { wiggle(i, 100_000) },
    );
    let rep = detect_anomalies(&t, None, &AnomalyConfig::default());
    assert_eq!(
        (
            rep.ops,
            rep.timed_ops,
            rep.samples,
            rep.judged,
            rep.histories_judged
        ),
        (160, 160, 40, 40, 1)
    );
    assert_eq!(rep.anomalies.len(), 1, "{:?}", rep.anomalies);
    let a = &rep.anomalies[0];
    assert_eq!(
        (a.rule, a.instance, a.kind, a.bytes),
        (
            Rule::SlowInstance,
            Some(23),
            OpKind::AllReduce,
            Some(2 * COUNT)
        )
    );
    assert_eq!(a.ranks, [Some(0), Some(1), Some(2), Some(3)]);
    assert_eq!(a.time_ns, at(23) + 100, "the earliest member start");
    assert!(
        (a.observed_ns - 300_000.0).abs() < 1.0 && (a.ratio - 3.0).abs() < 0.1,
        "{a:?}"
    );
    assert!(a.observed_busbw_gb_s.unwrap() < a.expected_busbw_gb_s.unwrap() / 2.0);
    assert_eq!(rep.late_arrivals, 0);
}

#[test]
fn a_late_rank_is_a_late_arrival_not_an_anomaly() {
    // Rank 2 arrives 250 µs late at instance 17: the others' kernels last 350 µs, the
    // transfer itself 100 µs as usual.
    let t = table(
        40,
        DataType::Bfloat16,
        |i, r| {
            if i == 17 && r == 2 {
                250_000
            } else {
                r as i64 * 200
            }
        },
        |i| wiggle(i, 100_000),
    );
    let rep = detect_anomalies(&t, None, &AnomalyConfig::default());
    assert!(rep.anomalies.is_empty(), "{:?}", rep.anomalies);
    assert_eq!(rep.late_arrivals, 1);
    assert_eq!(rep.late_ranks, [(Some(2), 1)]);
}

#[test]
fn zero_mad_tiny_kernels_short_histories_and_unknown_sizes() {
    // Identical durations (MAD 0), one instance 2.5× slower: found.
    let t = table(
        20,
        DataType::Float32,
        |_, _| 0,
        |i| if i == 9 { 250_000 } else { 100_000 },
    );
    let rep = detect_anomalies(&t, None, &AnomalyConfig::default());
    assert_eq!(
        rep.anomalies.iter().map(|a| a.instance).collect::<Vec<_>>(),
        [Some(9)]
    );
    // 1.8× slower is under the relative floor.
    let t = table(
        20,
        DataType::Float32,
        |_, _| 0,
        |i| if i == 9 { 180_000 } else { 100_000 },
    );
    assert!(detect_anomalies(&t, None, &AnomalyConfig::default())
        .anomalies
        .is_empty());
    // A 4 µs kernel taking 12 µs: 3× but only 8 µs more, under min_excess_ns.
    let t = table(
        20,
        DataType::Float32,
        |_, _| 0,
        |i| if i == 9 { 12_000 } else { 4_000 },
    );
    let rep = detect_anomalies(&t, None, &AnomalyConfig::default());
    assert!(rep.anomalies.is_empty() && rep.largest_score.unwrap() > 100.0);
    // Seven instances: too short a history to judge.
    let t = table(
        7,
        DataType::Float32,
        |_, _| 0,
        |i| if i == 3 { 900_000 } else { 100_000 },
    );
    let rep = detect_anomalies(&t, None, &AnomalyConfig::default());
    assert_eq!((rep.judged, rep.histories, rep.anomalies.len()), (0, 1, 0));
    // Unknown sizes: judged on duration alone, in their own bucket.
    let t = table(
        20,
        DataType::Unknown(-1),
        |_, _| 0,
        |i| if i == 4 { 400_000 } else { wiggle(i, 100_000) },
    );
    let rep = detect_anomalies(&t, None, &AnomalyConfig::default());
    assert_eq!(rep.anomalies.len(), 1);
    assert_eq!(
        (
            rep.anomalies[0].bytes,
            rep.anomalies[0].bucket_lo_bytes,
            rep.anomalies[0].observed_busbw_gb_s
        ),
        (None, None, None)
    );
}

#[test]
fn one_timed_member_is_lone() {
    let mut b = Builder::new();
    let devs: Vec<DevIdx> = (0..2)
        .map(|r| b.device("h0", 0x1000 * (r as u64 + 1), r))
        .collect();
    let (_, h) = b.comm(&devs, 3);
    for i in 0..30 {
        let d = if i == 12 { 500_000 } else { wiggle(i, 100_000) };
        b.op(
            h[0],
            OpKind::AllReduce,
            DataType::Float32,
            COUNT,
            Some((at(i), at(i) + d)),
        );
        b.op(h[1], OpKind::AllReduce, DataType::Float32, COUNT, None);
    }
    // By default a lone kernel is counted, not judged (its time may be waiting).
    let rep = detect_anomalies(&b.t, None, &AnomalyConfig::default());
    assert_eq!(
        (
            rep.ops,
            rep.timed_ops,
            rep.lone,
            rep.samples,
            rep.anomalies.len()
        ),
        (60, 30, 30, 0, 0)
    );
    let rep = detect_anomalies(
        &b.t,
        None,
        &AnomalyConfig {
            judge_lone: true,
            ..AnomalyConfig::default()
        },
    );
    assert_eq!((rep.lone, rep.samples), (0, 30));
    assert_eq!(rep.anomalies.len(), 1);
    assert_eq!(
        (rep.anomalies[0].rule, rep.anomalies[0].ranks.as_slice()),
        (Rule::SlowOp, &[Some(0)][..])
    );
}

#[test]
fn send_recv_pairs_are_lone_or_judged_on_the_shorter_kernel() {
    let mut b = Builder::new();
    let devs: Vec<DevIdx> = (0..2)
        .map(|r| b.device("h0", 0x1000 * (r as u64 + 1), r))
        .collect();
    let (_, h) = b.comm(&devs, 5);
    let p2p = |b: &mut Builder, c: CommIdx, kind, peer, span| {
        let i = b.op(c, kind, DataType::Float32, COUNT, Some(span));
        let d = b.t.comms[c.ix()].device.unwrap();
        b.t.per_rank[d.ix()].update(i, |o| o.peer = Some(peer));
    };
    for i in 0..30 {
        // The receiver posts early and waits (long kernel) every time; pair 20 is slow on both.
        let xfer = if i == 20 { 400_000 } else { wiggle(i, 100_000) };
        p2p(
            &mut b,
            h[0],
            OpKind::Send,
            1,
            (at(i) + 50_000, at(i) + 50_000 + xfer),
        );
        p2p(
            &mut b,
            h[1],
            OpKind::Recv,
            0,
            (at(i), at(i) + 50_000 + xfer),
        );
    }
    // Point-to-point kernels are lone by default (grouped sends and receives wait for each other).
    let rep = detect_anomalies(&b.t, None, &AnomalyConfig::default());
    assert_eq!((rep.samples, rep.lone, rep.anomalies.len()), (0, 30, 0));
    let rep = detect_anomalies(
        &b.t,
        None,
        &AnomalyConfig {
            judge_lone: true,
            ..AnomalyConfig::default()
        },
    );
    assert_eq!(rep.samples, 30, "30 pairs");
    assert_eq!(rep.anomalies.len(), 1, "{:?}", rep.anomalies);
    let a = &rep.anomalies[0];
    assert_eq!(
        (a.rule, a.kind, a.instance, a.ranks.as_slice()),
        (
            Rule::SlowInstance,
            OpKind::Send,
            Some(20),
            &[Some(0), Some(1)][..]
        ),
        "a pair is named by its Send"
    );
    assert!((a.observed_ns - 400_000.0).abs() < 1.0);
}

#[test]
fn a_lasting_slowdown_is_one_step_change() {
    // 30 iterations of one instance each; from iteration 18 on the transfer takes 2×.
    let t = table(
        30,
        DataType::Bfloat16,
        |_, r| r as i64 * 100,
        |i| wiggle(i, if i >= 18 { 200_000 } else { 100_000 }),
    );
    let iters = detect_iterations(&t, None);
    assert_eq!(iters.method, IterationMethod::Pattern);
    let rep = detect_anomalies(&t, Some(&iters), &AnomalyConfig::default());
    assert_eq!(rep.anomalies.len(), 1, "{:?}", rep.anomalies);
    let a = &rep.anomalies[0];
    assert_eq!(
        (a.rule, a.iteration, a.time_ns),
        (Rule::StepChange, Some(18), at(18))
    );
    assert!((a.ratio - 2.0).abs() < 0.1, "{a:?}");
    assert_eq!(a.ranks.len(), 4);
    assert_eq!(rep.series.len(), 1);
    assert_eq!(rep.series[0].change_at, Some(18));
    // Without iterations there is no step to find: slowed instances that reach 2× the
    // whole history's median are listed one by one, and only those.
    let rep = detect_anomalies(&t, None, &AnomalyConfig::default());
    assert!(!rep.anomalies.is_empty());
    assert!(rep
        .anomalies
        .iter()
        .all(|a| a.rule == Rule::SlowInstance && a.instance >= Some(18)));
}
