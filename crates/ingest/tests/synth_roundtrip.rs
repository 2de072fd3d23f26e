//! The generator's ground truth against the reader: exact operation counts
//! and bytes per (rank, communicator, kind), communicator grouping, global
//! ranks, and recovery of lines broken by interleaved writers.

use commlens_core::OpKind;
use commlens_ingest::inputs::load_inputs;
use commlens_ingest::nccl_log::{load_path, ReadOptions};
use commlens_synth::{generate, write_to_dir, MoeDispatcher, RunConfig, Truth};
use std::collections::HashMap;
use std::path::PathBuf;

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn check_run(cfg: &RunConfig, tag: &str) -> Truth {
    let run = generate(cfg);
    let dir = tmpdir(tag);
    let files = write_to_dir(&run, &dir).unwrap();
    let per_process: Vec<PathBuf> = files.into_iter().filter(|f| !f.ends_with("combined.log")).collect();
    let loaded = load_inputs(&per_process, &ReadOptions::default()).unwrap();
    let t = &loaded.table;
    let truth = &run.truth;
    assert_eq!(t.devices.len(), truth.world_size);

    // Global ranks come from the world communicator's init lines.
    for r in &truth.ranks {
        let d = t
            .devices
            .iter()
            .find(|d| t.processes[d.proc.ix()].pid == r.pid && t.processes[d.proc.ix()].host == r.host)
            .unwrap_or_else(|| panic!("rank {} missing", r.rank));
        assert_eq!(d.global_rank, Some(r.rank as u32), "rank of pid {}", r.pid);
        assert_eq!(d.cuda_dev, Some(r.cuda_dev as u32));
    }

    // Logical communicators: same members, in comm-rank order.
    let name_of: HashMap<u64, &str> = truth.communicators.iter().map(|c| (c.comm_id, c.name.as_str())).collect();
    assert_eq!(t.logical.len(), truth.communicators.len());
    for l in &t.logical {
        let name = name_of[&l.comm_id.expect("generated logs carry commIds")];
        let want = &truth.comm(name).unwrap().members;
        let got: Vec<usize> = l.members.iter().map(|m| t.global_rank_of(*m).unwrap() as usize).collect();
        assert_eq!(&got, want, "members of {name}");
    }

    // Operations and bytes per (rank, communicator, kind).
    let mut got: HashMap<(usize, &str, OpKind), (usize, u64)> = HashMap::new();
    for op in t.ops() {
        let rank = t.global_rank_of(op.comm).unwrap() as usize;
        let l = t.comms[op.comm.ix()].logical.unwrap();
        let name = name_of[&t.logical[l.ix()].comm_id.unwrap()];
        let e = got.entry((rank, name, op.kind)).or_default();
        e.0 += 1;
        e.1 += op.bytes;
    }
    for o in &truth.ops {
        let kind = OpKind::from_name(o.op.as_bytes()).unwrap();
        assert_eq!(got.get(&(o.rank, o.comm.as_str(), kind)), Some(&(o.lines, o.bytes)), "{o:?}");
    }
    assert_eq!(got.values().map(|v| v.0).sum::<usize>(), truth.total_op_lines());
    // Every collective got its algorithm from the tuning line that followed it.
    let tuned: usize = loaded.reports.iter().map(|r| r.tuning_lines as usize).sum();
    assert_eq!(tuned, truth.tuning_lines.iter().sum::<usize>());
    assert!(t.ops().filter(|o| !o.kind.is_p2p()).all(|o| o.algo.is_some() && o.proto.is_some()));
    let _ = std::fs::remove_dir_all(&dir);
    run.truth
}

/// Ops of `kind` in the truth of every communicator whose strategy is `strategy`.
fn truth_lines(truth: &Truth, strategy: &str, op: &str) -> usize {
    let names: Vec<&str> =
        truth.communicators.iter().filter(|c| c.strategy == strategy).map(|c| c.name.as_str()).collect();
    truth.ops.iter().filter(|o| o.op == op && names.contains(&o.comm.as_str())).map(|o| o.lines).sum()
}

#[test]
fn default_tp2_pp2_run_round_trips() {
    check_run(&RunConfig::default(), "default");
}

#[test]
fn two_node_tp2_pp2_dp2_run_round_trips() {
    let mut cfg = RunConfig::megatron(2, 2, 2);
    cfg.gpus_per_node = 4;
    cfg.layers = 2;
    cfg.iterations = 1;
    check_run(&cfg, "dp2");
}

#[test]
fn older_nccl_format_round_trips() {
    let mut cfg = RunConfig::default();
    cfg.nccl_version = "2.20.5".into();
    cfg.timestamps = false;
    check_run(&cfg, "v2205");
}

#[test]
fn sequence_parallel_run_round_trips() {
    let cfg = RunConfig { sequence_parallel: true, ..RunConfig::default() };
    let truth = check_run(&cfg, "sp");
    // Per layer and microbatch 6 AllGather + 4 ReduceScatter; no bf16 AllReduce remains on TP.
    let layers = (cfg.layers_per_stage() * cfg.num_microbatches * cfg.iterations) as f64;
    let ag = truth_lines(&truth, "tp-sp", "AllGather") as f64;
    let rs = truth_lines(&truth, "tp-sp", "ReduceScatter") as f64;
    assert!(ag >= 6.0 * layers * 4.0 && rs >= 4.0 * layers * 4.0, "{ag} {rs}");
    assert!(truth.communicators.iter().any(|c| c.kind == "TP" && c.strategy == "tp-sp"));
}

#[test]
fn distributed_optimizer_run_round_trips() {
    let cfg = RunConfig { distributed_optimizer: true, iterations: 1, ..RunConfig::megatron(2, 1, 2) };
    let truth = check_run(&cfg, "zero1");
    let rs = truth_lines(&truth, "dp-zero1", "ReduceScatter");
    assert!(rs > 0);
    assert_eq!(rs, truth_lines(&truth, "dp-zero1", "AllGather"));
    assert_eq!(truth_lines(&truth, "dp-zero1", "AllReduce"), 0);
}

#[test]
fn virtual_pipeline_run_round_trips() {
    let cfg = RunConfig { virtual_stages: 2, layers: 8, num_microbatches: 8, iterations: 1, ..RunConfig::megatron(1, 4, 1) };
    let truth = check_run(&cfg, "vpp");
    assert!(truth.op(3, "PP0", "Send").is_some());
    let plain = generate(&RunConfig { virtual_stages: 1, ..cfg.clone() }).truth;
    // Interleaving multiplies the stage-to-stage transfers (thesis §5.3.2).
    assert!(truth_lines(&truth, "pp-vpp", "Send") >= 2 * truth_lines(&plain, "pp", "Send"));
}

fn moe(dispatcher: MoeDispatcher) -> RunConfig {
    RunConfig {
        ep: 4,
        num_experts: 8,
        moe_layer_freq: 2,
        moe_dispatcher: dispatcher,
        iterations: 1,
        ..RunConfig::megatron(1, 1, 4)
    }
}

#[test]
fn expert_parallel_all_to_all_run_round_trips() {
    let truth = check_run(&moe(MoeDispatcher::AllToAll), "ep-a2a");
    assert!(truth_lines(&truth, "ep-a2a", "Send") > 0);
    assert_eq!(truth_lines(&truth, "ep-a2a", "Send"), truth_lines(&truth, "ep-a2a", "Recv"));
}

#[test]
fn expert_parallel_allgather_run_round_trips() {
    let truth = check_run(&moe(MoeDispatcher::AllGather), "ep-ag");
    // 4 AllGather + 3 ReduceScatter per MoE layer and microbatch.
    assert_eq!(3 * truth_lines(&truth, "ep-allgather", "AllGather"), 4 * truth_lines(&truth, "ep-allgather", "ReduceScatter"));
}

#[test]
fn all_variants_together_round_trip() {
    // 16 ranks on 2 nodes: TP 2 with SP, PP 2 with 2 virtual stages, DP 4 with ZeRO-1,
    // EP 2 (so expert-DP groups of 2) with the all-to-all dispatcher.
    let cfg = RunConfig::all_variants();
    let truth = check_run(&cfg, "all");
    let strategies: std::collections::BTreeSet<&str> = truth.communicators.iter().map(|c| c.strategy.as_str()).collect();
    for s in ["world", "dp-zero1", "mp", "tp-sp", "pp-vpp", "emb", "ep-a2a"] {
        assert!(strategies.contains(s), "{s} missing from {strategies:?}");
    }
    assert!(truth.communicators.iter().any(|c| c.kind == "EDP" && c.nranks == 2));
}

#[test]
fn interleaved_writers_are_recovered() {
    let mut cfg = RunConfig::default();
    cfg.interleave = true;
    cfg.broken_lines = 40;
    cfg.call_lines = true;
    let run = generate(&cfg);
    let dir = tmpdir("combined");
    write_to_dir(&run, &dir).unwrap();
    let combined = run.truth.combined.as_ref().unwrap();
    let (t, r) = load_path(&dir.join(&combined.file), &ReadOptions::default()).unwrap();
    // A line cut inside its own prefix (`node00:1:1 [2] N`) is no segment: it
    // is counted as a lost fragment instead.
    let visible = combined.broken.iter().filter(|b| b.original[..b.cut_at].contains(" NCCL INFO")).count();
    assert_eq!(r.broken_segments as usize, visible);
    assert_eq!(r.lost_fragments as usize, combined.broken.len() - visible);
    // Every intact line is read; each broken one is recovered or counted,
    // except those cut before `: opCount`, which nobody can tell from other lines.
    let unidentifiable = combined
        .broken
        .iter()
        .filter(|b| b.original[..b.cut_at].contains(" NCCL INFO") && !b.original[..b.cut_at].contains(": opCount "))
        .count() as u64;
    assert_eq!(
        r.ops + r.broken_unrecovered + r.lost_fragments + unidentifiable,
        run.truth.total_op_lines() as u64
    );
    assert_eq!(r.ops - r.recovered_ops, combined.intact_op_lines as u64);
    // Lines cut after the comm pointer survive on their own; with call lines
    // enabled, the call line that follows completes the others.
    assert!(r.recovered_ops >= combined.broken.iter().filter(|b| b.original[..b.cut_at].contains(" [nranks=")).count() as u64);
    assert_eq!(t.processes.len(), run.truth.world_size);
    let _ = std::fs::remove_dir_all(&dir);
}
