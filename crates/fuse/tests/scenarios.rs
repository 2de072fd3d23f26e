//! The four scenarios of thesis Table 4.5 (4 ranks × 200 operations; none
//! dropped, 20% of kernels dropped, 20% of log records dropped, both), each
//! over several seeds, in two settings:
//!
//! * **one-to-one**: what the thesis's name-level aligner can express (TP=4, no
//!   fusion, no batching, no anomalies): the reproduction of its numbers;
//! * **Megatron-like**: TP=2 × PP=2 with Send/Recv → SendRecv fusion, 2:1 batching
//!   on one rank per TP group, the "+20" AllReduce records without kernel, the
//!   "+10" SendRecv kernels without record, Generic kernels and noisy names.
//!
//! The production aligner (all ranks of a run together, `align_run`, as
//! `commlens fuse` runs it) must reach an average F1 ≥ 0.98 and ≥ 0.95 in
//! every scenario of both settings. The thesis-faithful aligner is printed next to the
//! thesis's published figures and checked only for sanity.

use commlens_fuse::metrics::{score_alignment, Prf};
use commlens_fuse::synth::{
    generate, table_4_5, table_4_5_one_to_one, MegatronConfig, RankTrace, Scenario,
    THESIS_AVERAGE_NW_F1,
};
use commlens_fuse::{align_rank_thesis, align_run, AlignConfig, Alignment, RankInput};

const SEEDS: u64 = 10;

fn evaluate(cfg: &MegatronConfig, aligner: impl Fn(&[RankTrace]) -> Vec<Alignment>) -> Prf {
    let run = generate(cfg);
    run.iter()
        .zip(aligner(&run))
        .fold(Prf::default(), |acc, (r, a)| {
            acc + score_alignment(&a, &r.truth)
        })
}

/// The production aligner: all ranks of the run together, as `commlens fuse` does.
fn production(run: &[RankTrace]) -> Vec<Alignment> {
    let inputs: Vec<RankInput> = run
        .iter()
        .map(RankTrace::input)
        .collect();
    align_run(&inputs, &AlignConfig::default())
}

fn thesis(run: &[RankTrace]) -> Vec<Alignment> {
    run.iter()
        .map(|r| align_rank_thesis(&r.logs, &r.kernels))
        .collect()
}

/// Micro-averaged F1 per scenario over the seeds: (ours, thesis-faithful).
fn run(
    title: &str,
    scenarios: &[Scenario],
    tweak: impl Fn(&mut MegatronConfig),
) -> Vec<(Prf, Prf)> {
    println!("\n{title}");
    println!(
        "{:<16} {:>7} {:>7} {:>7} | {:>9} | {:>10} {:>8}",
        "scenario", "ours", "P", "R", "NW (ours)", "NW thesis", "SW thesis"
    );
    let mut out = Vec::new();
    for (x, sc) in scenarios.iter().enumerate() {
        let (mut ours, mut nw) = (Prf::default(), Prf::default());
        for seed in 1..=SEEDS {
            let mut cfg = MegatronConfig {
                seed: seed * 100 + x as u64,
                ..sc.config.clone()
            };
            tweak(&mut cfg);
            ours = ours + evaluate(&cfg, production);
            nw = nw + evaluate(&cfg, thesis);
        }
        println!(
            "{:<16} {:>7.3} {:>7.3} {:>7.3} | {:>9.3} | {:>10.3} {:>8.3}",
            sc.name,
            ours.f1(),
            ours.precision(),
            ours.recall(),
            nw.f1(),
            sc.thesis_nw_f1,
            sc.thesis_sliding_window_f1
        );
        out.push((ours, nw));
    }
    let avg = |f: &dyn Fn(&(Prf, Prf)) -> f64| out.iter().map(f).sum::<f64>() / out.len() as f64;
    println!(
        "{:<16} {:>7.3} {:>7} {:>7} | {:>9.3} | {:>10.3} {:>8.3}",
        "average",
        avg(&|r| r.0.f1()),
        "",
        "",
        avg(&|r| r.1.f1()),
        THESIS_AVERAGE_NW_F1,
        0.612
    );
    out
}

fn assert_targets(name: &str, res: &[(Prf, Prf)]) {
    let avg = res.iter().map(|r| r.0.f1()).sum::<f64>() / res.len() as f64;
    let worst = res.iter().map(|r| r.0.f1()).fold(1.0, f64::min);
    assert!(avg >= 0.98, "{name}: average F1 {avg:.4} < 0.98");
    assert!(worst >= 0.95, "{name}: worst F1 {worst:.4} < 0.95");
    for (ours, nw) in res {
        assert!(
            ours.f1() > nw.f1(),
            "{name}: the production aligner must beat the thesis-faithful one"
        );
    }
}

#[test]
fn scenarios_one_to_one() {
    let res = run(
        "Table 4.5, one-to-one (the thesis's setting)",
        &table_4_5_one_to_one(0),
        |_| {},
    );
    assert_targets("one-to-one", &res);
    for (x, (_, nw)) in res.iter().enumerate() {
        assert!(
            nw.f1() >= 0.6,
            "scenario {x}: thesis-faithful F1 {:.3} out of the sane range",
            nw.f1()
        );
    }
}

#[test]
fn scenarios_megatron() {
    let res = run(
        "Table 4.5, Megatron-like (fusion, 2:1 batching, anomalies)",
        &table_4_5(0),
        |_| {},
    );
    assert_targets("megatron", &res);
    // Name equality cannot pair Send/Recv with SendRecv nor both records of a
    // 2:1 kernel, so the thesis-faithful aligner loses most of those pairs.
    for (x, (_, nw)) in res.iter().enumerate() {
        assert!(
            nw.f1() >= 0.35,
            "scenario {x}: thesis-faithful F1 {:.3} out of the sane range",
            nw.f1()
        );
    }
}

/// A timing condition: its name and how it changes the generator's settings.
type Condition = (&'static str, fn(&mut MegatronConfig));

/// The timing conditions users capture in, on the Megatron-like scenarios.
fn conditions() -> [Condition; 4] {
    [
        ("launch times", |_| {}),
        ("GPU start only", |c| c.kernel_launch_times = false),
        ("no log timestamps", |c| c.timestamps = false),
        ("no timing at all", |c| {
            c.timestamps = false;
            c.kernel_launch_times = false;
        }),
    ]
}

/// Every timing condition: kernels with launch times (nsys/Kineto runtime
/// records), with GPU start times only, records without timestamps (every
/// NCCL before 2.26), and neither. Prints the F1 per scenario and condition,
/// then a summary; holds every condition to the target (average ≥
/// 0.95, worst ≥ 0.90) and to floors just under today's figures (`FLOORS`).
/// Without launch times, a kernel lost from a periodic, GPU-bound run is placed
/// by its peers' kernels of the same collective (`align_run`).
#[test]
fn scenarios_megatron_every_timing_condition() {
    // (average, worst) each condition must keep.
    const FLOORS: [(f64, f64); 4] = [(0.99, 0.99), (0.97, 0.93), (0.965, 0.925), (0.96, 0.92)];
    let scs = table_4_5(0);
    let mut summary = Vec::new();
    for (name, tweak) in conditions() {
        let res = run(&format!("... {name}"), &scs, tweak);
        let f1: Vec<f64> = res.iter().map(|r| r.0.f1()).collect();
        let avg = f1.iter().sum::<f64>() / f1.len() as f64;
        let worst = f1.iter().copied().fold(1.0, f64::min);
        assert!(f1[0] >= 0.97, "{name}: nothing dropped: F1 {:.3}", f1[0]);
        for (ours, nw) in &res {
            assert!(
                ours.f1() >= nw.f1(),
                "{name}: never worse than the thesis-faithful aligner"
            );
        }
        summary.push((name, f1, avg, worst));
    }
    println!("\nF1 per timing condition (Megatron-like Table 4.5, {SEEDS} seeds)");
    println!(
        "{:<20} {:>6} {:>6} {:>6} {:>6} | {:>7} {:>6}",
        "condition", "easy", "nsys", "nccl", "both", "average", "worst"
    );
    for (name, f1, avg, worst) in &summary {
        println!(
            "{name:<20} {:>6.3} {:>6.3} {:>6.3} {:>6.3} | {avg:>7.3} {worst:>6.3}",
            f1[0], f1[1], f1[2], f1[3]
        );
    }
    for ((name, _, avg, worst), (a, w)) in summary.iter().zip(FLOORS) {
        assert!(*avg >= 0.95 && *worst >= 0.90, "{name}: below the target");
        assert!(*avg >= a, "{name}: average F1 {avg:.3} < {a}");
        assert!(*worst >= w, "{name}: worst F1 {worst:.3} < {w}");
    }
}

/// Precision of the matches per confidence bin (< 0.3, 0.3–0.8, ≥ 0.8), after
/// checking the stream reports and the leftover counts of every rank.
fn confidence_bins(launch_times: bool) -> [(usize, usize); 3] {
    let mut bins = [(0usize, 0usize); 3]; // (right, total)
    for seed in 1..=4 {
        let cfg = MegatronConfig {
            seed,
            kernel_drop: 0.2,
            log_drop: 0.2,
            kernel_launch_times: launch_times,
            ..MegatronConfig::default()
        };
        let run = generate(&cfg);
        for (r, a) in run.iter().zip(production(&run)) {
            let tp = a.streams.iter().max_by_key(|s| s.n_logs).unwrap();
            assert_eq!(tp.batching, r.batching, "rank {}: {tp:?}", r.rank);
            for m in &a.matches {
                assert!((0.0..=1.0).contains(&m.confidence));
                let bin = if m.confidence < 0.3 {
                    0
                } else if m.confidence < 0.8 {
                    1
                } else {
                    2
                };
                for &l in m.logs() {
                    bins[bin].0 += usize::from(r.truth[l as usize] == Some(m.kernel));
                    bins[bin].1 += 1;
                }
            }
            // Unmatched entries are kept and counted.
            assert_eq!(a.n_matched_logs() + a.unmatched_logs.len(), r.logs.len());
            assert_eq!(a.matches.len() + a.unmatched_kernels.len(), r.kernels.len());
        }
    }
    let prec = |b: (usize, usize)| b.0 as f64 / b.1.max(1) as f64;
    for (name, b) in ["< 0.3", "0.3-0.8", ">= 0.8"].iter().zip(bins) {
        println!(
            "launch times {launch_times:5}: confidence {name:>7}: {:5} pairs, precision {:.3}",
            b.1,
            prec(b)
        );
    }
    bins
}

/// Batching streams are recognised and confidence is calibrated: with launch
/// times nearly every match is confident and right; without them (a periodic
/// stream with 20% drops on both sides, where many matches are wrong) the
/// confident matches are right far more often than the unconfident ones.
#[test]
fn batching_streams_and_confidence() {
    let prec = |b: (usize, usize)| b.0 as f64 / b.1.max(1) as f64;
    let timed = confidence_bins(true);
    let total: usize = timed.iter().map(|b| b.1).sum();
    assert!(
        prec(timed[2]) >= 0.99 && timed[2].1 * 10 >= total * 9,
        "{timed:?}"
    );
    let untimed = confidence_bins(false);
    assert!(untimed[0].1 > 0 && untimed[2].1 > 0);
    assert!(prec(untimed[2]) > prec(untimed[0]) + 0.25, "{untimed:?}");
}
