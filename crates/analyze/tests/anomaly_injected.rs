//! Anomaly detection on generated runs with injected slowdowns (`RunConfig::slowdowns`):
//! each run is generated with its GPU timeline, written as Kineto traces, read back by the
//! Kineto reader (the path real traces take), and its anomalies are scored against the
//! generator's record of the slowed instances (`Truth::injected`). Recall and precision are
//! printed per scenario and over all seeds, and asserted against floors.

use commlens_analyze::anomaly::{detect_anomalies, AnomalyConfig, AnomalyReport, Rule};
use commlens_analyze::iteration::detect_iterations;
use commlens_core::OpTable;
use commlens_ingest::kineto::KernelTrace;
use commlens_ingest::load_any;
use commlens_ingest::nccl_log::ReadOptions;
use commlens_synth::{generate_traces, InjectedOp, RunConfig, Slowdown, TraceConfig};
use std::path::PathBuf;

/// `ProfilerStep#N` ranges of the traces, job-wide (first start, last end per name).
fn step_ranges(traces: &[KernelTrace]) -> Vec<(i64, i64, String)> {
    let mut by_name: std::collections::BTreeMap<String, (i64, i64)> = Default::default();
    for t in traces {
        for r in &t.ranges {
            let name = t.names.get(r.name as usize).map_or("", |s| s.as_str());
            if name.starts_with("ProfilerStep") {
                let (s, e) = (t.base_time_ns + r.start_ns, t.base_time_ns + r.end_ns);
                let x = by_name.entry(name.to_string()).or_insert((s, e));
                *x = (x.0.min(s), x.1.max(e));
            }
        }
    }
    let mut v: Vec<(i64, i64, String)> = by_name.into_iter().map(|(n, (s, e))| (s, e, n)).collect();
    v.sort();
    v
}

struct Run {
    table: OpTable,
    injected: Vec<InjectedOp>,
    report: AnomalyReport,
}

/// Generates, writes Kineto traces, reads them back and detects anomalies.
fn run(seed: u64, slowdowns: &[&str]) -> Run {
    let cfg = RunConfig {
        seed,
        iterations: 14,
        slowdowns: slowdowns
            .iter()
            .map(|s| s.parse::<Slowdown>().unwrap())
            .collect(),
        ..RunConfig::megatron(2, 2, 2)
    };
    let tcfg = TraceConfig {
        seed: seed ^ 0x55,
        ..TraceConfig::default()
    };
    let g = generate_traces(&cfg, &tcfg).unwrap();
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "commlens-anomaly-{}-{seed}-{}",
        std::process::id(),
        slowdowns.len()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let files = g.write_kineto(&dir, false).unwrap();
    let loaded = load_any(&files, &ReadOptions::default()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let ranges = step_ranges(&loaded.traces);
    let r: Vec<(i64, i64, &str)> = ranges
        .iter()
        .map(|(s, e, n)| (*s, *e, n.as_str()))
        .collect();
    let iters = detect_iterations(&loaded.table, Some(&r));
    let report = detect_anomalies(&loaded.table, Some(&iters), &AnomalyConfig::default());
    Run {
        table: loaded.table,
        injected: g.run.truth.injected,
        report,
    }
}

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v
}

fn ranks_of(a: &commlens_analyze::anomaly::Anomaly) -> Vec<usize> {
    sorted(
        a.ranks
            .iter()
            .map(|r| r.expect("generated ranks are known") as usize)
            .collect(),
    )
}

/// (true positives, reported, truth items found, truth items) for one-off injections: a
/// slow instance is right when it is an injected instance (same members, `comm_seq` =
/// `opCount`).
fn score_one_offs(r: &Run) -> (usize, usize, usize, usize) {
    let hit = |a: &commlens_analyze::anomaly::Anomaly, i: &InjectedOp| {
        a.rule == Rule::SlowInstance
            && a.instance == Some(i.opcount)
            && ranks_of(a) == sorted(i.members.clone())
            && a.kind.name() == i.kind
    };
    let tp = r
        .report
        .anomalies
        .iter()
        .filter(|a| r.injected.iter().any(|i| hit(a, i)))
        .count();
    let found = r
        .injected
        .iter()
        .filter(|i| r.report.anomalies.iter().any(|a| hit(a, i)))
        .count();
    (tp, r.report.anomalies.len(), found, r.injected.len())
}

fn print_seen(label: &str, r: &Run) {
    let rep = &r.report;
    println!(
        "{label}: {} ops ({} timed), {} samples, {} lone, {} judged in {}/{} histories, iterations by {:?}, largest score {:.1} ({}), {} late arrivals; {} injected instances; anomalies: {}",
        rep.ops,
        rep.timed_ops,
        rep.samples,
        rep.lone,
        rep.judged,
        rep.histories_judged,
        rep.histories,
        rep.iterations,
        rep.largest_score.unwrap_or(0.0),
        rep.largest_where.as_deref().unwrap_or("-"),
        rep.late_arrivals,
        r.injected.len(),
        rep.anomalies.len()
    );
    for i in r.injected.iter().take(3) {
        println!(
            "  injected {} {:?} opCount {} {} iteration {}",
            i.comm, i.members, i.opcount, i.kind, i.iteration
        );
    }
    for s in &rep.series {
        println!(
            "  series {} {} {:?} change at {:?}: {:?}",
            s.comm_name,
            s.kind.name(),
            s.bucket_lo_bytes,
            s.change_at,
            s.medians_ns
                .iter()
                .map(|m| (m.0, (m.1 / 1e3).round()))
                .collect::<Vec<_>>()
        );
    }
    for a in rep.anomalies.iter().take(12) {
        println!(
            "  {} {} {} {:?} inst {:?} iter {:?} ranks {:?} {:.1}/{:.1} µs ×{:.2} z {:.1}",
            a.rule.label(),
            a.comm_name,
            a.kind.name(),
            a.bytes,
            a.instance,
            a.iteration,
            ranks_of(a),
            a.observed_ns / 1e3,
            a.expected_ns / 1e3,
            a.ratio,
            a.score
        );
    }
}

#[test]
fn clean_generated_runs_have_no_anomaly() {
    for seed in [1, 2, 3] {
        let r = run(seed, &[]);
        print_seen(&format!("clean seed {seed}"), &r);
        assert!(
            r.report.judged > 500,
            "the rule judged too little: {}",
            r.report.judged
        );
        assert_eq!(r.report.anomalies.len(), 0, "clean run, seed {seed}");
        assert!(r.table.n_ops() > 0);
    }
}

#[test]
fn one_off_slow_instances_are_found() {
    let (mut tp, mut reported, mut found, mut truth) = (0, 0, 0, 0);
    for seed in [11u64, 12, 13, 14] {
        // Different communicators, ranks, iterations, positions and factors per seed.
        let s = seed as usize;
        let specs = [
            format!(
                "comm:tp rank:{} iter:{} op:{} factor:{}",
                s % 8,
                2 + s % 5,
                3 + s % 11,
                2.5 + (s % 3) as f64
            ),
            format!(
                "comm:tp rank:{} iter:{} op:{} factor:4",
                (s + 3) % 8,
                9 + s % 3,
                s % 7
            ),
            format!(
                "comm:dp rank:{} iter:{} op:0 factor:{}",
                (s + 1) % 8,
                4 + s % 6,
                3 + s % 2
            ),
        ];
        let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
        let r = run(seed, &specs);
        print_seen(&format!("one-off seed {seed} {specs:?}"), &r);
        let (a, b, c, d) = score_one_offs(&r);
        println!("  precision {a}/{b}, recall {c}/{d}");
        assert!(
            d >= 3,
            "each injection slowed an instance: {:?}",
            r.injected
        );
        (tp, reported, found, truth) = (tp + a, reported + b, found + c, truth + d);
    }
    let (precision, recall) = (
        tp as f64 / reported.max(1) as f64,
        found as f64 / truth as f64,
    );
    println!("one-off slow instances: precision {precision:.3} ({tp}/{reported}), recall {recall:.3} ({found}/{truth})");
    assert!(recall >= 0.9, "recall {recall}");
    assert!(precision >= 0.9, "precision {precision}");
}

#[test]
fn lasting_drops_are_one_step_change_each() {
    let (mut right, mut reported, mut found, mut truth) = (0, 0, 0, 0);
    for (seed, comm, first) in [
        (21u64, "tp", 6usize),
        (22, "dp", 5),
        (23, "tp", 8),
        (24, "dp", 7),
    ] {
        let spec = format!("comm:{comm} rank:{} iter:{first}.. factor:2", seed % 8);
        let r = run(seed, &[&spec]);
        print_seen(&format!("lasting seed {seed} {spec}"), &r);
        let members = sorted(r.injected[0].members.clone());
        truth += 1;
        let step = |a: &&commlens_analyze::anomaly::Anomaly| {
            a.rule == Rule::StepChange && ranks_of(a) == members
        };
        let steps: Vec<_> = r.report.anomalies.iter().filter(step).collect();
        // The step is dated to the first slowed iteration's ProfilerStep range, or the next:
        // ranges are job-wide (first start, last end over ranks), so an operation a late
        // pipeline stage issues at the end of iteration i can lie where range i+1 has begun.
        let dated = steps
            .iter()
            .filter_map(|a| a.iteration)
            .find(|&i| i == first as u32 || i == first as u32 + 1);
        println!("  step dated to iteration {dated:?} (first slowed: {first})");
        found += dated.is_some() as usize;
        // Right: the step changes on the slowed communicator, and point anomalies that are slowed instances.
        right += steps.len()
            + r.report
                .anomalies
                .iter()
                .filter(|a| {
                    a.rule != Rule::StepChange
                        && r.injected
                            .iter()
                            .any(|i| a.instance == Some(i.opcount) && ranks_of(a) == members)
                })
                .count();
        reported += r.report.anomalies.len();
    }
    let (precision, recall) = (
        right as f64 / reported.max(1) as f64,
        found as f64 / truth as f64,
    );
    println!("lasting drops: precision {precision:.3} ({right}/{reported}), recall {recall:.3} ({found}/{truth})");
    assert!(recall >= 0.75, "recall {recall}");
    assert!(precision >= 0.75, "precision {precision}");
}
