//! `commlens stats --format json` reads one large log in chunks on all cores
//! (`COMMLENS_CHUNK_BYTES`, 64 MiB by default; `0` reads sequentially). The
//! promise: the output is byte for byte the one of the sequential reader.
//! Small chunks (1 KiB and 4 KiB) put chunk boundaries inside every construct
//! the logs hold; every real log and a generated interleaved log of 64
//! processes (cut lines, API call lines) are read both ways through the binary,
//! and both again with the AVX2 line loops refused (`COMMLENS_NO_AVX2=1`).
//!
//! Standard error may differ by one note: when the join had to read chunks
//! again (same result, less parallel) it says so and why; the rest of it is
//! the same too.

#[allow(dead_code)]
mod common;

use commlens_synth::{generate, write_to_dir, RunConfig};
use std::path::{Path, PathBuf};

/// `stats --format json FILE` with chunks of `chunk` bytes: (exit code,
/// stdout, stderr). A log without operations or communicators is an error,
/// which must be the same error both ways.
fn stats(file: &Path, chunk: u64, threads: usize) -> (i32, String, String) {
    stats_with(file, chunk, threads, false)
}

/// [`stats`], with the AVX2 line loops refused (`COMMLENS_NO_AVX2`) when
/// `no_avx2`: the SSE2 loops a machine without AVX2 runs.
fn stats_with(file: &Path, chunk: u64, threads: usize, no_avx2: bool) -> (i32, String, String) {
    let file = file.to_str().expect("a UTF-8 path");
    let mut cmd = common::commlens_cmd(&["stats", file, "--format", "json"]);
    cmd.env("COMMLENS_CHUNK_BYTES", chunk.to_string())
        .env("RAYON_NUM_THREADS", threads.to_string())
        .env("COMMLENS_NO_AVX2", if no_avx2 { "1" } else { "0" });
    let r = common::run_limited(cmd, 300, "commlens stats");
    (r.code, r.out, r.err)
}

/// The join's note about chunks read again, if any.
fn is_chunk_note(line: &str) -> bool {
    line.starts_with("note: ") && line.contains("chunks in parallel")
}

/// Reads `file` sequentially and in chunks; the outputs must be identical.
/// Returns whether the sequential read succeeded and how many chunked runs
/// noted chunks read again.
fn check(file: &Path) -> (bool, usize) {
    let (want_code, want_out, want_err) = stats(file, 0, 2);
    assert!(
        want_code != 0 || want_out.trim_start().starts_with('{'),
        "{}: {want_out}",
        file.display()
    );
    assert!(
        !want_err.lines().any(is_chunk_note),
        "{}: sequential read noted chunks",
        file.display()
    );
    let mut noted = 0;
    // Sequential and chunked without AVX2 too: the loops compiled for AVX2
    // and the plain ones must read alike.
    let runs = [(1 << 10, 2, false), (4 << 10, 2, false), (4 << 10, 1, false), (0, 1, true), (4 << 10, 2, true)];
    for (chunk, threads, no_avx2) in runs {
        let (code, out, err) = stats_with(file, chunk, threads, no_avx2);
        assert_eq!(
            code,
            want_code,
            "{} with {chunk}-byte chunks: exit code",
            file.display()
        );
        assert!(
            out == want_out,
            "{} with {chunk}-byte chunks on {threads} threads (AVX2 refused: {no_avx2}): stdout differs from the sequential read",
            file.display()
        );
        let rest: Vec<&str> = err.lines().filter(|l| !is_chunk_note(l)).collect();
        assert_eq!(
            rest,
            want_err.lines().collect::<Vec<_>>(),
            "{} with {chunk}-byte chunks: stderr differs beyond the chunk note",
            file.display()
        );
        noted += err.lines().filter(|l| is_chunk_note(l)).count();
    }
    (want_code == 0, noted)
}

#[test]
fn every_real_log_gives_the_same_stats_in_chunks() {
    let Some(dir) = commlens_testdata::real_dir("nccl-logs") else {
        return;
    };
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 8, "real logs in {}", dir.display());
    let checked: Vec<(bool, usize)> = logs.iter().map(|l| check(l)).collect();
    let read = checked.iter().filter(|c| c.0).count();
    assert!(
        read * 2 > logs.len(),
        "stats read only {read} of {} real logs",
        logs.len()
    );
    let noted: usize = checked.iter().map(|c| c.1).sum();
    // 1 KiB chunks of the larger logs cut some init block: the note shows
    // that the chunked reader ran (a sequential read never notes chunks).
    assert!(noted > 0, "no chunked run noted a chunk read again");
}

#[test]
fn a_generated_interleaved_log_gives_the_same_stats_in_chunks() {
    let mut cfg = RunConfig {
        tp: 4,
        pp: 4,
        dp: 4,
        iterations: 1,
        ..RunConfig::default()
    };
    cfg.gpus_per_node = cfg.gpus_per_node.min(64);
    cfg.layers = cfg.layers.max(4);
    cfg.interleave = true;
    cfg.broken_lines = 40;
    cfg.call_lines = true;
    let run = generate(&cfg);
    let dir = common::temp_dir("parallel-stats", "gen");
    write_to_dir(&run, &dir).unwrap();
    let combined = dir.join(&run.truth.combined.as_ref().unwrap().file);
    assert!(
        std::fs::metadata(&combined).unwrap().len() > 64 << 10,
        "a log of many chunks"
    );
    assert!(check(&combined).0, "stats read the generated log");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The chunk trace's summary line (`COMMLENS_CHUNK_TRACE=1`) of a run:
/// (chunks, first chunk in MiB, largest other chunk in MiB, workers), or
/// `None` when the file was read
/// sequentially (no trace).
fn chunk_plan(err: &str) -> Option<(usize, f64, f64, usize)> {
    // "chunk trace: 15 chunks (first 127.27 MiB, then 1.00..63.63 MiB, last 1.21 MiB), 2 workers; read …"
    let line = err.lines().find(|l| l.starts_with("chunk trace: ") && l.contains(" chunks (first "))?;
    let rest = &line["chunk trace: ".len()..];
    let (n, rest) = rest.split_once(" chunks (first ")?;
    let (first, rest) = rest.split_once(" MiB, then ")?;
    let (range, rest) = rest.split_once(" MiB, last ")?;
    let largest = range.split_once("..")?.1;
    let workers = rest.split_once("), ")?.1.split_once(" workers")?.0;
    Some((n.parse().ok()?, first.parse().ok()?, largest.parse().ok()?, workers.parse().ok()?))
}

/// `stats --format json FILE` with `env` set (and the chunk trace on):
/// (stdout, stderr); it must succeed.
fn stats_env(file: &Path, env: &[(&str, &str)]) -> (String, String) {
    let mut cmd = common::commlens_cmd(&["stats", file.to_str().expect("a UTF-8 path"), "--format", "json"]);
    cmd.env_remove("COMMLENS_CHUNK_BYTES").env("COMMLENS_CHUNK_TRACE", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let r = common::run_limited(cmd, 300, "commlens stats");
    assert_eq!(r.code, 0, "{env:?}: {}", r.err);
    (r.out, r.err)
}

/// README: a large plain log (two chunks or more) is read in chunks on all
/// cores, `COMMLENS_CHUNK_BYTES` of them (default 64 MiB, smaller where that
/// would give fewer than three chunks a core, at least 8 MiB; the first up
/// to twice that), `0` reads
/// sequentially, `RAYON_NUM_THREADS` sets the cores (and one core reads
/// sequentially unless a size is set). The plan each way, as the binary's
/// chunk trace reports it, on a generated log of over 16 MiB; the output
/// is the same every way.
#[test]
fn the_binary_plans_chunks_as_the_readme_says() {
    let mut cfg = RunConfig { tp: 4, pp: 2, dp: 4, iterations: 40, ..RunConfig::default() };
    cfg.interleave = true;
    let run = generate(&cfg);
    let dir = common::temp_dir("parallel-stats", "plan");
    write_to_dir(&run, &dir).unwrap();
    let log = dir.join(&run.truth.combined.as_ref().unwrap().file);
    let len = std::fs::metadata(&log).unwrap().len();
    println!("generated log: {:.1} MiB", len as f64 / (1 << 20) as f64);
    assert!(len > 17 << 20 && len < 48 << 20, "a log of 17-48 MiB: {len} bytes");
    let mib = len as f64 / (1 << 20) as f64;
    // Two cores: 8 MiB chunks (a sixth of the file is under the 8 MiB floor),
    // shrinking near the end.
    let (want, err) = stats_env(&log, &[("RAYON_NUM_THREADS", "2")]);
    // The first up to twice that, at most a quarter of the file (half a
    // worker's share) unless that is under one chunk: 8 MiB here.
    let (n, first, largest, workers) = chunk_plan(&err).expect("read in chunks on 2 cores");
    assert_eq!(workers, 2, "{err}");
    assert!(largest <= 8.01, "largest chunk after the first {largest} MiB: {err}");
    assert!(first > 7.9 && first <= (mib / 4.0).max(8.0) + 0.01, "first chunk {first} MiB: {err}");
    assert!(n as f64 >= ((mib - first) / 8.0).ceil() + 1.0, "{n} chunks of a {mib:.1} MiB file: {err}");
    // A size set: chunks of it (and smaller near the end), even on one core.
    for threads in ["2", "1"] {
        let (out, err) = stats_env(&log, &[("RAYON_NUM_THREADS", threads), ("COMMLENS_CHUNK_BYTES", "2097152")]);
        let (n, first, largest, workers) = chunk_plan(&err).expect("a size set chunks");
        assert_eq!(workers.to_string(), threads, "{err}");
        assert!(largest <= 2.01, "largest chunk {largest} MiB: {err}");
        assert!(first >= largest && first <= 4.01, "first chunk {first} MiB: {err}");
        assert!(n as f64 >= ((mib - first) / 2.0).ceil() + 1.0, "{n} chunks: {err}");
        assert!(out == want, "2 MiB chunks on {threads} threads: stdout differs");
    }
    // Sequential: `0`, and one core without a size.
    let sequential: [&[(&str, &str)]; 2] = [&[("RAYON_NUM_THREADS", "2"), ("COMMLENS_CHUNK_BYTES", "0")], &[("RAYON_NUM_THREADS", "1")]];
    for env in sequential {
        let (out, err) = stats_env(&log, env);
        assert_eq!(chunk_plan(&err), None, "{env:?} read sequentially: {err}");
        assert!(out == want, "{env:?}: stdout differs");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
