//! Two runs of one 4-rank AllReduce job built by hand: identical runs show no
//! change; a run with 25 % longer kernels is a bandwidth and span regression;
//! a run with more bytes is a change, not a regression; figures only one run
//! has are reported as missing.

use super::*;
use crate::clock::tests::Builder;
use commlens_core::{DataType, OpKind};

/// 4 ranks, `n` AllReduces of `count` floats, each `dur` ns, back to back.
fn run(n: usize, count: u64, dur: i64) -> OpTable {
    let mut b = Builder::new();
    let devs: Vec<_> = (0..4).map(|r| b.device("h", r as u64, r)).collect();
    let (_, handles) = b.comm(&devs, 7);
    for i in 0..n as i64 {
        for &h in &handles {
            b.op(h, OpKind::AllReduce, DataType::Float32, count, Some((i * 2 * dur, i * 2 * dur + dur)));
        }
    }
    b.t
}

#[test]
fn identical_runs_have_no_change() {
    let a = RunProfile::of_table("a", &run(10, 1 << 20, 1_000_000));
    let b = RunProfile::of_table("b", &run(10, 1 << 20, 1_000_000));
    let d = diff(&a, &b, &DiffOptions::default());
    assert!(!d.rows.is_empty());
    assert!(d.rows.iter().all(|r| r.verdict == Verdict::Same), "{:#?}", d.rows);
    assert_eq!(d.regressions().count(), 0);
}

#[test]
fn slower_kernels_are_a_regression() {
    let a = RunProfile::of_table("a", &run(10, 1 << 20, 1_000_000));
    let b = RunProfile::of_table("b", &run(10, 1 << 20, 1_250_000));
    let d = diff(&a, &b, &DiffOptions { threshold: 0.05 });
    let bw = d.rows.iter().find(|r| r.name.starts_with("busbw ") && r.name.ends_with(" AllReduce")).expect("class row");
    // busbw scales with 1/duration: −20 %.
    assert!((bw.change.unwrap() + 0.2).abs() < 1e-9, "{bw:?}");
    assert_eq!(bw.verdict, Verdict::Regressed);
    let span = d.rows.iter().find(|r| r.name == "run span (longest rank)").unwrap();
    assert_eq!(span.verdict, Verdict::Regressed);
    // Same volume: not a change.
    let vol = d.rows.iter().find(|r| r.name == "AllReduce bytes per rank").unwrap();
    assert_eq!(vol.verdict, Verdict::Same);
    // Reversed, the same figures are improvements.
    let back = diff(&b, &a, &DiffOptions { threshold: 0.05 });
    assert_eq!(back.regressions().count(), 0);
    assert!(back.rows.iter().any(|r| r.verdict == Verdict::Improved));
    // A threshold above the change hides it.
    assert_eq!(diff(&a, &b, &DiffOptions { threshold: 0.30 }).regressions().count(), 0);
}

#[test]
fn more_bytes_is_a_change_and_new_figures_are_missing() {
    let a = RunProfile::of_table("a", &run(10, 1 << 20, 1_000_000));
    let mut b = RunProfile::of_table("b", &run(10, 1 << 21, 2_000_000));
    b.put("iteration time".into(), 5.0, "ns", Better::Lower, 1);
    let d = diff(&a, &b, &DiffOptions::default());
    let vol = d.rows.iter().find(|r| r.name == "AllReduce bytes per rank").unwrap();
    assert_eq!(vol.verdict, Verdict::Changed);
    assert!((vol.change.unwrap() - 1.0).abs() < 1e-12);
    assert_eq!(vol.a, Some(10.0 * 4.0 * (1 << 20) as f64));
    let it = d.rows.iter().find(|r| r.name == "iteration time").unwrap();
    assert_eq!((it.verdict, it.a, it.b), (Verdict::Missing, None, Some(5.0)));
    // Doubling bytes and duration keeps busbw: the class row is unchanged.
    let bw = d.rows.iter().find(|r| r.name.starts_with("busbw ") && r.name.ends_with(" AllReduce")).unwrap();
    assert_eq!(bw.verdict, Verdict::Same);
}

#[test]
fn bandwidth_from_few_samples_is_not_judged() {
    let a = RunProfile::of_table("a", &run(1, 1 << 20, 1_000_000));
    let b = RunProfile::of_table("b", &run(1, 1 << 20, 3_000_000));
    // 4 samples (one per rank) pass MIN_BW_SAMPLES; with 2 ranks' worth they would not.
    let d = diff(&a, &b, &DiffOptions::default());
    assert!(d.regressions().any(|r| r.name.starts_with("busbw")));
    let mut a2 = a.clone();
    for f in a2.figures.values_mut() {
        f.samples = 1;
    }
    let d2 = diff(&a2, &b, &DiffOptions::default());
    assert!(!d2.regressions().any(|r| r.name.starts_with("busbw")));
}
