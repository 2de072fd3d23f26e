//! Period finding on hand-made token sequences, iterations from ranges on a
//! hand-built table, and generated TP/PP/DP runs whose iteration count and
//! per-iteration bytes are known exactly from the generator's truth.

use super::*;
use crate::classify::{classify_with_sizes, ParallelSizes};
use crate::clock::tests::Builder;
use commlens_core::DataType;
use commlens_synth::RunConfig;

#[test]
fn periods_of_token_sequences() {
    // Warm-up 90 91 92, four periods 1 2 1 2 3, tail 99.
    let mut tok = vec![90, 91, 92];
    for _ in 0..4 {
        tok.extend([1, 2, 1, 2, 3]);
    }
    tok.push(99);
    assert_eq!(find_period(&tok), Some((5, 3, 4)));
    // The warm-up ends with the iteration's last token (a barrier and the
    // gradient-norm reduction): the iterations still start after it.
    let tok = [7, 8, 7, 1, 2, 7, 1, 2, 7, 1, 2, 7, 7];
    assert_eq!(find_period(&tok), Some((3, 3, 3)));
    // A token seen twice per iteration, none once: lag 2 gives the period.
    let tok = [5, 6, 5, 6, 5, 6, 5, 6];
    assert_eq!(find_period(&tok), Some((2, 0, 4)));
    let tok = [4, 1, 1, 2, 1, 1, 2, 1, 1, 2];
    assert_eq!(find_period(&tok), Some((3, 1, 3)));
    assert_eq!(find_period(&[1, 2, 3, 4]), None);
    assert_eq!(find_period(&[1]), None);
    // Iterations that differ in their middle: the longest exact stretch
    // (1 2 3 1 2 3 1) wins, its two periods placed as late as it allows.
    let tok = [1, 2, 3, 1, 2, 3, 1, 9, 3];
    assert_eq!(find_period(&tok), Some((3, 1, 2)));
}

#[test]
fn iterations_from_ranges() {
    let mut b = Builder::new();
    let devs: Vec<DevIdx> = (0..2).map(|r| b.device("h0", 0x1000 * (r + 1), r as u32)).collect();
    let (_, h) = b.comm(&devs, 3);
    let times = [[50, 100, 150, 199, 200, 250, 300], [60, 120, 130, 210, 220, 230, 310]];
    for (r, ts) in times.iter().enumerate() {
        for (i, &ts) in ts.iter().enumerate() {
            let k = b.op(h[r], OpKind::AllReduce, DataType::Float32, 1 + i as u64, None);
            b.t.per_rank[r].update(k, |o| o.cpu_ts_ns = Some(ts));
        }
    }
    // Out of order on purpose: iterations follow start times.
    let ranges = [(200, 300, "ProfilerStep#2"), (100, 200, "ProfilerStep#1")];
    let rep = detect_iterations(&b.t, Some(&ranges[..]));
    assert_eq!((rep.method, rep.count, rep.iterations.len()), (IterationMethod::Ranges, 2, 2));
    let it0 = &rep.iterations[0];
    assert_eq!((it0.name.as_deref(), it0.start_ns, it0.end_ns), (Some("ProfilerStep#1"), Some(100), Some(200)));
    // Rank 0: ops 1, 2, 3 (counts 2, 3, 4); rank 1: ops 1, 2 (counts 2, 3). Float32 = 4 B.
    assert_eq!((it0.ranks, it0.ops, it0.bytes), (2, 5, 4 * (2 + 3 + 4 + 2 + 3)));
    let it1 = &rep.iterations[1];
    // Rank 0: ops 4, 5 (200, 250); rank 1: ops 3, 4, 5 (210, 220, 230).
    assert_eq!((it1.ops, it1.bytes), (5, 4 * (5 + 6 + 4 + 5 + 6)));
    assert_eq!(it1.by_kind, [Totals { key: OpKind::AllReduce, ops: 5, bytes: 4 * 26 }]);
    assert!(it1.by_parallelism.is_empty());
    let r0 = &rep.ranks[0];
    assert_eq!((r0.warmup_ops, r0.warmup_bytes, r0.tail_ops, r0.tail_bytes), (1, 4, 1, 28));
    assert_eq!(r0.iteration_bytes, [36, 44]);
    // No ranges and no repetition (every size differs): nothing found.
    let none = detect_iterations(&b.t, None);
    assert_eq!((none.method, none.count), (IterationMethod::None, 0));
    assert!(none.iterations.is_empty() && none.ranks.iter().all(|r| r.warmup_ops == 7));
}

/// Bytes every rank logs outside iterations: start-up barrier (fp32), start
/// time (fp64), barrier, shutdown barrier, all one element on WORLD.
const STARTUP_BYTES: u64 = 4 + 8 + 4 + 4;

#[test]
fn generated_runs() {
    let runs = [("tp2pp2dp1", 2, 2, 1), ("tp1pp2dp2", 1, 2, 2), ("tp4pp1dp2", 4, 1, 2)];
    for (tag, tp, pp, dp) in runs {
        let cfg = RunConfig { iterations: 3, ..RunConfig::megatron(tp, pp, dp) };
        let (t, truth) = crate::volume::tests::load_run(&cfg, tag);
        let class = classify_with_sizes(&t, &ParallelSizes::megatron(tp as u32, pp as u32, dp as u32)).unwrap();
        let rep = detect_iterations_with(&t, None, Some(&class));
        assert_eq!((rep.method, rep.count), (IterationMethod::Pattern, cfg.iterations), "{tag}");
        assert_eq!(rep.iterations.len(), cfg.iterations, "{tag}");
        let mut per_iter_total = 0;
        for r in &rep.ranks {
            let g = r.global_rank.unwrap() as usize;
            let truth_bytes: u64 = truth.ops.iter().filter(|o| o.rank == g).map(|o| o.bytes).sum();
            assert_eq!(r.iterations, cfg.iterations, "{tag} rank {g}");
            assert_eq!(r.warmup_bytes + r.tail_bytes, STARTUP_BYTES, "{tag} rank {g}: {r:?}");
            let expected = (truth_bytes - STARTUP_BYTES) / cfg.iterations as u64;
            assert_eq!(r.iteration_bytes, vec![expected; cfg.iterations], "{tag} rank {g}");
            per_iter_total += expected;
        }
        // Per type: every communicator but WORLD carries only iteration traffic.
        for it in &rep.iterations {
            assert_eq!((it.ranks as usize, it.bytes), (cfg.world(), per_iter_total), "{tag} iteration {}", it.index);
            assert!(it.start_ns.unwrap() < it.end_ns.unwrap());
            for kind in ["TP", "PP", "DP", "EMB", "MP"] {
                let bytes: u64 = truth
                    .ops
                    .iter()
                    .filter(|o| truth.comm(&o.comm).is_some_and(|c| c.kind == kind))
                    .map(|o| o.bytes)
                    .sum();
                let p = match kind {
                    "TP" => Parallelism::Tensor,
                    "PP" => Parallelism::Pipeline,
                    "DP" => Parallelism::Data,
                    "EMB" => Parallelism::Embedding,
                    _ => Parallelism::ModelParallel,
                };
                let got = it.by_parallelism.iter().find(|x| x.key == p).map_or(0, |x| x.bytes);
                assert_eq!(got, bytes / cfg.iterations as u64, "{tag} iteration {} {kind}", it.index);
            }
        }
        // Iterations follow each other in time.
        for w in rep.iterations.windows(2) {
            assert!(w[0].start_ns < w[1].start_ns, "{tag}");
        }
    }
}
