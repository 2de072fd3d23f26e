//! Global ranks of a real interleaved log whose fourth process lost its world
//! rank to a concurrent writer (NCCL 2.28.9, 4 × RTX 4090): the world reads
//! as ranks 0–3, never 0, 1, 2, 4 (issue: a rank past the world size).

mod common;

#[test]
fn four_rank_world_with_a_cut_init_line_reads_as_ranks_0_to_3() {
    let Some(dir) = commlens_testdata::real_dir("nccl-logs") else { return };
    let log = dir.join("sugarlxn-nccl_test-nccl_trace-4xRTX4090-PCIe-2.28.9.log");
    let r = common::run_limited(common::commlens_cmd(&["stats", "--format", "json", log.to_str().unwrap()]), 120, "stats");
    assert_eq!(r.code, 0, "{}", r.err);
    let v: serde_json::Value = serde_json::from_str(&r.out).expect("json");
    let world = &v["stats"]["comms"][0];
    assert_eq!(world["nranks"], 4);
    assert_eq!(world["global_ranks"], serde_json::json!([0, 1, 2, 3]), "{world}");
    // Each process keeps its own operations: pid 2984738 (device 3) is rank 3.
    let ranks = v["stats"]["ranks"].as_array().unwrap();
    let r3 = ranks.iter().find(|r| r["pid"] == 2984738).expect("pid 2984738");
    assert_eq!(r3["rank"], 3, "{r3}");
}
