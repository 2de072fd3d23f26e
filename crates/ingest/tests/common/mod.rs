//! Locating the shared real data: skipped with a note when absent, a failure under CI=true.

use std::path::PathBuf;

pub fn shared_dir(sub: &str) -> Option<PathBuf> {
    commlens_testdata::real_dir(sub)
}

pub fn nccl_log(name: &str) -> Option<PathBuf> {
    shared_dir("nccl-logs").map(|d| d.join(name))
}
