//! `commlens fuse` across hosts whose clocks disagree: a generated run over
//! four nodes whose trace files read k × 3 ms ahead on node k. The fused
//! spans must come out on one clock (one offset per host, recovered to well
//! under the skew), and with `--clock-sync off` they must keep the skew.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

const SKEW_NS: i64 = 3_000_000;

fn commlens(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_commlens")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Per collective instance (communicator, comm_seq) with members on more than
/// one host: the spread of the members' kernel ends, in ns.
fn cross_host_spreads(trace_json: &Path, host_of_rank: &HashMap<u64, String>) -> Vec<i64> {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(trace_json).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let mut inst: HashMap<(String, u64), Vec<(i64, String)>> = HashMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X" && e["cat"] == "nccl") {
        let a = &e["args"];
        let kind = a["kind"].as_str().unwrap_or("");
        if matches!(kind, "Send" | "Recv" | "SendRecv") {
            continue;
        }
        let (Some(end), Some(rank), Some(seq)) = (a["gpu_end_ns"].as_i64(), a["global_rank"].as_u64(), a["comm_seq"].as_u64())
        else {
            continue;
        };
        let comm = a["comm"].as_str().unwrap_or("").to_string();
        inst.entry((comm, seq)).or_default().push((end, host_of_rank[&rank].clone()));
    }
    inst.values()
        .filter(|m| m.iter().any(|(_, h)| *h != m[0].1))
        .map(|m| m.iter().map(|x| x.0).max().unwrap() - m.iter().map(|x| x.0).min().unwrap())
        .collect()
}

fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
fn fused_spans_of_skewed_hosts_land_on_one_clock() {
    let dir = std::env::temp_dir().join(format!("commlens-fuse-clock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // tp 2 inside a node; the DP and PP groups cross the four nodes.
    let cfg = commlens_synth::RunConfig { tp: 2, pp: 2, dp: 2, gpus_per_node: 2, ..commlens_synth::RunConfig::default() };
    let tcfg = commlens_synth::TraceConfig { node_clock_skew_ns: SKEW_NS, ..commlens_synth::TraceConfig::default() };
    let g = commlens_synth::generate_traces(&cfg, &tcfg).unwrap();
    let (logs, nsys) = (dir.join("logs"), dir.join("nsys"));
    g.write_logs(&logs).unwrap();
    g.write_nsys(&nsys, &tcfg).unwrap();
    let host_of_rank: HashMap<u64, String> =
        (0..8).map(|r| (r as u64, format!("node{:02}", g.clock_error_ns(r) / SKEW_NS))).collect();

    let synced = dir.join("synced");
    let (code, stdout, err) = commlens(&[
        "fuse", "--nccl-log", logs.to_str().unwrap(), "--nsys", nsys.to_str().unwrap(), "-o", synced.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("clocks put on one timeline"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(synced.join("summary.json")).unwrap()).unwrap();
    let offsets = summary["clock_offsets"].as_array().unwrap();
    assert_eq!(offsets.len(), 4, "one offset per host: {offsets:?}");
    for o in offsets {
        let host = o["domain"].as_str().unwrap();
        let k: i64 = host.trim_start_matches("node").parse().unwrap();
        let got = o["offset_ns"].as_i64().unwrap();
        // Node k reads k × 3 ms ahead: its spans move back by that much.
        assert!((got + k * SKEW_NS).abs() < 100_000, "{host}: offset {got} ns, expected {} ns", -k * SKEW_NS);
        assert_eq!(o["ranks"], 2, "{o}");
    }
    assert!(summary["unsynchronised_ranks"].as_array().unwrap().is_empty());

    let raw = dir.join("raw");
    let (code, stdout, err) = commlens(&[
        "fuse", "--nccl-log", logs.to_str().unwrap(), "--nsys", nsys.to_str().unwrap(), "-o", raw.to_str().unwrap(),
        "--clock-sync", "off",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!stdout.contains("clocks put on one timeline"), "{stdout}");

    let after = cross_host_spreads(&synced.join("trace.json"), &host_of_rank);
    let before = cross_host_spreads(&raw.join("trace.json"), &host_of_rank);
    assert!(after.len() > 20 && after.len() == before.len(), "{} vs {} instances", after.len(), before.len());
    let (a, b) = (median(after), median(before));
    println!("cross-host collective instances: median end spread {b} ns unsynchronised, {a} ns synchronised");
    assert!(b >= SKEW_NS * 9 / 10, "the skew shows without sync: {b} ns");
    assert!(a * 10 < b, "synchronised spread {a} ns is not well under the raw {b} ns");
    let _ = std::fs::remove_dir_all(&dir);
}
