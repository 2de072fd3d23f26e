//! Inputs given twice and jobs that cannot be: the same log under two names,
//! a copied Kineto trace, two logs claiming one rank of one communicator.
//! Repeats are read once with a note naming both files; a contradicting file
//! is left out with a warning, and no rank is invented for it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn commlens(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_commlens")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-dup-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `stats --format json` of `paths`: (stats object, stderr).
fn stats(paths: &[&Path]) -> (serde_json::Value, String) {
    let mut args = vec!["stats", "--format", "json"];
    args.extend(paths.iter().map(|p| s(p)));
    let (code, out, err) = commlens(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    (v["stats"].clone(), err)
}

/// One process's log: rank `rank` of a 2-rank communicator `commId 0x8931…`,
/// three AllReduces.
fn log(host: &str, pid: u32, ptr: u64, rank: u32) -> String {
    let p = format!("{host}:{pid}:{} [{rank}] NCCL INFO ", pid + 1);
    let mut lines = vec![
        format!("{p}NCCL version 2.20.5+cuda12.4"),
        format!(
            "{p}comm {ptr:#x} rank {rank} nranks 2 cudaDev {rank} nvmlDev {rank} busId {} commId 0x89315395f7ecf46a - Init COMPLETE",
            46000 + rank * 1000
        ),
    ];
    for i in 0..3 {
        lines.push(format!(
            "{p}AllReduce: opCount {i} sendbuff 0x7f0 recvbuff 0x7f0 count 1024 datatype 7 op 0 root 0 comm {ptr:#x} [nranks=2] stream 0x55"
        ));
    }
    lines.join("\n") + "\n"
}

#[test]
fn the_same_log_under_two_names_is_read_once() {
    let d = temp_dir("log");
    let (a, b, copy) = (d.join("rank0.log"), d.join("rank1.log"), d.join("rank0-copy.log"));
    std::fs::write(&a, log("h1", 100, 0x5590dbcd3180, 0)).unwrap();
    std::fs::write(&b, log("h1", 300, 0x7590dbcd3180, 1)).unwrap();
    std::fs::copy(&a, &copy).unwrap();
    let (once, _) = stats(&[&a, &b]);
    let (twice, err) = stats(&[&a, &b, &copy]);
    assert_eq!(once["total_ops"], 6);
    assert_eq!(twice["total_ops"], once["total_ops"], "{err}");
    assert_eq!(twice["ranks"].as_array().unwrap().len(), 2);
    let note = err.lines().find(|l| l.starts_with("note:") && l.contains("same content")).unwrap_or_else(|| panic!("{err}"));
    assert!(note.contains("rank0.log") && note.contains("rank0-copy.log"), "{note}");
    // Through a folder, and the same process with other bytes (a line of
    // program output in front): still read once.
    let with_text = d.join("rank0-stdout.log");
    std::fs::write(&with_text, format!("epoch 1\n{}", log("h1", 100, 0x5590dbcd3180, 0))).unwrap();
    let (v, err) = stats(&[&d]);
    assert_eq!(v["total_ops"], 6, "{err}");
    assert!(err.contains("repeats") && err.contains("rank0-stdout.log"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_copied_kineto_trace_is_read_once() {
    let d = temp_dir("kineto");
    let g = commlens_synth::generate_traces(&commlens_synth::RunConfig::default(), &commlens_synth::TraceConfig::default())
        .unwrap();
    let k = d.join("kineto");
    g.write_kineto(&k, true).unwrap();
    let mut traces: Vec<PathBuf> = std::fs::read_dir(&k).unwrap().map(|e| e.unwrap().path()).collect();
    traces.sort();
    let first = traces[0].clone();
    let copy_dir = d.join("again");
    std::fs::create_dir_all(&copy_dir).unwrap();
    let copy = copy_dir.join(format!("copy-{}", first.file_name().unwrap().to_str().unwrap()));
    std::fs::copy(&first, &copy).unwrap();
    let (once, _) = stats(&[&first]);
    let (twice, err) = stats(&[&first, &copy]);
    assert!(once["total_ops"].as_u64().unwrap() > 0);
    assert_eq!(twice["total_ops"], once["total_ops"], "{err}");
    assert_eq!(twice["ranks"], once["ranks"], "{err}");
    assert!(err.contains("same content") && err.contains("copy-"), "{err}");
    // All ranks plus the copy: as many operations as all ranks.
    let (all, _) = stats(&[&k]);
    let (all_twice, _) = stats(&[&k, &copy_dir]);
    assert_eq!(all_twice["total_ops"], all["total_ops"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn two_logs_claiming_one_rank_are_not_merged() {
    let d = temp_dir("conflict");
    let (a, b, other) = (d.join("a.log"), d.join("b.log"), d.join("c.log"));
    std::fs::write(&a, log("h1", 100, 0x5590dbcd3180, 0)).unwrap();
    // Another host's process claims rank 0 of the same communicator.
    std::fs::write(&b, log("h2", 200, 0x6590dbcd3180, 0)).unwrap();
    std::fs::write(&other, log("h1", 300, 0x7590dbcd3180, 1)).unwrap();
    let (v, err) = stats(&[&a, &b, &other]);
    let w = err.lines().find(|l| l.starts_with("warning:") && l.contains("rank 0")).unwrap_or_else(|| panic!("{err}"));
    assert!(w.contains("a.log") && w.contains("b.log") && w.contains("0x89315395f7ecf46a"), "{w}");
    let ranks: Vec<u64> = v["ranks"].as_array().unwrap().iter().map(|r| r["rank"].as_u64().unwrap()).collect();
    assert_eq!(ranks, [0, 1], "no third rank invented: {err}");
    assert_eq!(v["total_ops"], 6);
    // The report path (whole table) agrees.
    let html = d.join("r.html");
    let (code, _, err) = commlens(&["report", s(&a), s(&b), s(&other), "-o", s(&html)]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning:") && err.contains("b.log is left out"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn two_different_traces_of_rank_0_are_not_both_counted() {
    let d = temp_dir("kineto-rank0");
    let g = commlens_synth::generate_traces(&commlens_synth::RunConfig::default(), &commlens_synth::TraceConfig::default())
        .unwrap();
    let k = d.join("kineto");
    g.write_kineto(&k, false).unwrap();
    let mut traces: Vec<PathBuf> = std::fs::read_dir(&k).unwrap().map(|e| e.unwrap().path()).collect();
    traces.sort();
    let (all, _) = stats(&[&k]);
    // The same capture exported again with other bytes (pretty-printed): same process, same rank.
    let first = traces[0].clone();
    let text = std::fs::read_to_string(&first).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let again = d.join("again");
    std::fs::create_dir_all(&again).unwrap();
    std::fs::write(again.join("rank0-again.json"), serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let (with_again, err) = stats(&[&k, &again]);
    assert_eq!(with_again["total_ops"], all["total_ops"], "{err}");
    assert!(err.contains("rank0-again.json") && err.contains("already read") && err.contains("read once"), "{err}");
    // Another process claiming rank 0 (a second run): left out, named.
    let pid = v["traceEvents"].as_array().unwrap().iter().find_map(|e| e["pid"].as_u64().filter(|p| *p > 100)).unwrap();
    let other = text.replace(&format!("\"pid\": {pid}"), "\"pid\": 4242").replace(&format!("\"pid\":{pid}"), "\"pid\":4242");
    assert_ne!(other, text, "the trace names its process id");
    let run2 = d.join("run2");
    std::fs::create_dir_all(&run2).unwrap();
    std::fs::write(run2.join("rank0-run2.json"), other).unwrap();
    let (with_other, err) = stats(&[&k, &run2]);
    assert_eq!(with_other["total_ops"], all["total_ops"], "{err}");
    assert_eq!(with_other["ranks"], all["ranks"], "no rank invented: {err}");
    assert!(err.contains("rank0-run2.json") && err.contains("claims rank 0") && err.contains("left out"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn many_contradicting_ranks_are_named_a_few_and_counted() {
    // One transcript where twelve processes on twelve hosts each claim rank 0
    // of one communicator (runs appended to one file): eleven
    // contradictions, the first eight named, the rest counted in one line.
    let d = temp_dir("many-conflicts");
    let f = d.join("all.log");
    let text: String = (0..12u32).map(|h| log(&format!("h{h}"), 100 + h, 0x5590dbcd3180 + 0x1000 * h as u64, 0)).collect();
    std::fs::write(&f, text).unwrap();
    let (v, err) = stats(&[&f]);
    let named = err.lines().filter(|l| l.starts_with("warning: rank 0 of communicator")).count();
    assert_eq!(named, 8, "{err}");
    let summary = err.lines().find(|l| l.contains("more contradictions")).unwrap_or_else(|| panic!("{err}"));
    assert!(summary.starts_with("warning: 3 more contradictions like these in 1 communicators (3 ranks"), "{summary}");
    // Every process is still kept, each with its operations.
    assert_eq!(v["total_ops"], 36, "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
