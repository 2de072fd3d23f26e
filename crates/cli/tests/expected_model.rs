//! The collective model's expectations through the binary: `report` on the
//! real NCCL 2.27.7 log (with `Bytes -> Algo` tuning lines) compares NCCL's
//! choices with the model's, and its printed count equals an independent
//! count of the log's tuned operations; the same log without its tuning lines
//! says which setting would add them; on the generated demo run (fused GPU
//! spans) `trace` gives every timed operation its expected time, expected
//! bus bandwidth and efficiency against the model, and `report` shows them.

use std::path::{Path, PathBuf};
use std::process::Command;

const LOG_2_27_7: &str = "timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log";

fn commlens(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_commlens")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-expected-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `(agree, compared)` of the `tuning: model agrees with NCCL on A/B …` line.
fn agreement(stdout: &str) -> (u64, u64) {
    let line = stdout.lines().find(|l| l.starts_with("tuning: model agrees with NCCL on ")).unwrap_or_else(|| panic!("{stdout}"));
    let frac = line["tuning: model agrees with NCCL on ".len()..].split_whitespace().next().unwrap();
    let (a, b) = frac.split_once('/').unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

/// Operations of a log that a `Bytes -> Algo` line names, counted from the
/// text alone: each thread's `<Op>: opCount …` lines wait until that thread's
/// next tuning line, which names those of the same kind and byte count
/// (count × datatype size, NCCL ≥ 2.x datatype numbers). NCCL prints one
/// tuning line per grouped call, so a process driving two GPUs has two
/// operations per line.
fn tuned_ops_in_log(path: &Path) -> u64 {
    const SIZES: [u64; 10] = [1, 1, 4, 4, 8, 8, 2, 4, 8, 2];
    let text = std::fs::read_to_string(path).unwrap();
    let mut pending: std::collections::HashMap<String, Vec<(String, u64)>> = Default::default();
    let mut tuned = 0;
    for line in text.lines() {
        let Some((prefix, msg)) = line.split_once(" NCCL INFO ") else { continue };
        // `host:pid:tid`, keyed by pid:tid (nccl-tests' stdout may run into
        // the host name of a line: `…  -1mew0:64904:64904 [1] NCCL INFO …`).
        let Some(id) = prefix.split_whitespace().find(|w| w.matches(':').count() >= 2) else { continue };
        let thread = id.rsplitn(3, ':').take(2).collect::<Vec<_>>().join(":");
        let Some((op, rest)) = msg.split_once(": ") else { continue };
        let field = |k: &str| rest.split_whitespace().skip_while(|w| *w != k).nth(1).and_then(|v| v.parse::<u64>().ok());
        if rest.starts_with("opCount ") {
            if let (Some(count), Some(dt)) = (field("count"), field("datatype")) {
                pending.entry(thread).or_default().push((op.to_string(), count * SIZES[dt as usize]));
            }
        } else if let Some((bytes, _)) = rest.split_once(" Bytes -> Algo ") {
            let bytes: u64 = bytes.trim().parse().unwrap();
            let q = pending.entry(thread).or_default();
            tuned += q.iter().filter(|(k, b)| k == op && *b == bytes).count() as u64;
            q.clear();
        }
    }
    tuned
}

#[test]
fn report_compares_nccl_tuning_with_the_model_on_a_real_log() {
    let Some(dir) = commlens_testdata::real_dir("nccl-logs") else { return };
    let log = dir.join(LOG_2_27_7);
    let out = tmp("real");
    let html = out.join("r.html");
    let (code, stdout, err) = commlens(&["report", log.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (agree, compared) = agreement(&stdout);
    let independent = tuned_ops_in_log(&log);
    assert_eq!(compared, independent, "{stdout}");
    assert!(compared >= 900, "{compared} compared");
    assert!(agree as f64 >= 0.95 * compared as f64, "{agree}/{compared}");
    // No GPU spans in a log: no efficiency line.
    assert!(!stdout.contains("expected: measured"), "{stdout}");
    let page = std::fs::read_to_string(&html).unwrap();
    for needle in [
        "<h2>Expected from the collective model</h2>",
        "<h2>Tuning disagreements</h2>",
        &format!("from {LOG_2_27_7}"),
        "GPU A100-PCIe from the name",
        "NCCL&#39;s logged search graphs for all 2 communicator handles",
        "<td class=\"\">RING/SIMPLE</td>",
        "No operation has a GPU span",
        &format!("agree on <b>{agree} of {compared}</b>"),
    ] {
        assert!(page.contains(needle), "report lacks {needle}");
    }
    // One row per size bucket of the benchmark sweep (8 MiB … 8 GiB).
    let section = page.split(r#"id="expected""#).nth(1).unwrap().split("</section>").next().unwrap();
    assert_eq!(section.matches("<td class=\"\">world0</td>").count(), 11, "{section}");

    // Without its tuning lines the log says which setting prints them.
    let text = std::fs::read_to_string(&log).unwrap();
    let stripped: String = text.lines().filter(|l| !l.contains(" Bytes -> Algo ")).map(|l| format!("{l}\n")).collect();
    let bare = out.join("untuned.log");
    std::fs::write(&bare, stripped).unwrap();
    let (code, stdout, err) = commlens(&["report", bare.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("tuning: no logged choices to compare"), "{stdout}");
    let page = std::fs::read_to_string(&html).unwrap();
    let section = page.split(r#"id="tuning""#).nth(1).unwrap().split("</section>").next().unwrap();
    assert!(section.contains("Not available") && section.contains("NCCL_DEBUG_SUBSYS=TUNING"), "{section}");
    assert!(page.contains("<h2>Expected from the collective model</h2>") && page.contains("world0"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn trace_and_report_judge_the_demo_run_against_the_model() {
    let out = tmp("demo");
    let (code, _, err) = commlens(&["demo", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let fused = out.join("fused");
    let tr = out.join("trace");
    let (code, stdout, err) = commlens(&["trace", fused.to_str().unwrap(), "-o", tr.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("collective model on cluster"), "{stdout}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(tr.join("trace.json")).unwrap()).unwrap();
    let (mut timed, mut judged) = (0, 0);
    for e in v["traceEvents"].as_array().unwrap() {
        let args = &e["args"];
        if args.get("busbw GB/s").is_none() {
            continue; // not an operation with a GPU span
        }
        timed += 1;
        let num = |k: &str| args.get(k).and_then(serde_json::Value::as_f64);
        let (Some(us), Some(bw), Some(eff)) = (num("expected_us"), num("expected_busbw_gb_s"), num("efficiency_vs_model")) else {
            panic!("timed operation without the model's figures: {e}");
        };
        assert!(us > 0.0 && bw >= 0.0 && eff.is_finite() && eff >= 0.0, "{e}");
        // Efficiency is measured over expected bus bandwidth.
        let measured = num("busbw GB/s").unwrap();
        if bw > 0.0 {
            assert!((eff - measured / bw).abs() <= 1e-9 * eff.max(1.0), "{e}");
        }
        judged += 1;
    }
    assert!(timed >= 400 && judged == timed, "{judged} of {timed} timed operations judged");

    // The demo's own report and `report` on the fused table show the section.
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let section = page.split(r#"id="expected""#).nth(1).unwrap().split("</section>").next().unwrap();
    assert!(section.contains("measured ÷ model") && section.contains("class=\"badge"), "{section}");
    assert!(page.contains("NCCL&#39;s logged search graphs for all"));
    let html = out.join("again.html");
    let (code, stdout, err) = commlens(&["report", fused.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("expected: measured bus bandwidth is ") && stdout.contains("timed operations"), "{stdout}");
    let (agree, compared) = agreement(&stdout);
    assert!(compared > 0 && agree <= compared, "{stdout}");
    let _ = std::fs::remove_dir_all(&out);
}
