//! A byte-based progress bar on stderr, shown only on a terminal and only for
//! inputs large enough to take a moment.

use commlens_ingest::nccl_log::ProgressFn;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

const SHOW_ABOVE_BYTES: u64 = 64 << 20;

/// Total size of the inputs (files, or files under folders).
fn total_bytes(paths: &[PathBuf]) -> u64 {
    fn walk(p: &std::path::Path) -> u64 {
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => std::fs::read_dir(p)
                .map(|rd| rd.filter_map(|e| e.ok()).map(|e| walk(&e.path())).sum())
                .unwrap_or(0),
            Ok(m) => m.len(),
            Err(_) => 0,
        }
    }
    paths.iter().map(|p| walk(p)).sum()
}

/// Returns the callback to give the readers, and the bar to finish.
pub fn for_inputs(paths: &[PathBuf]) -> (Option<ProgressFn>, Option<ProgressBar>) {
    let total = total_bytes(paths);
    if total < SHOW_ABOVE_BYTES || !std::io::stderr().is_terminal() {
        return (None, None);
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} reading {bytes}/{total_bytes} [{bar:30}] {bytes_per_sec} eta {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    let b = bar.clone();
    let cb: ProgressFn = Arc::new(move |delta: u64| b.inc(delta));
    (Some(cb), Some(bar))
}
