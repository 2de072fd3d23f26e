//! Locating the shared real data: skipped with a note when absent, a failure under CI=true.

use std::path::PathBuf;

pub fn shared_dir(sub: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/real")).join(sub);
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("shared data not found at {} (required under CI=true)", dir.display());
    }
    eprintln!("skipped: shared data not found at {}", dir.display());
    None
}

pub fn nccl_log(name: &str) -> Option<PathBuf> {
    shared_dir("nccl-logs").map(|d| d.join(name))
}
