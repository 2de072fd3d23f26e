//! The binary end to end: demo, stats in every format, topo, and errors.

use std::path::PathBuf;
use std::process::Command;

fn commlens(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_commlens")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Splits one CSV record (RFC 4180 quoting).
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out
}

fn demo_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("commlens-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out, err) = commlens(&["demo", "--out", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Ranks") && out.contains("Communicator bottlenecks"), "{out}");
    // The whole job ran: fusion (exact on the generated capture) and its outputs.
    assert!(out.contains("496 of 496 log records (100.0%) got a kernel"), "{out}");
    assert!(out.contains("precision 1.000, recall 1.000"), "{out}");
    for f in ["fused/fused.parquet", "fused/trace.pftrace", "fused/trace.json", "fused/summary.json", "report.html"] {
        assert!(dir.join(f).is_file(), "demo wrote {f}");
    }
    // The fused trace draws the iteration ranges (2 per rank) in the operations' clock.
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fused/trace.json")).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let ts = |e: &serde_json::Value| e["ts"].as_f64().unwrap();
    let ops: Vec<f64> = events.iter().filter(|e| e["cat"] == "nccl").map(ts).collect();
    let (lo, hi) = ops.iter().fold((f64::MAX, f64::MIN), |(a, b), &t| (a.min(t), b.max(t)));
    let nvtx: Vec<&serde_json::Value> = events.iter().filter(|e| e["cat"] == "nvtx").collect();
    assert_eq!(nvtx.len(), 8, "iteration ranges, NCCL's own per-op ranges left out");
    assert!(nvtx.iter().all(|e| ts(e) >= lo - 1e6 && ts(e) <= hi), "ranges in the ops' clock");
    // The logs alone, for the commands that read one family.
    dir.join("logs")
}

#[test]
fn demo_then_stats_in_all_formats() {
    let dir = demo_dir("formats");
    let d = dir.to_str().unwrap();

    let (code, out, err) = commlens(&["stats", d]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("read 4 files"), "{err}");
    assert!(out.contains("world") && out.contains("AllReduce"));

    let (code, csv, _) = commlens(&["stats", d, "--format", "csv"]);
    assert_eq!(code, 0);
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().starts_with("rank,host,pid,cuda_dev,communicator"));
    let ops: u64 = lines.map(|l| csv_fields(l)[8].parse::<u64>().unwrap()).sum();
    assert_eq!(ops, 496, "the default run's 112+112+136+136 operations");

    let (code, json, _) = commlens(&["stats", d, "--format", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["stats"]["total_ops"], 496);
    assert_eq!(v["stats"]["ranks"].as_array().unwrap().len(), 4);

    let (code, topo, _) = commlens(&["topo", d, "--format", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&topo).unwrap();
    assert_eq!(v["topologies"][0]["host"], "node00");
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn errors_name_the_file_and_fail() {
    let dir = std::env::temp_dir().join(format!("commlens-cli-err-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("notes.txt");
    std::fs::write(&f, "hello\nthis is not a log\n").unwrap();
    let (code, out, err) = commlens(&["stats", f.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(out.is_empty());
    assert!(err.contains("notes.txt") && err.contains("not an NCCL debug log"), "{err}");

    let (code, _, err) = commlens(&["stats", dir.join("missing.log").to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("missing.log"), "{err}");

    // A log without topology: `topo` says what is missing instead of printing nothing.
    let log = dir.join("ops.log");
    std::fs::write(
        &log,
        "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2] stream 0x3\n",
    )
    .unwrap();
    let (code, out, err) = commlens(&["topo", log.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(out.is_empty() && err.contains("no topology"), "{err}");
    let (code, out, _) = commlens(&["stats", log.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("16 B"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Dumps of a 4-rank TP group where rank 3 never entered AllReduce seq 7, and
/// of a ring stuck mid-way where rank 2 has the least progress.
#[test]
fn hang_names_the_collective_and_the_rank() {
    let write = |dir: &std::path::Path, r: u32, current: serde_json::Value, past_to: u64| {
        let past: Vec<_> = (past_to.saturating_sub(2)..past_to)
            .map(|s| serde_json::json!({"seq": s, "op": "AllReduce", "bytes": 1024}))
            .collect();
        let d = serde_json::json!({
            "format": "commlens-hang", "version": 1, "host": "node0", "pid": 100 + r,
            "global_rank": r, "time_ns": 100_000_000_000i64, "reason": "timeout",
            "comms": [{"comm_hash": 4242, "nranks": 4, "rank": r, "desc": "TP0",
                       "past": past, "current": current, "pending": []}]
        });
        std::fs::write(dir.join(format!("hang_r{r}.json")), serde_json::to_string(&d).unwrap()).unwrap();
    };
    let base = std::env::temp_dir().join(format!("commlens-cli-hang-{}", std::process::id()));
    let (a, b) = (base.join("notjoined"), base.join("ring"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    for r in 0..4u32 {
        let running = serde_json::json!([{"seq": 7, "op": "AllReduce", "bytes": 1048576, "start_ns": 1_000_000_000i64}]);
        write(&a, r, if r == 3 { serde_json::json!([]) } else { running }, 7);
        let progress = if r == 2 { 3 } else { 12 };
        write(
            &b,
            r,
            serde_json::json!([{"seq": 12, "op": "AllReduce", "bytes": 1048576, "start_ns": 1_000_000_000i64,
                                "progress_done": progress, "progress_total": 16}]),
            12,
        );
    }
    let (code, out, err) = commlens(&["hang", a.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rank did not join: r3 never entered it"), "{out}");
    assert!(out.contains("first stalled: AllReduce seq 7") && out.contains("\"TP0\""), "{out}");
    assert!(out.contains("NEVER ENTERED"));
    let (code, out, _) = commlens(&["hang", b.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("r2 has the least progress"), "{out}");
    let (code, json, _) = commlens(&["hang", b.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["first_stalled"]["instance"]["seq"], 12);
    // Not a dump: a clear error naming the file.
    let junk = base.join("junk.json");
    std::fs::write(&junk, "{\"traceEvents\": []}").unwrap();
    let (code, _, err) = commlens(&["hang", junk.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("junk.json") && err.contains("commlens-hang"), "{err}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn trace_writes_chrome_and_perfetto_files() {
    let dir = demo_dir("trace");
    let out = dir.join("trace-out");
    let (code, stdout, err) = commlens(&["trace", dir.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("496 CPU-only instants"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("trace.json")).unwrap()).unwrap();
    // One instant per operation on its CPU track (category nccl_enqueue)
    // and one more on the rank's parallelism track.
    let events = json["traceEvents"].as_array().unwrap();
    let ops: Vec<_> = events.iter().filter(|e| e["ph"] == "i" && e["cat"] == "nccl_enqueue").collect();
    assert_eq!(ops.len(), 496);
    assert_eq!(events.iter().filter(|e| e["ph"] == "i").count(), 2 * 496);
    // Every operation carries its communicator's inferred parallelism class.
    assert!(ops.iter().all(|e| e["args"]["parallelism"].is_string()));
    assert!(std::fs::metadata(out.join("trace.pftrace")).unwrap().len() > 1000);
    // commlens's own outputs in an input folder are skipped, not read: a
    // folder of traces we wrote holds no inputs; an output folder alone is
    // read through its Parquet table only (tests/parquet_input.rs).
    let (code, _, err) = commlens(&["stats", out.to_str().unwrap()]);
    assert_eq!(code, 2, "a folder of our traces holds no inputs: {err}");
    assert!(err.contains("no input files found"), "{err}");
    let (code, _, err) = commlens(&["stats", dir.parent().unwrap().join("fused").to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("fused.parquet: commlens table") && !err.contains("trace.json"), "{err}");
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// Writes a generated run (`iterations` long) as logs into a fresh folder.
fn generated_run(tag: &str, iterations: usize) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("commlens-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = commlens_synth::RunConfig { iterations, ..commlens_synth::RunConfig::default() };
    commlens_synth::write_to_dir(&commlens_synth::generate(&cfg), &dir).unwrap();
    dir
}

#[test]
fn diff_exits_one_on_a_regression_only() {
    let a = generated_run("diff-a", 2);
    let a2 = generated_run("diff-a2", 2);
    let b = generated_run("diff-b", 4);
    // The same run twice: nothing changed, exit 0.
    let (code, out, err) = commlens(&["diff", a.to_str().unwrap(), a2.to_str().unwrap(), "--all"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("AllReduce ops per rank") && !out.contains("REGRESSED"), "{out}");
    // Twice the iterations: twice the volume (a change) and a longer run (a regression).
    let (code, out, err) = commlens(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    let span = out.lines().find(|l| l.contains("run span")).expect("span row");
    assert!(span.contains("REGRESSED"), "{span}");
    let vol = out.lines().find(|l| l.contains("AllReduce bytes per rank")).expect("volume row");
    assert!(vol.contains("changed") && !vol.contains("REGRESSED"), "{vol}");
    assert!(err.contains("regression"), "{err}");
    // A threshold above the change passes; JSON carries every row.
    let (code, _, _) = commlens(&["diff", a.to_str().unwrap(), b.to_str().unwrap(), "--threshold", "500"]);
    assert_eq!(code, 0);
    let (_, json, _) = commlens(&["diff", a.to_str().unwrap(), b.to_str().unwrap(), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["rows"].as_array().unwrap().iter().any(|r| r["verdict"] == "Regressed"));
    // A missing input is an error (exit 2), not a pass.
    let (code, _, err) = commlens(&["diff", a.to_str().unwrap(), "/nonexistent/run"]);
    assert_eq!(code, 2, "{err}");
    for d in [a, a2, b] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn model_and_report_on_the_generated_run() {
    let dir = generated_run("report", 2);
    let conf = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/demo-model.conf"));
    // The generator sends exactly eq. 5.4's pipeline volume: ratio 1.000.
    let (code, out, err) = commlens(&["model", conf.to_str().unwrap(), dir.to_str().unwrap(), "--format", "csv"]);
    assert_eq!(code, 0, "{err}");
    let pp = out.lines().find(|l| l.starts_with("PP,")).expect("PP row");
    assert_eq!(csv_fields(pp)[5].parse::<f64>().ok(), Some(1.0), "{pp}");
    assert!(out.lines().any(|l| l.starts_with("TP,")), "{out}");
    // Theory alone works without inputs.
    let (code, out, _) = commlens(&["model", conf.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("eq. 5.5"), "{out}");
    let html = dir.join("report.html");
    let (code, out, err) = commlens(&["report", dir.to_str().unwrap(), "--model", conf.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    for heading in ["Operation mix", "Message sizes", "Volume per rank", "Stragglers", "Model against observed", "Communicators and their parallelism"] {
        assert!(page.contains(heading), "report lacks {heading}");
    }
    assert!(page.matches("<svg").count() >= 5);
    assert!(!page.contains("<script src") && !page.contains("<link ") && !page.contains("url(http"), "self-contained");
    // A broken model file is an error naming the file and line.
    let bad = dir.join("bad.conf");
    std::fs::write(&bad, "layers = 4\nhidden: 1024\n").unwrap();
    let (code, _, err) = commlens(&["model", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.conf") && err.contains("line 2"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn fuse_with_kineto_and_a_mismatched_pair() {
    let dir = std::env::temp_dir().join(format!("commlens-cli-fuse-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let tcfg = commlens_synth::TraceConfig::default();
    let g = commlens_synth::generate_traces(&commlens_synth::RunConfig::default(), &tcfg).unwrap();
    g.write_logs(&dir.join("logs")).unwrap();
    g.write_kineto(&dir.join("kineto"), true).unwrap();
    let (logs, kineto, out) = (dir.join("logs"), dir.join("kineto"), dir.join("out"));
    let (code, stdout, err) =
        commlens(&["fuse", "--nccl-log", logs.to_str().unwrap(), "--kineto", kineto.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("496 of 496 log records (100.0%) got a kernel"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["matched_records"], 496);
    assert_eq!(summary["ranks"].as_array().unwrap().len(), 4);
    // Logs of another run: a loud warning, never a silent success.
    let other = dir.join("other");
    let cfg = commlens_synth::RunConfig { seed: 4242, tp: 4, pp: 1, ..commlens_synth::RunConfig::default() };
    commlens_synth::write_to_dir(&commlens_synth::generate(&cfg), &other).unwrap();
    let (code, stdout, _) =
        commlens(&["fuse", "--nccl-log", other.to_str().unwrap(), "--kineto", kineto.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(code == 2 || stdout.contains("warning: "), "{stdout}");
    // Neither --nsys nor --kineto: a usage error.
    let (code, _, _) = commlens(&["fuse", "--nccl-log", logs.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code, 2);
    let _ = std::fs::remove_dir_all(&dir);
}
