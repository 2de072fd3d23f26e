//! The strategy recognizer on generated runs of every parallelism variant (written by
//! commlens-synth, read back through commlens-ingest, so only what the logs say is used) and on
//! real nccl-tests logs, which must come out as a benchmark, never as a training strategy.

use commlens_analyze::signature::{recognize, Signature, Strategy};
use commlens_core::OpTable;
use commlens_synth::{generate, write_to_dir, MoeDispatcher, RunConfig, Truth};
use std::path::PathBuf;

fn load(cfg: &RunConfig, tag: &str) -> (OpTable, Truth) {
    let run = generate(cfg);
    let dir = std::env::temp_dir().join(format!("commlens-signature-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = write_to_dir(&run, &dir).unwrap();
    let loaded = commlens_ingest::inputs::load_inputs(&files, &Default::default()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (loaded.table, run.truth)
}

/// Every communicator of the truth is recognized as its true strategy; returns the signatures.
fn check(cfg: &RunConfig, tag: &str) -> Vec<Signature> {
    let (t, truth) = load(cfg, tag);
    let sigs = recognize(&t);
    assert_eq!(sigs.len(), truth.communicators.len(), "{tag}");
    for tc in &truth.communicators {
        let l = t.logical.iter().position(|l| l.comm_id == Some(tc.comm_id)).expect("logical comm of truth");
        let s = &sigs[l];
        println!("{tag}: {:<6} truth {:<12} -> {:<12} {:.2} | {}", tc.name, tc.strategy, s.strategy, s.confidence, s.evidence.join(" | "));
        assert_eq!(s.strategy.label(), tc.strategy, "{tag}: {} recognized as {}: {:?}", tc.name, s.strategy, s.evidence);
        assert!(s.confidence >= 0.5 && s.confidence <= 1.0, "{tag}: {} confidence {}", tc.name, s.confidence);
        assert!(!s.evidence.is_empty());
    }
    sigs
}

fn moe(dispatcher: MoeDispatcher) -> RunConfig {
    RunConfig { ep: 4, num_experts: 8, moe_layer_freq: 2, moe_dispatcher: dispatcher, iterations: 1, ..RunConfig::megatron(1, 1, 4) }
}

#[test]
fn plain_megatron_runs() {
    check(&RunConfig::default(), "tp2pp2");
    check(&RunConfig { gpus_per_node: 4, iterations: 1, ..RunConfig::megatron(2, 2, 2) }, "tp2pp2dp2");
    check(&RunConfig::megatron(1, 1, 4), "dp4");
    check(&RunConfig::megatron(1, 4, 1), "pp4");
}

#[test]
fn data_parallel_with_distributed_optimizer() {
    let sigs = check(&RunConfig { distributed_optimizer: true, ..RunConfig::megatron(1, 1, 4) }, "dp4-zero1");
    assert!(sigs.iter().any(|s| s.strategy == Strategy::DpZero1));
    check(&RunConfig { distributed_optimizer: true, iterations: 1, ..RunConfig::megatron(2, 1, 2) }, "tp2dp2-zero1");
}

#[test]
fn tensor_parallel_with_sequence_parallelism() {
    let sigs = check(&RunConfig { sequence_parallel: true, ..RunConfig::megatron(4, 1, 1) }, "tp4-sp");
    assert!(sigs.iter().any(|s| s.strategy == Strategy::TpSp));
    check(&RunConfig { sequence_parallel: true, ..RunConfig::default() }, "tp2pp2-sp");
    // Without SP the same layout is plain TP.
    let plain = check(&RunConfig::megatron(4, 1, 1), "tp4");
    assert!(plain.iter().any(|s| s.strategy == Strategy::Tp));
}

#[test]
fn pipeline_with_virtual_stages() {
    let base = RunConfig { layers: 8, num_microbatches: 8, iterations: 1, ..RunConfig::megatron(1, 4, 1) };
    let sigs = check(&RunConfig { virtual_stages: 2, ..base.clone() }, "pp4-vpp2");
    let vpp = sigs.iter().find(|s| s.strategy == Strategy::PpVirtual).expect("a virtual-stage pipeline");
    assert!(vpp.evidence.iter().any(|e| e.contains("wraps around")), "{:?}", vpp.evidence);
    check(&base, "pp4");
    // Two stages: no wrap-around to see, the two-Send groups decide.
    check(&RunConfig { virtual_stages: 2, num_microbatches: 4, iterations: 1, ..RunConfig::megatron(1, 2, 1) }, "pp2-vpp2");
}

#[test]
fn expert_parallel_dispatchers() {
    let a2a = check(&moe(MoeDispatcher::AllToAll), "ep4-a2a");
    assert!(a2a.iter().any(|s| s.strategy == Strategy::EpAllToAll));
    let ag = check(&moe(MoeDispatcher::AllGather), "ep4-allgather");
    assert!(ag.iter().any(|s| s.strategy == Strategy::EpAllGather));
    // EP groups carved from DP with TP: EP 2 of DP 4, expert-DP groups of 2.
    check(&RunConfig { ep: 2, num_experts: 4, iterations: 1, ..RunConfig::megatron(2, 1, 4) }, "tp2dp4-ep2");
}

#[test]
fn all_variants_at_once() {
    let cfg = RunConfig::all_variants();
    check(&cfg, "everything");
}

fn real_logs() -> Option<PathBuf> {
    commlens_testdata::real_dir("nccl-logs")
}

#[test]
fn nccl_tests_logs_are_benchmarks() {
    let Some(dir) = real_logs() else { return };
    let mut seen = 0;
    for name in [
        // one rank, AllReduce sweep
        "ssbandjl-nccl-tests-all_ref_log-V100-2.26.6-modified.log",
        // 4 ranks on 2 nodes, AllGather sweep, plus a handle rebuilt from a broken line
        "ssbandjl-nccl-tests-run_with_mpi_2node_4gpu_trace-4xV100-2node-IB-2.26.6-modified.log",
        // 4 ranks, Send/Recv test (an all-to-all pattern, yet no training job)
        "sugarlxn-nccl_test-nccl_trace-4xRTX4090-PCIe-2.28.9.log",
        // one process driving 2 GPUs
        "timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log",
    ] {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        let t = commlens_ingest::inputs::load_inputs(&[path], &Default::default()).unwrap().table;
        let sigs = recognize(&t);
        for s in &sigs {
            println!("{name}: {} -> {} {:.2} | {}", s.name, s.strategy, s.confidence, s.evidence.join(" | "));
        }
        let ops = |i: usize| t.ops().filter(|o| t.comms[o.comm.ix()].logical.map(|l| l.ix()) == Some(i)).count();
        let busiest = (0..sigs.len()).max_by_key(|&i| ops(i)).expect("a communicator");
        assert!(ops(busiest) > 100, "{name}");
        assert_eq!(sigs[busiest].strategy, Strategy::Benchmark, "{name}: {:?}", sigs[busiest].evidence);
        assert!(sigs[busiest].confidence >= 0.7);
        assert!(sigs.iter().all(|s| !s.strategy.is_training()), "{name}");
        seen += 1;
    }
    assert!(seen > 0, "no real nccl-tests log found in {}", dir.display());
}
