//! Stream inputs: a log piped into `commlens stats -` or given as a FIFO reads
//! exactly like the same log as a file (the format sniffing must not swallow
//! the stream), and the temporary copy is gone afterwards.

use commlens_synth::{generate_into, RunConfig};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn one_log(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("commlens-streams-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    generate_into(&RunConfig::default(), &dir).unwrap();
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    logs.sort();
    logs.into_iter().find(|p| p.extension().is_some_and(|e| e == "log")).expect("a generated log")
}

/// `stats --format json` without the input paths (they name the copy).
fn stats_without_paths(stdout: &[u8]) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(stdout).expect("JSON");
    v.as_object_mut().unwrap().remove("inputs");
    v
}

fn stats_of_file(log: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_commlens")).args(["stats", "--format", "json"]).arg(log).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    stats_without_paths(&out.stdout)
}

/// Runs `stats --format json` on `input` with `data` written to its stdin
/// by another thread (as a pipe delivers it).
fn stats_of_piped(input: &str, data: Vec<u8>) -> (serde_json::Value, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_commlens"))
        .args(["stats", "--format", "json", input])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&data).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (stats_without_paths(&out.stdout), err)
}

#[test]
fn a_log_on_standard_input_reads_like_the_file() {
    let log = one_log("stdin");
    let expected = stats_of_file(&log);
    assert!(expected["stats"].to_string().contains("AllReduce"), "the generated log has operations");
    let (got, err) = stats_of_piped("-", std::fs::read(&log).unwrap());
    assert_eq!(got, expected);
    // Said on stderr, and the copy is removed when the command ends.
    let note = err.lines().find(|l| l.starts_with("note: - is a stream")).expect("a note");
    let copy = note.rsplit(" copied to ").next().unwrap().trim_end_matches(" to be read");
    assert!(!Path::new(copy).exists(), "{copy} removed");
    // /dev/stdin on a pipe is a stream too.
    let (got, _) = stats_of_piped("/dev/stdin", std::fs::read(&log).unwrap());
    assert_eq!(got, expected);
}

#[test]
fn gzip_on_standard_input_and_garbage_on_standard_input() {
    let log = one_log("gz");
    let expected = stats_of_file(&log);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&std::fs::read(&log).unwrap()).unwrap();
    let (got, _) = stats_of_piped("-", gz.finish().unwrap());
    assert_eq!(got, expected);
    // Not a log: the usual error, naming the copy of standard input.
    let mut child = Command::new(env!("CARGO_BIN_EXE_commlens"))
        .args(["stats", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\nworld\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stdin") && err.contains("not an NCCL debug log"), "{err}");
}
