//! Synthetic GPU captures (`commlens_synth::generate_traces`) through our readers: the nsys
//! SQLite exports and the Kineto traces load, their kernels, correlation ids, profiler links,
//! compute kernels and iteration ranges equal the generator's truth; Send/Recv fusion, 2:1
//! batching and drops show up exactly as configured; the GPU timeline keeps its invariants
//! (no overlap on a stream, kernels after their records, collectives ending together, compute
//! overlapping gradient all-reduces).

use commlens_core::OpKind;
use commlens_ingest::inputs::{load_any, load_inputs};
use commlens_ingest::kineto::{self, LinkVia, RangeKind};
use commlens_ingest::nccl_log::ReadOptions;
use commlens_ingest::nsys;
use commlens_synth::{generate, generate_traces, GeneratedTraces, RunConfig, TraceConfig};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-traces-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// TP=2, PP=2, DP=2 on two nodes of four GPUs.
fn run_cfg() -> RunConfig {
    RunConfig { gpus_per_node: 4, ..RunConfig::megatron(2, 2, 2) }
}

fn gen(cfg: &RunConfig, tcfg: &TraceConfig) -> GeneratedTraces {
    generate_traces(cfg, tcfg).expect("valid config")
}

#[test]
fn kineto_traces_load_with_the_true_kernels_and_links() {
    let cfg = run_cfg();
    let tcfg = TraceConfig::default();
    let t = gen(&cfg, &tcfg);
    for gzip in [false, true] {
        let dir = tmpdir(if gzip { "kineto-gz" } else { "kineto" });
        let paths = t.write_kineto(&dir, gzip).unwrap();
        assert_eq!(paths.len(), cfg.world());
        for (r, p) in paths.iter().enumerate() {
            let tr = kineto::load_kineto(p).unwrap();
            let truth = &t.truth.kernels[r];
            assert_eq!(tr.world_size, Some(cfg.world() as u32));
            assert_eq!(tr.nccl_version.map(|v| (v.major, v.minor, v.patch)), Some((2, 27, 7)));
            let rank = &tr.ranks[0];
            assert_eq!(rank.rank, Some(r as u32));
            assert_eq!(rank.kernels.len(), truth.len(), "rank {r} kernels");
            for (k, want) in rank.kernels.iter().zip(truth) {
                assert_eq!(k.name, want.name);
                assert!((tr.base_time_ns + k.start_ns - want.start_ns).abs() <= 1, "start of {}", want.name);
                assert_eq!(k.correlation, Some(want.correlation));
                assert_eq!(k.stream, want.stream as u64);
                assert!(k.launch.is_some(), "launch of {}", want.name);
            }
            // Every NCCL kernel is linked, by External id, to the op the truth names.
            assert_eq!(rank.cpu_ops.len(), t.truth.cpu_ops[r]);
            assert_eq!(rank.links.len(), truth.len());
            for l in &rank.links {
                assert_eq!(l.via, LinkVia::ExternalId);
                let want = &truth[l.kernel as usize];
                assert_eq!(l.cpu as usize, want.cpu_op, "rank {r} kernel {}", l.kernel);
                let op = &rank.cpu_ops[l.cpu as usize];
                let kind = op.kind.expect("collective kind");
                let logged = &want.ops.last().unwrap().kind;
                assert_eq!(format!("{kind:?}"), *logged, "op of {}", want.name);
            }
            // Compute kernels and one ProfilerStep per iteration.
            assert_eq!(tr.stats.gpu_kernels as usize, truth.len() + t.truth.compute_kernels[r]);
            assert!(t.truth.compute_kernels[r] > truth.len());
            let steps: Vec<_> = tr.ranges.iter().filter(|x| x.kind == RangeKind::ProfilerStep).collect();
            assert_eq!(steps.len(), cfg.iterations);
            assert_eq!(tr.name(steps[1].name), "ProfilerStep#1");
        }
    }
}

#[test]
fn nsys_exports_load_per_node_with_ranks_launches_and_nvtx() {
    let cfg = run_cfg();
    let tcfg = TraceConfig::default();
    let t = gen(&cfg, &tcfg);
    let dir = tmpdir("nsys");
    let paths = t.write_nsys(&dir, &tcfg).unwrap();
    assert_eq!(paths.len(), 2, "one export per node");
    let mut seen = HashSet::new();
    for p in &paths {
        let tr = nsys::load_nsys(p).unwrap();
        assert_eq!(tr.ranks.len(), 4);
        assert_eq!(tr.source_version.as_deref(), Some("3.28.1"));
        let mut compute = 0;
        for rank in &tr.ranks {
            let r = rank.rank.expect("MPI_RANKS gives the global rank") as usize;
            seen.insert(r);
            compute += t.truth.compute_kernels[r];
            let truth = &t.truth.kernels[r];
            assert_eq!(rank.kernels.len(), truth.len(), "rank {r}");
            assert_eq!(rank.gpu_name.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
            for (k, want) in rank.kernels.iter().zip(truth) {
                assert_eq!(k.name, want.name);
                assert_eq!(tr.base_time_ns + k.start_ns, want.start_ns);
                assert_eq!(k.correlation, Some(want.correlation));
                let l = k.launch.expect("cudaLaunchKernel row");
                assert!(tr.base_time_ns + l.ts_ns < want.start_ns);
                assert!(k.grid[0] >= 1 && k.block[0] >= 512 && k.shared_mem_bytes > 0);
            }
        }
        assert_eq!(tr.stats.gpu_kernels as usize, tr.n_kernels() + compute);
        let iters = tr.ranges.iter().filter(|x| tr.name(x.name).starts_with("iteration ")).count();
        assert_eq!(iters, 4 * cfg.iterations);
        let nccl_ranges = tr.ranges.iter().filter(|x| x.domain.is_some_and(|d| tr.name(d) == "NCCL")).count();
        assert!(nccl_ranges > tr.n_kernels(), "one NCCL range per call");
    }
    assert_eq!(seen.len(), cfg.world());
}

#[test]
fn load_any_reads_both_captures_into_tables() {
    let cfg = RunConfig::default();
    let tcfg = TraceConfig::default();
    let t = gen(&cfg, &tcfg);
    let kd = tmpdir("any-kineto");
    t.write_kineto(&kd, true).unwrap();
    let nd = tmpdir("any-nsys");
    t.write_nsys(&nd, &tcfg).unwrap();
    // Kineto: one row per CPU-side collective (each kernel attached to the op that launched
    // it; the first Send/Recv of a fused group has none); nsys: one row per kernel.
    let cpu_ops: usize = t.truth.cpu_ops.iter().sum();
    for (dir, want) in [(kd, cpu_ops), (nd, t.truth.n_kernels())] {
        let loaded = load_any(std::slice::from_ref(&dir), &ReadOptions::default()).unwrap();
        assert_eq!(loaded.table.n_ops(), want, "{}", dir.display());
        assert_eq!(loaded.table.devices.len(), cfg.world());
    }
}

/// Log records per rank and kind as the NCCL reader sees them.
fn read_logs(t: &GeneratedTraces, tag: &str) -> BTreeMap<(usize, OpKind), usize> {
    let dir = tmpdir(tag);
    let paths = t.write_logs(&dir).unwrap();
    let loaded = load_inputs(&paths, &ReadOptions::default()).unwrap();
    let tb = &loaded.table;
    let mut out = BTreeMap::new();
    for op in tb.ops() {
        *out.entry((tb.global_rank_of(op.comm).unwrap() as usize, op.kind)).or_default() += 1;
    }
    out
}

#[test]
fn sendrecv_groups_fuse_into_one_kernel() {
    let cfg = run_cfg();
    let fused = gen(&cfg, &TraceConfig::default());
    let split = gen(&cfg, &TraceConfig { fuse_sendrecv: false, ..TraceConfig::default() });
    for r in 0..cfg.world() {
        let p2p = |t: &GeneratedTraces| -> Vec<Vec<(String, u64, String)>> {
            t.truth.kernels[r]
                .iter()
                .filter(|k| k.name.starts_with("ncclDevKernel_SendRecv"))
                .map(|k| k.ops.iter().map(|o| (o.comm.clone(), o.op_count, o.kind.clone())).collect())
                .collect()
        };
        let records = fused.truth.log_ops[r].iter().filter(|o| o.kind == "Send" || o.kind == "Recv").count();
        let groups: HashSet<(String, u64)> = fused.truth.log_ops[r]
            .iter()
            .filter(|o| o.kind == "Send" || o.kind == "Recv")
            .map(|o| (o.comm.clone(), o.op_count))
            .collect();
        let (f, s) = (p2p(&fused), p2p(&split));
        assert!(records > 0);
        assert_eq!(f.len(), groups.len(), "rank {r}: one kernel per group");
        assert_eq!(s.len(), records, "rank {r}: one kernel per record without fusion");
        assert!(f.iter().any(|ops| ops.len() == 2), "send_forward_recv_backward is one kernel");
        for ops in &f {
            assert!(ops.iter().all(|o| o.0 == ops[0].0 && o.1 == ops[0].1), "one group per kernel");
        }
    }
    // The logs are unchanged by fusion: it happens below the log.
    assert_eq!(read_logs(&fused, "fused"), read_logs(&split, "split"));
}

#[test]
fn batching_ranks_log_every_collective_twice() {
    let cfg = RunConfig { dp: 1, ..run_cfg() }; // TP=2, PP=2: two TP groups
    let tcfg = TraceConfig { batching: true, ..TraceConfig::default() };
    let t = gen(&cfg, &tcfg);
    let plain = gen(&cfg, &TraceConfig::default());
    assert_eq!(t.truth.batching_ranks, vec![0, 2], "TP rank 0 of each TP group");
    let logged = read_logs(&t, "batching");
    let logged_plain = read_logs(&plain, "batching-plain");
    for r in 0..cfg.world() {
        let batching = t.truth.batching_ranks.contains(&r);
        for kind in [OpKind::AllReduce, OpKind::Broadcast] {
            let k = logged_plain.get(&(r, kind)).copied().unwrap_or(0);
            let factor = if batching { 2 } else { 1 };
            assert_eq!(logged.get(&(r, kind)).copied().unwrap_or(0), factor * k, "rank {r} {kind:?}");
        }
        // Kernels are the same; on batching ranks each collective kernel executes a pair of
        // records with consecutive opCounts.
        assert_eq!(t.truth.kernels[r].len(), plain.truth.kernels[r].len());
        for k in &t.truth.kernels[r] {
            if k.name.contains("SendRecv") {
                continue;
            }
            if batching {
                assert_eq!(k.ops.len(), 2);
                assert_eq!(k.ops[1].op_count, k.ops[0].op_count + 1);
                assert_eq!(k.ops[1].index, k.ops[0].index.map(|i| i + 1));
            } else {
                assert_eq!(k.ops.len(), 1);
            }
        }
    }
}

#[test]
fn drops_remove_exactly_the_configured_numbers() {
    let cfg = run_cfg();
    let base = gen(&cfg, &TraceConfig::default());
    let tcfg = TraceConfig { drop_kernels: 0.1, drop_log_ops: 0.2, ..TraceConfig::default() };
    let t = gen(&cfg, &tcfg);
    let logged = read_logs(&t, "drops");
    let dir = tmpdir("drops-kineto");
    let paths = t.write_kineto(&dir, false).unwrap();
    let mut dropped_per_rank: HashMap<usize, usize> = HashMap::new();
    for k in &t.truth.dropped_kernels {
        *dropped_per_rank.entry(k.rank).or_default() += 1;
    }
    for (r, path) in paths.iter().enumerate() {
        let n = base.truth.kernels[r].len();
        let k_drop = (0.1 * n as f64).round() as usize;
        assert_eq!(t.truth.kernels[r].len(), n - k_drop, "rank {r}");
        assert_eq!(dropped_per_rank.get(&r).copied().unwrap_or(0), k_drop);
        let tr = kineto::load_kineto(path).unwrap();
        assert_eq!(tr.ranks[0].kernels.len(), n - k_drop);
        // The CPU side keeps the ops of dropped kernels.
        assert_eq!(tr.ranks[0].cpu_ops.len(), base.truth.cpu_ops[r]);

        let ops = &t.truth.log_ops[r];
        let l_drop = (0.2 * ops.len() as f64).round() as usize;
        assert_eq!(ops.iter().filter(|o| o.index.is_none()).count(), l_drop);
        let read: usize = logged.iter().filter(|((rr, _), _)| *rr == r).map(|(_, n)| n).sum();
        assert_eq!(read, ops.len() - l_drop, "rank {r} records read back");
    }
}

#[test]
fn gpu_timeline_keeps_its_invariants_and_overlaps_grad_reduce() {
    // hidden 2048: every stage has several 40M-parameter gradient buckets.
    let cfg = RunConfig { hidden: 2048, ..run_cfg() };
    let t = gen(&cfg, &TraceConfig::default());
    let serial = gen(&cfg, &TraceConfig { overlap_grad_reduce: false, ..TraceConfig::default() });
    let mut ends: HashMap<(String, u64), Vec<i64>> = HashMap::new();
    for r in 0..cfg.world() {
        let mut last_end: HashMap<u32, i64> = HashMap::new();
        for k in t.kernels(r) {
            assert!(k.end_ns > k.start_ns);
            assert!(k.launch_ns < k.start_ns, "{} starts after its launch", k.name);
            let prev = last_end.insert(k.stream, k.end_ns).unwrap_or(i64::MIN);
            assert!(k.start_ns >= prev, "rank {r} stream {}: kernels overlap", k.stream);
        }
        for k in &t.truth.kernels[r] {
            let t_rec = k.ops.iter().map(|o| o.t_us).max().unwrap() as i64 * 1000;
            assert!(k.start_ns > t_rec, "kernel after its record");
            if !k.name.contains("SendRecv") {
                ends.entry((k.ops[0].comm.clone(), k.ops[0].op_count)).or_default().push(k.end_ns);
            }
        }
        // DP grad buckets run under backward compute when overlapped, not otherwise.
        assert!(t.truth.overlap_ns[r] > 0, "rank {r}");
        assert!(t.truth.overlap_ns[r] > serial.truth.overlap_ns[r], "rank {r}");
    }
    for ((comm, oc), e) in &ends {
        let spread = e.iter().max().unwrap() - e.iter().min().unwrap();
        assert!(spread <= 2_000, "{comm} opCount {oc}: ends {spread} ns apart");
    }
}

#[test]
fn untouched_logs_are_the_generators_and_old_nccl_names_parse() {
    let cfg = RunConfig { nccl_version: "2.18.1".into(), ..RunConfig::default() };
    let tcfg = TraceConfig { overlap_grad_reduce: false, ..TraceConfig::default() };
    let t = gen(&cfg, &tcfg);
    let run = generate(&cfg);
    assert_eq!(t.logs, run.files, "no trace-side change leaves the logs byte-identical");
    let k = &t.truth.kernels[0];
    assert!(k.iter().all(|k| k.name.starts_with("ncclKernel_")));
    assert!(k.iter().any(|k| k.name == "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)"));
    let dir = tmpdir("old");
    let paths = t.write_kineto(&dir, false).unwrap();
    let tr = kineto::load_kineto(&paths[0]).unwrap();
    assert!(tr.ranks[0].kernels.iter().all(|k| k.parsed.kind.is_some()));
    assert_eq!(tr.stats.kernels_without_kind, 0);
}


#[test]
fn every_collective_kind_of_the_new_variants_gets_kernels() {
    // Sequence parallelism (AllGather/ReduceScatter), the distributed optimizer and experts.
    let cfg = RunConfig {
        sequence_parallel: true,
        distributed_optimizer: true,
        ep: 2,
        num_experts: 4,
        ..run_cfg()
    };
    let t = gen(&cfg, &TraceConfig::default());
    let dir = tmpdir("variants");
    let paths = t.write_kineto(&dir, true).unwrap();
    let mut kinds = HashSet::new();
    for (r, p) in paths.iter().enumerate() {
        let tr = kineto::load_kineto(p).unwrap();
        assert_eq!(tr.ranks[0].kernels.len(), t.truth.kernels[r].len());
        assert_eq!(tr.ranks[0].links.len(), t.truth.kernels[r].len());
        for k in &tr.ranks[0].kernels {
            kinds.insert(k.parsed.kind.expect("kernel names a collective"));
        }
        // Every record has exactly one kernel.
        let covered: usize = t.truth.kernels[r].iter().map(|k| k.ops.len()).sum();
        assert_eq!(covered, t.truth.log_ops[r].len(), "rank {r}");
    }
    for k in [OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllReduce, OpKind::SendRecv] {
        assert!(kinds.contains(&k), "{k:?} kernels");
    }
}
