//! The first real capture of the profiler plugin (torch 2.11 + NCCL 2.28.9, API v5, one
//! H100 shared by 4 ranks, TP2×DP2; `crates/testdata/captures/h100-nccl2.28.9-tp2dp2`,
//! job in `scripts/gpu/capture_job.py`) through `commlens trace`: the operations per
//! communicator and kind agree with NCCL's own log, the TP and DP groups come out as
//! the job built them, and the GPU spans shown are the operations' own.
//!
//! NCCL 2.28 quirk this pins: torch's all-to-all sends to and receives from the rank
//! itself; NCCL gives that self p2p no KernelCh and, from then on, hands every KernelCh
//! of that communicator (world) the timers of an earlier kernel work. Those operations
//! keep no GPU span (before the fix they showed spans 75 ms before their enqueue, and
//! the 6 s stall as 5 µs); the stall itself is still visible in the ProxyOp stops.

use commlens_ingest::plugin_out::{read_trace, Fields};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

const CAPTURE: &str = "../testdata/captures/h100-nccl2.28.9-tp2dp2";
/// A kernel cannot start before its enqueue. The GPU globaltimer drifts ~20 ppm against
/// CLOCK_MONOTONIC on this machine; mapped through one constant offset, kernels late in
/// the run started up to 0.2 ms before their enqueue. With drift allowed for
/// (`commlens_ingest::gpu_clock`) a mapped time is never earlier than the true one.
const CLOCK_TOLERANCE_NS: i64 = 0;

fn clp_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(Path::new(CAPTURE).join("plugin"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "clp"))
        .collect();
    v.sort();
    assert_eq!(v.len(), 4);
    v
}

/// `commlens trace` of the four .clp files: the `nccl` events (one per operation).
fn traced_ops() -> Vec<serde_json::Value> {
    traced(&clp_files())
}

fn traced(inputs: &[PathBuf]) -> Vec<serde_json::Value> {
    // Tests run in parallel threads of one process: one output folder per call.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = std::env::temp_dir().join(format!("commlens-real-capture-plugin-{}-{call}", std::process::id()));
    let mut args: Vec<String> = vec!["trace".into()];
    args.extend(inputs.iter().map(|p| p.to_string_lossy().into_owned()));
    args.extend(["-o".into(), out.to_string_lossy().into_owned()]);
    let o = Command::new(env!("CARGO_BIN_EXE_commlens")).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("trace.json")).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    let ev = v.get("traceEvents").unwrap_or(&v).as_array().unwrap().clone();
    ev.into_iter().filter(|e| e["cat"] == "nccl" || e["cat"] == "nccl_enqueue").collect()
}

type Counts = BTreeMap<String, u64>;

fn arg(e: &serde_json::Value, k: &str) -> serde_json::Value {
    e["args"][k].clone()
}

fn u(e: &serde_json::Value, k: &str) -> u64 {
    e["args"][k].as_u64().unwrap_or_else(|| panic!("{k} in {e}"))
}

/// NCCL's log, per process id: one count map per communicator (ops per kind). An
/// `AlltoAll` is counted as the `nranks` Sends and Recvs the plugin sees it as.
fn log_counts() -> BTreeMap<u32, Vec<Counts>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(Path::new(CAPTURE).join("logs")).unwrap() {
        let p = e.unwrap().path();
        let pid: u32 = p.file_name().unwrap().to_str().unwrap().split('.').nth(2).unwrap().parse().unwrap();
        let mut by_comm: HashMap<String, Counts> = HashMap::new();
        for l in std::fs::read_to_string(&p).unwrap().lines().filter(|l| l.contains(": opCount ")) {
            let kind = l.split("NCCL INFO ").nth(1).unwrap().split(':').next().unwrap();
            let comm = l.split(" comm ").nth(1).unwrap().split(' ').next().unwrap().to_string();
            let nranks: u64 = l.split("[nranks=").nth(1).unwrap().split(']').next().unwrap().parse().unwrap();
            let c = by_comm.entry(comm).or_default();
            if kind == "AlltoAll" {
                *c.entry("Send".into()).or_default() += nranks;
                *c.entry("Recv".into()).or_default() += nranks;
            } else {
                *c.entry(kind.into()).or_default() += 1;
            }
        }
        let mut v: Vec<Counts> = by_comm.into_values().collect();
        v.sort();
        out.insert(pid, v);
    }
    out
}

#[test]
fn real_capture_through_commlens_trace() {
    let ops = traced_ops();

    // Per process and communicator: operations per kind, as NCCL logged them.
    let mut plugin: BTreeMap<u32, HashMap<String, Counts>> = BTreeMap::new();
    for e in &ops {
        let c = plugin.entry(u(e, "cpu_tid") as u32).or_default();
        *c.entry(arg(e, "comm_id").to_string()).or_default().entry(arg(e, "kind").as_str().unwrap().into()).or_default() +=
            1;
    }
    let plugin: BTreeMap<u32, Vec<Counts>> = plugin
        .into_iter()
        .map(|(pid, m)| {
            let mut v: Vec<Counts> = m.into_values().collect();
            v.sort();
            (pid, v)
        })
        .collect();
    assert_eq!(plugin, log_counts());

    // Groups: TP {0,1},{2,3}, DP {0,2},{1,3}, and the world, named by parallelism.
    let mut members: BTreeMap<String, (String, BTreeSet<u64>)> = BTreeMap::new();
    for e in &ops {
        let m = members.entry(arg(e, "comm_id").to_string()).or_insert((arg(e, "parallelism").to_string(), BTreeSet::new()));
        m.1.insert(u(e, "global_rank"));
    }
    let mut groups: Vec<(String, Vec<u64>)> =
        members.into_values().map(|(p, r)| (p.trim_matches('"').to_string(), r.into_iter().collect())).collect();
    groups.sort();
    #[rustfmt::skip]
    let want: Vec<(String, Vec<u64>)> = vec![
        ("DP".into(), vec![0, 2]), ("DP".into(), vec![1, 3]), ("TP".into(), vec![0, 1]), ("TP".into(), vec![2, 3]),
        ("world".into(), vec![0, 1, 2, 3]),
    ];
    assert_eq!(groups, want);

    // GPU spans: every TP/DP operation has one, and on the world communicator the three
    // before the first all-to-all (broadcast, send, recv); never before the CPU enqueue.
    for rank in 0..4 {
        let mine: Vec<_> = ops.iter().filter(|e| u(e, "global_rank") == rank).collect();
        let timed = |e: &&&serde_json::Value| e["args"].get("gpu_start_ns").is_some();
        let (world, rest): (Vec<_>, Vec<_>) = mine.iter().partition(|e| arg(e, "parallelism") == "world");
        assert_eq!(rest.len(), 80);
        assert!(rest.iter().all(|e| timed(&e)), "rank {rank}: a TP/DP op without GPU span");
        let mut world = world;
        world.sort_by_key(|e| u(e, "cpu_ts_ns"));
        let timed_world: Vec<_> = world.iter().filter(timed).map(|e| arg(e, "kind")).collect();
        assert_eq!(timed_world, ["Broadcast", "Send", "Recv"], "rank {rank}");
        assert!(world.iter().take(3).all(|e| timed(&e)), "rank {rank}: the first three world ops are the timed ones");
        let selfs = world.iter().filter(|e| e["args"].get("peer").and_then(|p| p.as_u64()) == Some(u(e, "comm_rank")));
        assert_eq!(selfs.count(), 32, "rank {rank}: a Send and a Recv to itself per all-to-all");
    }
    let mut worst = i64::MAX;
    for e in ops.iter().filter(|e| e["args"].get("gpu_start_ns").is_some()) {
        let (cpu, g0, g1) = (u(e, "cpu_ts_ns") as i64, u(e, "gpu_start_ns") as i64, u(e, "gpu_end_ns") as i64);
        assert!(g0 >= cpu - CLOCK_TOLERANCE_NS && g1 >= g0, "GPU span before its enqueue or reversed: {e}");
        worst = worst.min(g0 - cpu);
    }
    eprintln!("earliest GPU start relative to its CPU enqueue: {:.3} ms", worst as f64 / 1e6);
}

/// The last world AllReduce (1024 floats) rank 3 entered 6 s late: NCCL's KernelCh said it
/// ran 5 µs, but its ProxyOps on ranks 0-2 stopped only when rank 3 arrived.
#[test]
fn the_stall_shows_in_the_proxy_ops() {
    let mut waits = Vec::new();
    for p in clp_files() {
        let t = read_trace(&p).unwrap();
        let api = t
            .events
            .iter()
            .rev()
            .find(|e| matches!(e.fields, Fields::CollApi { count: 1024, .. }) && t.comm(e.comm).unwrap().nranks == 4)
            .expect("the stalled AllReduce");
        let coll = t.events.iter().find(|e| e.parent == api.id && matches!(e.fields, Fields::Coll { .. })).unwrap();
        let proxy_end = t
            .events
            .iter()
            .filter(|e| e.parent == coll.id && matches!(e.fields, Fields::ProxyOp { .. }))
            .filter_map(|e| e.stop_ns)
            .max()
            .expect("ProxyOps (socket transport)");
        waits.push((t.comm(api.comm).unwrap().rank, api.start_ns, proxy_end - api.start_ns));
    }
    waits.sort();
    let late = waits.iter().max_by_key(|w| w.1).unwrap().0;
    assert_eq!(late, 3, "rank 3 slept before it: {waits:?}");
    for &(rank, _, wait) in &waits {
        if rank == late {
            assert!(wait < 1_000_000_000, "{waits:?}");
        } else {
            assert!(wait >= 5_000_000_000, "rank {rank} waited for rank 3: {waits:?}");
        }
    }
}

/// Eight ranks (`h100-nccl2.28.9-tp2pp2dp2-ep-ts`, all-to-all on its own group, so no
/// self p2p on world): rank 3 enters the last world AllReduce 6 s late. On ranks 1, 5, 6
/// and 7 NCCL's KernelCh says that kernel ran 4 µs, while their receive ProxyOps stop
/// 6 s later: those timers are another work's, and the operation keeps no GPU span
/// (before, it showed 4 µs). Ranks 0, 2 and 4 show the 6 s wait, rank 3 a short kernel,
/// and no kernel of the job starts before its enqueue.
/// The eight `.clp` files of a capture's `plugin/` folder, and the traced operations.
fn eight_rank_capture(dir: &Path) -> (Vec<PathBuf>, Vec<serde_json::Value>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|x| x == "clp"));
    assert_eq!(files.len(), 8);
    let ops = traced(&files);
    (files, ops)
}

/// Per global rank, the GPU span (ms) of its last world AllReduce, `None` when it keeps none.
fn last_world_allreduce_ms(ops: &[serde_json::Value]) -> Vec<Option<f64>> {
    let gpu_ms = |e: &serde_json::Value| {
        e["args"].get("gpu_start_ns").map(|_| (u(e, "gpu_end_ns") - u(e, "gpu_start_ns")) as f64 / 1e6)
    };
    let mut last: BTreeMap<u64, (u64, Option<f64>)> = BTreeMap::new();
    for e in ops.iter().filter(|e| arg(e, "parallelism") == "world" && arg(e, "kind") == "AllReduce") {
        let (rank, at) = (u(e, "global_rank"), u(e, "cpu_ts_ns"));
        if last.get(&rank).is_none_or(|&(t, _)| at > t) {
            last.insert(rank, (at, gpu_ms(e)));
        }
    }
    let spans: Vec<Option<f64>> = last.values().map(|v| v.1).collect();
    eprintln!("last world AllReduce, GPU ms per rank: {spans:?}");
    assert_eq!(spans.len(), 8);
    spans
}

#[test]
fn a_kernel_that_ends_before_its_receives_keeps_no_span() {
    let (files, ops) = eight_rank_capture(Path::new("../testdata/captures/h100-nccl2.28.9-tp2pp2dp2-ep-ts/plugin"));
    let spans = last_world_allreduce_ms(&ops);
    for (rank, span) in spans.iter().enumerate() {
        match rank {
            0 | 2 | 4 => assert!(span.is_some_and(|ms| ms > 5_900.0), "rank {rank}: {span:?}"),
            3 => assert!(span.is_some_and(|ms| ms < 1.0), "rank {rank}: {span:?}"),
            _ => assert_eq!(*span, None, "rank {rank}"),
        }
    }
    let early = ops.iter().filter(|e| e["args"].get("gpu_start_ns").is_some_and(|_| u(e, "gpu_start_ns") < u(e, "cpu_ts_ns")));
    assert_eq!(early.count(), 0, "kernels mapped before their enqueue");
    let r = Command::new(env!("CARGO_BIN_EXE_commlens")).arg("stats").args(&files).output().unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    let warned = err.lines().filter(|l| l.contains("keep no GPU span")).count();
    assert!(warned >= 4, "a warning on each of ranks 1, 5, 6, 7: {err}");
}

/// The same job with `NCCL_ALGO=Ring` (`h100-nccl2.28.9-tp2pp2dp2-ep-ts-ring`, rank 3 enters
/// the last world AllReduce 3 s late): NCCL's KernelCh timers stay in step under Ring, so the
/// stale-kernel rule must not fire: every rank but 3 keeps its ~3 s wait, rank 3 a short
/// kernel. And `commlens hang` on the folder (dumps written by the fixed plugin, beside the
/// `.clp` files) names rank 3 and that AllReduce.
#[test]
fn under_ring_every_waiting_rank_keeps_its_span_and_hang_names_rank_3() {
    let dir = Path::new("../testdata/captures/h100-nccl2.28.9-tp2pp2dp2-ep-ts-ring/plugin");
    let (_, ops) = eight_rank_capture(dir);
    for (rank, span) in last_world_allreduce_ms(&ops).iter().enumerate() {
        match rank {
            3 => assert!(span.is_some_and(|ms| ms < 1.0), "rank {rank}: {span:?}"),
            _ => assert!(span.is_some_and(|ms| ms > 2_900.0), "rank {rank}: {span:?}"),
        }
    }
    let r = Command::new(env!("CARGO_BIN_EXE_commlens")).arg("hang").arg(dir).output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&r.stdout), String::from_utf8_lossy(&r.stderr));
    assert!(r.status.success(), "{err}");
    assert!(out.contains("verdict: rank did not join: comm rank 3 (no dump) never entered it"), "{out}");
    assert!(out.contains("first stalled: AllReduce") && out.contains("(8 ranks, 4.0 KiB)"), "{out}");
    assert!(err.contains("note: skipped 8 files") && err.contains("not a hang dump"), "one note for the eight .clp files: {err}");
}
