//! Several jobs in one input are named, not merged silently (through the binary): two
//! generated runs (different seeds, so different commIds and pids) in one folder give a
//! warning that names both jobs; one run gives none.

mod common;

fn run_into(dir: &std::path::Path, seed: u64, host_prefix: &str) {
    let cfg = commlens_synth::RunConfig { seed, host_prefix: host_prefix.into(), ..commlens_synth::RunConfig::default() };
    commlens_synth::write_to_dir(&commlens_synth::generate(&cfg), dir).unwrap();
}

#[test]
fn two_runs_in_one_folder_are_named_as_two_jobs() {
    let dir = common::temp_dir("jobs", "two");
    run_into(&dir.join("a"), 1, "alpha");
    run_into(&dir.join("b"), 2, "beta");
    let r = common::run_limited(common::commlens_cmd(&["stats", dir.to_str().unwrap()]), 120, "stats");
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.err.contains("the inputs hold 2 separate jobs"), "{}", r.err);
    assert!(r.err.contains("job 1: 4 processes on alpha00") && r.err.contains("job 2: 4 processes on beta00"), "{}", r.err);

    let r = common::run_limited(common::commlens_cmd(&["stats", dir.join("a").to_str().unwrap()]), 120, "stats");
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(!r.err.contains("separate jobs"), "{}", r.err);
}

/// An all_reduce_perf output of 2 GPUs on host `otherbox` (hand-written in nccl-tests' format).
const OTHER_BOX_BENCH: &str = "# nThread 1 nGpus 2 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4242 on   otherbox device  0 [0000:17:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   4242 on   otherbox device  1 [0000:65:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    20.00   52.43   52.43      0    20.00   52.43   52.43      0
     2097152        524288     float     sum      -1    30.00   69.91   69.91      0    30.00   69.91   69.91      0
     4194304       1048576     float     sum      -1    50.00   83.89   83.89      0    50.00   83.89   83.89      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 68.74
#
";

#[test]
fn a_model_file_of_another_size_and_a_baseline_of_other_machines_are_named() {
    let dir = common::temp_dir("jobs", "inputs");
    run_into(&dir.join("run"), 1, "alpha");
    // The demo's layout doubled in DP: 8 GPUs for a 4-rank run.
    let conf = dir.join("model8.conf");
    std::fs::write(&conf, "layers = 4\nhidden = 1024\nseq_len = 1024\nvocab = 50304\nmicro_batch = 1\nnum_microbatches = 4\ntp = 2\npp = 2\ndp = 2\n").unwrap();
    let bench = dir.join("all_reduce_perf.out");
    std::fs::write(&bench, OTHER_BOX_BENCH).unwrap();
    let html = dir.join("r.html");
    let r = common::run_limited(
        common::commlens_cmd(&[
            "report",
            dir.join("run").to_str().unwrap(),
            "--model",
            conf.to_str().unwrap(),
            "--baseline",
            bench.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
        ]),
        180,
        "report",
    );
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.err.contains("describes 8 GPUs but the run has 4 ranks"), "{}", r.err);
    assert!(r.err.contains("ran on otherbox (NVIDIA H100 80GB HBM3), the run on alpha00"), "{}", r.err);
    // The matching model file gives no warning.
    let r = common::run_limited(
        common::commlens_cmd(&["model", concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/demo-model.conf"), dir.join("run").to_str().unwrap()]),
        120,
        "model",
    );
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(!r.err.contains("describes"), "{}", r.err);
}
