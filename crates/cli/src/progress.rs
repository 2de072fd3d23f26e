//! A byte-based progress bar on stderr, shown only on a terminal and only for
//! inputs large enough to take a moment.

use commlens_ingest::nccl_log::ProgressFn;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

const SHOW_ABOVE_BYTES: u64 = 64 << 20;

/// Total size of the files the readers will read (the ingest folder walk:
/// each real file once, links to enclosing folders not followed again).
fn total_bytes(paths: &[PathBuf]) -> u64 {
    commlens_ingest::expand_inputs(paths)
        .map(|files| files.iter().filter_map(|(p, _)| std::fs::metadata(p).ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

/// Returns the callback to give the readers, and the bar to finish.
pub fn for_inputs(paths: &[PathBuf]) -> (Option<ProgressFn>, Option<ProgressBar>) {
    // The terminal first: the size walk stats every file (100,000 of them for a large job).
    if !std::io::stderr().is_terminal() {
        return (None, None);
    }
    let total = total_bytes(paths);
    if total < SHOW_ABOVE_BYTES {
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
