//! Throughput and peak memory of the production aligner (10k, 100k, 1M
//! operations per rank) next to the thesis-faithful O(n·m) Needleman-Wunsch on
//! the sizes it can handle (2k, 5k, 10k), in the same run, with ratios.
//!
//! Input: one generated Megatron-like rank (TP=2 × PP=2, rank 1: no 2:1 batching;
//! rank 0 with batching is also timed for the production aligner), 20% of
//! kernels and 20% of records dropped, kernels with launch times. "ops" are
//! operations (kernels before drops) per rank. Peak memory is the largest heap
//! growth during the call, measured by a counting allocator (inputs excluded),
//! and the process's peak RSS.
//!
//! Then the whole run (4 ranks) aligned rank by rank ([`align_ranks`]) and
//! jointly ([`align_run`]: peers' kernels stand in for lost ones), on one
//! thread each, with GPU start times only (no launch times), with the ratio.
//!
//! Run: `scripts/bench-align` (release). Options: `--sizes 10000,100000,1000000`
//! `--nw-sizes 2000,5000,10000` `--joint-sizes 10000,100000`.

use commlens_fuse::metrics::score_alignment;
use commlens_fuse::metrics::Prf;
use commlens_fuse::synth::{generate, generate_rank, MegatronConfig, RankTrace};
use commlens_fuse::{
    align_rank, align_rank_thesis, align_ranks, align_run, AlignConfig, Alignment, RankInput,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f`, returning its result, seconds and peak heap growth in bytes.
fn measure<T>(f: impl FnOnce() -> T) -> (T, f64, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let t = Instant::now();
    let out = f();
    let secs = t.elapsed().as_secs_f64();
    (out, secs, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_owned)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn rank(ops: usize, r: usize) -> RankTrace {
    let cfg = MegatronConfig {
        seed: 42,
        ops_per_rank: ops,
        kernel_drop: 0.2,
        log_drop: 0.2,
        ..MegatronConfig::default()
    };
    generate_rank(&cfg, r)
}

fn list(args: &[String], flag: &str, default: &[usize]) -> Vec<usize> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|p| args.get(p + 1))
        .map(|v| {
            v.split(',')
                .filter_map(|x| x.trim().replace('_', "").parse().ok())
                .collect()
        })
        .unwrap_or_else(|| default.to_vec())
}

struct Row {
    ops: usize,
    secs: f64,
    peak: usize,
}

fn report(name: &str, r: &RankTrace, a: &Alignment, secs: f64, peak: usize, ops: usize) {
    let f1 = score_alignment(a, &r.truth).f1();
    println!(
        "{name:<22} {ops:>9} {:>9} {:>9} {:>9.3} {:>12.0} {:>10.1} {:>7.4}",
        r.logs.len(),
        r.kernels.len(),
        secs,
        ops as f64 / secs,
        peak as f64 / (1 << 20) as f64,
        f1
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes = list(&args, "--sizes", &[10_000, 100_000, 1_000_000]);
    let nw_sizes = list(&args, "--nw-sizes", &[2_000, 5_000, 10_000]);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("bench_align: {threads} hardware threads; 20% kernels and 20% records dropped; launch times on");
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>9} {:>12} {:>10} {:>7}",
        "aligner", "ops", "records", "kernels", "seconds", "ops/s", "peak MiB", "F1"
    );
    let cfg = AlignConfig::default();
    let mut ours: Vec<Row> = Vec::new();
    for &n in &sizes {
        for r in [1, 0] {
            let t = rank(n, r);
            let (a, secs, peak) = measure(|| align_rank(&t.logs, &t.kernels, &cfg));
            let name = if r == 0 {
                "production (2:1 rank)"
            } else {
                "production"
            };
            report(name, &t, &a, secs, peak, n);
            if r == 1 {
                ours.push(Row { ops: n, secs, peak });
            }
        }
    }
    let mut theirs: Vec<Row> = Vec::new();
    for &n in &nw_sizes {
        let t = rank(n, 1);
        let (a, secs, peak) = measure(|| align_rank_thesis(&t.logs, &t.kernels));
        report("thesis NW O(n·m)", &t, &a, secs, peak, n);
        theirs.push(Row { ops: n, secs, peak });
        // The production aligner on the same input, for a like-for-like ratio.
        let (b, s2, p2) = measure(|| align_rank(&t.logs, &t.kernels, &cfg));
        report("production (same)", &t, &b, s2, p2, n);
        println!(
            "{:<22} {n:>9}   production is {:.0}x faster and uses {:.0}x less memory",
            "  ratio",
            secs / s2,
            peak as f64 / p2.max(1) as f64
        );
    }
    if let (Some(big), Some(nw)) = (ours.last(), theirs.last()) {
        // O(n·m) extrapolation of the thesis aligner to the largest production size.
        let scale = (big.ops as f64 / nw.ops as f64).powi(2);
        println!(
            "extrapolated thesis NW at {} ops: {:.0} s and {:.1} GiB (x{:.0} of {} ops); production: {:.2} s, {:.1} MiB",
            big.ops,
            nw.secs * scale,
            nw.peak as f64 * scale / (1u64 << 30) as f64,
            scale,
            nw.ops,
            big.secs,
            big.peak as f64 / (1 << 20) as f64
        );
    }
    joint(&list(&args, "--joint-sizes", &[10_000, 100_000]));
    println!(
        "peak RSS of the whole run (inputs included): {:.0} MiB",
        peak_rss_mib()
    );
}

/// Per-rank against joint alignment of a whole run, one thread each.
fn joint(sizes: &[usize]) {
    let cfg = AlignConfig {
        parallel: false,
        ..AlignConfig::default()
    };
    println!("\nwhole run (4 ranks), GPU start times only, one thread");
    println!(
        "{:<22} {:>9} {:>9} {:>12} {:>10} {:>7}",
        "aligner", "ops/rank", "seconds", "ops/s", "peak MiB", "F1"
    );
    for &n in sizes {
        let run = generate(&MegatronConfig {
            seed: 42,
            ops_per_rank: n,
            kernel_drop: 0.2,
            log_drop: 0.2,
            kernel_launch_times: false,
            ..MegatronConfig::default()
        });
        let f1 = |a: &[Alignment]| {
            run.iter()
                .zip(a)
                .fold(Prf::default(), |acc, (r, a)| {
                    acc + score_alignment(a, &r.truth)
                })
                .f1()
        };
        let pairs: Vec<(&[_], &[_])> = run.iter().map(|r| (&r.logs[..], &r.kernels[..])).collect();
        let (per, s1, p1) = measure(|| align_ranks(&pairs, &cfg));
        let inputs: Vec<RankInput> = run
            .iter()
            .map(RankTrace::input)
            .collect();
        let (joint, s2, p2) = measure(|| align_run(&inputs, &cfg));
        let ops = (n * run.len()) as f64;
        for (name, a, secs, peak) in [("per rank", &per, s1, p1), ("joint", &joint, s2, p2)] {
            println!(
                "{name:<22} {n:>9} {secs:>9.3} {:>12.0} {:>10.1} {:>7.4}",
                ops / secs,
                peak as f64 / (1 << 20) as f64,
                f1(a)
            );
        }
        println!(
            "{:<22} {n:>9}   joint takes {:.2}x the time of per rank",
            "  ratio",
            s2 / s1
        );
    }
}
