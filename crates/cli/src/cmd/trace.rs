//! `commlens trace INPUTS -o DIR`: writes the table of any input kind as a
//! Chrome trace (`trace.json`) and a Perfetto trace (`trace.pftrace`): one
//! process per rank, one track per CUDA stream, the operation's metadata as
//! slice arguments, with bandwidth, efficiency and the communicator's
//! parallelism class added, and the collective model's expectation on the
//! run's cluster (`expected_us`, `expected_busbw_gb_s`, and
//! `efficiency_vs_model` for timed operations).

use super::CmdResult;
use commlens_report::enrich::Enrichment;
use commlens_export::TraceOptions;
use commlens_ingest::nccl_log::ReadOptions;
use std::path::{Path, PathBuf};

pub fn run(inputs: &[PathBuf], out: &Path) -> CmdResult {
    let mut loaded = crate::load::load(inputs, &ReadOptions { samples: false, ..ReadOptions::default() })?;
    crate::load::drop_read_state(&mut loaded);
    let t = &loaded.table;
    if t.n_ops() == 0 {
        return Err("no operations in the inputs: nothing to draw".into());
    }
    if !t.per_rank.iter().flatten().any(|op| op.gpu.is_some() || op.cpu_ts_ns.is_some()) {
        return Err(untimed_error(t.n_ops()).into());
    }
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let opts = TraceOptions::default();
    // Bandwidth, efficiency, parallelism class and the model's expectation
    // as slice arguments.
    let enrich = Enrichment::new(t);
    let cluster = commlens_report::expected::run_cluster(inputs, t);
    let expected = commlens_report::expected::Expected::compute(t, cluster, enrich.bandwidth());
    let enrich = enrich.with_expected(&expected);
    let json = out.join("trace.json");
    let pf = out.join("trace.pftrace");
    let s = crate::outputs::write_traces(t, &enrich, &opts, &json, &pf)?;
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
    let modelled = expected.all().count();
    let vs: Vec<f64> = expected.all().filter_map(|x| x.efficiency).collect();
    println!(
        "collective model on cluster '{}': expected time and busbw for {modelled} of {} operations, efficiency against it for {} timed ones",
        expected.cluster.name,
        t.n_ops(),
        vs.len()
    );
    println!("open them in https://ui.perfetto.dev (or chrome://tracing for the JSON)");
    Ok(())
}

/// Why a table whose operations carry no time at all cannot be drawn, and
/// how to capture one that can.
fn untimed_error(n_ops: usize) -> String {
    format!(
        "none of the {n_ops} operations has a time, so there is nothing to place on a timeline: \
NCCL_DEBUG=INFO logs carry timestamps only from NCCL 2.26 and with NCCL_DEBUG_TIMESTAMP_LEVELS=INFO (or ALL) set, \
and never GPU times. To get a timed trace, fuse the logs with kernel times \
(`commlens fuse --nccl-log LOGS --nsys EXPORTS` from `nsys profile` + `nsys export --type sqlite`, \
or `--kineto TRACES` from the PyTorch profiler), or record with commlens's profiler plugin \
(NCCL_PROFILER_PLUGIN=libcommlens_plugin.so, see crates/plugin/README.md) and trace its output"
    )
}
