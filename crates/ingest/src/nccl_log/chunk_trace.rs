//! Where the parallel reader's workers ([`super::chunked`]) spend their
//! time, printed to stderr when `COMMLENS_CHUNK_TRACE=1`: per worker the
//! time parsing chunks, joining them (holding the join), waiting for the join
//! (a worker too far ahead), and when it started and ran out of chunks; then
//! the tail (one worker working, the others out of chunks) and the serial
//! end (the last join and the join's finish). Wall clock on a shared VM
//! varies run to run; the split between parse, join and wait, and the
//! tail against the whole, say how well the workers are kept busy whatever
//! the speed of the cores. Off, it costs a branch per chunk and no clock read.
//!
//! The trace also takes each chunk's parse and join in thread CPU time,
//! which other processes on the cores do not inflate, and lays those costs
//! out as the workers take chunks (each the next chunk when free): the
//! makespan and tail this plan gives against the ideal (total / workers),
//! and, the costs spread over bytes, what chunks of equal size would give.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Whether `COMMLENS_CHUNK_TRACE` is `1` (the summary) or `2` (the summary
/// and one line a chunk: its bytes and its parse and join CPU time).
pub(super) fn enabled() -> bool {
    std::env::var_os("COMMLENS_CHUNK_TRACE").is_some_and(|v| v == "1" || v == "2")
}

/// Whether `COMMLENS_CHUNK_TRACE=2` asks for a line a chunk.
fn per_chunk() -> bool {
    std::env::var_os("COMMLENS_CHUNK_TRACE").is_some_and(|v| v == "2")
}

/// One read's trace: its start, its workers' figures as they finish, and
/// each chunk's CPU time (parse, join).
pub(super) struct Trace {
    t0: Instant,
    done: Mutex<Vec<Worker>>,
    cpu: Mutex<Vec<(usize, Duration, Duration)>>,
}

/// CPU time of the calling thread (0 where it cannot be read).
pub(super) fn thread_cpu() -> Duration {
    #[cfg(target_os = "linux")]
    {
        #[repr(C)]
        struct Timespec {
            sec: i64,
            nsec: i64,
        }
        extern "C" {
            fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
        }
        const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
        let mut ts = Timespec { sec: 0, nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec (64-bit Linux layout);
        // the call writes only it.
        if unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return Duration::new(ts.sec as u64, ts.nsec as u32);
        }
    }
    Duration::ZERO
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
        Trace { t0: Instant::now(), done: Mutex::new(Vec::new()), cpu: Mutex::new(Vec::new()) }
    }

    /// Chunk `i` took `parse` CPU time to parse.
    pub(super) fn parsed(&self, i: usize, parse: Duration) {
        let mut c = self.cpu.lock().expect("trace");
        if c.len() <= i {
            c.resize(i + 1, (0, Duration::ZERO, Duration::ZERO));
        }
        c[i].0 = i;
        c[i].1 = parse;
    }

    /// Chunks `from..to` were joined in `join` CPU time (spread evenly).
    pub(super) fn joined(&self, from: usize, to: usize, join: Duration) {
        if to <= from {
            return;
        }
        let each = join / (to - from) as u32;
        let mut c = self.cpu.lock().expect("trace");
        if c.len() < to {
            c.resize(to, (0, Duration::ZERO, Duration::ZERO));
        }
        c[from..to].iter_mut().for_each(|x| x.2 = each);
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
        // The first apart: it may be larger (`chunked::plan`).
        let rest = sizes.get(1..).unwrap_or_default();
        let (lo, hi) = (rest.iter().min().copied().unwrap_or(0), rest.iter().max().copied().unwrap_or(0));
        eprintln!(
            "chunk trace: {} chunks (first {:.2} MiB, then {:.2}..{:.2} MiB, last {:.2} MiB), {} workers; read {:.1} ms",
            chunks.len(),
            sizes.first().copied().unwrap_or(0) as f64 / 1048576.0,
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
        let cpu = self.cpu.into_inner().expect("trace");
        if per_chunk() {
            for (r, c) in chunks.iter().zip(&cpu) {
                eprintln!(
                    "chunk trace: chunk {:>3} at {:>8.2} MiB, {:>6.2} MiB: parse {:6.2} ms, join {:5.2} ms (CPU)",
                    c.0,
                    r.0 as f64 / 1048576.0,
                    (r.1 - r.0) as f64 / 1048576.0,
                    ms(c.1),
                    ms(c.2)
                );
            }
        }
        let costs: Vec<f64> = cpu.iter().map(|c| ms(c.1 + c.2)).collect();
        let total: f64 = costs.iter().sum();
        let n = ws.len().max(1);
        let (span, tail) = schedule(&costs, n);
        // The same costs spread over bytes, in chunks of the largest size.
        let size = hi.max(1);
        let len = chunks.last().map_or(0, |r| r.1);
        let mut equal = Vec::new();
        let mut at = 0;
        while at < len {
            let end = (at + size).min(len);
            let c: f64 = chunks
                .iter()
                .zip(&costs)
                .map(|(r, c)| {
                    let o = end.min(r.1).saturating_sub(at.max(r.0));
                    c * o as f64 / (r.1 - r.0).max(1) as f64
                })
                .sum();
            equal.push(c);
            at = end;
        }
        let (espan, etail) = schedule(&equal, n);
        eprintln!(
            "chunk trace: CPU time parse+join {total:.1} ms (ideal {:.1} ms on {n}); these chunks laid out in order: makespan {span:.1} ms (+{:.1}%), tail {tail:.1} ms; {} equal chunks of {:.2} MiB: makespan {espan:.1} ms (+{:.1}%), tail {etail:.1} ms",
            total / n as f64,
            100.0 * (span * n as f64 / total.max(1e-9) - 1.0),
            equal.len(),
            size as f64 / 1048576.0,
            100.0 * (espan * n as f64 / total.max(1e-9) - 1.0),
        );
    }
}

/// `costs` taken in order by `n` workers, each the next when free: the
/// makespan, and the tail (from the first worker out of work to the last).
fn schedule(costs: &[f64], n: usize) -> (f64, f64) {
    let mut free = vec![0.0f64; n.max(1)];
    for &c in costs {
        let w = free
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |x| x.0);
        free[w] += c;
    }
    let hi = free.iter().copied().fold(0.0, f64::max);
    let lo = free.iter().copied().fold(f64::INFINITY, f64::min);
    (hi, hi - lo)
}

#[cfg(test)]
mod tests {
    use super::schedule;

    #[test]
    fn schedule_takes_the_next_cost_on_the_first_free_worker() {
        assert_eq!(schedule(&[3.0, 1.0, 1.0, 1.0], 2), (3.0, 0.0));
        assert_eq!(schedule(&[1.0, 1.0, 4.0], 2), (5.0, 4.0));
        assert_eq!(schedule(&[2.0, 2.0], 1), (4.0, 0.0));
        assert_eq!(schedule(&[], 3), (0.0, 0.0));
    }
}
