//! A whole report (`commlens_export::report::Report`) from a loaded run: every
//! section the inputs allow, each from [`crate::sections`], the collective
//! model's sections from [`crate::expected`] on the run's own cluster, and the
//! volume model from a model file ([`crate::volumes`]); or, for nccl-tests
//! outputs alone, their curves and tables ([`benchmark_report`]).

use crate::baseline::Baseline;
use crate::sections as rd;
use commlens_analyze::stats::Aggregate;
use commlens_core::OpTable;
use commlens_export::report::{Bandwidth, BandwidthSeries, BwPoint, Figure, Report};
use commlens_ingest::kineto::KernelTrace;
use commlens_ingest::nccl_tests::{BenchFile, BenchRun};
use std::path::{Path, PathBuf};

/// Anomalies listed in the HTML section.
pub const ANOMALY_ROWS: usize = 50;

/// Label of the summary tile with the median efficiency against the model.
pub const VS_MODEL: &str = "busbw vs model";

/// Builds the report of a table (and the kernel traces it came with, for
/// iteration ranges and overlap). `inputs` label the report; those that are
/// existing paths add their log lines to the cluster the model runs on.
/// `model` is a model file for the theory-versus-observed volume section.
pub fn build(
    t: &OpTable,
    traces: &[KernelTrace],
    inputs: &[String],
    model: Option<&Path>,
    baselines: &[Baseline],
    title: Option<&str>,
) -> Result<Report, Box<dyn std::error::Error>> {
    build_noted(t, traces, inputs, model, baselines, title, None)
}

/// [`build`], with the hardware lines the loader noted (`Loaded::noted`):
/// the cluster facts take them instead of reading the logs again.
pub fn build_noted(
    t: &OpTable,
    traces: &[KernelTrace],
    inputs: &[String],
    model: Option<&Path>,
    baselines: &[Baseline],
    title: Option<&str>,
    noted: Option<&commlens_ingest::noted::NotedLines>,
) -> Result<Report, Box<dyn std::error::Error>> {
    use commlens_core::timing::time;
    // Independent groups of sections, run on rayon's threads (the analyses
    // are per-table passes that share nothing but `t`); each group frees its
    // own maps before its next section builds its own, and rayon runs one
    // task per thread (two here), so about two analyses' maps coexist. Every section's result
    // is the same whichever thread computes it, so the page does not change.
    let overview = || {
        let agg = time("report: aggregate", || Aggregate::from_table(t));
        let overview = commlens_core::timing::Phase::start("report: overview sections");
        let mut r = Report {
            title: title.map_or_else(|| "commlens communication report".to_string(), str::to_string),
            generated_by: format!("commlens {}", env!("CARGO_PKG_VERSION")),
            inputs: inputs.to_vec(),
            summary: rd::summary(t, &agg),
            op_mix: Some(rd::op_mix(&agg)),
            rank_volume: Some(rd::rank_volume(t, &agg)),
            size_histogram: Some(rd::size_histogram(&agg)),
            ..Report::default()
        };
        overview.end();
        // Per rank × communicator counters: freed before the analyses below build theirs.
        drop(agg);
        r.bandwidth = time("report: bandwidth section", || rd::bandwidth(t, baselines));
        // One classification serves the three tables that name parallelism.
        let class = time("report: classify", || commlens_analyze::classify::infer(t));
        time("report: parallelism tables", || {
            r.tables.push(rd::parallelism_table(t, &class));
            r.tables.push(rd::classification_table(&class));
            r.tables.push(rd::signature_table(t, &class));
        });
        r
    };
    // The timelines' three analyses are tasks of their own, so the two
    // threads stay busy to the end (each section is a fair share of the work).
    // The iterations found once serve their heat map and the anomalies' step changes.
    let timelines = || {
        let ((iterations, anomalies), stragglers) = rayon::join(
            || {
                let ranges = crate::enrich::iteration_ranges(traces);
                let iters = time("report: iterations", || rd::iteration_report(t, &ranges));
                rayon::join(
                    || rd::iterations_of(t, &iters),
                    || time("report: anomalies", || rd::anomaly_section(&rd::anomaly_report_with(t, &iters), ANOMALY_ROWS)),
                )
            },
            || time("report: stragglers", || rd::stragglers(t, &rd::straggler_report(t))),
        );
        let overlap = rd::overlap_section(&rd::overlap_rows(traces));
        (iterations, stragglers, anomalies, overlap)
    };
    // The collective model on the run's own cluster (inputs are labelled by
    // their paths; those that exist add their log lines to the cluster facts).
    let expected = || {
        let paths: Vec<PathBuf> = inputs.iter().map(PathBuf::from).filter(|p| p.exists()).collect();
        let bw = time("report: bandwidth analysis", || commlens_analyze::bandwidth::analyze(t, &Default::default()));
        let cluster = time("report: cluster facts", || crate::expected::run_cluster_noted(&paths, t, noted));
        let exp = time("report: expected (model)", || crate::expected::Expected::compute(t, cluster, &bw));
        drop(bw);
        let sections = time("report: expected+tuning sections", || {
            (crate::expected::expected_section(t, &exp), crate::expected::tuning_section(t, &exp))
        });
        let eff: Vec<f64> = exp.all().filter_map(|x| x.efficiency).collect();
        (sections, eff)
    };
    let (mut r, ((iterations, stragglers, anomalies, overlap), ((expected, tuning), mut eff))) =
        rayon::join(overview, || rayon::join(timelines, expected));
    (r.iterations, r.stragglers, r.anomalies, r.overlap) = (iterations, stragglers, anomalies, overlap);
    (r.expected, r.tuning) = (expected, tuning);
    if let Some(s) = commlens_analyze::bandwidth::Spread::of(&mut eff) {
        r.summary.push(Figure {
            detail: Some(format!("median over {} timed operations", eff.len())),
            ..Figure::new(VS_MODEL, format!("{:.0}%", 100.0 * s.median))
        });
    }
    if let Some(path) = model {
        let c = crate::volumes::read_config(path)?;
        let (theory, cmp) = crate::volumes::volumes(&c, Some(t));
        r.model = Some(rd::model(&cmp, &theory));
    }
    Ok(r)
}

/// The report of nccl-tests outputs alone: per run a bus-bandwidth curve over
/// message sizes (best of out-of-place and in-place), the summary and per-size
/// tables `stats` prints, and the job's hosts.
pub fn benchmark_report(files: &[BenchFile], inputs: &[String], title: Option<&str>) -> Report {
    let runs: Vec<&BenchRun> = files.iter().flat_map(|f| &f.runs).collect();
    let job = crate::job::Job::of_benchmarks(files);
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
