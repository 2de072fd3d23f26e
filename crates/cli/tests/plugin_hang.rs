//! The profiler plugin's in-flight dumps through the `commlens` binary: the plugin's
//! fake-NCCL harness (`crates/plugin/tests/harness`, compiled here with the `cc` crate;
//! the plugin cdylib is built as a dev-dependency) hangs a 4-rank TP collective with
//! one rank that never enters it and dumps; `commlens hang DIR` must name the collective
//! and the rank in both output formats, skipping the plugin's trace file in the folder;
//! that trace file then goes through `report` and `diff`.

#[path = "../../plugin/tests/support/mod.rs"]
mod support;

use std::process::Command;
use support::{harness, out_dir, plugin_so, run};

fn commlens(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_commlens")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn plugin_dumps_through_commlens_hang() {
    let dir = out_dir("cli-plugin-hang");
    let mut cmd = Command::new(&harness().plain);
    cmd.arg(plugin_so()).arg("hang-join");
    let o = run(&mut cmd, &dir, &[("COMMLENS_PLUGIN_FLUSH_MS", "20")]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("DUMPED 4"));
    let d = dir.to_str().unwrap();

    let (code, out, err) = commlens(&["hang", d, "--still-running-ms", "0"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("read 4 rank dumps"), "{out}");
    assert!(out.contains("verdict: rank did not join: r0 never entered it"), "{out}");
    assert!(
        out.contains("first stalled: AllReduce seq 4 on communicator 0x0000000000007e57 \"TP0\" (4 ranks"),
        "{out}"
    );
    let running = out.lines().filter(|l| l.contains(" running ") && l.contains("0/2")).count();
    assert_eq!(running, 3, "three members run it, no channel done: {out}");
    assert!(out.contains("NEVER ENTERED"), "{out}");
    assert!(out.contains("3 pending operation(s) are blocked behind running ones"), "{out}");
    assert!(err.contains("note: skipped") && err.contains(".clp"), "the plugin's trace is not a dump: {err}");

    let (code, json, _) = commlens(&["hang", d, "--format", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["verdict"]["RankDidNotJoin"]["ranks"], serde_json::json!(["r0"]));
    assert_eq!(v["first_stalled"]["instance"], serde_json::json!({"comm_hash": 0x7E57u64, "seq": 4}));
    assert_eq!(v["ranks_dumped"], 4);

    // The plugin's own trace (.clp) through `report` and a self-`diff`.
    let clp: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "clp"))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    assert!(!clp.is_empty(), "the plugin wrote its trace");
    let html = dir.join("report.html");
    let mut args = vec!["report"];
    args.extend(clp.iter().map(String::as_str));
    args.extend(["-o", html.to_str().unwrap()]);
    let (code, out, err) = commlens(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(std::fs::read_to_string(&html).unwrap().contains("Operation mix"));
    let (code, out, err) = commlens(&["diff", &clp[0], &clp[0]]);
    assert_eq!(code, 0, "{out}{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
