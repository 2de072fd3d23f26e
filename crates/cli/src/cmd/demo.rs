//! `commlens demo`: the main job on the built-in example. Generates a 4-rank
//! Megatron-like run (TP=2, PP=2; `commlens-synth`) as NCCL 2.27.7 debug logs
//! plus the matching Nsight Systems SQLite exports and Kineto traces (with
//! compute kernels, SendRecv fusion and iteration ranges), then runs `stats`
//! and `topo` on the logs, fuses logs and kernels (`fuse`, scored against the
//! generator's known mapping), and writes the fused traces and the HTML report.

use super::CmdResult;
use crate::Format;
use commlens_synth::{generate_traces, RunConfig, TraceConfig};
use std::path::{Path, PathBuf};

pub fn run(out: Option<PathBuf>) -> CmdResult {
    let cfg = RunConfig::default();
    let tcfg = TraceConfig::default();
    let dir = out.unwrap_or_else(|| std::env::temp_dir().join(format!("commlens-demo-{}", std::process::id())));
    claim_dir(&dir)?;
    let g = generate_traces(&cfg, &tcfg)?;
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    let logs_dir = dir.join("logs");
    let logs = g.write_logs(&logs_dir).map_err(io)?;
    let nsys = g.write_nsys(&dir.join("nsys"), &tcfg).map_err(io)?;
    let kineto = g.write_kineto(&dir.join("kineto"), true).map_err(io)?;
    let lines: usize = g.logs.iter().map(|f| f.contents.lines().count()).sum();
    println!(
        "commlens demo: a Megatron-like training run, TP={} PP={} DP={} on {} GPUs ({} layers, hidden {}, \
         sequence {}, {} micro-batches, {} iterations), captured three ways:",
        cfg.tp,
        cfg.pp,
        cfg.dp,
        cfg.world(),
        cfg.layers,
        cfg.hidden,
        cfg.seq_len,
        cfg.num_microbatches,
        cfg.iterations,
    );
    println!("  NCCL {} debug logs: {} ({} files, {lines} lines)", cfg.nccl_version, logs_dir.display(), logs.len());
    println!("  Nsight Systems SQLite exports: {} ({} files)", dir.join("nsys").display(), nsys.len());
    println!("  PyTorch profiler traces: {} ({} files)\n", dir.join("kineto").display(), kineto.len());

    println!("$ commlens stats {}\n", logs_dir.display());
    super::stats::run(std::slice::from_ref(&logs_dir), Format::Table, false, false)?;
    println!("$ commlens topo {}\n", logs_dir.display());
    super::topo::run(std::slice::from_ref(&logs_dir), Format::Table, false)?;

    let fused_dir = dir.join("fused");
    println!("$ commlens fuse --nccl-log {} --nsys {} -o {}\n", logs_dir.display(), dir.join("nsys").display(), fused_dir.display());
    let f = super::fuse::fuse_inputs(std::slice::from_ref(&logs_dir), super::fuse::TraceKind::Nsys, &nsys, super::fuse::ClockSyncMode::Host, false)?;
    super::fuse::write_outputs(&f, &fused_dir)?;
    super::fuse::print_summary(&f);
    // The generator knows which kernel runs which log record: score the fusion.
    let truth = g.truth.kernel_of_record();
    let (mut right, mut fused) = (0, 0);
    for (d, ops) in f.table.per_rank.iter().enumerate() {
        let rank = f.table.devices[d].global_rank.map(|r| r as usize);
        for (i, op) in ops.iter().enumerate() {
            if let (Some(k), Some(r)) = (&op.kernel, rank) {
                fused += 1;
                right += usize::from(truth.get(&(r, i)) == Some(&k.correlation_id));
            }
        }
    }
    println!(
        "Against the generator's known mapping: {right} of {fused} fused records got their own kernel \
         (precision {:.3}, recall {:.3}).\n",
        right as f64 / fused.max(1) as f64,
        right as f64 / truth.len().max(1) as f64
    );

    let html = dir.join("report.html");
    let conf = dir.join("model.conf");
    std::fs::write(&conf, include_str!("../../../../examples/demo-model.conf")).map_err(io)?;
    println!("$ commlens report {} --model {} -o {}\n", fused_dir.display(), conf.display(), html.display());
    let r = super::report::build(&f.table, &f.traces, &[logs_dir.display().to_string()], Some(&conf), &[], Some("commlens demo: fused NCCL logs and Nsight Systems kernels"))?;
    super::report::write_report(&r, &html)?;
    println!("wrote {}", html.display());
    println!(
        "\nEverything stays in {}: open fused/trace.pftrace in https://ui.perfetto.dev, report.html in a browser.",
        dir.display()
    );
    Ok(())
}

/// Marks the folder (`.commlens-demo`) as the demo's. The demo writes files of
/// fixed names, so it only writes into a new or empty folder or one an
/// earlier demo marked: it never overwrites files of the user's.
fn claim_dir(dir: &Path) -> CmdResult {
    let marker = dir.join(".commlens-demo");
    if dir.exists() && !marker.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if entries.next().is_some() {
            return Err(format!(
                "refusing to write the demo into {}: the folder is not empty and no earlier demo wrote it, so its files could be overwritten; name a new or empty folder",
                dir.display()
            )
            .into());
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(&marker, "written by commlens demo; it may overwrite the files it wrote here\n")
        .map_err(|e| format!("{}: {e}", marker.display()))?;
    Ok(())
}
