//! `commlens simulate` through the binary: every front end, the outputs other commands read,
//! SimAI's figures on its own baseline case, self-consistency with the demo's generated logs,
//! and clear errors.

mod common;

use common::{commlens_cmd, run_limited, temp_dir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn simulate(args: &[&str]) -> common::Run {
    run_limited(commlens_cmd(&[&["simulate"], args].concat()), 300, "commlens simulate")
}

/// Per communicator (sorted member ranks, operation kinds) → (ops, bytes), from
/// `commlens stats --format json` (two communicators may hold the same ranks: PP and
/// embedding of a 2-stage pipeline).
fn comm_volumes(input: &Path) -> BTreeMap<(Vec<u64>, String), (u64, u64)> {
    let r = run_limited(commlens_cmd(&["stats", "--format", "json", input.to_str().unwrap()]), 120, "stats");
    assert_eq!(r.code, 0, "stats {}: {}", input.display(), r.err);
    let v: serde_json::Value = serde_json::from_str(&r.out).unwrap();
    let mut m = BTreeMap::new();
    for c in v["stats"]["comms"].as_array().unwrap() {
        let mut ranks: Vec<u64> = c["global_ranks"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        ranks.sort();
        let mut kinds: Vec<&str> = c["mix"].as_array().unwrap().iter().map(|x| x[0].as_str().unwrap()).collect();
        kinds.sort();
        m.insert((ranks, kinds.join("+")), (c["ops"].as_u64().unwrap(), c["bytes"].as_u64().unwrap()));
    }
    m
}

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The demo's configuration simulated moves exactly the generated logs' bytes on every
/// communicator the training program uses; the world communicator differs only by the
/// generator's process start-up and shutdown calls (barrier, start-time AllReduce, barrier;
/// shutdown barrier), which are not part of a training iteration. `diff` compares the two runs.
#[test]
fn demo_configuration_simulates_to_the_generated_volumes_and_diffs() {
    let dir = temp_dir("simulate", "demo");
    let demo = dir.join("demo");
    let r = run_limited(commlens_cmd(&["demo", "--out", demo.to_str().unwrap()]), 300, "demo");
    assert_eq!(r.code, 0, "{}", r.err);
    let out = dir.join("sim");
    let conf = repo().join("examples/demo-model.conf");
    let r = simulate(&[conf.to_str().unwrap(), "--cluster", "dgx-h100", "-o", out.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("simulated 4 of 4 ranks"), "{}", r.out);
    for f in ["simulated.parquet", "summary.json", "EndToEnd.csv", "links.csv", "trace.json", "trace.pftrace"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let measured = comm_volumes(&demo.join("logs"));
    let simulated = comm_volumes(&out.join("simulated.parquet"));
    assert_eq!(measured.len(), simulated.len(), "communicators: {measured:?} vs {simulated:?}");
    let mut same = 0;
    for (ranks, m) in &measured {
        let s = simulated.get(ranks).unwrap_or_else(|| panic!("communicator {ranks:?} not simulated"));
        if ranks.0.len() == 4 {
            // World: the generator's 4 lifecycle calls per rank (start-up barrier, start-time
            // AllReduce, barrier; shutdown barrier) are in the generated logs only.
            assert_eq!(m.0 - s.0, 4 * 4, "world ops {m:?} vs {s:?}");
            continue;
        }
        assert_eq!(m, s, "communicator {ranks:?}: generated (ops, bytes) {m:?}, simulated {s:?}");
        same += 1;
    }
    assert!(same >= 6, "{same} communicators compared");
    let r = run_limited(
        commlens_cmd(&["diff", demo.join("logs").to_str().unwrap(), out.join("simulated.parquet").to_str().unwrap()]),
        120,
        "diff",
    );
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("iteration time"), "{}", r.out);
    // The simulated table is read by report like any other.
    let html = dir.join("r.html");
    let r = run_limited(
        commlens_cmd(&["report", out.join("simulated.parquet").to_str().unwrap(), "-o", html.to_str().unwrap()]),
        120,
        "report",
    );
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(std::fs::metadata(&html).unwrap().len() > 10_000);
    // summary.json carries SimAI's split and the run's figures.
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["world"], 4);
    assert!(s["summary"]["mean_iteration_us"].as_f64().unwrap() > 0.0);
    // What-if: a faster network never makes the iteration longer, and makes it shorter here.
    let fast = dir.join("fast");
    let r = simulate(&[conf.to_str().unwrap(), "--scale-network", "4", "-o", fast.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let f: serde_json::Value = serde_json::from_str(&r.out).unwrap();
    let (t1, t4) = (s["summary"]["total_us"].as_f64().unwrap(), f["summary"]["total_us"].as_f64().unwrap());
    assert!(t4 < t1, "4x network {t4} µs vs {t1} µs");
    // Flow-level mode runs the same workload.
    let flow = dir.join("flow");
    let r = simulate(&[conf.to_str().unwrap(), "--mode", "flow", "-o", flow.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SimAI's own baseline case through the binary with its flags gives its summary line.
#[test]
fn aicb_file_with_simai_flags_reproduces_simai() {
    let Some(real) = commlens_testdata::real_dir("workloads") else { return };
    let base = real.join("../../baselines/simai-1.6");
    let dir = temp_dir("simulate", "aicb");
    let wl = base.join("workloads/aicb-L7B-tp2-g1024.txt");
    let r = simulate(&[
        wl.to_str().unwrap(),
        "--gpus",
        "1024",
        "--simai-nv",
        "360",
        "--simai-nic",
        "48.5",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.err);
    let field = |text: &str, i: usize| -> f64 {
        let line = text.lines().nth(1).unwrap();
        line.split(',').nth(i).unwrap().split_whitespace().next().unwrap().parse().unwrap()
    };
    let ours = std::fs::read_to_string(dir.join("EndToEnd.csv")).unwrap();
    let simai = std::fs::read_to_string(base.join("outputs/adapted-aicb-L7B-tp2-g1024/EndToEnd.csv")).unwrap();
    for (i, what) in [(1, "DP"), (3, "TP"), (7, "compute"), (9, "total")] {
        let (a, b) = (field(&ours, i), field(&simai, i));
        assert!((a - b).abs() <= 0.05 * b.max(1.0), "{what}: ours {a}, SimAI {b}");
        println!("L7B tp2 g1024 {what}: ours {a} µs, SimAI {b} µs");
    }
    // The file as AICB published it (no all_gpus, ep, pp, vpp, ga in the header) runs too.
    let raw = real.join("aicb-simAI-model_workload-L7B-M1-C04_Llama7B_megatron_tp2_pp1_mbs1_A100.txt");
    let out2 = dir.join("raw");
    let r = simulate(&[raw.to_str().unwrap(), "--gpus", "128", "--cluster", "dgx-a100", "-o", out2.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("all_gpus"), "the filled header key is named: {}", r.out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Chakra traces: ASTRA-sim's 8-rank microbenchmark and a set chosen from an archive.
#[test]
fn chakra_traces_simulate() {
    let Some(real) = commlens_testdata::real_dir("workloads") else { return };
    let dir = temp_dir("simulate", "chakra");
    let r = simulate(&[real.join("astra-sim-microbench-all_reduce-8npus_1MB").to_str().unwrap(), "-o", dir.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let v: serde_json::Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["world"], 8);
    let vols = comm_volumes(&dir.join("simulated.parquet"));
    assert_eq!(vols.get(&((0..8).collect::<Vec<u64>>(), "AllReduce".to_string())), Some(&(8, 8 << 20)), "{vols:?}");
    let arch = real.join("chakra-tests-data-json_trace.tar.gz");
    let r = simulate(&[arch.to_str().unwrap(), "-o", dir.join("a").to_str().unwrap()]);
    assert_ne!(r.code, 0);
    assert!(r.err.contains("--trace-set"), "{}", r.err);
    let r = simulate(&[arch.to_str().unwrap(), "--trace-set", "small_chakra", "-o", dir.join("b").to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Inputs that are no workload get a clear error and a failing exit code, never empty output.
#[test]
fn bad_workloads_fail_clearly() {
    let dir = temp_dir("simulate", "bad");
    let aicb = dir.join("bad.txt");
    std::fs::write(&aicb, "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 3 all_gpus: 8\n1\nx -1 1 ALLREDUCE nope 1 NONE 0 1 NONE 0 100\n").unwrap();
    let r = simulate(&[aicb.to_str().unwrap(), "-o", dir.join("o").to_str().unwrap()]);
    assert_ne!(r.code, 0);
    assert!(r.err.contains("bad.txt"), "{}", r.err);
    assert!(!dir.join("o/simulated.parquet").exists());
    let r = simulate(&[aicb.to_str().unwrap(), "--scale-network", "0", "-o", dir.join("o").to_str().unwrap()]);
    assert_ne!(r.code, 0);
    assert!(r.err.contains("scale-network"), "{}", r.err);
    let et = dir.join("cut.0.et");
    std::fs::write(&et, [0xffu8, 0xff, 0xff, 0xff, 0x0f, 1, 2]).unwrap();
    let r = simulate(&[et.to_str().unwrap(), "-o", dir.join("p").to_str().unwrap()]);
    assert_ne!(r.code, 0);
    assert!(r.err.contains("cut.0.et"), "{}", r.err);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Communicators of a simulated table (all ranks, `--expand`), as (size, operation kinds) →
/// how many communicators have them.
fn communicator_shapes(table: &Path) -> BTreeMap<(usize, String), usize> {
    let mut shapes = BTreeMap::new();
    for (ranks, kinds) in comm_volumes(table).keys() {
        *shapes.entry((ranks.len(), kinds.clone())).or_insert(0) += 1;
    }
    shapes
}

/// Each `framework = …` front end of a model file simulates through the binary on a DGX-A100
/// cluster: a meaningful iteration time (compute from the roofline, communication from the
/// network), and on every communicator the operations that framework issues there.
#[test]
fn framework_model_files_simulate_with_their_communicators() {
    let dir = temp_dir("simulate", "frameworks");
    let small = "layers = 4\nhidden = 512\nseq_len = 512\nvocab = 4096\nmicro_batch = 1\nnum_microbatches = 2\n";
    // (name, model file, [((communicator size, operations), communicators)])
    type Case = (&'static str, String, Vec<((usize, &'static str), usize)>);
    let cases: [Case; 6] = [
        // ZeRO-1: gradient reduce-scatter, parameter all-gather, the grad-norm all-reduce.
        ("zero1", format!("{small}framework = deepspeed\nzero_stage = 1\ndp = 8"), vec![((8, "AllGather+AllReduce+ReduceScatter"), 1)]),
        // ZeRO-0 (DDP): bucketed gradient all-reduce only.
        ("zero0", format!("{small}framework = deepspeed\nzero_stage = 0\ndp = 8"), vec![((8, "AllReduce"), 1)]),
        ("zero3", format!("{small}framework = deepspeed\nzero_stage = 3\ndp = 8"), vec![((8, "AllGather+AllReduce+ReduceScatter"), 1)]),
        // HSDP: two shard groups of a node each, eight replica pairs all-reducing shards.
        (
            "hsdp",
            format!("{small}framework = fsdp\nfsdp_sharding = hybrid\ndp = 16"),
            vec![((8, "AllGather+AllReduce+ReduceScatter"), 2), ((2, "AllReduce"), 8)],
        ),
        // AxoNN 2×2×2×2: X and Y groups all-reduce, Z groups gather and reduce-scatter, data
        // groups all-reduce: 8 of each, all pairs.
        (
            "axonn",
            format!("{small}framework = axonn\ngx = 2\ngy = 2\ngz = 2\ngdata = 2"),
            vec![((2, "AllReduce"), 24), ((2, "AllGather+ReduceScatter"), 8)],
        ),
        // TED tp2 × ep4 × dp8: TP pairs (all-reduce, DTD all-gather), EP quads (all-to-all),
        // DP of 8 and expert DP pairs (ZeRO-1), WORLD (grad norm).
        (
            "ted",
            format!("{small}framework = ted\ntp = 2\nep = 4\ndp = 8\nexperts = 8\ntop_k = 2\nmoe_layers = 2"),
            vec![
                ((2, "AllGather+AllReduce"), 8),
                ((4, "AllToAll"), 4),
                ((8, "AllGather+ReduceScatter"), 2),
                ((2, "AllGather+ReduceScatter"), 8),
                ((16, "AllReduce"), 1),
            ],
        ),
    ];
    for (name, text, want) in cases {
        let conf = dir.join(format!("{name}.conf"));
        std::fs::write(&conf, &text).unwrap();
        let out = dir.join(name);
        let r = simulate(&[conf.to_str().unwrap(), "--cluster", "dgx-a100", "--expand", "-o", out.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{name}: {}", r.err);
        assert!(r.out.contains("note: front end:"), "{name}: {}", r.out);
        let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        let (total, compute) = (summary["summary"]["total_us"].as_f64().unwrap(), summary["summary"]["compute_us"].as_f64().unwrap());
        assert!(compute > 0.0 && total >= compute, "{name}: total {total} µs, compute {compute} µs");
        let shapes = communicator_shapes(&out.join("simulated.parquet"));
        let want: BTreeMap<(usize, String), usize> = want.into_iter().map(|((n, k), c)| ((n, k.to_string()), c)).collect();
        assert_eq!(shapes, want, "{name}: communicators (size, operations) → count");
        eprintln!("{name}: {total:.0} µs per iteration, compute {compute:.0} µs");
    }
    // A framework knob without its framework is refused with the key named.
    let bad = dir.join("bad.conf");
    std::fs::write(&bad, format!("{small}dp = 2\ngz = 2")).unwrap();
    let r = simulate(&[bad.to_str().unwrap(), "-o", dir.join("bad").to_str().unwrap()]);
    assert_ne!(r.code, 0);
    assert!(r.err.contains("bad.conf") && r.err.contains("gz"), "{}", r.err);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--sweep nic=…` runs one variant per value on rayon's threads: each variant's folder holds
/// the same summary as a lone run with that `--nic` (the sweep changes where runs happen, not
/// what they compute), faster NICs shorten the iteration, and `sweep.csv` compares them.
#[test]
fn a_nic_sweep_matches_lone_runs_and_orders_the_gains() {
    let dir = temp_dir("simulate", "sweep");
    let conf = dir.join("gpt.conf");
    std::fs::write(&conf, "layers = 8\nhidden = 4096\nseq_len = 2048\nvocab = 51200\nmicro_batch = 1\nnum_microbatches = 4\niterations = 1\ntp = 8\npp = 2\ndp = 4\nsequence_parallel = true\ndistributed_optimizer = true\n").unwrap();
    let out = dir.join("sweep");
    let r = simulate(&[conf.to_str().unwrap(), "--sweep", "nic=8x100g,8x200g,8x400g", "-o", out.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("what-if sweep of nic") && r.out.contains("vs previous"), "{}", r.out);
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().skip(1).map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.iter().map(|r| r[0]).collect::<Vec<_>>(), ["8x100g", "8x200g", "8x400g"], "{csv}");
    let iter: Vec<f64> = rows.iter().map(|r| r[1].parse().unwrap()).collect();
    assert!(iter[0] > iter[1] && iter[1] > iter[2], "faster NICs, shorter iterations: {iter:?}");
    let summary = |p: &Path| -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join("summary.json")).unwrap()).unwrap();
        v["summary"].clone()
    };
    let lone = dir.join("lone");
    let r = simulate(&[conf.to_str().unwrap(), "--nic", "8x200g", "-o", lone.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(summary(&out.join("nic-8x200g")), summary(&lone));
    assert!(out.join("nic-8x400g/simulated.parquet").is_file());
    let r = simulate(&[conf.to_str().unwrap(), "--sweep", "nic=8x200g,8x400g", "--nic", "8x100g", "-o", out.to_str().unwrap()]);
    assert_ne!(r.code, 0);
    assert!(r.err.contains("do not also give --nic"), "{}", r.err);
}

/// README: `COMMLENS_TIMINGS=1` before `simulate` or `report` prints one `timing:` line per
/// phase on stderr (wall, process CPU, the timing thread's CPU); without it, none.
#[test]
fn timings_are_printed_only_when_asked() {
    let dir = temp_dir("simulate", "timings");
    let conf = repo().join("examples/demo-model.conf");
    let out = dir.join("sim");
    let mut c = commlens_cmd(&["simulate", conf.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    c.env("COMMLENS_TIMINGS", "1");
    let r = run_limited(c, 300, "simulate with timings");
    assert_eq!(r.code, 0, "{}", r.err);
    for phase in ["workload build", "engine loop", "table build"] {
        let line = r.err.lines().find(|l| l.starts_with(&format!("timing: {phase} "))).unwrap_or_else(|| panic!("no {phase} line: {}", r.err));
        assert!(line.contains(" s (cpu ") && line.contains("this thread"), "{line}");
    }
    let pq = out.join("simulated.parquet");
    let html = dir.join("r.html");
    let mut c = commlens_cmd(&["report", pq.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    c.env("COMMLENS_TIMINGS", "1");
    let r = run_limited(c, 300, "report with timings");
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.err.lines().any(|l| l.starts_with("timing: write html ")), "{}", r.err);
    let mut c = commlens_cmd(&["report", pq.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    c.env_remove("COMMLENS_TIMINGS");
    let r = run_limited(c, 300, "report without timings");
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(!r.err.contains("timing:"), "{}", r.err);
    let _ = std::fs::remove_dir_all(&dir);
}
