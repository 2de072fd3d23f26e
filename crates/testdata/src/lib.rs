//! Test support shared by every crate's tests: where the shared real data
//! (`../shared/data/real`, beside the repository) is, and the project's rule
//! for its absence — tests print that they skipped, except under `CI=true`,
//! where a missing folder is a failure.

use std::path::PathBuf;

/// Root of the shared real data (may not exist).
pub fn real_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/real"))
}

/// `../shared/data/real/<sub>` when it exists; `None` with a printed note
/// when it does not.
///
/// # Panics
/// When it does not exist and `CI=true`.
pub fn real_dir(sub: &str) -> Option<PathBuf> {
    let dir = real_root().join(sub);
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("shared data not found at {} (required under CI=true)", dir.display());
    }
    eprintln!("skipped: shared data not found at {}", dir.display());
    None
}
