//! The parallel reader (one file cut into chunks parsed on all cores, then
//! joined) must give exactly what the sequential reader gives: the same
//! table (operations with their line numbers, per-handle sequence numbers and
//! hashes, processes, devices, topology), the same report (counts, samples
//! and their line numbers), and folded per-operation states that, mapped
//! through `Loaded::remaps`, match one state per file. Chunks of 4 KiB and
//! 64 KiB put a boundary inside every construct the logs have (init blocks,
//! topology dumps, queued operations and their tuning lines, cut lines);
//! every real log and generated interleaved logs of 1 to 1,024 processes are
//! read both ways.
//!
//! Without the shared data folder the real-log test prints a note and
//! passes, except under `CI=true` (see `common`).

#[allow(dead_code)]
mod common;

use commlens_core::model::{CommIdx, DevIdx};
use commlens_core::{Algorithm, OpKind, Protocol};
use commlens_ingest::inputs::load_listed_with;
use commlens_ingest::nccl_log::chunked::{plan, read_chunked};
use commlens_ingest::nccl_log::ReadOptions;
use commlens_synth::{generate, write_to_dir, RunConfig};
use std::path::{Path, PathBuf};

/// What `stats` folds of an operation: device, handle, kind, bytes (with the
/// datatype), algorithm and protocol, whether it was recovered. (A fold sees
/// a chunk's own line numbers and per-handle sequence numbers: the table's
/// are checked above.)
type Folded = Vec<(
    u32,
    u32,
    OpKind,
    u64,
    String,
    Option<Algorithm>,
    Option<Protocol>,
    bool,
)>;

fn opts(chunk: u64) -> ReadOptions {
    ReadOptions {
        chunk_bytes: Some(chunk),
        ..ReadOptions::default()
    }
}

/// The table and reports as JSON, and every operation folded per part and
/// mapped into the table (sorted).
fn read_both_ways(file: &Path, chunk: u64) -> (String, Folded) {
    let files = vec![(file.to_path_buf(), true)];
    let (loaded, _) = load_listed_with(&files, &opts(chunk), true, || (), |_, _| {}).unwrap();
    // The one note a chunked read may add says which chunks the join read again.
    let notes: Vec<&String> = loaded
        .notes
        .iter()
        .filter(|n| !n.contains("chunks in parallel"))
        .collect();
    let text = format!(
        "table {}\nreports {}\nnotes {:?}",
        serde_json::to_string(&loaded.table).unwrap(),
        serde_json::to_string(&loaded.reports).unwrap(),
        notes
    );
    let (loaded, states) = load_listed_with(&files, &opts(chunk), false, Folded::new, |s, op| {
        s.push((
            op.dev.0,
            op.comm.0,
            op.kind,
            op.bytes,
            format!("{:?}", op.dtype),
            op.algo,
            op.proto,
            op.recovered,
        ))
    })
    .unwrap();
    assert_eq!(states.len(), loaded.remaps.len());
    let mut folded: Folded = states
        .into_iter()
        .zip(&loaded.remaps)
        .flat_map(|(s, r)| {
            s.into_iter().map(move |(d, c, k, b, t, a, p, x)| {
                let (d, c) = r.dev_comm(DevIdx(d), CommIdx(c));
                (d.0, c.0, k, b, t, a, p, x)
            })
        })
        .collect();
    folded.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    (text, folded)
}

/// Reads `file` sequentially and in chunks of each size; returns (chunks, replayed) summed.
fn check_identical(file: &Path, sizes: &[u64]) -> (usize, usize) {
    let (want_text, want_folded) = read_both_ways(file, 0);
    let (mut chunks, mut replayed) = (0, 0);
    for &size in sizes {
        let Some(ranges) = plan(file, &opts(size)) else {
            continue;
        };
        let (got_text, got_folded) = read_both_ways(file, size);
        assert!(
            got_text == want_text,
            "{} with {size}-byte chunks: table or report differ",
            file.display()
        );
        assert!(
            got_folded == want_folded,
            "{} with {size}-byte chunks: folded operations differ",
            file.display()
        );
        let c = read_chunked(
            file,
            &opts(size),
            &ranges,
            false,
            &|| (),
            &|_: &mut (), _| {},
        )
        .unwrap();
        assert_eq!(c.chunks, ranges.len());
        chunks += c.chunks;
        replayed += c.replayed;
    }
    (chunks, replayed)
}

#[test]
fn every_real_log_reads_the_same_in_chunks() {
    let Some(dir) = common::shared_dir("nccl-logs") else {
        return;
    };
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 8, "real logs in {}", dir.display());
    let (mut chunks, mut replayed) = (0, 0);
    for log in &logs {
        let (c, r) = check_identical(log, &[4 << 10, 64 << 10]);
        println!(
            "{}: {c} chunks, {r} read again by the join",
            log.file_name().unwrap().to_string_lossy()
        );
        chunks += c;
        replayed += r;
    }
    // The join folds most chunks itself (else this test would only test replay).
    assert!(
        chunks > 100 && replayed * 2 < chunks,
        "{chunks} chunks, {replayed} replayed"
    );
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-parallel-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A generated run of `tp × pp × dp` processes written as one interleaved
/// file (with cut lines and call lines), read sequentially and in chunks.
fn check_generated(tp: usize, pp: usize, dp: usize, iterations: usize) -> (usize, usize) {
    let mut cfg = RunConfig {
        tp,
        pp,
        dp,
        iterations,
        ..RunConfig::default()
    };
    cfg.gpus_per_node = cfg.gpus_per_node.min(tp * pp * dp).max(1);
    cfg.layers = cfg.layers.max(pp);
    cfg.interleave = true;
    cfg.broken_lines = 40;
    cfg.call_lines = true;
    let run = generate(&cfg);
    let dir = tmpdir(&format!("{tp}x{pp}x{dp}"));
    write_to_dir(&run, &dir).unwrap();
    let combined = dir.join(&run.truth.combined.as_ref().unwrap().file);
    let size = std::fs::metadata(&combined).unwrap().len();
    let r = check_identical(
        &combined,
        &[1 << 10, 4 << 10, 64 << 10, (size / 3).max(4096)],
    );
    let _ = std::fs::remove_dir_all(&dir);
    r
}

#[test]
fn generated_interleaved_logs_read_the_same_in_chunks() {
    for (tp, pp, dp, iterations) in [(1, 1, 1, 3), (2, 1, 1, 3), (2, 2, 2, 2), (4, 4, 4, 1)] {
        let (c, r) = check_generated(tp, pp, dp, iterations);
        println!(
            "{} processes: {c} chunks, {r} read again by the join",
            tp * pp * dp
        );
        assert!(c > 0 && r < c, "{c} chunks, {r} replayed");
    }
}

#[test]
fn a_generated_log_of_1024_processes_reads_the_same_in_chunks() {
    let (c, r) = check_generated(8, 8, 16, 1);
    println!("1024 processes: {c} chunks, {r} read again by the join");
    assert!(c > 0 && r < c, "{c} chunks, {r} replayed");
}

/// One thread drives both GPUs of nccl-tests (2.27.7, `-g 2`): it prints its
/// current device, `[1]`, on operations of the handle of device 0. A chunk
/// that starts there gives the handle device 1 from its bracket; the join
/// moves those operations to the handle's true device instead of reading the
/// chunk again (it used to, with "an operation's [dev] differs from its
/// communicator's device"), and the result is the sequential one.
#[test]
fn a_thread_driving_two_gpus_is_folded_not_read_again() {
    let Some(dir) = common::shared_dir("nccl-logs") else {
        return;
    };
    let log = dir.join("timez-zx-nccl-tests-nccl-2x-A100PCIe-NVLbridge-RoCE-2.27.7.log");
    check_identical(&log, &[2 << 10, 4 << 10, 16 << 10, 64 << 10]);
    let mut moved = 0;
    for size in [2 << 10, 4 << 10, 16 << 10, 64 << 10] {
        let ranges = plan(&log, &opts(size)).unwrap();
        let c = read_chunked(&log, &opts(size), &ranges, false, &|| (), &|_: &mut (), _| {}).unwrap();
        assert!(
            !c.reasons.iter().any(|(why, _)| why.contains("[dev]")),
            "{size}-byte chunks: {:?}",
            c.reasons
        );
        moved += c.chunks;
    }
    assert!(moved > 100, "{moved} chunks");
}

/// Reasons the join gave for reading chunks of `file` again, over `sizes`.
fn replay_reasons(file: &Path, sizes: &[u64]) -> Vec<(&'static str, usize)> {
    let mut all = Vec::new();
    for &size in sizes {
        let Some(ranges) = plan(file, &opts(size)) else {
            continue;
        };
        let c = read_chunked(file, &opts(size), &ranges, false, &|| (), &|_: &mut (), _| {}).unwrap();
        all.extend(c.reasons);
    }
    all
}

/// Init blocks as NCCL prints them (START, then per thread ring orders,
/// connections and trees, then COMPLETE, then operations), for 2 processes
/// of 2 threads and 12 communicators each: chunks of 512 B to 4 KiB cut
/// them everywhere. A boundary between a thread's START and its COMPLETE
/// used to send the chunk back to the join ("a communicator init spans the
/// boundary": the channel lines after it went to the handle the thread was
/// initializing, which the chunk could not know); the chunk now holds them
/// until the COMPLETE line names that handle, and the fold appends them, as
/// the sequential read attached them. Same table, report and fold.
#[test]
fn init_blocks_cut_by_boundaries_are_folded_not_read_again() {
    let mut log = String::new();
    for comm in 0..12u64 {
        for (pid, tid) in [(100u32, 110u32), (100, 111), (200, 210), (200, 211)] {
            let rank = (pid / 100 - 1) * 2 + tid % 10;
            let dev = tid % 10;
            let p = format!("node{}:{pid}:{tid} [{dev}] NCCL INFO ", pid / 100);
            let ptr = 0x5000 + comm * 0x100 + rank as u64;
            let head = format!("{p}ncclCommInitRank comm {ptr:#x} rank {rank} nranks 4 cudaDev {dev} nvmlDev {dev} busId {dev}000 commId 0x{comm:x}77");
            log += &format!("{head} - Init START\n");
            for ch in 0..6 {
                let order = if (ch + comm) % 2 == 0 { "0 1 2 3" } else { "3 2 1 0" };
                log += &format!("{p}Channel {ch:02}/06 :    {order}\n");
                log += &format!("{p}Channel {ch:02}/0 : {rank}[{dev}] -> {}[{dev}] via P2P/IPC\n", (rank + 1) % 4);
                log += &format!("{p}Trees [{ch}] -1/-1/-1->{rank}->{}\n", (rank + 3) % 4);
            }
            log += &format!("{head} - Init COMPLETE\n");
            for op in 0..3 {
                log += &format!(
                    "{p}AllReduce: opCount {op:x} sendbuff 0x7f00 recvbuff 0x7f00 count {} datatype 7 op 0 root 0 comm {ptr:#x} [nranks=4] stream 0x9\n",
                    1024 << (comm % 5)
                );
            }
        }
    }
    let dir = tmpdir("init-blocks");
    let file = dir.join("init.log");
    std::fs::write(&file, &log).unwrap();
    let sizes = [512, 700, 1 << 10, 1500, 2 << 10, 4 << 10];
    let (chunks, _) = check_identical(&file, &sizes);
    let reasons = replay_reasons(&file, &sizes);
    assert!(chunks > 200, "{chunks} chunks");
    assert!(
        !reasons.iter().any(|(why, _)| why.contains("communicator init")),
        "{reasons:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A thread holds channel lines until it names its communicator, at most
/// 4,096 of them (the sequential read drops the rest), and attaches them
/// straight to the communicator it is initializing. Held lines on both
/// sides of a boundary are kept to that cap in file order, and a chunk that
/// dropped lines the true thread would have attached is read again. Ring
/// orders of channel 0, every 16th line a tree of a new channel (the first
/// line of a channel's tree is the one kept, so a dropped line shows):
/// 5,000 lines before the thread's first communicator line (no START: held,
/// the last 904 dropped), 9,500 and 16,000 after its START (all attached),
/// then 5,000 operations. In 256 KiB chunks on 2 workers (~4,950 lines
/// each) the second chunk holds over 4,096 of them, before the COMPLETE
/// line or with none. Same table as the sequential read at every boundary.
#[test]
fn lines_held_across_a_boundary_keep_one_cap() {
    let p = "node1:100:110 [0] NCCL INFO ";
    let head = format!("{p}ncclCommInitRank comm 0x5000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x77");
    let dir = tmpdir("held-cap");
    // The plan's chunk sizes depend on the workers: two, as on CI.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    for (start, n, ops) in [(false, 5000, 1), (true, 9500, 5000), (true, 16_000, 5000)] {
        let mut log = String::new();
        if start {
            log += &format!("{head} - Init START\n");
        }
        for i in 0..n {
            if i % 16 == 15 {
                log += &format!("{p}Trees [{}] -1/-1/-1->0->1\n", i / 16);
            } else {
                log += &format!("{p}Channel 00/32 :    0 1\n");
            }
        }
        log += &format!("{head} - Init COMPLETE\n");
        for op in 0..ops {
            log += &format!("{p}AllReduce: opCount {op:x} sendbuff 0x7f00 recvbuff 0x7f00 count 64 datatype 7 op 0 root 0 comm 0x5000 [nranks=2] stream 0x9\n");
        }
        let file = dir.join(format!("held-{start}-{n}.log"));
        std::fs::write(&file, &log).unwrap();
        let (chunks, _) = pool.install(|| check_identical(&file, &[16 << 10, 64 << 10, 256 << 10]));
        assert!(chunks > 4, "{chunks} chunks");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
