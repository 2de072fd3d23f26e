//! Prints the memory the operation table holds per operation (issue #16):
//! `cargo run --release -p commlens-ingest --example op_bytes -- DIR_OR_FILE…`.
//! Reads the inputs as the table commands do (folders list their files),
//! then prints operations, op bytes (packed rows plus per-rank side tables),
//! bytes per operation and operations stored whole. Used by scripts/bench-scale.
use commlens_core::RankOps;
use commlens_ingest::inputs::load_inputs;
use commlens_ingest::nccl_log::ReadOptions;
use std::path::PathBuf;

fn main() {
    let mut files: Vec<PathBuf> = Vec::new();
    for arg in std::env::args().skip(1) {
        let p = PathBuf::from(arg);
        match std::fs::read_dir(&p) {
            Ok(rd) => {
                let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))).collect();
                v.sort();
                files.extend(v);
            }
            Err(_) => files.push(p),
        }
    }
    let t = match load_inputs(&files, &ReadOptions::default()) {
        Ok(l) => l.table,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let n = t.n_ops().max(1);
    let full: usize = t.per_rank.iter().map(RankOps::n_full).sum();
    println!("ops {} op_bytes {} bytes_per_op {:.1} stored_whole {}", t.n_ops(), t.op_bytes(), t.op_bytes() as f64 / n as f64, full);
}
