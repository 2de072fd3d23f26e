//! Memory of the operation table (issue #16): a generated Megatron job read
//! the way the table commands read it stores each operation in at most 64
//! bytes (packed rows plus the per-rank side tables), every operation in a
//! row (none stored whole), and reads back the operations a plain `Vec` of
//! them would hold. Prints the figure.

use commlens_core::{CollOp, RankOps};
use commlens_ingest::inputs::load_inputs;
use commlens_ingest::nccl_log::ReadOptions;
use commlens_synth::{generate, write_to_dir, RunConfig};
use std::path::PathBuf;

#[test]
fn a_generated_job_costs_at_most_64_bytes_per_operation() {
    let run = generate(&RunConfig::megatron(2, 2, 4));
    let dir = std::env::temp_dir().join(format!("commlens-test-op-bytes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let files = write_to_dir(&run, &dir).unwrap();
    let per_process: Vec<PathBuf> = files.into_iter().filter(|f| !f.ends_with("combined.log")).collect();
    let t = load_inputs(&per_process, &ReadOptions::default()).unwrap().table;
    let _ = std::fs::remove_dir_all(&dir);
    let n = t.n_ops();
    assert!(n > 1000, "{n}");
    let per_op = t.op_bytes() as f64 / n as f64;
    println!(
        "{} ranks, {n} operations: {} op bytes, {per_op:.1} B/op (a CollOp is {} B)",
        t.devices.len(),
        t.op_bytes(),
        std::mem::size_of::<CollOp>()
    );
    assert_eq!(t.per_rank.iter().map(RankOps::n_full).sum::<usize>(), 0, "every operation fits a row");
    assert!(per_op <= 64.0, "{per_op:.1} B per operation");
    // Packing loses nothing: rebuilding each rank from its operations gives them back.
    for ops in &t.per_rank {
        let v: Vec<CollOp> = ops.to_vec();
        assert_eq!(&RankOps::from(v.clone()).to_vec(), &v);
    }
}
