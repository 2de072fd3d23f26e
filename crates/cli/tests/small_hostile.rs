//! Small hostile inputs through the binary: folders whose every file is
//! refused, corrupt plugin files, huge values echoed by errors, a full
//! standard output, devices given as inputs, a missing output folder and
//! implausible values.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A fresh folder under the system temp dir, unique per test and call.
mod common;
use common::Run;

fn temp_dir(tag: &str) -> PathBuf {
    common::temp_dir("small-hostile", tag)
}

/// Runs the binary with `stdout` as its standard output, killed after 60 s.
fn run_with(args: &[&str], stdout: Stdio) -> Run {
    let mut c = Command::new(env!("CARGO_BIN_EXE_commlens"));
    c.args(args).stdout(stdout);
    common::run_limited(c, 60, &format!("commlens {args:?}"))
}

fn commlens(args: &[&str]) -> Run {
    run_with(args, Stdio::piped())
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const OP: &str = "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 1024 datatype 7 op 0 root 0 comm 0xa [nranks=2] stream 0x3\n";

/// A plugin file header line, as the plugin writes it.
const CLP_HEADER: &[u8] = b"commlens-plugin v1 host=h pid=1 session=1 mono_ns=1 real_ns=1\n";

#[test]
fn a_folder_whose_every_file_is_refused_says_why_per_file() {
    let d = temp_dir("refused");
    std::fs::write(d.join("notes.txt"), "hello\nworld\n").unwrap();
    std::fs::write(d.join("blob.bin"), b"\0\0\0\x01\x02").unwrap();
    std::fs::write(d.join(".hidden.log"), OP).unwrap();
    let r = commlens(&["stats", s(&d)]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("no input files found"), "{}", r.err);
    assert!(r.err.contains("notes.txt: not an NCCL debug log"), "{}", r.err);
    assert!(r.err.contains("blob.bin: binary data"), "{}", r.err);

    // Only what the walk passes over: each named with the reason.
    let e = temp_dir("passed-over");
    std::fs::write(e.join(".hidden.log"), OP).unwrap();
    std::fs::write(e.join("old.html"), "<html></html>").unwrap();
    let r = commlens(&["report", s(&e), "-o", s(&d.join("r"))]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains(".hidden.log: passed over: hidden"), "{}", r.err);
    assert!(r.err.contains("old.html: passed over"), "{}", r.err);

    // An empty folder says so.
    let empty = temp_dir("empty");
    let r = commlens(&["stats", s(&empty)]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("holds no files"), "{}", r.err);
    for x in [d, e, empty] {
        std::fs::remove_dir_all(x).unwrap();
    }
}

#[test]
fn a_corrupt_plugin_file_is_named() {
    let d = temp_dir("clp");
    // A chunk whose magic is wrong.
    let mut bad_chunk = CLP_HEADER.to_vec();
    bad_chunk.extend_from_slice(b"XXXXgarbage-garbage-garbage");
    std::fs::write(d.join("chunk.clp"), &bad_chunk).unwrap();
    // A record too short for its kind (a communicator record of 8 bytes).
    let mut short = CLP_HEADER.to_vec();
    short.extend_from_slice(b"CHNK\0\0\0\0\x08\0\0\0\0\0\0\0\x08\0\x03\x04\x01\0\0\0");
    std::fs::write(d.join("short.clp"), &short).unwrap();
    // The header line itself destroyed.
    std::fs::write(d.join("header.clp"), b"\0\0\0\0commlens-plu\x01\x02").unwrap();
    std::fs::write(d.join("header2.clp"), b"commlens-plug v1 host=h\nCHNK").unwrap();
    for (name, what) in [
        ("chunk.clp", "bad chunk magic"),
        ("short.clp", "too short"),
        ("header.clp", "corrupt"),
        ("header2.clp", "corrupt"),
    ] {
        let p = d.join(name);
        let r = commlens(&["stats", s(&p)]);
        assert_eq!(r.code, 2, "{name}: {}", r.err);
        assert!(r.err.contains(s(&p)) && r.err.contains(what), "{name}: {}", r.err);
    }
    // Through a folder too: the file that failed is named.
    let r = commlens(&["stats", s(&d)]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains(".clp"), "{}", r.err);
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn errors_quote_only_an_excerpt_of_a_huge_value() {
    let d = temp_dir("excerpt");
    let big = "A".repeat(2_000_000);
    let ok = d.join("ok.log");
    std::fs::write(&ok, OP).unwrap();
    let not_log = d.join("not_log.txt");
    std::fs::write(&not_log, format!("{big}\n")).unwrap();
    let bad_line = d.join("bad_line.log");
    std::fs::write(&bad_line, format!("h:1:1 [0] NCCL INFO AllReduce: opCount {big} sendbuff\n{OP}")).unwrap();
    let conf = d.join("model.conf");
    std::fs::write(&conf, format!("tp = {big}\n")).unwrap();
    let conf2 = d.join("model2.conf");
    std::fs::write(&conf2, format!("{big}\n")).unwrap();
    let insp = d.join("insp.json");
    std::fs::write(&insp, format!("{{\"header\":{{\"id\":\"{big}\"}},\"coll_perf\":{{\"coll\":\"AllReduce\"}}}}\n")).unwrap();
    for args in [
        vec!["stats", s(&not_log)],
        vec!["stats", "-v", s(&bad_line)],
        vec!["model", s(&conf), s(&ok)],
        vec!["model", s(&conf2), s(&ok)],
        vec!["stats", "-v", s(&insp)],
    ] {
        let r = commlens(&args);
        assert!(r.err.len() < 8_000, "{args:?}: {} bytes on stderr", r.err.len());
        assert!(r.out.len() < 8_000, "{args:?}: {} bytes on stdout", r.out.len());
        assert!(r.err.contains("bytes in all"), "{args:?}: {}", r.err);
        assert!(!r.err.contains(&"A".repeat(200)), "{args:?}");
    }
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_full_standard_output_is_an_error_and_a_closed_pipe_is_not() {
    let d = temp_dir("full");
    let log = d.join("a.log");
    std::fs::write(&log, OP).unwrap();
    if Path::new("/dev/full").exists() {
        for format in ["table", "csv", "json"] {
            let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
            let r = run_with(&["stats", s(&log), "--format", format], Stdio::from(full));
            assert_eq!(r.code, 2, "{format}: {}", r.err);
            assert!(r.err.contains("error: writing to standard output"), "{format}: {}", r.err);
            assert!(!r.err.contains("panicked"), "{format}: {}", r.err);
        }
    }
    // `| head -c1`: the reader goes away; a quiet, successful end.
    let many: String = (0..20_000)
        .map(|i| OP.replace("[0]", &format!("[{}]", i % 8)).replace("h:1:1", &format!("h{i}:{i}:1")))
        .collect();
    std::fs::write(&log, many).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("\"$0\" stats \"$1\" | head -c 1 >/dev/null")
        .arg(env!("CARGO_BIN_EXE_commlens"))
        .arg(&log)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("error:") && !err.contains("panicked"), "{err}");
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn devices_are_refused_and_pipes_still_read() {
    if Path::new("/dev/zero").exists() {
        let r = commlens(&["stats", "/dev/zero"]);
        assert_eq!(r.code, 2, "{}", r.err);
        assert!(r.err.contains("/dev/zero") && r.err.contains("character device"), "{}", r.err);
        // Also where no stream copy is made: `model`'s config.
        let d = temp_dir("dev-config");
        let log = d.join("a.log");
        std::fs::write(&log, OP).unwrap();
        let r = commlens(&["model", "/dev/zero", s(&log)]);
        assert_eq!(r.code, 2, "{}", r.err);
        assert!(r.err.contains("character device"), "{}", r.err);
        std::fs::remove_dir_all(d).unwrap();
        // Standard input redirected from a device.
        let zero = std::fs::File::open("/dev/zero").unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_commlens"))
            .args(["stats", "-"])
            .stdin(Stdio::from(zero))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("character device"), "{err}");
    }
    // A pipe on standard input is read as before.
    let mut child = Command::new(env!("CARGO_BIN_EXE_commlens"))
        .args(["stats", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(OP.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("1 operations"), "{err}");
    // A named FIFO too.
    let d = temp_dir("fifo");
    let fifo = d.join("in.fifo");
    if Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()) {
        let f = fifo.clone();
        let writer = std::thread::spawn(move || {
            std::fs::OpenOptions::new().write(true).open(f).unwrap().write_all(OP.as_bytes()).unwrap();
        });
        let r = commlens(&["stats", s(&fifo)]);
        writer.join().unwrap();
        assert_eq!(r.code, 0, "{}", r.err);
        assert!(r.err.contains("1 operations"), "{}", r.err);
    }
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn export_creates_the_missing_folder() {
    let d = temp_dir("export");
    let log = d.join("a.log");
    std::fs::write(&log, OP).unwrap();
    let out = d.join("out").join("dir").join("ops.parquet");
    let r = commlens(&["export", s(&log), "--parquet", s(&out)]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(out.is_file(), "{}", r.err);
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn an_implausible_parallel_size_is_an_error_naming_the_line() {
    let d = temp_dir("model");
    let log = d.join("a.log");
    std::fs::write(&log, OP).unwrap();
    let conf = d.join("model.conf");
    std::fs::write(&conf, "layers = 2\n# sizes\ntp = 18446744073709551615\n").unwrap();
    let r = commlens(&["model", s(&conf), s(&log)]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("line 3") && r.err.contains("tp") && r.err.contains("implausible"), "{}", r.err);
    // Each size plausible, their product not.
    std::fs::write(&conf, "tp = 65536\npp = 65536\ndp = 65536\n").unwrap();
    let r = commlens(&["model", s(&conf), s(&log)]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("implausible"), "{}", r.err);
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn byte_totals_beyond_2_64_are_flagged() {
    let d = temp_dir("overflow");
    let log = d.join("a.log");
    // Each operation 2^64 − 8 bytes (count · 8-byte elements): their sum overflows.
    let ops: String = (0..3)
        .map(|i| {
            format!(
                "h:1:1 [0] NCCL INFO AllReduce: opCount {i} sendbuff 0x1 recvbuff 0x2 count 2305843009213693951 \
                 datatype 7 op 0 root 0 comm 0xa [nranks=2] stream 0x3\n"
            )
        })
        .collect();
    std::fs::write(&log, ops).unwrap();
    let r = commlens(&["stats", s(&log), "--format", "json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.err.contains("warning: implausible byte counts"), "{}", r.err);
    assert!(r.out.contains("\"warnings\""), "{}", r.out);
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn infinite_and_nan_bandwidths_never_reach_the_output() {
    let d = temp_dir("bw");
    let f = d.join("all_reduce.txt");
    std::fs::write(
        &f,
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 32 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n\
         #\n\
         #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n\
         #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n\
         \x20          8             2     float     sum      -1     0.00     inf     inf      0     0.00     inf     inf      0\n\
         \x20         16             4     float     sum      -1     -nan    -nan    -nan      0    10.00    0.00    0.00      0\n\
         \x20         32             8     float     sum      -1    10.00    0.00    0.00      0    10.00    0.00    0.00      0\n\
         # Avg bus bandwidth    : inf\n",
    )
    .unwrap();
    for format in ["table", "csv", "json"] {
        let r = commlens(&["stats", s(&f), "--format", format]);
        assert_eq!(r.code, 0, "{format}: {}", r.err);
        // The bad rows are flagged (quoted as they were); no figure is inf or NaN.
        let both = format!("{}{}", r.out, r.err);
        let flagged = if format == "json" { "\"malformed\"" } else { "not a result row" };
        assert!(both.contains(flagged), "{format}: {both}");
        let figures: String = if format == "json" {
            let mut v: serde_json::Value = serde_json::from_str(&r.out).unwrap();
            for f in v["nccl_tests"].as_array_mut().unwrap() {
                f.as_object_mut().unwrap().remove("malformed");
            }
            v.to_string()
        } else {
            r.out.lines().filter(|l| !l.contains("not a result row")).collect()
        };
        let lower = figures.to_ascii_lowercase();
        assert!(!lower.contains("inf") && !lower.contains("nan"), "{format}: {}", r.out);
    }
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn one_bus_id_claimed_by_thousands_of_devices_is_flagged() {
    let d = temp_dir("bus");
    let log = d.join("a.log");
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(&format!(
            "h:{i}:{i} [0] NCCL INFO comm 0x{:x} rank {i} nranks 20000 cudaDev 0 nvmlDev 0 busId 17000 commId 0xabc - Init START\n",
            0x1000 + i
        ));
        text.push_str(&format!(
            "h:{i}:{i} [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 1024 datatype 7 op 0 root 0 comm 0x{:x} [nranks=20000] stream 0x3\n",
            0x1000 + i
        ));
    }
    std::fs::write(&log, text).unwrap();
    let r = commlens(&["stats", s(&log)]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.err.contains("20000 devices (ranks) claim one GPU, busId 17000"), "{}", r.err);
    let r = commlens(&["export", s(&log), "--parquet", s(&d.join("o.parquet"))]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.err.contains("claim one GPU"), "{}", r.err);
    std::fs::remove_dir_all(d).unwrap();
}
