//! `commlens diff A B`: compares two runs (any input kind each), or two
//! nccl-tests outputs per collective and message size, and exits 1 when a
//! figure regressed beyond `--threshold` percent, so CI can gate on it. Anomaly counts
//! (`commlens_analyze::anomaly`) are figures too, and the anomalies only the second run
//! has are listed under the table.

use crate::Format;
use commlens_analyze::diff::{diff, DiffOptions, DiffReport, RunProfile, Verdict};
use commlens_export::table::Table;
use commlens_ingest::nccl_log::ReadOptions;
use std::path::Path;

/// Returns whether a regression was found.
pub fn run(a: &Path, b: &Path, threshold_pct: f64, format: Format, all: bool) -> Result<bool, Box<dyn std::error::Error>> {
    if !(threshold_pct.is_finite() && threshold_pct >= 0.0) {
        return Err(format!("--threshold must be a non-negative percentage, got {threshold_pct}").into());
    }
    let (pa, bench_a, anom_a) = load_profile(a)?;
    let (pb, bench_b, anom_b) = load_profile(b)?;
    if bench_a != bench_b {
        let (bench, run) = if bench_a { (a, b) } else { (b, a) };
        return Err(format!(
            "{} holds nccl-tests results and {} a run's operations: diff compares two runs or two benchmarks; \
             to compare a run with a benchmark: commlens report {} --baseline {} -o report.html",
            bench.display(),
            run.display(),
            run.display(),
            bench.display()
        )
        .into());
    }
    let d = diff(&pa, &pb, &DiffOptions { threshold: threshold_pct / 100.0 });
    match format {
        Format::Json => {
            let mut v = serde_json::to_value(&d)?;
            if let (Some(x), Some(y), Some(obj)) = (&anom_a, &anom_b, v.as_object_mut()) {
                obj.insert("new_anomalies".into(), new_anomalies_json(x, y));
            }
            println!("{}", serde_json::to_string_pretty(&v)?)
        }
        Format::Csv => print!("{}", table(&d, true).to_csv()),
        Format::Table => {
            print!("{}", table(&d, all).to_text());
            if let (Some(x), Some(y)) = (&anom_a, &anom_b) {
                print!("{}", new_anomalies(x, y, &d.b).to_text());
            }
        }
    }
    let n = d.regressions().count();
    if n > 0 {
        eprintln!("commlens diff: {n} regression(s) beyond {threshold_pct}% ({} → {})", d.a, d.b);
    } else {
        eprintln!("commlens diff: no regression beyond {threshold_pct}%");
    }
    Ok(n > 0)
}

/// Loads one input and computes its comparable figures: a run's (see [`profile_of`], plus
/// its anomaly counts) with its anomalies keyed for comparison, or, for nccl-tests outputs
/// (flag set), per collective and message size the bus bandwidth and time of the best
/// direction, and each run's average bus bandwidth.
fn load_profile(p: &Path) -> Result<(RunProfile, bool, Option<Vec<Keyed>>), Box<dyn std::error::Error>> {
    let loaded = crate::load::load(std::slice::from_ref(&p.to_path_buf()), &ReadOptions { samples: false, ..ReadOptions::default() })?;
    if loaded.table.n_ops() > 0 || loaded.benchmarks.is_empty() {
        let mut prof = profile_of(p, &loaded)?;
        let rep = commlens_report::sections::anomaly_report(&loaded.table, &loaded.traces);
        add_anomaly_figures(&mut prof, &rep);
        return Ok((prof, false, Some(keyed(&loaded.table, &rep))));
    }
    Ok((benchmark_profile(&p.display().to_string(), &loaded.benchmarks), true, None))
}

/// Anomaly counts as figures: a change is reported, not judged (a slowdown also shows
/// in the bandwidth and time figures).
fn add_anomaly_figures(p: &mut RunProfile, rep: &commlens_analyze::anomaly::AnomalyReport) {
    use commlens_analyze::anomaly::Rule;
    use commlens_analyze::diff::Better;
    for rule in [Rule::SlowInstance, Rule::StepChange] {
        p.put(format!("anomalies: {}s", rule.label()), rep.count(rule) as f64, "", Better::Neither, rep.judged);
    }
    p.put("anomalies: late arrivals (see stragglers)".into(), rep.late_arrivals as f64, "", Better::Neither, rep.judged);
}

/// An anomaly with what identifies it across two runs of one job: rule, the
/// communicator's class (never its name or pointer), kind, size bucket, instance or iteration.
struct Keyed {
    key: (commlens_analyze::anomaly::Rule, String, &'static str, Option<u64>, Option<u64>),
    a: commlens_analyze::anomaly::Anomaly,
}

fn keyed(t: &commlens_core::OpTable, rep: &commlens_analyze::anomaly::AnomalyReport) -> Vec<Keyed> {
    let class = commlens_analyze::classify::infer(t);
    rep.anomalies
        .iter()
        .map(|a| {
            let cls = class.comms.iter().find(|c| c.comm == a.comm).map_or("?".to_string(), |c| format!("{} ({} ranks)", c.class.label(), c.evidence.nranks));
            let when = a.instance.or(a.iteration.map(u64::from));
            Keyed { key: (a.rule, cls, a.kind.name(), a.bucket_lo_bytes, when), a: a.clone() }
        })
        .collect()
}

/// The anomalies of B whose key A does not have, in B's order.
fn fresh<'b>(a: &[Keyed], b: &'b [Keyed]) -> Vec<&'b Keyed> {
    let seen: std::collections::HashSet<_> = a.iter().map(|y| &y.key).collect();
    b.iter().filter(|x| !seen.contains(&x.key)).collect()
}

/// `--format json`: every anomaly of B that A does not have, whole, with the
/// communicator's class that keys it across the runs.
fn new_anomalies_json(a: &[Keyed], b: &[Keyed]) -> serde_json::Value {
    let list = fresh(a, b)
        .into_iter()
        .map(|k| {
            let mut v = serde_json::to_value(&k.a).unwrap_or(serde_json::Value::Null);
            if let Some(o) = v.as_object_mut() {
                o.insert("class".into(), serde_json::Value::String(k.key.1.clone()));
            }
            v
        })
        .collect();
    serde_json::Value::Array(list)
}

/// The anomalies of B that A does not have.
fn new_anomalies(a: &[Keyed], b: &[Keyed], label: &str) -> Table {
    const SHOWN: usize = 20;
    let mut t = Table::new(&format!("New anomalies in {label}"), &["time", "rule", "communicator", "kind", "size>", "ranks", "iter>", "observed>", "expected>"]);
    let fresh = fresh(a, b);
    for k in fresh.iter().take(SHOWN) {
        let x = &k.a;
        t.row(vec![
            commlens_report::sections::anomaly_time(x.time_ns),
            x.rule.label().to_string(),
            format!("{} ({})", x.comm_name, k.key.1),
            x.kind.name().to_string(),
            x.bytes.map_or_else(|| "-".into(), commlens_export::human_bytes),
            commlens_report::sections::rank_runs(&x.ranks),
            x.iteration.map_or_else(|| "-".into(), |i| i.to_string()),
            commlens_export::report::scale::fmt_ns(x.observed_ns),
            commlens_export::report::scale::fmt_ns(x.expected_ns),
        ]);
    }
    if fresh.is_empty() {
        t.note("none");
    } else if fresh.len() > SHOWN {
        t.note(format!("… and {} more", fresh.len() - SHOWN));
    }
    t
}

/// The figures of nccl-tests outputs (see [`load_profile`]). Runs of one
/// collective with different rank counts are told apart by their ranks.
pub fn benchmark_profile(label: &str, files: &[commlens_ingest::nccl_tests::BenchFile]) -> RunProfile {
    use commlens_analyze::diff::Better;
    let mut prof = RunProfile { label: label.to_string(), ..RunProfile::default() };
    let runs: Vec<_> = files.iter().flat_map(|f| &f.runs).collect();
    for r in &runs {
        let kind = r.kind.map_or("unknown collective", |k| k.name());
        let same_kind = runs.iter().filter(|x| x.kind == r.kind).count();
        let name = if same_kind > 1 && r.ranks > 0 { format!("nccl-tests {kind} ({} ranks)", r.ranks) } else { format!("nccl-tests {kind}") };
        for row in r.rows.iter().filter(|x| x.bytes > 0) {
            // Right-aligned byte counts keep the sizes in order in the table.
            let size = format!("{:>13} B ({})", row.bytes, commlens_export::human_bytes(row.bytes));
            let best = if row.in_place.busbw_gb_s > row.out_of_place.busbw_gb_s { &row.in_place } else { &row.out_of_place };
            // Each row is nccl-tests' mean over its iterations: enough samples to compare.
            let n = commlens_analyze::diff::MIN_BW_SAMPLES;
            prof.put(format!("{name} {size} busbw"), best.busbw_gb_s, "GB/s", Better::Higher, n);
            prof.put(format!("{name} {size} time"), best.time_us * 1e3, "ns", Better::Lower, n);
        }
        if let Some(avg) = r.avg_busbw_gb_s {
            prof.put(format!("{name} avg busbw"), avg, "GB/s", Better::Higher, commlens_analyze::diff::MIN_BW_SAMPLES);
        }
    }
    prof
}

/// The comparable figures of a run already loaded from `p`.
fn profile_of(p: &Path, loaded: &commlens_ingest::Loaded) -> Result<RunProfile, Box<dyn std::error::Error>> {
    if loaded.table.n_ops() == 0 {
        return Err(format!("{}: no NCCL operations", p.display()).into());
    }
    let mut prof = RunProfile::of_table(&p.display().to_string(), &loaded.table);
    commlens_report::enrich::add_timing_figures(&mut prof, &loaded.table, &loaded.traces);
    Ok(prof)
}

fn fmt(v: Option<f64>, unit: &str) -> String {
    match v {
        None => "—".into(),
        Some(x) if unit == "B" => commlens_export::human_bytes(x.round() as u64),
        Some(x) if unit == "ns" => format!("{:.3} ms", x / 1e6),
        Some(x) => format!("{x:.2} {unit}"),
    }
}

/// The comparison table; without `all`, unchanged rows are left out (and counted).
pub fn table(d: &DiffReport, all: bool) -> Table {
    let mut t = Table::new(&format!("Diff: {} → {}", d.a, d.b), &["figure", "A", "B", "change", "verdict"]);
    // CSV: each figure's values as plain numbers with their unit in a column.
    t.csv_columns(&["figure", "unit", "a", "b", "change_pct", "verdict"]);
    let num = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    let mut same = 0;
    for r in &d.rows {
        if !all && r.verdict == Verdict::Same {
            same += 1;
            continue;
        }
        let verdict = match r.verdict {
            Verdict::Same => "same",
            Verdict::Improved => "better",
            Verdict::Regressed => "REGRESSED",
            Verdict::Changed => "changed",
            Verdict::Missing => "only in one run",
        };
        t.row_with_csv(
            vec![
                r.name.clone(),
                fmt(r.a, r.unit),
                fmt(r.b, r.unit),
                r.change.map_or("—".into(), |c| format!("{:+.1}%", c * 100.0)),
                verdict.to_string(),
            ],
            vec![r.name.clone(), r.unit.to_string(), num(r.a), num(r.b), num(r.change.map(|c| c * 100.0)), verdict.to_string()],
        );
    }
    if same > 0 {
        t.note(format!("{same} figures within ±{:.1}% left out (--all shows them)", d.threshold * 100.0));
    }
    t
}
