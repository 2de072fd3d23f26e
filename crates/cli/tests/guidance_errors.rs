//! Errors that say what is wrong and what to do, through the binary: `hang`
//! on a folder without dumps, `fuse` without kernel traces, `trace` on logs
//! without timestamps; and the sample hang-dump set in `examples/` analysed.

mod common;

use std::path::PathBuf;

fn commlens(args: &[&str]) -> (i32, String, String) {
    let r = common::run_limited(common::commlens_cmd(args), 120, &format!("commlens {args:?}"));
    (r.code, r.out, r.err)
}

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// A 2-rank NCCL log without timestamps (the form of every NCCL before 2.26),
/// three AllReduce calls per rank.
fn untimed_logs(tag: &str) -> PathBuf {
    let dir = common::temp_dir("guidance", tag);
    for (rank, pid) in [(0, 4101), (1, 4102)] {
        let mut s = String::new();
        s.push_str(&format!(
            "node0:{pid}:{pid} [{rank}] NCCL INFO ncclCommInitRank comm 0x55b6aa64a99{rank} rank {rank} nranks 2 cudaDev {rank} nvmlDev {rank} busId {rank}000 commId 0x1234abcd - Init COMPLETE\n"
        ));
        for op in 0..3 {
            s.push_str(&format!(
                "node0:{pid}:{pid} [{rank}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x720000000 recvbuff 0x920000000 count 2097152 datatype 7 op 0 root 0 comm 0x55b6aa64a99{rank} [nranks=2] stream 0x55b6a98daaf0\n"
            ));
        }
        std::fs::write(dir.join(format!("rank{rank}.log")), s).unwrap();
    }
    dir
}

#[test]
fn sample_hang_dumps_name_the_rank_that_never_joined() {
    let dumps = repo().join("examples/hang-dumps");
    let (code, out, err) = commlens(&["hang", dumps.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("read 4 rank dumps"), "{out}");
    assert!(out.contains("rank did not join: r3 never entered it"), "{out}");
    assert!(out.contains("AllReduce seq 42") && out.contains("\"DP1\""), "{out}");
}

#[test]
fn hang_on_logs_says_there_are_no_dumps_and_how_to_get_them() {
    let logs = untimed_logs("hang");
    let (code, out, err) = commlens(&["hang", logs.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("no hang dumps in"), "{err}");
    assert!(err.contains("2 × NCCL debug log"), "{err}");
    assert!(err.contains("SIGUSR1") && err.contains("COMMLENS_PLUGIN_DIR") && err.contains("examples/hang-dumps"), "{err}");
}

#[test]
fn fuse_without_kernel_traces_names_both_kinds() {
    let logs = untimed_logs("fuse");
    let out_dir = logs.join("out");
    let (code, _, err) = commlens(&["fuse", "--nccl-log", logs.to_str().unwrap(), "-o", out_dir.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--nsys") && err.contains("--kineto"), "{err}");
}

#[test]
fn trace_of_untimed_logs_explains_why_and_how_to_capture() {
    let logs = untimed_logs("trace");
    let out_dir = logs.join("trace-out");
    let (code, out, err) = commlens(&["trace", logs.to_str().unwrap(), "-o", out_dir.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("none of the 6 operations has a time"), "{err}");
    assert!(err.contains("NCCL_DEBUG_TIMESTAMP_LEVELS") && err.contains("--nsys") && err.contains("--kineto"), "{err}");
    assert!(!out_dir.join("trace.json").exists(), "no empty trace is written");
}
