//! `commlens trace INPUTS -o DIR`: writes the table of any input kind as a
//! Chrome trace (`trace.json`) and a Perfetto trace (`trace.pftrace`): one
//! process per rank, one track per CUDA stream, the operation's metadata as
//! slice arguments, with bandwidth, efficiency and the communicator's
//! parallelism class added.

use super::CmdResult;
use crate::enrich::Enrichment;
use commlens_export::{chrome, perfetto, TraceOptions};
use commlens_ingest::nccl_log::ReadOptions;
use std::path::{Path, PathBuf};

pub fn run(inputs: &[PathBuf], out: &Path) -> CmdResult {
    let loaded = crate::load::load(inputs, &ReadOptions::default())?;
    let t = &loaded.table;
    if t.n_ops() == 0 {
        return Err("no operations in the inputs: nothing to draw".into());
    }
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let opts = TraceOptions::default();
    // Bandwidth, efficiency and parallelism class as slice arguments.
    let enrich = Enrichment::new(t);
    let json = out.join("trace.json");
    let pf = out.join("trace.pftrace");
    let s = chrome::write_chrome_trace_file(t, &enrich, &opts, &json).map_err(|e| format!("{}: {e}", json.display()))?;
    perfetto::write_perfetto_trace_file(t, &enrich, &opts, &pf).map_err(|e| format!("{}: {e}", pf.display()))?;
    println!(
        "wrote {} and {}: {} ranks, {} tracks ({} for overlapping operations), {} slices with GPU time, {} CPU-only instants, {} untimed",
        json.display(),
        pf.display(),
        s.processes,
        s.tracks,
        s.overflow_tracks,
        s.slices,
        s.instants,
        s.untimed_ops
    );
    println!("open them in https://ui.perfetto.dev (or chrome://tracing for the JSON)");
    Ok(())
}
