//! Inputs are never overwritten, outputs are never left half-written, and
//! folder walks read every real file once, through the binary.

use std::path::{Path, PathBuf};

mod common;
use std::io::Read;

/// Runs the binary, killing it (and failing) after two minutes: a walk that
/// loops must not hang the test suite.
fn commlens(args: &[&str]) -> (i32, String, String) {
    let r = common::run_limited(common::commlens_cmd(args), 120, &format!("commlens {args:?}"));
    (r.code, r.out, r.err)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A fresh folder with the demo's generated capture in `demo/`.
struct Fixture {
    root: PathBuf,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let root = std::env::temp_dir().join(format!("commlens-safety-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let (code, _, err) = commlens(&["demo", "--out", s(&root.join("demo"))]);
        assert_eq!(code, 0, "{err}");
        Fixture { root }
    }
    fn logs(&self) -> PathBuf {
        self.root.join("demo/logs")
    }
    fn log_files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.logs()).unwrap().map(|e| e.unwrap().path()).collect();
        v.sort();
        v
    }
    /// One rank's Kineto trace, uncompressed, as `k/trace.json`.
    fn kineto_trace_json(&self) -> PathBuf {
        let mut gz: Vec<PathBuf> =
            std::fs::read_dir(self.root.join("demo/kineto")).unwrap().map(|e| e.unwrap().path()).collect();
        gz.sort();
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&gz[0]).unwrap()).read_to_end(&mut text).unwrap();
        let k = self.root.join("k");
        std::fs::create_dir_all(&k).unwrap();
        std::fs::write(k.join("trace.json"), text).unwrap();
        k.join("trace.json")
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Runs `args`, which must be refused: exit 2, the output and the input it
/// is or holds (`named`) in the message, the input file `input` byte-identical afterwards.
fn refused(args: &[&str], input: &Path, output: &Path) {
    refused_naming(args, input, output, input)
}

fn refused_naming(args: &[&str], input: &Path, output: &Path, named: &Path) {
    let before = std::fs::read(input).unwrap();
    let (code, out, err) = commlens(args);
    assert_eq!(code, 2, "{args:?} must be refused\nstdout: {out}\nstderr: {err}");
    assert!(err.contains("refusing"), "{err}");
    assert!(err.contains(s(output)), "the output {} named: {err}", output.display());
    assert!(err.contains(s(named)), "the input {} named: {err}", named.display());
    assert_eq!(std::fs::read(input).unwrap(), before, "{} left as it was", input.display());
}

#[test]
fn outputs_that_are_inputs_are_refused() {
    let fx = Fixture::new("refuse");
    let logs = fx.logs();
    let log = fx.root.join("in.log");
    std::fs::copy(&fx.log_files()[0], &log).unwrap();

    refused(&["report", s(&log), "-o", s(&log)], &log, &log);
    refused(&["export", s(&log), "--parquet", s(&log)], &log, &log);
    // The same file by another name: a symbolic link, and a path with `..`
    // through a folder that does not exist yet.
    let link = fx.root.join("link.log");
    std::os::unix::fs::symlink(&log, &link).unwrap();
    refused(&["report", s(&log), "-o", s(&link)], &log, &link);
    let dotted = fx.root.join("new/../in.log");
    refused(&["report", s(&log), "-o", s(&dotted)], &log, &dotted);
    assert!(!fx.root.join("new").exists());
    // A file found in the walk of an input folder.
    let first = fx.log_files()[0].clone();
    refused(&["report", s(&logs), "-o", s(&first)], &first, &first);
    refused(&["export", s(&logs), "--parquet", s(&first)], &first, &first);

    // Output folders that hold an input.
    let trace = fx.kineto_trace_json();
    let k = trace.parent().unwrap().to_path_buf();
    refused(&["trace", s(&trace), "-o", s(&k)], &trace, &k);
    refused(&["fuse", "--nccl-log", s(&logs), "--kineto", s(&trace), "-o", s(&k)], &trace, &k);
    refused_naming(&["trace", s(&logs), "-o", s(&logs)], &first, &logs, &logs);
    let root = fx.root.clone();
    refused_naming(&["fuse", "--nccl-log", s(&logs), "--kineto", s(&trace), "-o", s(&root)], &first, &root, &logs);
    assert!(!k.join("trace.pftrace").exists() && !logs.join("trace.json").exists(), "nothing written");
    // A Parquet table read back is an input too.
    let pq = fx.root.join("demo/fused/fused.parquet");
    refused(&["export", s(pq.parent().unwrap()), "--parquet", s(&pq)], &pq, &pq);

    // Outputs beside the inputs are fine (the walk passes over commlens outputs).
    let html = logs.join("report.html");
    let (code, _, err) = commlens(&["report", s(&logs), "-o", s(&html)]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = commlens(&["report", s(&logs), "-o", s(&html)]);
    assert_eq!(code, 0, "a second run replaces its own report: {err}");
    let (code, _, err) = commlens(&["trace", s(&logs), "-o", s(&logs.join("traces"))]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn demo_never_writes_into_a_folder_of_the_user() {
    let fx = Fixture::new("demo");
    let mine = fx.root.join("mine");
    std::fs::create_dir_all(mine.join("logs")).unwrap();
    let precious = mine.join("logs").join(fx.log_files()[0].file_name().unwrap());
    std::fs::write(&precious, b"my own log").unwrap();
    std::fs::write(mine.join("report.html"), b"my own report").unwrap();
    let (code, _, err) = commlens(&["demo", "--out", s(&mine)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(s(&mine)), "{err}");
    assert_eq!(std::fs::read(&precious).unwrap(), b"my own log");
    assert_eq!(std::fs::read(mine.join("report.html")).unwrap(), b"my own report");
    // An earlier demo's folder may be written again.
    let (code, _, err) = commlens(&["demo", "--out", s(&fx.root.join("demo"))]);
    assert_eq!(code, 0, "{err}");
}

fn total_ops(path: &Path) -> (u64, String) {
    let (code, json, err) = commlens(&["stats", s(path), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    (v["stats"]["total_ops"].as_u64().unwrap(), err)
}

#[test]
fn links_are_followed_once_and_loops_end() {
    let fx = Fixture::new("links");
    let (plain_ops, _) = total_ops(&fx.logs());
    assert!(plain_ops > 0);

    // linked/sub: the logs, `loop -> ..` and `loop2 -> ..` (two links to an
    // enclosing folder never ended before), `dup.log -> <first log>`.
    let linked = fx.root.join("linked");
    let sub = linked.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    for f in fx.log_files() {
        std::fs::copy(&f, sub.join(f.file_name().unwrap())).unwrap();
    }
    let first = sub.join(fx.log_files()[0].file_name().unwrap());
    std::os::unix::fs::symlink("..", sub.join("loop")).unwrap();
    std::os::unix::fs::symlink("..", sub.join("loop2")).unwrap();
    std::os::unix::fs::symlink(&first, sub.join("dup.log")).unwrap();

    let (ops, err) = total_ops(&linked);
    assert_eq!(ops, plain_ops, "each operation read once: {err}");
    assert!(err.contains("read 4 files"), "{err}");
    assert!(err.contains("note: skipped 3 paths already read"), "{err}");
    // Named twice, or through a link on the command line: read once as well.
    let (ops, _) = total_ops(&sub.join("dup.log"));
    let (one, _) = total_ops(&first);
    assert_eq!(ops, one);
    let (code, json, err) = commlens(&["stats", s(&first), s(&sub.join("dup.log")), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["stats"]["total_ops"].as_u64().unwrap(), one, "{err}");

    // The report finishes and counts every operation once.
    let html = fx.root.join("linked.html");
    let (code, out, err) = commlens(&["report", s(&linked), "-o", s(&html)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("({plain_ops} operations")), "{out}");
    assert!(err.contains("note: skipped 3 paths"), "{err}");
    let (code, _, err) = commlens(&["trace", s(&linked), "-o", s(&fx.root.join("linked-trace"))]);
    assert_eq!(code, 0, "{err}");
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    v.sort();
    v
}

#[test]
fn failed_writes_leave_no_partial_file() {
    let fx = Fixture::new("partial");
    let logs = fx.logs();
    // The output's parent is a file: nothing can be written.
    let blocker = fx.root.join("afile");
    std::fs::write(&blocker, b"not a folder").unwrap();
    let before = listing(&fx.root);
    for args in [
        vec!["report", s(&logs), "-o", "PLACEHOLDER/report.html"],
        vec!["export", s(&logs), "--parquet", "PLACEHOLDER/t.parquet"],
        vec!["trace", s(&logs), "-o", "PLACEHOLDER/traces"],
    ] {
        let args: Vec<String> = args.iter().map(|a| a.replace("PLACEHOLDER", s(&blocker))).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = commlens(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(s(&blocker)), "{err}");
    }
    assert_eq!(listing(&fx.root), before, "no file left behind");
    assert_eq!(std::fs::read(&blocker).unwrap(), b"not a folder");

    // The destination is a folder: the complete file cannot be renamed into
    // place, and its temporary copy is removed.
    let taken = fx.root.join("taken.html");
    std::fs::create_dir_all(&taken).unwrap();
    let before = listing(&fx.root);
    let (code, _, err) = commlens(&["report", s(&logs), "-o", s(&taken)]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(listing(&fx.root), before, "no temporary file left");
    assert!(listing(&taken).is_empty());
    let pq = fx.root.join("taken.parquet");
    std::fs::create_dir_all(&pq).unwrap();
    let (code, _, err) = commlens(&["export", s(&logs), "--parquet", s(&pq)]);
    assert_eq!(code, 2, "{err}");
    let names = listing(&fx.root);
    assert!(names.iter().all(|n| !n.contains("commlens-tmp")), "{names:?}");
    let (code, _, err) = commlens(&["trace", s(&logs), "-o", s(&fx.root)]);
    assert_eq!(code, 2, "the root holds the logs: {err}");
}
