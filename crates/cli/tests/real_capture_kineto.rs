//! Our own capture on real NCCL (torch 2.11, NCCL 2.28.9, H100; four ranks on
//! one GPU, TP 2 × DP 2; `scripts/gpu/capture.sh`), its Kineto traces read
//! through the binary and checked against the NCCL logs of the same job and
//! its `truth.json`. What the traces of this torch showed: the
//! `batch_isend_irecv` exchange is a `send` and a `recv` call that launch
//! nothing plus a closing `nccl:coalesced` annotation that launches the one
//! `SendRecv` kernel (no `External id`), which once made an extra
//! kernel-only communicator of unknown sizes; the default group named by the
//! ops' metadata plus the operation-less world handle made an empty second
//! world; and `all_to_allv` records the whole buffer where NCCL counts per peer.

mod common;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn capture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/captures/h100-nccl2.28.9-tp2dp2")
}

fn ranks(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(|r| r.as_u64().unwrap()).collect()
}

fn stats(folder: &str) -> Value {
    let p = capture().join(folder);
    let r = common::run_limited(common::commlens_cmd(&["stats", "--format", "json", p.to_str().unwrap()]), 120, "stats");
    assert_eq!(r.code, 0, "{}", r.err);
    serde_json::from_str::<Value>(&r.out).expect("json")["stats"].clone()
}

/// Operations per kind of a communicator (its `mix`).
fn mix(c: &Value) -> BTreeMap<String, u64> {
    c["mix"].as_array().unwrap().iter().map(|m| (m[0].as_str().unwrap().to_string(), m[1].as_u64().unwrap())).collect()
}

fn comm_of<'a>(comms: &'a [Value], members: &[u64]) -> &'a Value {
    comms.iter().find(|c| ranks(&c["global_ranks"]) == members).unwrap_or_else(|| {
        panic!("{members:?} not found among {:?}", comms.iter().map(|c| ranks(&c["global_ranks"])).collect::<Vec<_>>())
    })
}

#[test]
fn kineto_traces_of_a_real_torch_job_agree_with_its_logs_and_truth() {
    let truth: Value = serde_json::from_slice(&std::fs::read(capture().join("truth.json")).unwrap()).unwrap();
    let prof = ranks(&truth["profiled_iterations"]);
    let iters = prof[1] - prof[0]; // iterations 3..8: five
    let world = truth["world"].as_u64().unwrap();
    let (k, l) = (stats("kineto"), stats("logs"));
    let (kc, lc) = (k["comms"].as_array().unwrap(), l["comms"].as_array().unwrap());

    // Five communicators, each with operations and grouped by its id: the
    // world, two TP and two DP groups; no kernel-only or empty one.
    assert_eq!(kc.len(), 5, "{kc:?}");
    for c in kc {
        assert!(c["ops"].as_u64().unwrap() > 0 && c["grouping"] == "CommId" && c["unknown_size"] == 0, "{c}");
        assert_eq!(c["members_seen"], c["nranks"], "{c}");
    }
    // Per rank and iteration: 2 TP all-reduces, all-gather, reduce-scatter,
    // send, recv, all-to-all, DP all-reduce.
    let per_iteration = 8;
    for r in k["ranks"].as_array().unwrap() {
        assert_eq!(r["ops"].as_u64().unwrap(), per_iteration * iters, "{r}");
        assert_eq!((r["collective_ops"].as_u64(), r["p2p_ops"].as_u64()), (Some(6 * iters), Some(2 * iters)), "{r}");
    }
    assert_eq!(k["total_unknown_size"], 0);
    let n = |m: &[(&str, u64)]| m.iter().map(|&(s, c)| (s.to_string(), c)).collect::<BTreeMap<_, _>>();
    for g in truth["tp_groups"].as_array().unwrap() {
        let (kg, lg) = (comm_of(kc, &ranks(g)), comm_of(lc, &ranks(g)));
        assert_eq!(mix(kg), n(&[("AllReduce", 4 * iters), ("AllGather", 2 * iters), ("ReduceScatter", 2 * iters)]), "{kg}");
        // Same operations every iteration: the same bytes per operation as the log.
        let per_op = |c: &Value| c["bytes"].as_u64().unwrap() as f64 / c["ops"].as_u64().unwrap() as f64;
        assert_eq!(per_op(kg), per_op(lg), "TP {g}: kineto {kg} logs {lg}");
    }
    for g in truth["dp_groups"].as_array().unwrap() {
        let (kg, lg) = (comm_of(kc, &ranks(g)), comm_of(lc, &ranks(g)));
        assert_eq!(mix(kg), n(&[("AllReduce", 2 * iters)]), "{kg}");
        assert_eq!(kg["bytes"].as_u64().unwrap() / (2 * iters), lg["bytes"].as_u64().unwrap() / lg["ops"].as_u64().unwrap());
    }
    let w = comm_of(kc, &(0..world).collect::<Vec<_>>());
    assert_eq!(mix(w), n(&[("AllToAll", world * iters), ("Send", world * iters), ("Recv", world * iters)]), "{w}");

    // Sizes per kind equal the log's (the log's all-reduces include the
    // barrier and the final world all-reduce, outside the profiled steps).
    let sizes = |s: &Value| -> BTreeMap<String, (u64, u64)> {
        let ops = s["ops"].as_array().unwrap();
        ops.iter().map(|o| (o["kind"].as_str().unwrap().to_string(), (o["min_bytes"].as_u64().unwrap(), o["max_bytes"].as_u64().unwrap()))).collect()
    };
    let (ks, ls) = (sizes(&k), sizes(&l));
    for kind in ["AllGather", "ReduceScatter", "AllToAll", "Send", "Recv"] {
        assert_eq!(ks.get(kind), ls.get(kind), "{kind}: kineto {ks:?} logs {ls:?}");
    }
    assert_eq!(ks["AllToAll"], (256 << 10, 256 << 10), "per peer: 1 MiB of float over 4 ranks");
    assert_eq!(ks.keys().map(String::as_str).collect::<Vec<_>>(), ["AllGather", "AllReduce", "AllToAll", "Recv", "ReduceScatter", "Send"]);

    // Every operation is timed by its kernel; a send and a recv of one
    // exchange share the exchange's SendRecv kernel, on the world
    // communicator, with the TP peer as peer.
    let out = common::temp_dir("kineto-capture", "trace");
    let p = capture().join("kineto");
    let r = common::run_limited(
        common::commlens_cmd(&["trace", "-o", out.to_str().unwrap(), p.to_str().unwrap()]),
        120,
        "trace",
    );
    assert_eq!(r.code, 0, "{}", r.err);
    let t: Value = serde_json::from_slice(&std::fs::read(out.join("trace.json")).unwrap()).unwrap();
    let ev = t.get("traceEvents").unwrap_or(&t).as_array().unwrap();
    let ops: Vec<&Value> = ev.iter().filter(|e| e["cat"] == "nccl").map(|e| &e["args"]).collect();
    assert_eq!(ops.len() as u64, per_iteration * iters * world);
    assert!(ops.iter().all(|a| a["gpu_start_ns"].is_u64() && a["kernel"].is_string()), "an operation without its kernel");
    let mut exchanges: BTreeMap<(u64, u64), Vec<&str>> = BTreeMap::new();
    for a in ops.iter().filter(|a| a["kind"] == "Send" || a["kind"] == "Recv") {
        let rank = a["global_rank"].as_u64().unwrap();
        assert!(a["kernel"].as_str().unwrap().starts_with("ncclDevKernel_SendRecv"), "{a}");
        assert_eq!((a["nranks"].as_u64(), a["peer"].as_u64(), a["bytes"].as_u64()), (Some(world), Some(rank ^ 1), Some(512 << 10)), "{a}");
        exchanges.entry((rank, a["correlation_id"].as_u64().unwrap())).or_default().push(a["kind"].as_str().unwrap());
    }
    assert_eq!(exchanges.len() as u64, world * iters, "one kernel per exchange and rank");
    assert!(exchanges.values().all(|v| v.len() == 2 && v.contains(&"Send") && v.contains(&"Recv")), "{exchanges:?}");
    let _ = std::fs::remove_dir_all(&out);
}
