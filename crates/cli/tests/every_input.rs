//! `report` and `diff` on every kind of input commlens reads: each real NCCL
//! log, Kineto trace and NVIDIA plugin sample in `../shared/data/real`, and
//! the generated logs, nsys exports and Kineto traces. A run diffed with
//! itself never regresses; every report is a complete page.

use std::path::{Path, PathBuf};
use std::process::Command;

fn commlens(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_commlens")).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn real(sub: &str) -> Option<PathBuf> {
    commlens_testdata::real_dir(sub)
}

/// Runs report and self-diff on one input set; returns whether it had operations.
fn check(label: &str, inputs: &[&Path], tmp: &Path) {
    let args: Vec<&str> = inputs.iter().map(|p| p.to_str().unwrap()).collect();
    let html = tmp.join(format!("{}.html", label.replace(['/', ' '], "_")));
    let mut rep = vec!["report"];
    rep.extend(&args);
    rep.extend(["-o", html.to_str().unwrap()]);
    let (code, out, err) = commlens(&rep);
    assert_eq!(code, 0, "{label}: report failed: {out}{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Operation mix") && page.contains("</html>"), "{label}: incomplete page");
    assert!(page.contains("<svg"), "{label}: no chart");
    if inputs.len() == 1 {
        let (code, out, err) = commlens(&["diff", args[0], args[0]]);
        assert_eq!(code, 0, "{label}: a run differs from itself: {out}{err}");
        assert!(!out.contains("REGRESSED"), "{label}: {out}");
    }
    eprintln!("{label}: report and self-diff ok");
}

#[test]
fn report_and_diff_read_every_input_kind() {
    let tmp = std::env::temp_dir().join(format!("commlens-every-input-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    if let Some(dir) = real("nccl-logs") {
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "log") {
                // Logs of init only (no COLL lines) have nothing to report:
                // that must be an error that says so, never an empty page.
                // (Topology-only logs are refused by `stats` as well.)
                let (_, json, _) = commlens(&["stats", p.to_str().unwrap(), "--format", "json"]);
                let v = serde_json::from_str::<serde_json::Value>(&json).ok();
                let ops = v.as_ref().and_then(|v| v["stats"]["total_ops"].as_u64());
                let bench = v.as_ref().is_some_and(|v| v["nccl_tests"].is_array());
                if ops.unwrap_or(0) == 0 && bench {
                    // nccl-tests output whose NCCL lines hold no operation: a benchmark report.
                    let out = tmp.join("bench.html");
                    let (code, _, err) = commlens(&["report", p.to_str().unwrap(), "-o", out.to_str().unwrap()]);
                    assert_eq!(code, 0, "{err}");
                    assert!(std::fs::read_to_string(&out).unwrap().contains("nccl-tests"));
                } else if ops.unwrap_or(0) > 0 {
                    check(&p.file_name().unwrap().to_string_lossy(), &[&p], &tmp);
                    n += 1;
                } else {
                    let out = tmp.join("empty.html");
                    let (code, _, err) = commlens(&["report", p.to_str().unwrap(), "-o", out.to_str().unwrap()]);
                    assert!(code == 2 && err.contains("no NCCL operations"), "{err}");
                }
            }
        }
        assert!(n >= 4, "the real logs with per-operation lines ({n})");
    }
    if let Some(dir) = real("kineto") {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.to_string_lossy().ends_with(".json.gz") {
                check(&p.file_name().unwrap().to_string_lossy(), &[&p], &tmp);
            }
        }
    }
    if let Some(dir) = real("plugin-json") {
        let inspector: Vec<PathBuf> = (44..=47)
            .map(|i| dir.join(format!("sugarlxn-inspector-all_reduce_perf-4xRTX4090-rank-pid32979{i}.jsonl")))
            .collect();
        let refs: Vec<&Path> = inspector.iter().map(|p| p.as_path()).collect();
        check("inspector 4 ranks", &refs, &tmp);
        check("inspector rank", &[&inspector[0]], &tmp);
        check("example plugin", &[&dir.join("pha-Z-nccl-example-profiler-trace-p2p-ring-4rank-rank0.txt")], &tmp);
    }
    // Generated: logs, nsys exports (one per node), Kineto traces.
    let g = commlens_synth::generate_traces(&commlens_synth::RunConfig::default(), &commlens_synth::TraceConfig::default())
        .unwrap();
    let logs = tmp.join("gen/logs");
    g.write_logs(&logs).unwrap();
    let nsys = tmp.join("gen/nsys");
    g.write_nsys(&nsys, &commlens_synth::TraceConfig::default()).unwrap();
    let kineto = tmp.join("gen/kineto");
    g.write_kineto(&kineto, true).unwrap();
    for (label, p) in [("generated logs", &logs), ("generated nsys", &nsys), ("generated kineto", &kineto)] {
        check(label, &[p.as_path()], &tmp);
    }
    // Kernel traces carry compute kernels: the overlap section is filled.
    let page = std::fs::read_to_string(tmp.join("generated_nsys.html")).unwrap();
    assert!(page.contains("Overlap with compute") && !page.contains("Needs compute kernels next to NCCL kernels"));
    let _ = std::fs::remove_dir_all(&tmp);
}
