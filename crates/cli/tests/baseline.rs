//! nccl-tests outputs through the binary: `stats` summarises the real
//! benchmark files, and `report --baseline` draws their curves beside a
//! generated run's operations and compares the two.

use std::process::Command;

fn commlens(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_commlens")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn stats_summarises_real_benchmark_outputs() {
    let Some(dir) = commlens_testdata::real_dir("nccl-tests") else { return };
    let (code, out, err) = commlens(&["stats", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nccl-tests results"), "{out}");
    // One summary row per run, each naming its collective and peak.
    for needle in ["AllReduce", "AllToAll", "SendRecv", "Reduce", "235.26 GB/s", "16.24 GB/s"] {
        assert!(out.contains(needle), "{needle} missing:\n{out}");
    }
    let (code, out, _) = commlens(&["stats", dir.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let runs: usize = v["nccl_tests"].as_array().unwrap().iter().map(|f| f["runs"].as_array().unwrap().len()).sum();
    assert!(runs >= 7, "{runs} runs");
}

#[test]
fn report_compares_a_run_with_its_baseline() {
    let Some(dir) = commlens_testdata::real_dir("nccl-tests") else { return };
    let tmp = std::env::temp_dir().join(format!("commlens-baseline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let g = commlens_synth::generate_traces(&commlens_synth::RunConfig::default(), &commlens_synth::TraceConfig::default())
        .unwrap();
    let kineto = tmp.join("kineto");
    g.write_kineto(&kineto, true).unwrap();
    let html = tmp.join("r.html");
    let base = dir.join("superbenchmark-tests-data-nccl_allreduce-8xA100SXM4-oldformat.log");
    let (code, _, err) = commlens(&[
        "report", kineto.to_str().unwrap(), "--baseline", base.to_str().unwrap(), "-o", html.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches(r#"<polyline class="curve""#).count(), 1);
    assert!(page.contains("nccl-tests AllReduce, 8 ranks") && page.contains("median of baseline"));
    // A file without a result table is refused, naming it.
    let other = tmp.join("r2.html");
    let (code, _, err) = commlens(&["report", kineto.to_str().unwrap(), "--baseline", html.to_str().unwrap(), "-o", other.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("r.html") && err.contains("no nccl-tests result table"), "{err}");
    let _ = std::fs::remove_dir_all(&tmp);
}
