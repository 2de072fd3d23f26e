//! `commlens stats`: streams the inputs through [`Aggregate`] (operations are
//! not stored; kernel traces and commlens Parquet tables are read whole) and
//! prints the per-rank, per-communicator and per-operation tables and the
//! message-size histogram. nccl-tests outputs (benchmark
//! tables without NCCL debug lines) are summarised by `crate::baseline`.

use super::CmdResult;
use crate::render;
use crate::Format;
use commlens_analyze::stats::{Aggregate, StatsReport};
use commlens_ingest::inputs::{expand_inputs, load_inputs_with, sniff, InputFormat};
use commlens_ingest::nccl_log::ReadOptions;
use commlens_ingest::nccl_tests::BenchFile;
use std::path::PathBuf;

pub fn run(inputs: &[PathBuf], format: Format, verbose: bool) -> CmdResult {
    // Our own Parquet tables are read whole (crate::load); the rest as before.
    let split = crate::load::split_inputs(inputs)?;
    let (mut bench, mut rest) = (Vec::new(), Vec::new());
    if !split.rest.is_empty() {
        for (p, _) in expand_inputs(&split.rest)? {
            let (tables, nccl_lines) = crate::baseline::sniff_benchmark(&p);
            if tables {
                bench.push(p.clone());
            }
            if !tables || nccl_lines {
                rest.push(p);
            }
        }
    }
    let only_benchmarks = rest.is_empty() && split.parquet.is_empty();
    if !bench.is_empty() && only_benchmarks {
        print_benchmarks(read_benchmarks(&bench)?, format, true)?;
        return Ok(());
    }
    let inputs = if bench.is_empty() { split.rest.clone() } else { rest };
    let inputs = &inputs[..];
    let printed_benchmarks = !bench.is_empty();
    let mut traces = !split.parquet.is_empty();
    if !inputs.is_empty() {
        for (p, _) in expand_inputs(inputs)? {
            traces |= sniff(&p)? != InputFormat::NcclLog;
        }
    }
    if traces {
        // Kernel traces and tables are small next to logs: read whole, then aggregate.
        let both = crate::load::Split { parquet: split.parquet.clone(), rest: inputs.to_vec() };
        let loaded = crate::load::load_split(&both, &ReadOptions::default())?;
        // JSON stays one document: the benchmark results join the stats object.
        let bench_json = print_benchmarks(read_benchmarks(&bench)?, format, false)?;
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
            "parquet_tables": split.parquet.len(),
            "traces": loaded.traces.len(),
            "plugin": loaded.plugin_reports,
            "nvidia_plugins": loaded.nvidia_reports.len(),
        });
        return print_stats(&loaded.table, &agg, format, inputs, bench_json);
    }
    let (progress, bar) = crate::progress::for_inputs(inputs);
    let opts = ReadOptions { progress, ..ReadOptions::default() };
    // Logs that share stdout with nccl-tests hold both: their benchmark
    // tables are read while the logs are.
    let (loaded, read) = rayon::join(
        || load_inputs_with(inputs, &opts, false, Aggregate::default, |a, op| a.add(op)),
        || read_benchmarks(&bench),
    );
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (loaded, aggs) = loaded?;
    let bench_json = print_benchmarks(read?, format, false)?;
    let mut agg = Aggregate::default();
    for (a, r) in aggs.into_iter().zip(&loaded.remaps) {
        if !a.cells.is_empty() {
            agg.merge(a.remap(&r.dev, &r.comm));
        }
    }
    let t = &loaded.table;
    eprint!("{}", render::read_summary(&loaded.reports, &loaded.skipped_files, verbose));
    loaded.notes.iter().for_each(|n| eprintln!("{n}"));
    if t.devices.is_empty() && agg.cells.is_empty() {
        if printed_benchmarks {
            eprintln!("note: the NCCL lines beside the benchmark tables hold no communicators or operations");
            if format == Format::Json {
                println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "nccl_tests": bench_json }))?);
            }
            return Ok(());
        }
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
    print_stats(t, &agg, format, serde_json::to_value(&loaded.reports)?, bench_json)
}

/// The nccl-tests outputs among the inputs, read in parallel.
fn read_benchmarks(files: &[PathBuf]) -> Result<Vec<BenchFile>, commlens_ingest::IngestError> {
    use rayon::prelude::*;
    files.par_iter().map(|p| commlens_ingest::nccl_tests::read_nccl_tests(p)).collect()
}

/// nccl-tests outputs: a summary per run, then each run's sizes (nothing
/// when there are none). In JSON the results are returned (and printed only
/// when `alone`), so that one document holds everything.
fn print_benchmarks(read: Vec<BenchFile>, format: Format, alone: bool) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    if read.is_empty() {
        return Ok(serde_json::Value::Null);
    }
    match format {
        Format::Json => {
            let v = serde_json::to_value(&read)?;
            if alone {
                println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "nccl_tests": v }))?);
            }
            return Ok(v);
        }
        Format::Csv | Format::Table => {
            if format == Format::Csv {
                // The table's notes do not reach CSV: the rows left out are said on stderr.
                for f in &read {
                    for (line, text) in &f.malformed {
                        eprintln!("warning: {}:{line}: not a result row: {text}", f.path);
                    }
                }
            }
            for t in crate::baseline::tables(&read) {
                if format == Format::Csv {
                    println!("# {}\n{}", t.title, t.to_csv());
                } else {
                    println!("{}", t.to_text());
                }
            }
        }
    }
    Ok(serde_json::Value::Null)
}

fn print_stats(
    t: &commlens_core::OpTable,
    agg: &Aggregate,
    format: Format,
    inputs: serde_json::Value,
    nccl_tests: serde_json::Value,
) -> CmdResult {
    let report = StatsReport::build(t, agg);
    for w in report.warnings.iter().cloned().chain(crate::load::implausible_devices(t)) {
        eprintln!("warning: {w}");
    }
    match format {
        Format::Table => {
            for tab in render::stats_tables(&report) {
                println!("{}", tab.to_text());
            }
        }
        Format::Csv => print!("{}", render::stats_csv(t, agg).to_csv()),
        Format::Json => {
            let mut v = serde_json::json!({ "inputs": inputs, "stats": report });
            if !nccl_tests.is_null() {
                v["nccl_tests"] = nccl_tests;
            }
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    Ok(())
}
