//! Test support shared by every crate's tests: where the shared real data
//! (`../shared/data/real`, beside the repository) is, and the project's rule
//! for checks that cannot run here — they say so, visibly, and under `CI=true`
//! a check CI is meant to run (real data, the browser, DuckDB) fails instead.
//!
//! Why the notes bypass libtest's capture: a passing test's `println!` output
//! is swallowed by a normal `cargo test`, so a skipped check looked like a
//! passed one. [`skip`] writes straight to the process's stderr (libtest only
//! captures the `print!` macros) and appends a line to
//! `target/skipped-checks.txt`, which `.ci/run` summarises at the end.

pub mod clp;

use std::io::Write;
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
    skip("real-data checks", &format!("shared data not found at {}", dir.display()));
    None
}

/// Whether this run is CI's (`CI=true`), where every check must run.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Records that `check` did not run because of `why`: a line on stderr that a
/// normal `cargo test` shows (`SKIPPED check: why`), and one in
/// `target/skipped-checks.txt` for the end-of-run summary.
pub fn skip(check: &str, why: &str) {
    let line = format!("SKIPPED {check}: {why}\n");
    // Straight to the file descriptor: libtest's capture would hide `eprintln!`.
    let _ = std::io::stderr().write_all(line.as_bytes());
    let log = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/skipped-checks.txt"));
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
        let _ = f.write_all(line.as_bytes());
    }
}

/// Like [`skip`], for a check CI must run: under `CI=true` it panics with
/// `how` (what to install).
///
/// # Panics
/// Under `CI=true`.
pub fn skip_unless_ci(check: &str, why: &str, how: &str) {
    if under_ci() {
        panic!("{check}: {why}; required under CI=true ({how})");
    }
    skip(check, &format!("{why} ({how})"));
}
