//! `fuse_traces` end to end on generated captures with known mapping: logs
//! read by the NCCL log reader, kernels by the nsys and Kineto readers, ranks
//! paired by process, and every fused operation scored against the
//! generator's truth (which kernel executes which log record), with SendRecv
//! fusion, 2:1 batching and drops on both sides.

use commlens_core::OpTable;
use commlens_fuse::{fuse_traces, FuseConfig};
use commlens_ingest::inputs::load_inputs;
use commlens_ingest::kineto::{load_kineto, KernelTrace};
use commlens_ingest::nccl_log::ReadOptions;
use commlens_ingest::nsys::load_nsys_files;
use commlens_ingest::kineto::TraceOptions;
use commlens_synth::{generate_traces, GeneratedTraces, RunConfig, TraceConfig};
use std::path::{Path, PathBuf};

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-join-synth-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// (precision, recall) of the table's kernels against the truth, per record.
fn score(t: &OpTable, g: &GeneratedTraces) -> (f64, f64, usize) {
    // Truth: (rank, index in the written log) → correlation id of its kernel.
    let truth = g.truth.kernel_of_record();
    let (mut right, mut fused) = (0usize, 0usize);
    for (d, ops) in t.per_rank.iter().enumerate() {
        let ops = &ops.to_vec();
        let Some(rank) = t.devices[d].global_rank else { continue };
        for (i, op) in ops.iter().enumerate() {
            let Some(k) = &op.kernel else { continue };
            fused += 1;
            if truth.get(&(rank as usize, i)) == Some(&k.correlation_id) {
                right += 1;
            }
        }
    }
    let p = right as f64 / fused.max(1) as f64;
    let r = right as f64 / truth.len().max(1) as f64;
    (p, r, truth.len())
}

fn run(tag: &str, cfg: &RunConfig, tcfg: &TraceConfig, kineto: bool) -> (f64, f64) {
    let g = generate_traces(cfg, tcfg).unwrap();
    let dir = tmp(tag);
    let logs = g.write_logs(&dir.join("logs")).unwrap();
    let traces: Vec<KernelTrace> = if kineto {
        g.write_kineto(&dir.join("kineto"), true).unwrap().iter().map(|p| load_kineto(p).unwrap()).collect()
    } else {
        let files = g.write_nsys(&dir.join("nsys"), tcfg).unwrap();
        load_nsys_files(&files, &TraceOptions::default()).unwrap()
    };
    let mut t = load_inputs(&logs, &ReadOptions::default()).unwrap().table;
    let report = fuse_traces(&mut t, &traces, &FuseConfig::default()).unwrap();
    assert!(report.unpaired_devices.is_empty() && report.unpaired_trace_ranks.is_empty(), "{tag}: all ranks paired");
    assert_eq!(report.ranks.len(), cfg.world(), "{tag}");
    let kernels: usize = g.truth.kernels.iter().map(Vec::len).sum();
    assert_eq!(report.total_kernels(), kernels, "{tag}: every NCCL kernel reached the aligner");
    // The generated kernels are physically plausible: on a clean capture no
    // fused operation beats its communicator's slowest link. (With drops, a
    // few records take a neighbour's kernel; precision below says how many.)
    let bw = commlens_analyze::bandwidth::analyze(&t, &Default::default());
    assert!(bw.ops.len() >= report.matched_logs() / 2, "{tag}: most fused ops have a bandwidth");
    let clean = tcfg.drop_kernels == 0.0 && tcfg.drop_log_ops == 0.0;
    for o in bw.ops.iter().filter(|_| clean) {
        assert!(o.m.efficiency.is_none_or(|e| e <= 1.0), "{tag}: {:?} {} B at efficiency {:?}", o.kind, o.bytes, o.m.efficiency);
    }
    let (p, r, n) = score(&t, &g);
    eprintln!(
        "{tag}: {n} records with a kernel in the truth; fused {} of {} records; P {p:.4} R {r:.4}; batched {} fused SendRecv {}",
        report.matched_logs(),
        report.total_logs(),
        report.ranks.iter().map(|x| x.batched).sum::<usize>(),
        report.ranks.iter().map(|x| x.fused_p2p).sum::<usize>()
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _: &Path = &dir;
    (p, r)
}

#[test]
fn clean_capture_fuses_exactly() {
    for kineto in [false, true] {
        let tag = if kineto { "clean-kineto" } else { "clean-nsys" };
        let (p, r) = run(tag, &RunConfig::default(), &TraceConfig::default(), kineto);
        assert!(p >= 0.999 && r >= 0.999, "{tag}: P {p} R {r}");
    }
}

#[test]
fn batching_and_drops_on_a_bigger_run() {
    let cfg = RunConfig { dp: 2, gpus_per_node: 8, ..RunConfig::default() };
    let tcfg = TraceConfig { batching: true, drop_kernels: 0.1, drop_log_ops: 0.1, ..TraceConfig::default() };
    let (p, r) = run("batched-drops", &cfg, &tcfg, false);
    // Drops leave records without kernels and kernels without records; what
    // is fused must still be right.
    assert!(p >= 0.97 && r >= 0.95, "P {p} R {r}");
}
