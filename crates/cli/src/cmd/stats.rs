//! `commlens stats`: streams the inputs through [`Aggregate`] (operations are
//! not stored; kernel traces and commlens Parquet tables are read whole) and
//! prints the per-rank, per-communicator and per-operation tables and the
//! message-size histogram. nccl-tests outputs (benchmark
//! tables without NCCL debug lines) are summarised by `commlens_report::baseline`.

use super::CmdResult;
use commlens_report::render;
use crate::Format;
use commlens_analyze::stats::{Aggregate, StatsReport};
use commlens_analyze::stats_stream::AggregateBuilder;
use commlens_ingest::inputs::{expand_inputs, load_listed_with, InputFormat};
use commlens_ingest::kind::{classify, FileKind};
use commlens_ingest::nccl_log::ReadOptions;
use commlens_ingest::nccl_tests::{read_nccl_tests, BenchFile, BenchTables};
use std::path::PathBuf;

pub fn run(inputs: &[PathBuf], format: Format, verbose: bool, sizes: bool) -> CmdResult {
    // Our own Parquet tables are read whole (crate::load); the rest as before.
    let split = crate::load::split_inputs(inputs)?;
    // Each file by its kind: benchmark tables are read here, the rest by the
    // log reader (streamed) or, when any is a trace or plugin output, whole.
    let (mut bench, mut rest, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    let mut traces = !split.parquet.is_empty();
    if !split.rest.is_empty() {
        for (p, explicit) in expand_inputs(&split.rest)? {
            match classify(&p)? {
                FileKind::Benchmark { nccl_lines } => {
                    bench.push(p.clone());
                    if nccl_lines {
                        // Its NCCL lines are read too; no error when they hold no operation.
                        rest.push((p, false));
                    }
                }
                FileKind::Ops(f) => {
                    traces |= f != InputFormat::NcclLog;
                    rest.push((p, explicit));
                }
                // Named explicitly: the reader says what it is (and refuses it).
                _ if explicit => rest.push((p, explicit)),
                k => skipped.push((p, k)),
            }
        }
    }
    let only_benchmarks = rest.is_empty() && split.parquet.is_empty();
    if !bench.is_empty() && only_benchmarks {
        print_benchmarks(read_benchmarks(&bench)?, format, true, sizes)?;
        return Ok(());
    }
    let printed_benchmarks = !bench.is_empty();
    if traces {
        // Kernel traces and tables are small next to logs: read whole, then
        // aggregate (load_any sorts the folders' files again and says what it skipped).
        let both = crate::load::Split { parquet: split.parquet.clone(), rest: split.rest.clone() };
        let loaded = crate::load::load_split_columns(&both, &ReadOptions::default(), &crate::load::columns(crate::load::STATS_COLUMNS))?;
        // JSON stays one document: the benchmark results join the stats object.
        let bench_json = print_benchmarks(read_benchmarks(&bench)?, format, false, sizes)?;
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
            if r.ops_gpu_desync > 0 {
                eprintln!(
                    "warning: {}: {} ops keep no GPU span: NCCL gave them the kernel timers of earlier work (after a send/recv to the own rank, or a kernel that ended long before its receives)",
                    r.path, r.ops_gpu_desync
                );
            }
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
        return print_stats(&loaded.table, &loaded.notes, &agg, format, Inputs::Value(inputs), bench_json);
    }
    for (p, k) in &skipped {
        let why = match k {
            FileKind::TopoXml => "an NCCL topology XML: `commlens topo` reads it".to_string(),
            k => format!("a {} inside a folder: name it on the command line to read it unpacked", k.name()),
        };
        eprintln!("note: skipped {}: {why}", p.display());
    }
    let paths: Vec<PathBuf> = rest.iter().map(|f| f.0.clone()).collect();
    let inputs = &paths[..];
    let (progress, bar) = crate::progress::for_inputs(inputs);
    // Logs that share stdout with nccl-tests hold both: the log reader reads
    // their benchmark tables in its own pass; the other nccl-tests outputs
    // are read meanwhile.
    let bench_set: std::collections::HashSet<&PathBuf> = bench.iter().collect();
    let folded = std::sync::Arc::new(BenchTables::new(rest.iter().filter(|f| bench_set.contains(&f.0)).map(|f| f.0.clone())));
    let opts = ReadOptions { progress, bench_tables: Some(folded.clone()), ..ReadOptions::default() };
    let (loaded, others) = rayon::join(
        || load_listed_with(&rest, &opts, false, AggregateBuilder::default, |a, op| a.add(op)),
        || read_benchmarks_but(&bench, &folded),
    );
    let read = with_folded(&bench, others, &folded);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (loaded, aggs) = match loaded {
        // Benchmarks beside files that are no log (notes, scripts): the tables alone.
        Err(commlens_ingest::IngestError::NoInputs { paths }) if printed_benchmarks => {
            let why = crate::load::why_no_inputs(&paths);
            eprintln!("note: skipped {} files beside the nccl-tests outputs{}", paths.len(), why.replace("; every file was refused or passed over:", ":"));
            print_benchmarks(read?, format, true, sizes)?;
            return Ok(());
        }
        other => other?,
    };
    let merging = commlens_core::timing::Phase::start("stats: merge the parts' aggregates");
    let mut agg = Aggregate::default();
    for (a, r) in aggs.into_iter().map(AggregateBuilder::finish).zip(&loaded.remaps) {
        if !a.cells.is_empty() {
            agg.merge(a.remap(|d, c| r.dev_comm(d, c)));
        }
    }
    merging.end();
    let t = &loaded.table;
    eprint!("{}", render::read_summary(&loaded.reports, &loaded.skipped_files, verbose));
    crate::load::eprint_lines(&loaded.notes);
    if t.devices.is_empty() && agg.cells.is_empty() {
        if printed_benchmarks {
            eprintln!("note: the NCCL lines beside the benchmark tables hold no communicators or operations");
            print_benchmarks_of(read?, format, true, sizes, Some(Job::of_table(t)))?;
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
    let bench_json = print_benchmarks(read?, format, false, sizes)?;
    let printed = commlens_core::timing::time("stats: print", || {
        print_stats(t, &loaded.notes, &agg, format, Inputs::Reports(&loaded.reports), bench_json)
    });
    // Not freed: the command's work is done, and freeing the table's many
    // small allocations (communicators, members, per-device maps) was 29 %
    // of the main thread's instructions on the 100 MB bench log (1.17 M of
    // 3.98 M, callgrind --separate-threads), serial after the parallel read.
    // The demo calls this in-process: it keeps its small table until exit.
    std::mem::forget(loaded);
    printed
}

/// The nccl-tests outputs among the inputs, read in parallel.
fn read_benchmarks(files: &[PathBuf]) -> Result<Vec<BenchFile>, commlens_ingest::IngestError> {
    use rayon::prelude::*;
    files.par_iter().map(|p| read_nccl_tests(p)).collect()
}

type BenchRead = Result<BenchFile, commlens_ingest::IngestError>;

/// [`read_benchmarks`] but for the files the log reader scans (`None` in their place).
fn read_benchmarks_but(files: &[PathBuf], folded: &BenchTables) -> Vec<Option<BenchRead>> {
    use rayon::prelude::*;
    files.par_iter().map(|p| (!folded.scans(p)).then(|| read_nccl_tests(p))).collect()
}

/// The results of [`read_benchmarks_but`] completed, in order, with what the
/// log reader found; a file it did not read to its end is read here.
fn with_folded(files: &[PathBuf], read: Vec<Option<BenchRead>>, folded: &BenchTables) -> Result<Vec<BenchFile>, commlens_ingest::IngestError> {
    files.iter().zip(read).map(|(p, r)| r.or_else(|| folded.take(p)).unwrap_or_else(|| read_nccl_tests(p))).collect()
}

/// nccl-tests outputs: a summary per run, then each run's sizes (nothing
/// when there are none). In JSON the results are returned (and printed only
/// when `alone`), so that one document holds everything.
/// Runs of nccl-tests output whose per-size rows `stats` prints without `--sizes`.
const MAX_RUNS_WITH_SIZES: usize = 4;

fn print_benchmarks(read: Vec<BenchFile>, format: Format, alone: bool, sizes: bool) -> Result<Option<Vec<BenchFile>>, Box<dyn std::error::Error>> {
    print_benchmarks_of(read, format, alone, sizes, None)
}

/// [`print_benchmarks`], the job line adding what `logged` (the NCCL lines
/// beside the tables) says: NCCL versions, hosts.
fn print_benchmarks_of(
    read: Vec<BenchFile>,
    format: Format,
    alone: bool,
    sizes: bool,
    logged: Option<Job>,
) -> Result<Option<Vec<BenchFile>>, Box<dyn std::error::Error>> {
    if read.is_empty() {
        return Ok(None);
    }
    let mut job = Job::of_benchmarks(&read);
    if let Some(l) = logged {
        job.nccl_versions = l.nccl_versions;
        if job.nodes == 0 {
            (job.nodes, job.hosts) = (l.nodes, l.hosts);
        }
    }
    match format {
        Format::Json => {
            if alone {
                let job = entry(&job)?;
                write_json_to_stdout(&[("job", &[job]), ("nccl_tests", &super::bench_json::write(read, 1))])?;
                return Ok(None);
            }
            return Ok(Some(read));
        }
        Format::Csv if alone => println!("{}", job.csv()),
        Format::Table if alone => println!("{}\n", job.line()),
        _ => {}
    }
    match format {
        Format::Json => {}
        Format::Csv | Format::Table => {
            if format == Format::Csv {
                // The table's notes do not reach CSV: the rows left out are said on stderr.
                for f in &read {
                    for (line, text) in &f.malformed {
                        eprintln!("warning: {}:{line}: not a result row: {text}", f.path);
                    }
                }
            }
            // Text: the per-size rows of a few runs, or of any number with --sizes; a
            // large output (a sweep of many runs) is summarised. CSV always has them all.
            let runs: usize = read.iter().map(|f| f.runs.len()).sum();
            let all_sizes = sizes || runs <= MAX_RUNS_WITH_SIZES || format == Format::Csv;
            for (i, t) in commlens_report::baseline::tables(&read).into_iter().enumerate() {
                if format == Format::Csv {
                    println!("# {}\n{}", t.title, t.to_csv());
                } else if i == 0 || all_sizes {
                    println!("{}", t.to_text());
                }
            }
            if !all_sizes {
                println!("({runs} runs summarised; --sizes prints each run's per-size rows, as --format csv|json do)\n");
            }
        }
    }
    Ok(None)
}

fn print_stats(
    t: &commlens_core::OpTable,
    notes: &[String],
    agg: &Aggregate,
    format: Format,
    inputs: Inputs<'_>,
    nccl_tests: Option<Vec<BenchFile>>,
) -> CmdResult {
    // The nccl-tests entry (JSON only) is written, and its tables dropped,
    // beside the report and the `inputs` entry: this all runs after the
    // parallel read, when the other cores are idle.
    let json = format == Format::Json;
    let ((stats, inputs), bench) = rayon::join(
        || {
            rayon::join(
                || -> Result<_, serde_json::Error> {
                    let report = StatsReport::build(t, agg);
                    let warnings: Vec<String> =
                        report.warnings.iter().cloned().chain(crate::load::implausible_devices(t)).chain(crate::load::several_jobs(t, notes)).collect();
                    let job = Job::of_table(t);
                    let json = if json { Some((entry(&job)?, super::stats_json::write(&report, 1)?)) } else { None };
                    Ok((report, warnings, job, json))
                },
                // The read reports (a few per file, through `Value`s).
                || json.then(|| inputs.entry()).transpose(),
            )
        },
        || nccl_tests.map(|b| super::bench_json::write(b, 1)),
    );
    let (report, warnings, job, json) = stats?;
    let inputs = inputs?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    match format {
        Format::Table => {
            println!("{}\n", job.line());
            for tab in render::stats_tables(&report) {
                println!("{}", tab.to_text());
            }
        }
        Format::Csv => print!("{}", render::stats_csv(t, agg).to_csv()),
        Format::Json => {
            let ((job, stats), inputs) = json.zip(inputs).expect("written for JSON");
            let (inputs, job, stats) = ([inputs], [job], [stats]);
            let mut doc: Vec<(&str, &[Vec<u8>])> = vec![("inputs", &inputs), ("job", &job)];
            if let Some(b) = &bench {
                doc.push(("nccl_tests", b));
            }
            doc.push(("stats", &stats));
            write_json_to_stdout(&doc)?;
        }
    }
    Ok(())
}

/// The `inputs` entry of `stats --format json`: what the trace path built, or
/// the logs' read reports (one per file, thousands for a large job).
enum Inputs<'a> {
    Value(serde_json::Value),
    Reports(&'a [commlens_ingest::nccl_log::ReadReport]),
}

impl Inputs<'_> {
    /// The entry's text one level deep (see [`entry`]).
    fn entry(&self) -> serde_json::Result<Vec<u8>> {
        match self {
            Inputs::Value(v) => entry(v),
            // Each report through a `Value`: its keys sorted.
            Inputs::Reports(r) => entry(r),
        }
    }
}

/// A top-level entry of the JSON document through a `serde_json::Value`
/// (which sorts the keys of every object), as its text one level deep.
fn entry(v: &impl serde::Serialize) -> serde_json::Result<Vec<u8>> {
    let mut t = super::json_text::Text::at(1, 256);
    t.value(&serde_json::to_value(v)?)?;
    Ok(t.buf)
}

/// The JSON document of `stats`: an object of `entries` (key, text written
/// one level deep in pieces; keys in sorted order), pretty, and a newline,
/// on stdout.
/// It used to be one `serde_json::Value`, pretty-printed into one `String`:
/// for 40,000 ranks that tree and string were gigabytes. Each entry is now
/// written apart (the long ones by hand, `bench_json`, `stats_json`) and
/// the document is their concatenation; a closed pipe (`| head`) ends
/// quietly, as `println!` does here.
fn write_json_to_stdout(entries: &[(&str, &[Vec<u8>])]) -> CmdResult {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(std::io::stdout().lock());
    let res = (|| {
        w.write_all(b"{")?;
        for (i, (key, text)) in entries.iter().enumerate() {
            w.write_all(if i == 0 { b"\n  \"" } else { b",\n  \"" })?;
            w.write_all(key.as_bytes())?;
            w.write_all(b"\": ")?;
            for piece in *text {
                w.write_all(piece)?;
            }
        }
        w.write_all(if entries.is_empty() { b"}\n" } else { b"\n}\n" })?;
        w.flush()
    })();
    match res {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => Err(format!("writing to standard output: {e}").into()),
        Ok(()) => Ok(()),
    }
}

// `Job` is report data (`commlens_report::job`); `topo` names it through here.
pub use commlens_report::job::Job;
