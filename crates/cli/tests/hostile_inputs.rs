//! Hostile and broken inputs through the binary: declared sizes that do not
//! match the input (2^31 ranks), graphs and dumps that made the work
//! quadratic, a gzip log cut mid-stream, host names that are not UTF-8.
//! Each case runs under a virtual-memory limit and a wall-clock limit.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Virtual memory allowed per run (KiB): far below what a per-declared-rank
/// allocation takes, well above what the binary needs.
const MEM_KB: u64 = 2_000_000;

mod common;
use common::Run;

fn temp_dir(tag: &str) -> PathBuf {
    common::temp_dir("hostile", tag)
}

/// Runs the binary under `ulimit -v MEM_KB`, failing after `limit_s`.
fn commlens(args: &[&str], limit_s: u64) -> Run {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("ulimit -v {MEM_KB}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_commlens"))
        .args(args)
        .stdout(Stdio::piped());
    common::run_limited(c, limit_s, &format!("commlens {args:?}"))
}

fn ok(args: &[&str], limit_s: u64) -> Run {
    let r = commlens(args, limit_s);
    assert_eq!(r.code, 0, "commlens {args:?} exited {} in {:.2} s\nstdout:\n{}\nstderr:\n{}", r.code, r.secs, r.out, r.err);
    r
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const P: &str = "h1:100:101 [0] NCCL INFO ";

/// A log whose communicator declares 2^31 ranks (init, rank-layout and op
/// lines) while one rank is seen.
fn huge_nranks_log() -> String {
    let n = 1u64 << 31;
    let q = "h1:200:201 [1] NCCL INFO ";
    [
        format!("{P}NCCL version 2.20.5+cuda12.4"),
        format!("{P}ncclCommInitRank comm 0x5590dbcd3180 rank 0 nranks {n} cudaDev 0 nvmlDev 0 busId 46000 commId 0x89315395f7ecf46a - Init START"),
        format!("{P}comm 0x5590dbcd3180 rank 0 nRanks {n} nNodes 1 localRanks 1 localRank 0 MNNVL 0"),
        format!("{P}comm 0x5590dbcd3180 rank 0 nranks {n} cudaDev 0 nvmlDev 0 busId 46000 commId 0x89315395f7ecf46a - Init COMPLETE"),
        format!("{P}AllReduce: opCount 0 sendbuff 0x7f0 recvbuff 0x7f0 count 1024 datatype 7 op 0 root 0 comm 0x5590dbcd3180 [nranks={n}] stream 0x55"),
        format!("{P}AllReduce: opCount 1 sendbuff 0x7f0 recvbuff 0x7f0 count 1048576 datatype 7 op 0 root 0 comm 0x5590dbcd3180 [nranks={n}] stream 0x55"),
        format!("{q}comm 0x6590dbcd3180 rank 2147483647 nranks {n} cudaDev 1 nvmlDev 1 busId 47000 commId 0x89315395f7ecf46a - Init COMPLETE"),
        format!("{q}AllReduce: opCount 0 sendbuff 0x7f0 recvbuff 0x7f0 count 1024 datatype 7 op 0 root 0 comm 0x6590dbcd3180 [nranks={n}] stream 0x55"),
    ]
    .join("\n")
        + "\n"
}

#[test]
fn log_declaring_2_pow_31_ranks_is_bounded() {
    let d = temp_dir("nranks-log");
    let log = d.join("huge.log");
    std::fs::write(&log, huge_nranks_log()).unwrap();
    let r = ok(&["stats", s(&log)], 30);
    assert!(r.out.contains("2147483648"), "the declared size is still shown:\n{}", r.out);
    assert!(
        r.err.contains("declares 2147483648 ranks, more than NCCL can count") && r.err.matches("commId 0x89315395f7ecf46a").count() == 1,
        "one warning per damaged communicator:\n{}",
        r.err
    );
    let html = d.join("r.html");
    let r = ok(&["report", s(&log), "-o", s(&html)], 60);
    // No prediction for a communicator no machine can hold (was "7389424763% of the model's").
    assert!(!r.out.contains("of the model") && !r.err.contains("of the model"), "{}\n{}", r.out, r.err);
    // The log has no timestamps: `trace` explains that there is nothing to
    // place on a timeline (a clean error, not a crash or an empty file).
    let trace = d.join("t.json");
    let r = commlens(&["trace", s(&log), "-o", s(&trace)], 30);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("has a time"), "{}", r.err);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn inspector_json_declaring_2_pow_31_ranks_is_bounded() {
    let d = temp_dir("nranks-inspector");
    let f = d.join("inspector.log");
    let rec = |rank: u32, pid: u32| {
        format!(
            r#"{{"header":{{"id":"0xabc","comm_name":"tp","rank":{rank},"n_ranks":2147483648,"nnodes":1}},"metadata":{{"inspector_output_format_version":"v4.2","dump_timestamp_us":5000,"hostname":"h","pid":{pid}}},"coll_perf":{{"coll":"AllGather","coll_algo":"RING","coll_proto":"unknown","coll_sn":4,"coll_msg_size_bytes":1024,"coll_exec_time_us":10,"coll_timing_source":"kernel_gpu","event_trace_ts":{{"coll_start_ts":100,"coll_stop_ts":200,"kernel_events":[{{"channel_id":0,"kernel_start_ts":120,"kernel_stop_ts":150}}]}}}}}}"#
        )
    };
    std::fs::write(&f, format!("{}\n{}\n", rec(1, 7), rec(0, 8))).unwrap();
    let r = ok(&["stats", s(&f)], 30);
    assert!(r.out.contains("2147483648"), "{}", r.out);
    let _ = std::fs::remove_dir_all(&d);
}

fn hang_dump(rank: u32, comms: &[String]) -> String {
    format!(
        r#"{{"format":"commlens-hang","version":1,"host":"n0","pid":{},"global_rank":{rank},"time_ns":100000000000,"reason":"timeout","comms":[{}]}}"#,
        100 + rank,
        comms.join(",")
    )
}

fn hang_comm(hash: u64, nranks: u64, rank: u32, with_pending: bool) -> String {
    let pending = if with_pending { r#"{"seq":4,"op":"AllGather","bytes":64,"enqueue_ns":5}"# } else { "" };
    format!(
        r#"{{"comm_hash":{hash},"nranks":{nranks},"rank":{rank},"past":[{{"seq":2,"op":"AllReduce","bytes":1,"start_ns":1,"end_ns":2}}],"current":[{{"seq":3,"op":"AllReduce","bytes":1048576,"start_ns":1000000000,"progress_done":3,"progress_total":16}}],"pending":[{pending}]}}"#
    )
}

/// `docs/hang-dump.md`: a dump declaring a communicator of 2^31 ranks (this
/// aborted on a 154 GB allocation): rows for the ranks dumped, the rest named
/// as a range.
#[test]
fn hang_dump_declaring_2_pow_31_ranks_is_bounded() {
    let d = temp_dir("nranks-hang");
    std::fs::write(d.join("rank0.json"), hang_dump(0, &[hang_comm(42, 1 << 31, 0, false)])).unwrap();
    let r = ok(&["hang", s(&d)], 30);
    assert!(r.out.contains("2147483648 ranks"), "{}", r.out);
    assert!(r.out.contains("comm ranks 65-2147483647 (no dump)"), "{}", r.out);
    assert!(r.out.lines().count() < 200, "{}", r.out);
    let _ = std::fs::remove_dir_all(&d);
}

/// 4 dumps × 2,000 communicators, each running one operation with one
/// pending behind it (2.76 GB when every pending op was paired with every
/// running op of its rank).
#[test]
fn hang_dumps_with_many_communicators_are_linear() {
    let d = temp_dir("hang-many");
    for g in 0..4u32 {
        let comms: Vec<String> = (0..2000u64).map(|h| hang_comm(h + 1, 4, g, true)).collect();
        std::fs::write(d.join(format!("rank{g}.json")), hang_dump(g, &comms)).unwrap();
    }
    let r = ok(&["hang", s(&d)], 60);
    assert!(r.out.contains("8000 pending operation(s) are blocked behind running ones"), "{}", r.out);
    let _ = std::fs::remove_dir_all(&d);
}

/// A topology dump of `cpus` CPUs, each with one GPU and SYS links to every
/// other CPU (`cpus`² links): minutes when each link added and each GPU pair
/// scanned the whole graph.
#[test]
fn large_topologies_are_near_linear() {
    let d = temp_dir("topo");
    let mut log = format!("{P}NCCL version 2.20.5+cuda12.4\n{P}=== System : maxBw 80.0 totalBw 80.0 ===\n");
    let cpus = 500;
    for c in 0..cpus {
        log += &format!("{P}CPU/0-{c:x} (1/2/-1)\n{P}+ PCI[24.0] - GPU/0-{:x}000 ({c})\n", c + 1);
        for o in (0..cpus).filter(|&o| o != c) {
            log += &format!("{P}+ SYS[16.0] - CPU/0-{o:x}\n");
        }
    }
    log += &format!("{P}==========================================\n");
    let f = d.join("cpus.log");
    std::fs::write(&f, log).unwrap();
    let r = ok(&["topo", s(&f)], 60);
    assert!(r.out.contains("GPU-to-GPU bottleneck bandwidth"), "{}", &r.out[..r.out.len().min(2000)]);
    assert!(r.out.contains("16.0 SYS"));

    // 256 GPUs, every pair joined by NVLink.
    let mut log = format!("{P}NCCL version 2.20.5+cuda12.4\n{P}=== System : maxBw 80.0 totalBw 80.0 ===\n{P}CPU/0-0 (1/2/-1)\n");
    for g in 0..256 {
        log += &format!("{P}+ PCI[24.0] - GPU/0-{:x}000 ({g})\n", g + 1);
        for h in (0..256).filter(|&h| h != g) {
            log += &format!("{P}          + NVL[80.0] - GPU/0-{:x}000\n", h + 1);
        }
    }
    log += &format!("{P}==========================================\n");
    let f = d.join("gpus.log");
    std::fs::write(&f, log).unwrap();
    let r = ok(&["topo", s(&f)], 60);
    assert!(r.out.contains("80.0 NVL"));
    let _ = std::fs::remove_dir_all(&d);
}

/// Operations in the `read N files (…): M operations` summary.
fn ops_read(err: &str) -> u64 {
    let line = err.lines().find(|l| l.starts_with("read ")).expect("read summary");
    let i = line.find("): ").expect("read summary") + 3;
    line[i..].split(' ').next().unwrap().parse().unwrap()
}

/// A `.log.gz` cut mid-stream keeps the complete lines before the cut,
/// says where it stopped, and does not stop a good log beside it.
#[test]
fn gzip_cut_mid_stream_keeps_its_records() {
    let d = temp_dir("gzcut");
    let mut text = format!("{P}NCCL version 2.20.5+cuda12.4\n{P}comm 0x5590dbcd3180 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 46000 commId 0x89315395f7ecf46a - Init COMPLETE\n");
    for i in 0..4000 {
        text += &format!("{P}AllReduce: opCount {i:x} sendbuff 0x7f0 recvbuff 0x7f0 count {} datatype 7 op 0 root 0 comm 0x5590dbcd3180 [nranks=1] stream 0x55\n", 1024 + i % 7);
    }
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(text.as_bytes()).unwrap();
    let gz = enc.finish().unwrap();
    let cut = d.join("cut.log.gz");
    std::fs::write(&cut, &gz[..gz.len() / 2]).unwrap();
    let good_dir = d.join("good");
    std::fs::create_dir_all(&good_dir).unwrap();
    std::fs::write(good_dir.join("good.log"), text.replace("h1:100:101", "h2:300:301")).unwrap();

    let r = ok(&["stats", s(&cut)], 30);
    let kept = ops_read(&r.err);
    assert!(kept > 100 && kept < 4000, "{kept} ops kept\n{}", r.err);
    assert!(r.err.contains("cut.log.gz") && r.err.contains("input cut short"), "{}", r.err);
    assert!(r.err.contains("complete lines"), "{}", r.err);

    // The good log in the same folder is still read.
    std::fs::rename(&cut, good_dir.join("cut.log.gz")).unwrap();
    let r = ok(&["stats", s(&good_dir)], 30);
    assert_eq!(ops_read(&r.err), 4000 + kept, "{}", r.err);
    let _ = std::fs::remove_dir_all(&d);
}

fn host_log(host: &[u8], pid: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for msg in [
        &b"NCCL version 2.20.5+cuda12.4"[..],
        b"comm 0x5590dbcd3180 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 46000 commId 0x89315395f7ecf46a - Init COMPLETE",
        b"AllReduce: opCount 0 sendbuff 0x7f0 recvbuff 0x7f0 count 1024 datatype 7 op 0 root 0 comm 0x5590dbcd3180 [nranks=1] stream 0x55",
    ] {
        out.extend_from_slice(host);
        out.extend_from_slice(format!(":{pid}:{} [0] NCCL INFO ", pid + 1).as_bytes());
        out.extend_from_slice(msg);
        out.push(b'\n');
    }
    out
}

/// `gpu\xe9x` and `cpu\xe9x` are two hosts (they were both `x`); a host with
/// `\xff` is read, not rejected.
#[test]
fn host_names_with_invalid_utf8_stay_distinct() {
    let d = temp_dir("utf8");
    std::fs::write(d.join("a.log"), host_log(b"gpu\xe9x", 100)).unwrap();
    std::fs::write(d.join("b.log"), host_log(b"cpu\xe9x", 100)).unwrap();
    std::fs::write(d.join("c.log"), host_log(b"node\xff1", 100)).unwrap();
    std::fs::write(d.join("e.log"), host_log(b"gpu\xffx", 100)).unwrap();
    let r = ok(&["stats", s(&d)], 30);
    assert_eq!(ops_read(&r.err), 4, "{}", r.err);
    for h in ["gpu\\xe9x", "cpu\\xe9x", "node\\xff1", "gpu\\xffx"] {
        assert!(r.out.contains(h), "{h} missing:\n{}", r.out);
    }
    let ranks = r.out.lines().skip_while(|l| !l.starts_with("rank ")).skip(2).take_while(|l| !l.starts_with("total")).count();
    assert_eq!(ranks, 4, "{}", r.out);
    let r = ok(&["stats", s(&d.join("c.log"))], 30);
    assert_eq!(ops_read(&r.err), 1, "{}", r.err);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn corrupt_parquet_page_is_a_clean_error() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../parquet/tests/data/corrupt-dictionary-page.parquet");
    // `export` decodes every column, so it reaches the corrupt page (`stats`
    // reads a projection that skips that column and meets the damage elsewhere).
    let out = temp_dir("corrupt-page").join("x.parquet");
    let r = commlens(&["export", p.to_str().unwrap(), "-o", out.to_str().unwrap()], 30);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("corrupt page") && !r.err.contains("panicked"), "{}", r.err);
    let r = commlens(&["stats", p.to_str().unwrap()], 30);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("not a readable Parquet file") && !r.err.contains("panicked"), "{}", r.err);
}
