//! Where the parallel reader's workers ([`super::chunked`]) spend their
//! time, printed to stderr when `COMMLENS_CHUNK_TRACE=1`: per worker the
//! time parsing chunks, joining them (holding the join), waiting for the join
//! (a worker too far ahead), and when it started and ran out of chunks; then
//! the tail (one worker working, the others out of chunks) and the serial
//! end (the last join and the join's finish). Wall clock on a shared VM
//! varies run to run; the split between parse, join and wait, and the
//! tail against the whole, say how well the workers are kept busy whatever
//! the speed of the cores. Off, it costs a branch per chunk and no clock read.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Whether `COMMLENS_CHUNK_TRACE=1` is set.
pub(super) fn enabled() -> bool {
    std::env::var_os("COMMLENS_CHUNK_TRACE").is_some_and(|v| v == "1")
}

/// One read's trace: its start and its workers' figures as they finish.
pub(super) struct Trace {
    t0: Instant,
    done: Mutex<Vec<Worker>>,
}

/// One worker's figures.
#[derive(Default)]
pub(super) struct Worker {
    pub(super) chunks: usize,
    pub(super) bytes: u64,
    pub(super) joined: usize,
    pub(super) parse: Duration,
    pub(super) join: Duration,
    pub(super) wait: Duration,
    /// Since the read's start: first chunk taken, last work done.
    first: Option<Duration>,
    last: Duration,
}

impl Trace {
    pub(super) fn new() -> Trace {
        Trace { t0: Instant::now(), done: Mutex::new(Vec::new()) }
    }

    /// A worker starting now.
    pub(super) fn worker(&self) -> Worker {
        Worker { first: Some(self.t0.elapsed()), ..Worker::default() }
    }

    /// A worker out of chunks now.
    pub(super) fn finished(&self, mut w: Worker) {
        w.last = self.t0.elapsed();
        self.done.lock().expect("trace").push(w);
    }

    /// Prints the trace: `after` is the time of the join after the workers
    /// (what a race left) and of its finish.
    pub(super) fn print(self, chunks: &[(u64, u64)], after: Duration) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut ws = self.done.into_inner().expect("trace");
        ws.sort_by_key(|w| w.last);
        let total = self.t0.elapsed();
        let scope_end = total - after;
        let sizes: Vec<u64> = chunks.iter().map(|r| r.1 - r.0).collect();
        let (lo, hi) = (sizes.iter().min().copied().unwrap_or(0), sizes.iter().max().copied().unwrap_or(0));
        eprintln!(
            "chunk trace: {} chunks ({:.2}..{:.2} MiB, last {:.2} MiB), {} workers; read {:.1} ms",
            chunks.len(),
            lo as f64 / 1048576.0,
            hi as f64 / 1048576.0,
            sizes.last().copied().unwrap_or(0) as f64 / 1048576.0,
            ws.len(),
            ms(total)
        );
        for (i, w) in ws.iter().enumerate() {
            let first = w.first.unwrap_or_default();
            let span = w.last.saturating_sub(first);
            let other = span.saturating_sub(w.parse + w.join + w.wait);
            eprintln!(
                "chunk trace: worker {i}: +{:.1}..+{:.1} ms; parse {:.1} ms ({} chunks, {:.1} MiB), join {:.1} ms ({} chunks), wait for join {:.1} ms, other {:.1} ms; idle after {:.1} ms",
                ms(first),
                ms(w.last),
                ms(w.parse),
                w.chunks,
                w.bytes as f64 / 1048576.0,
                ms(w.join),
                w.joined,
                ms(w.wait),
                ms(other),
                ms(scope_end.saturating_sub(w.last))
            );
        }
        // The tail: from the first worker out of chunks to the last.
        let tail = match (ws.first(), ws.last()) {
            (Some(a), Some(b)) => b.last.saturating_sub(a.last),
            _ => Duration::ZERO,
        };
        let busy: Duration = ws.iter().map(|w| w.parse + w.join).sum();
        let cap = scope_end * ws.len().max(1) as u32;
        eprintln!(
            "chunk trace: tail (workers out of chunks but one) {:.1} ms; workers busy {:.1}% of {} x {:.1} ms; after the workers {:.1} ms",
            ms(tail),
            100.0 * busy.as_secs_f64() / cap.as_secs_f64().max(1e-9),
            ws.len(),
            ms(scope_end),
            ms(after)
        );
    }
}
