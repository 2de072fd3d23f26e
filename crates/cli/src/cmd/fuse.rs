//! `commlens fuse --nccl-log LOGS (--nsys DB… | --kineto JSON…) -o DIR`: joins
//! what NCCL logged with what the GPU ran (`commlens_fuse::fuse_traces`) and
//! writes the fused table (`fused.parquet`), Chrome and Perfetto traces with
//! the kernel, bandwidth, parallelism and fusion-confidence arguments, and
//! `summary.json`; prints matches, confidence and what stayed unmatched.
//!
//! Every trace keeps its host's clock, and hosts' clocks disagree (by
//! milliseconds without PTP). After the join, the fused GPU spans are put on
//! one clock (`--clock-sync`, default one offset per host, estimated from the
//! kernel ends of collective instances with `analyze::clock`); the traces' iteration ranges
//! move with their ranks so that the written timeline stays consistent.

use super::CmdResult;
use commlens_report::enrich::Enrichment;
use commlens_report::render;
use commlens_export::table::Table;
use commlens_export::TraceOptions;
use commlens_fuse::{fuse_traces, FuseConfig, FuseReport};
use commlens_ingest::inputs::{expand_inputs, load_inputs};
use commlens_ingest::kineto::{self, KernelTrace, TraceOptions as ReadTraceOptions};
use commlens_ingest::nccl_log::ReadOptions;
use commlens_ingest::nsys;
use commlens_analyze::clock::{self, ClockOptions, SyncPoint};
use commlens_core::model::DevIdx;
use commlens_core::OpTable;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Which kind of kernel trace the user gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    Nsys,
    Kineto,
}

/// How `fuse` puts the GPU spans of different hosts on one clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ClockSyncMode {
    /// One offset per host (its GPUs share the host's clock), estimated from
    /// the collective instances that span hosts (thesis eqs. 4.7–4.8).
    #[default]
    Host,
    /// One offset per rank, as the thesis writes it; it also absorbs each
    /// rank's systematic arrival skew.
    Rank,
    /// Keep each trace's own clock.
    Off,
}

/// The shift applied to one host's (or, with `Rank`, one rank's) spans.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ClockShift {
    /// Host name, or the rank label with `ClockSyncMode::Rank`.
    pub domain: String,
    pub ranks: usize,
    /// Added to every GPU timestamp of the domain.
    pub offset_ns: i64,
    /// Collective instances that constrained the estimate (summed over ranks).
    pub instances: usize,
}

/// What a fusion run produced (for `demo` and tests).
pub struct Fused {
    pub table: OpTable,
    pub report: FuseReport,
    pub traces: Vec<KernelTrace>,
    /// One entry per clock domain with an offset (empty with `Off`).
    pub clock: Vec<ClockShift>,
    /// Devices with GPU spans that got no offset (no instance tied them to the reference).
    pub unsynced: Vec<DevIdx>,
}

pub fn run(
    logs: &[PathBuf],
    kind: TraceKind,
    traces: &[PathBuf],
    out: &Path,
    clock_mode: ClockSyncMode,
    verbose: bool,
) -> CmdResult {
    let fused = fuse_inputs(logs, kind, traces, clock_mode, verbose)?;
    write_outputs(&fused, out)?;
    print_summary(&fused);
    Ok(())
}

/// Reads the logs and traces, fuses them and puts the spans on one clock.
pub fn fuse_inputs(
    logs: &[PathBuf],
    kind: TraceKind,
    traces: &[PathBuf],
    clock_mode: ClockSyncMode,
    verbose: bool,
) -> Result<Fused, Box<dyn std::error::Error>> {
    let (progress, bar) = crate::progress::for_inputs(logs);
    let loaded = load_inputs(logs, &ReadOptions { progress, ..ReadOptions::default() })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    eprint!("{}", render::read_summary(&loaded.reports, &loaded.skipped_files, verbose));
    crate::load::eprint_lines(&loaded.notes);
    if loaded.table.n_ops() == 0 {
        return Err("the NCCL logs hold no operations (was NCCL_DEBUG_SUBSYS missing COLL?): nothing to fuse".into());
    }
    let files: Vec<PathBuf> = expand_inputs(traces)?.into_iter().map(|(p, _)| p).collect();
    let opts = ReadTraceOptions::default();
    let spinner = spinner(&format!("reading {} trace file(s)", files.len()));
    let mut traces: Vec<KernelTrace> = match kind {
        TraceKind::Nsys => nsys::load_nsys_files(&files, &opts)?,
        TraceKind::Kineto => files
            .par_iter()
            .map(|p| kineto::load_kineto_with(p, &opts))
            .collect::<Result<Vec<_>, _>>()?,
    };
    eprint!("{}", render::trace_summary(&traces, verbose));
    if let Some(s) = &spinner {
        s.set_message(format!("aligning {} ranks", loaded.table.per_rank.iter().filter(|o| !o.is_empty()).count()));
    }
    let mut table = loaded.table;
    let report = fuse_traces(&mut table, &traces, &FuseConfig::default())?;
    let (clock, unsynced) = sync_clocks(&mut table, &report, &mut traces, clock_mode);
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    Ok(Fused { table, report, traces, clock, unsynced })
}

/// Estimates the clock offsets from the fused spans, shifts the spans, and
/// moves each trace's base time by the offset of the ranks paired with it
/// (their median, which is their common offset in `Host` mode).
fn sync_clocks(
    table: &mut OpTable,
    report: &FuseReport,
    traces: &mut [KernelTrace],
    mode: ClockSyncMode,
) -> (Vec<ClockShift>, Vec<DevIdx>) {
    if mode == ClockSyncMode::Off {
        return (Vec::new(), Vec::new());
    }
    let host_of = |t: &OpTable, d: DevIdx| t.processes[t.devices[d.ix()].proc.ix()].host.clone();
    // Kernel ends: a member that arrives early waits inside its kernel, so
    // starts (and midpoints) carry the arrival skew, while the members of a
    // collective finish within microseconds of each other.
    let per_rank = clock::synchronize(table, &ClockOptions { point: SyncPoint::End, ..ClockOptions::default() });
    let sync = match mode {
        ClockSyncMode::Host => per_rank.per_domain(|d| Some(host_of(table, d))),
        _ => per_rank,
    };
    let unsynced: Vec<DevIdx> = (0..table.devices.len())
        .map(|d| DevIdx(d as u32))
        .filter(|&d| sync.offset_ns(d).is_none() && table.per_rank[d.ix()].iter().any(|op| op.gpu.is_some()))
        .collect();
    let mut shifts: Vec<ClockShift> = Vec::new();
    for r in &sync.ranks {
        let domain = if mode == ClockSyncMode::Host { host_of(table, r.dev) } else { table.device_label(r.dev) };
        match shifts.iter_mut().find(|s| s.domain == domain) {
            Some(s) => {
                s.ranks += 1;
                s.instances += r.instances;
            }
            None => shifts.push(ClockShift {
                domain,
                ranks: 1,
                offset_ns: sync.offset_ns(r.dev).unwrap_or(0),
                instances: r.instances,
            }),
        }
    }
    sync.apply_in_place(table);
    for (i, t) in traces.iter_mut().enumerate() {
        let mut offs: Vec<i64> =
            report.ranks.iter().filter(|x| x.pairing.trace == i).filter_map(|x| sync.offset_ns(x.pairing.dev)).collect();
        if !offs.is_empty() {
            offs.sort_unstable();
            t.base_time_ns += offs[offs.len() / 2];
        }
    }
    (shifts, unsynced)
}

fn spinner(msg: &str) -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let s = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    s.set_style(ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("static template"));
    s.enable_steady_tick(std::time::Duration::from_millis(120));
    s.set_message(msg.to_string());
    Some(s)
}

/// Writes `fused.parquet`, `trace.json`, `trace.pftrace` and `summary.json` into `out`.
pub fn write_outputs(f: &Fused, out: &Path) -> CmdResult {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let enrich = Enrichment::new(&f.table).with_confidence(&f.report.confidence);
    let opts = TraceOptions { ranges: commlens_report::enrich::trace_ranges(&f.traces), ..TraceOptions::default() };
    let json = out.join("trace.json");
    let pf = out.join("trace.pftrace");
    crate::outputs::write_traces(&f.table, &enrich, &opts, &json, &pf)?;
    let pq = out.join("fused.parquet");
    crate::parquet_out::write(&f.table, &enrich, true, &pq)?;
    let summary = out.join("summary.json");
    let text = serde_json::to_string_pretty(&summary_json(f))?;
    crate::outputs::write_file_atomic(&summary, |w| std::io::Write::write_all(w, text.as_bytes()))?;
    println!("wrote {}, {}, {} and {}", pq.display(), json.display(), pf.display(), summary.display());
    Ok(())
}

fn summary_json(f: &Fused) -> serde_json::Value {
    let r = &f.report;
    let ranks: Vec<serde_json::Value> = r
        .ranks
        .iter()
        .map(|x| {
            serde_json::json!({
                "rank": x.label,
                "paired_by": x.pairing.by.to_string(),
                "trace": f.traces[x.pairing.trace].path,
                "log_records": x.n_logs,
                "kernels": x.n_kernels,
                "matched_records": x.matched_logs,
                "matched_kernels": x.matched_kernels,
                "batched_2to1": x.batched,
                "fused_sendrecv": x.fused_p2p,
                "mean_confidence": x.mean_confidence,
                "low_confidence_matches": x.low_confidence,
                "unmatched_records": x.unmatched_logs.len(),
                "unmatched_kernels": x.unmatched_kernels.len(),
                "unmatched_kernel_samples": x.unmatched_kernels.iter().take(20).map(|k| serde_json::json!({
                    "name": k.name, "stream": k.stream, "start_ns": k.start_ns, "end_ns": k.end_ns,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({
        "log_records": r.total_logs(),
        "matched_records": r.matched_logs(),
        "kernels": r.total_kernels(),
        "matched_kernels": r.matched_kernels(),
        "ranks": ranks,
        "unpaired_log_ranks": r.unpaired_devices.iter().map(|d| f.table.device_label(*d)).collect::<Vec<_>>(),
        "unpaired_trace_ranks": r.unpaired_trace_ranks.iter().map(|x| x.2.clone()).collect::<Vec<_>>(),
        "clock_offsets": f.clock,
        "unsynchronised_ranks": f.unsynced.iter().map(|d| f.table.device_label(*d)).collect::<Vec<_>>(),
    })
}

/// The per-rank fusion table.
pub fn summary_table(f: &Fused) -> Table {
    let mut t = Table::new(
        "Fusion (NCCL log records ↔ GPU kernels)",
        &["rank", "paired by", "records", "kernels", "matched rec", "matched kern", "2:1", "SendRecv", "mean conf", "conf<0.5", "unmatched rec", "unmatched kern"],
    );
    for x in &f.report.ranks {
        t.row(vec![
            x.label.clone(),
            x.pairing.by.to_string(),
            x.n_logs.to_string(),
            x.n_kernels.to_string(),
            x.matched_logs.to_string(),
            x.matched_kernels.to_string(),
            x.batched.to_string(),
            x.fused_p2p.to_string(),
            format!("{:.3}", x.mean_confidence),
            x.low_confidence.to_string(),
            x.unmatched_logs.len().to_string(),
            x.unmatched_kernels.len().to_string(),
        ]);
    }
    let r = &f.report;
    let pct = |a: usize, b: usize| if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 };
    t.note(format!(
        "{} of {} log records ({:.1}%) got a kernel; {} of {} kernels ({:.1}%) explain a record",
        r.matched_logs(),
        r.total_logs(),
        pct(r.matched_logs(), r.total_logs()),
        r.matched_kernels(),
        r.total_kernels(),
        pct(r.matched_kernels(), r.total_kernels())
    ));
    let kernels_matched: usize = r.ranks.iter().map(|x| x.matched_kernels).sum();
    let mean_conf =
        r.ranks.iter().map(|x| x.mean_confidence * x.matched_kernels as f64).sum::<f64>() / kernels_matched.max(1) as f64;
    if r.total_logs() > 0 && r.matched_logs() * 2 < r.total_logs() {
        t.note(format!(
            "warning: only {:.0}% of the records found a kernel: are the logs and the traces from the same run and the same time window?",
            pct(r.matched_logs(), r.total_logs())
        ));
    } else if kernels_matched > 0 && mean_conf < 0.5 {
        t.note(format!(
            "warning: the matches are doubtful (mean confidence {mean_conf:.2}): are the logs and the traces from the same run?"
        ));
    }
    for d in &r.unpaired_devices {
        t.note(format!("no trace for log rank {}", f.table.device_label(*d)));
    }
    for (_, _, l) in &r.unpaired_trace_ranks {
        t.note(format!("no log rank for trace {l}"));
    }
    if f.clock.iter().any(|c| c.offset_ns != 0) {
        let shifts: Vec<String> = f
            .clock
            .iter()
            .map(|c| format!("{} {:+.3} ms ({} ranks, {} instances)", c.domain, c.offset_ns as f64 / 1e6, c.ranks, c.instances))
            .collect();
        t.note(format!("clocks put on one timeline (spans shifted): {}", shifts.join("; ")));
    } else if f.clock.len() > 1 {
        t.note("clocks: the hosts already agree (no shift)".to_string());
    }
    for d in &f.unsynced {
        t.note(format!("clock of {} not synchronised (no collective ties it to the others)", f.table.device_label(*d)));
    }
    t
}

pub fn print_summary(f: &Fused) {
    print!("{}", summary_table(f).to_text());
}
