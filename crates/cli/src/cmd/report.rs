//! `commlens report INPUTS -o report.html`: one self-contained HTML page
//! (inline SVG, no network) with the charts of every analysis the inputs
//! allow; sections the inputs cannot feed say which input would. The
//! collective model's expectations (`commlens_report::expected`) judge every operation
//! on its own communicator, and NCCL's logged tuning choices are compared
//! with the model's (one summary line on stdout). Anomalies (`commlens_analyze::anomaly`)
//! get a section and, on stdout, a table of the first ones.

use super::CmdResult;
use commlens_export::report::{write_html, Report};
use commlens_ingest::nccl_log::ReadOptions;
use commlens_report::baseline;
use commlens_report::build::VS_MODEL;
// Report assembly lives in `commlens-report`; `demo` builds its report through here too.
pub use commlens_report::{benchmark_report, build};
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
    let (mut baselines, baseline_files) = if a.baselines.is_empty() { (Vec::new(), Vec::new()) } else { baseline::load(a.baselines)? };
    let (progress, bar) = crate::progress::for_inputs(a.inputs);
    // The loader keeps the logs' hardware lines for the cluster facts, so they are read once.
    let opts = ReadOptions { progress, samples: false, ..ReadOptions::default() };
    let loading = commlens_core::timing::Phase::start("load (total)");
    let mut loaded = crate::load::load_columns_noting(a.inputs, &opts, &crate::load::columns(crate::load::REPORT_COLUMNS), true)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    commlens_core::timing::time("load: free read state", || crate::load::drop_read_state(&mut loaded));
    loading.end();
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
    for w in baseline::other_hardware(&baseline_files, t) {
        eprintln!("warning: {w}");
    }
    if let Some(path) = a.model {
        if let Some(w) = super::model::world_mismatch(path, t)? {
            eprintln!("warning: {w}");
        }
    }
    // nccl-tests outputs among the inputs are the run's baselines too.
    baselines.extend(baseline::from_files(&loaded.benchmarks));
    let labels: Vec<String> = a.inputs.iter().map(|p| p.display().to_string()).collect();
    let report = commlens_core::timing::time("report (total)", || {
        commlens_report::build::build_noted(&loaded.table, &loaded.traces, &labels, a.model, &baselines, a.title, loaded.noted.as_ref())
    })?;
    commlens_core::timing::time("write html", || write_report(&report, a.out))?;
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
        print!("{}", commlens_report::render::anomaly_table(&text).to_text());
    }
    if let Some(f) = report.summary.iter().find(|f| f.label == VS_MODEL) {
        println!("expected: measured bus bandwidth is {} of the model's ({})", f.value, f.detail.as_deref().unwrap_or(""));
    }
    Ok(())
}

/// Anomalies listed on the terminal (the HTML section holds `commlens_report::build::ANOMALY_ROWS`).
const ANOMALY_TEXT_ROWS: usize = 10;

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

pub fn write_report(r: &Report, out: &Path) -> CmdResult {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(crate::outputs::write_file_atomic(out, |w| write_html(r, w))?)
}
