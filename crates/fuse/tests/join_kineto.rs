//! `fuse_traces` end to end on real data: a Kineto trace's CPU-side NCCL calls
//! become the "log" table (their kernels, GPU spans and stream ids removed),
//! the same trace supplies the kernels, and fusion must pair the ranks by
//! process id and give every call back the kernel the profiler linked to it.

use commlens_core::OpTable;
use commlens_fuse::{fuse_traces, FuseConfig};
use commlens_fuse::join::PairedBy;
use commlens_ingest::kineto::{load_kineto, to_op_table, KernelTrace};
use std::collections::HashSet;
use std::path::PathBuf;

fn kineto_files() -> Vec<PathBuf> {
    let Some(dir) = commlens_testdata::real_dir("kineto") else { return Vec::new() };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        // HTA's trace_filter fixture is sampled: its links join different kinds.
        .filter(|p| p.to_string_lossy().ends_with(".json.gz") && !p.to_string_lossy().contains("trace_filter"))
        .collect();
    files.sort();
    files
}

/// The table of CPU calls only (rows the conversion made from kernels without
/// a call of their own are dropped), without anything the kernels told us.
fn strip(t: &OpTable, trace: &KernelTrace) -> (OpTable, Vec<Vec<Option<(i64, i64, String)>>>) {
    // Call rows carry the call's time; kernel-made rows the launch's.
    let calls: HashSet<i64> = trace
        .ranks
        .iter()
        .flat_map(|r| r.cpu_ops.iter().filter(|c| c.kind.is_some()).map(|c| trace.base_time_ns + c.ts_ns))
        .collect();
    let mut s = t.clone();
    let mut truth = Vec::new();
    for ops in &mut s.per_rank {
        ops.retain(|o| o.cpu_ts_ns.is_some_and(|t| calls.contains(&t)));
        truth.push(
            ops.iter()
                .map(|o| o.gpu.map(|g| (g.start_ns, g.end_ns, o.kernel.as_ref().map_or(String::new(), |k| k.name.clone()))))
                .collect(),
        );
        ops.update_all(|_, o| {
            o.gpu = None;
            o.kernel = None;
            o.stream = None;
            o.algo = None;
            o.proto = None;
        });
    }
    (s, truth)
}

#[test]
fn fusion_gives_each_call_its_profiler_linked_kernel() {
    let files = kineto_files();
    let mut scored = 0;
    for f in &files {
        let trace: KernelTrace = load_kineto(f).unwrap();
        let (full, _) = to_op_table(std::slice::from_ref(&trace));
        let (mut table, truth) = strip(&full, &trace);
        let linked: usize = truth.iter().flatten().filter(|x| x.is_some()).count();
        let report = fuse_traces(&mut table, std::slice::from_ref(&trace), &FuseConfig::default()).unwrap();
        let name = f.file_name().unwrap().to_string_lossy();
        assert_eq!(report.ranks.len(), trace.ranks.len(), "{name}: every rank paired");
        assert!(report.ranks.iter().all(|r| r.pairing.by == PairedBy::Pid), "{name}");
        assert!(report.unpaired_trace_ranks.is_empty() && report.unpaired_devices.is_empty(), "{name}");
        let (mut right, mut attached) = (0usize, 0usize);
        for (d, ops) in table.per_rank.iter().enumerate() {
            let ops = &ops.to_vec();
            for (i, o) in ops.iter().enumerate() {
                let Some(g) = o.gpu else { continue };
                attached += 1;
                assert!(report.confidence[d][i].is_some(), "a fused op has a confidence");
                let got = (g.start_ns, g.end_ns, o.kernel.as_ref().unwrap().name.clone());
                if truth[d][i].as_ref() == Some(&got) {
                    right += 1;
                }
            }
        }
        // Every attachment is counted in the report.
        assert_eq!(attached, report.matched_logs(), "{name}");
        eprintln!("{name}: {linked} linked calls, {attached} fused, {right} as the profiler linked them");
        if linked == 0 {
            continue;
        }
        scored += 1;
        let precision = right as f64 / attached.max(1) as f64;
        let recall = right as f64 / linked as f64;
        assert!(precision >= 0.95 && recall >= 0.9, "{name}: P {precision:.3} R {recall:.3}");
    }
    if !files.is_empty() {
        assert!(scored >= 3, "at least three real traces have linked calls");
    }
}
