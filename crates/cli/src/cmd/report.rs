//! `commlens report INPUTS -o report.html`: one self-contained HTML page
//! (inline SVG, no network) with the charts of every analysis the inputs
//! allow; sections the inputs cannot feed say which input would. The
//! collective model's expectations (`crate::expected`) judge every operation
//! on its own communicator, and NCCL's logged tuning choices are compared
//! with the model's (one summary line on stdout). Anomalies (`commlens_analyze::anomaly`)
//! get a section and, on stdout, a table of the first ones.

use super::CmdResult;
use crate::report_data as rd;
use commlens_analyze::stats::Aggregate;
use commlens_export::report::{write_html, Report};
use commlens_ingest::nccl_log::ReadOptions;
use std::path::{Path, PathBuf};

pub struct ReportArgs<'a> {
    pub inputs: &'a [PathBuf],
    pub out: &'a Path,
    pub model: Option<&'a Path>,
    /// nccl-tests outputs to compare with.
    pub baselines: &'a [PathBuf],
    pub title: Option<&'a str>,
}

pub fn run(a: &ReportArgs<'_>) -> CmdResult {
    let (mut baselines, baseline_files) = if a.baselines.is_empty() { (Vec::new(), Vec::new()) } else { crate::baseline::load(a.baselines)? };
    let (progress, bar) = crate::progress::for_inputs(a.inputs);
    let mut loaded = crate::load::load_columns(a.inputs, &ReadOptions { progress, samples: false, ..ReadOptions::default() }, &crate::load::columns(crate::load::REPORT_COLUMNS))?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    crate::load::drop_read_state(&mut loaded);
    let t = &loaded.table;
    if t.n_ops() == 0 && !loaded.benchmarks.is_empty() {
        // nccl-tests outputs alone: their curves and tables are the report.
        let labels: Vec<String> = a.inputs.iter().map(|p| p.display().to_string()).collect();
        let report = benchmark_report(&loaded.benchmarks, &labels, a.title);
        write_report(&report, a.out)?;
        let runs: usize = loaded.benchmarks.iter().map(|b| b.runs.len()).sum();
        println!(
            "wrote {} (nccl-tests: {runs} runs from {} files); open it in any browser, it needs no network",
            a.out.display(),
            loaded.benchmarks.len()
        );
        return Ok(());
    }
    if t.n_ops() == 0 {
        return Err("no NCCL operations in the inputs: nothing to report".into());
    }
    // Inputs of another job: a baseline from other machines, a model file of another layout.
    for w in crate::baseline::other_hardware(&baseline_files, t) {
        eprintln!("warning: {w}");
    }
    if let Some(path) = a.model {
        if let Some(w) = super::model::world_mismatch(path, t)? {
            eprintln!("warning: {w}");
        }
    }
    // nccl-tests outputs among the inputs are the run's baselines too.
    baselines.extend(crate::baseline::from_files(&loaded.benchmarks));
    let labels: Vec<String> = a.inputs.iter().map(|p| p.display().to_string()).collect();
    let report = build(&loaded.table, &loaded.traces, &labels, a.model, &baselines, a.title)?;
    write_report(&report, a.out)?;
    println!(
        "wrote {} ({} operations, {} ranks); open it in any browser, it needs no network",
        a.out.display(),
        t.n_ops(),
        t.per_rank.iter().filter(|o| !o.is_empty()).count()
    );
    println!("{}", tuning_line(&report));
    if let Some(a) = &report.anomalies {
        // The first rows on the terminal, the HTML section holds more.
        let shown = a.rows.len().min(ANOMALY_TEXT_ROWS);
        let text = commlens_export::report::AnomalySection {
            rows: a.rows[..shown].to_vec(),
            more: a.more + (a.rows.len() - shown) as u64,
            ..a.clone()
        };
        print!("{}", crate::render::anomaly_table(&text).to_text());
    }
    if let Some(f) = report.summary.iter().find(|f| f.label == VS_MODEL) {
        println!("expected: measured bus bandwidth is {} of the model's ({})", f.value, f.detail.as_deref().unwrap_or(""));
    }
    Ok(())
}

/// Anomalies listed in the HTML section, and on the terminal.
const ANOMALY_ROWS: usize = 50;
const ANOMALY_TEXT_ROWS: usize = 10;

/// Label of the summary tile with the median efficiency against the model.
const VS_MODEL: &str = "busbw vs model";

/// The one-line summary of NCCL's logged choices against the model's.
pub fn tuning_line(r: &Report) -> String {
    match &r.tuning {
        Some(tu) => format!(
            "tuning: model agrees with NCCL on {}/{} logged choices (algorithm and protocol; channel counts {}/{})",
            tu.agree, tu.compared, tu.channels_agree, tu.channels_compared
        ),
        None => "tuning: no logged choices to compare (NCCL_DEBUG_SUBSYS=TUNING prints `Bytes -> Algo` lines)".into(),
    }
}

/// Builds the report of a table (and the kernel traces it came with, for
/// iteration ranges).
pub fn build(
    t: &commlens_core::OpTable,
    traces: &[commlens_ingest::kineto::KernelTrace],
    inputs: &[String],
    model: Option<&Path>,
    baselines: &[crate::baseline::Baseline],
    title: Option<&str>,
) -> Result<Report, Box<dyn std::error::Error>> {
    let agg = Aggregate::from_table(t);
    let mut r = Report {
        title: title.map_or_else(|| "commlens communication report".to_string(), str::to_string),
        generated_by: format!("commlens {}", env!("CARGO_PKG_VERSION")),
        inputs: inputs.to_vec(),
        summary: rd::summary(t, &agg),
        op_mix: Some(rd::op_mix(&agg)),
        rank_volume: Some(rd::rank_volume(t, &agg)),
        size_histogram: Some(rd::size_histogram(&agg)),
        bandwidth: rd::bandwidth(t, baselines),
        ..Report::default()
    };
    // Per rank × communicator counters: freed before the analyses below build theirs.
    drop(agg);
    // One classification serves the three tables that name parallelism.
    let class = commlens_analyze::classify::infer(t);
    r.tables.push(rd::parallelism_table(t, &class));
    r.tables.push(rd::classification_table(&class));
    r.tables.push(rd::signature_table(t, &class));
    drop(class);
    let ranges = crate::enrich::iteration_ranges(traces);
    r.iterations = rd::iterations(t, &ranges);
    r.stragglers = rd::stragglers(t, &rd::straggler_report(t));
    r.anomalies = rd::anomaly_section(&rd::anomaly_report(t, traces), ANOMALY_ROWS);
    r.overlap = rd::overlap_section(&rd::overlap_rows(traces));
    // The collective model on the run's own cluster (inputs are labelled by
    // their paths; those that exist add their log lines to the cluster facts).
    let paths: Vec<PathBuf> = inputs.iter().map(PathBuf::from).filter(|p| p.exists()).collect();
    let bw = commlens_analyze::bandwidth::analyze(t, &Default::default());
    let exp = crate::expected::Expected::compute(t, crate::expected::run_cluster(&paths, t), &bw);
    r.expected = crate::expected::expected_section(t, &exp);
    r.tuning = crate::expected::tuning_section(t, &exp);
    let mut eff: Vec<f64> = exp.all().filter_map(|x| x.efficiency).collect();
    if let Some(s) = commlens_analyze::bandwidth::Spread::of(&mut eff) {
        r.summary.push(commlens_export::report::Figure {
            detail: Some(format!("median over {} timed operations", eff.len())),
            ..commlens_export::report::Figure::new(VS_MODEL, format!("{:.0}%", 100.0 * s.median))
        });
    }
    if let Some(path) = model {
        let c = super::model::read_config(path)?;
        let (theory, cmp) = super::model::volumes(&c, Some(t));
        r.model = Some(rd::model(&cmp, &theory));
    }
    Ok(r)
}

pub fn write_report(r: &Report, out: &Path) -> CmdResult {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(crate::outputs::write_file_atomic(out, |w| write_html(r, w))?)
}

/// The report of nccl-tests outputs alone: per run a bus-bandwidth curve over
/// message sizes (best of out-of-place and in-place), the summary and per-size
/// tables `stats` prints, and the job's hosts.
pub fn benchmark_report(files: &[commlens_ingest::nccl_tests::BenchFile], inputs: &[String], title: Option<&str>) -> Report {
    use commlens_export::report::{Bandwidth, BandwidthSeries, BwPoint, Figure};
    let runs: Vec<&commlens_ingest::nccl_tests::BenchRun> = files.iter().flat_map(|f| &f.runs).collect();
    let job = super::stats::Job::of_benchmarks(files);
    let peak = runs.iter().map(|r| r.peak_busbw_gb_s()).fold(0.0, f64::max);
    let series = runs
        .iter()
        .map(|r| BandwidthSeries {
            kind: format!(
                "{}{}",
                r.kind.map_or("unknown collective", |k| k.name()),
                if r.ranks > 0 { format!(", {} ranks", r.ranks) } else { String::new() }
            ),
            points: r
                .rows
                .iter()
                .filter(|x| x.bytes > 0)
                .map(|x| BwPoint {
                    bytes: x.bytes,
                    busbw_gb_s: x.out_of_place.busbw_gb_s.max(x.in_place.busbw_gb_s),
                    efficiency: None,
                    vs_baseline: None,
                })
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect::<Vec<_>>();
    Report {
        title: title.map_or_else(|| "commlens report: nccl-tests results".to_string(), str::to_string),
        generated_by: format!("commlens {}", env!("CARGO_PKG_VERSION")),
        inputs: inputs.to_vec(),
        summary: vec![
            Figure::new("benchmark runs", runs.len().to_string()),
            Figure::new("nodes", if job.nodes > 0 { job.nodes.to_string() } else { "unknown".into() }),
            Figure::new("peak bus bandwidth", format!("{peak:.2} GB/s")),
        ],
        notes: vec!["nccl-tests outputs only: no training operations, so only the benchmark curves are shown".into()],
        bandwidth: (!series.is_empty()).then(|| Bandwidth {
            series,
            limits: Vec::new(),
            convention: "nccl-tests (busbw = algbw × bus factor)".into(),
            notes: Vec::new(),
            baselines: Vec::new(),
        }),
        tables: crate::baseline::tables(files).iter().map(Into::into).collect(),
        ..Report::default()
    }
}
