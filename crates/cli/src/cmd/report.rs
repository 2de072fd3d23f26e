//! `commlens report INPUTS -o report.html`: one self-contained HTML page
//! (inline SVG, no network) with the charts of every analysis the inputs
//! allow; sections the inputs cannot feed say which input would.

use super::CmdResult;
use crate::report_data as rd;
use commlens_analyze::stats::Aggregate;
use commlens_export::report::{write_html, Report};
use commlens_ingest::nccl_log::ReadOptions;
use std::io::Write;
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
    let baselines = if a.baselines.is_empty() { Vec::new() } else { crate::baseline::load(a.baselines)? };
    let (progress, bar) = crate::progress::for_inputs(a.inputs);
    let loaded = crate::load::load(a.inputs, &ReadOptions { progress, ..ReadOptions::default() })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let t = &loaded.table;
    if t.n_ops() == 0 {
        return Err("no NCCL operations in the inputs: nothing to report".into());
    }
    let labels: Vec<String> = a.inputs.iter().map(|p| p.display().to_string()).collect();
    let report = build(&loaded.table, &loaded.traces, &labels, a.model, &baselines, a.title)?;
    write_report(&report, a.out)?;
    println!(
        "wrote {} ({} operations, {} ranks); open it in any browser, it needs no network",
        a.out.display(),
        t.n_ops(),
        t.per_rank.iter().filter(|o| !o.is_empty()).count()
    );
    Ok(())
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
    // One classification serves the three tables that name parallelism.
    let class = commlens_analyze::classify::infer(t);
    r.tables.push(rd::parallelism_table(t, &class));
    r.tables.push(rd::classification_table(&class));
    r.tables.push(rd::signature_table(t, &class));
    let ranges = crate::enrich::iteration_ranges(traces);
    r.iterations = rd::iterations(t, &ranges);
    r.stragglers = rd::stragglers(t, &rd::straggler_report(t));
    r.overlap = rd::overlap_section(&rd::overlap_rows(traces));
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
    let f = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut w = std::io::BufWriter::new(f);
    write_html(r, &mut w).and_then(|_| w.flush()).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(())
}
