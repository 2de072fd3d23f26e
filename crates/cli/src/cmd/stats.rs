//! `commlens stats`: streams the inputs through [`Aggregate`] (operations are
//! not stored) and prints the per-rank, per-communicator and per-operation
//! tables and the message-size histogram.

use super::CmdResult;
use crate::render;
use crate::Format;
use commlens_analyze::stats::{Aggregate, StatsReport};
use commlens_ingest::inputs::{expand_inputs, load_any, load_inputs_with, sniff, InputFormat};
use commlens_ingest::nccl_log::ReadOptions;
use std::path::PathBuf;

pub fn run(inputs: &[PathBuf], format: Format, verbose: bool) -> CmdResult {
    let mut traces = false;
    for (p, _) in expand_inputs(inputs)? {
        traces |= sniff(&p)? != InputFormat::NcclLog;
    }
    if traces {
        // Kernel traces are small next to logs: read whole, then aggregate.
        let loaded = load_any(inputs, &ReadOptions::default())?;
        eprint!("{}", render::trace_summary(&loaded.traces, verbose));
        for r in &loaded.plugin_reports {
            eprintln!(
                "{}: plugin output ({}), {} ops ({} with GPU timing), {} communicators, {} records dropped{}",
                r.path,
                r.format,
                r.ops,
                r.ops_with_gpu,
                r.comms,
                r.dropped,
                if r.clean_end { "" } else { ", no END record (process killed?)" }
            );
        }
        for r in &loaded.nvidia_reports {
            eprintln!("{}: {}, {} ops, {} skipped", r.path, r.format, r.ops, r.skipped());
            for p in r.problems().iter().take(if verbose { usize::MAX } else { 3 }) {
                eprintln!("warning: {p}");
            }
        }
        let agg = Aggregate::from_table(&loaded.table);
        if agg.cells.is_empty() {
            return Err("no NCCL operations in the inputs".into());
        }
        let inputs = serde_json::json!({
            "traces": loaded.traces.len(),
            "plugin": loaded.plugin_reports,
            "nvidia_plugins": loaded.nvidia_reports.len(),
        });
        return print_stats(&loaded.table, &agg, format, inputs);
    }
    let (progress, bar) = crate::progress::for_inputs(inputs);
    let opts = ReadOptions { progress, ..ReadOptions::default() };
    let (loaded, aggs) = load_inputs_with(inputs, &opts, false, Aggregate::default, |a, op| a.add(op))?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut agg = Aggregate::default();
    for (a, r) in aggs.into_iter().zip(&loaded.remaps) {
        if !a.cells.is_empty() {
            agg.merge(a.remap(&r.dev, &r.comm));
        }
    }
    let t = &loaded.table;
    eprint!("{}", render::read_summary(&loaded.reports, &loaded.skipped_files, verbose));
    if t.devices.is_empty() && agg.cells.is_empty() {
        return Err("no communicators and no operations in the inputs: the logs have neither init lines nor \
                    per-operation lines (run with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS including INIT,COLL)"
            .into());
    }
    if agg.cells.is_empty() {
        eprintln!(
            "note: no per-operation (opCount) lines found; only communicators are listed. \
             NCCL writes them with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL (or ALL)."
        );
    }
    print_stats(t, &agg, format, serde_json::to_value(&loaded.reports)?)
}

fn print_stats(t: &commlens_core::OpTable, agg: &Aggregate, format: Format, inputs: serde_json::Value) -> CmdResult {
    let report = StatsReport::build(t, agg);
    match format {
        Format::Table => {
            for tab in render::stats_tables(&report) {
                println!("{}", tab.to_text());
            }
        }
        Format::Csv => print!("{}", render::stats_csv(t, agg).to_csv()),
        Format::Json => {
            let v = serde_json::json!({ "inputs": inputs, "stats": report });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    Ok(())
}
