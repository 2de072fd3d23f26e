//! Shared harness of the `fuzz_*` tests (included with `#[path]` by every
//! crate's fuzz test, so it needs no crate of its own and no dependency):
//! a seeded xorshift PRNG, byte- and text-level mutations of real and
//! generated seed files, and the property every reader must keep on any
//! input — it returns (Ok or Err) within a bounded time, never panics and
//! never allocates without bound.
//!
//! Knobs (environment):
//! * `COMMLENS_FUZZ_CASES` — mutated inputs per reader (default 200);
//! * `COMMLENS_FUZZ_SECONDS` — time budget per reader: a reader stops early
//!   once it is spent (default 60);
//! * `COMMLENS_FUZZ_CASE_SECONDS` — the bound one case must finish within
//!   (default 60; a case past it is a failure and its input is kept).
//!
//! A failing case writes its input to `target/fuzz-repro/<reader>-<case>.bin`
//! and the panic message names that file.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Counting allocator: live bytes and their peak, and a hard cap on the
/// live total so that an unbounded allocation fails the test ("memory
/// allocation of N bytes failed") instead of taking the machine down.
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Live bytes above which allocations are refused (the process aborts).
pub const HARD_CAP: usize = 6 << 30;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if !reserve(l.size()) {
            return std::ptr::null_mut();
        }
        let p = System.alloc(l);
        if p.is_null() {
            LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if !reserve(l.size()) {
            return std::ptr::null_mut();
        }
        let p = System.alloc_zeroed(l);
        if p.is_null() {
            LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() && !reserve(new - l.size()) {
            return std::ptr::null_mut();
        }
        let q = System.realloc(p, l, new);
        if q.is_null() {
            if new > l.size() {
                LIVE.fetch_sub(new - l.size(), Ordering::Relaxed);
            }
        } else if new < l.size() {
            LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
        }
        q
    }
}

fn reserve(n: usize) -> bool {
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    if now > HARD_CAP {
        LIVE.fetch_sub(n, Ordering::Relaxed);
        return false;
    }
    PEAK.fetch_max(now, Ordering::Relaxed);
    true
}

/// Declares the counting allocator as the test binary's global allocator.
#[macro_export]
macro_rules! counting_allocator {
    () => {
        #[global_allocator]
        static ALLOC: fuzz_support::Counting = fuzz_support::Counting;
    };
}

/// xorshift64* — small, deterministic, good enough for fuzzing.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `0..n` (0 when n is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// Cases per reader (`COMMLENS_FUZZ_CASES`, default 200).
pub fn cases() -> usize {
    env_num("COMMLENS_FUZZ_CASES", 200) as usize
}

/// Time budget per reader (`COMMLENS_FUZZ_SECONDS`, default 60).
pub fn budget() -> Duration {
    Duration::from_secs(env_num("COMMLENS_FUZZ_SECONDS", 60))
}

/// Bound on one case (`COMMLENS_FUZZ_CASE_SECONDS`, default 60).
pub fn case_limit() -> Duration {
    Duration::from_secs(env_num("COMMLENS_FUZZ_CASE_SECONDS", 60))
}

/// Folder of reproducers: `<workspace>/target/fuzz-repro`.
pub fn repro_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")));
    target.join("fuzz-repro")
}

/// A scratch folder for readers that take a path, unique to this process and tag.
pub fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-fuzz-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch folder");
    d
}

/// Tokens that stress number parsing.
pub const HUGE_NUMBERS: &[&str] = &[
    "18446744073709551616",
    "18446744073709551615",
    "9223372036854775808",
    "-9223372036854775809",
    "4294967296",
    "2147483648",
    "-1",
    "-0",
    "1e308",
    "1e309",
    "-1e309",
    "1e-400",
    "NaN",
    "inf",
    "-inf",
    "0x7fffffffffffffff",
    "0xffffffffffffffffff",
    "99999999999999999999999999999999999999999999999",
    "0.0000000000000000000000000000001",
    "00000000000000000000000000000000000000000000001",
];

/// Byte sequences that are not UTF-8.
pub const BAD_UTF8: &[&[u8]] = &[b"\xff", b"\xfe\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xc0\xaf", b"\x80"];

/// Which mutations suit the format.
#[derive(Clone, Copy, Debug, Default)]
pub struct Kind {
    /// Text: also mutate numbers and insert invalid UTF-8 at token borders.
    pub text: bool,
    /// JSON: also insert deep nesting.
    pub json: bool,
    /// Binary with a fixed header of this many bytes that the mutations leave
    /// alone in half of the cases (so the reader gets past its magic check).
    pub keep_head: usize,
}

/// Replaces a run of ASCII digits at or after `at` by `with`.
fn replace_number(data: &mut Vec<u8>, at: usize, with: &[u8]) {
    let Some(s) = data[at..].iter().position(u8::is_ascii_digit).map(|p| p + at) else {
        data.extend_from_slice(with);
        return;
    };
    let e = data[s..].iter().position(|b| !b.is_ascii_digit()).map_or(data.len(), |p| p + s);
    data.splice(s..e, with.iter().copied());
}

/// One mutated input from `seed`. `case` and `total` place the truncations
/// evenly over the file, so that every region gets cut somewhere.
pub fn mutate(rng: &mut Rng, seed: &[u8], kind: Kind, case: usize, total: usize) -> Vec<u8> {
    let mut d = seed.to_vec();
    let keep = if rng.chance(50) { kind.keep_head.min(d.len()) } else { 0 };
    // An even sweep of truncation points, for one case in four.
    if case % 4 == 0 && !d.is_empty() {
        let at = keep + (d.len() - keep) * ((case / 4) % total.max(1)) / total.max(1);
        let at = (at + rng.below(64)).min(d.len());
        d.truncate(at);
        if rng.chance(50) {
            return d;
        }
    }
    for _ in 0..1 + rng.below(4) {
        let n = d.len();
        let pos = keep + rng.below(n.saturating_sub(keep) + 1);
        let mut op = rng.below(if kind.text { 13 } else { 9 });
        if kind.json && rng.chance(8) {
            op = 100;
        }
        match op {
            // Bit flips.
            0 => {
                for _ in 0..1 + rng.below(8) {
                    if d.len() > keep {
                        let i = keep + rng.below(d.len() - keep);
                        d[i] ^= 1 << rng.below(8);
                    }
                }
            }
            // A random byte.
            1 => {
                if pos < d.len() {
                    d[pos] = rng.next() as u8;
                }
            }
            // Random bytes inserted.
            2 => {
                let k = 1 + rng.below(32);
                let bytes: Vec<u8> = (0..k).map(|_| rng.next() as u8).collect();
                d.splice(pos..pos, bytes);
            }
            // A range deleted.
            3 => {
                let k = 1 + rng.below(1 + (n - pos.min(n)).min(4096));
                let e = (pos + k).min(n);
                d.drain(pos.min(n)..e);
            }
            // Truncated anywhere.
            4 => d.truncate(pos.min(n)),
            // A chunk duplicated in place.
            5 => {
                if pos < n {
                    let k = 1 + rng.below((n - pos).min(8192));
                    let chunk = d[pos..pos + k].to_vec();
                    let reps = if rng.chance(10) { 2 + rng.below(20) } else { 1 };
                    for _ in 0..reps {
                        d.splice(pos..pos, chunk.iter().copied());
                    }
                }
            }
            // Two chunks swapped.
            6 => {
                if n > keep + 2 {
                    let k = 1 + rng.below(((n - keep) / 2).min(4096));
                    let a = keep + rng.below(n - keep - k + 1);
                    let b = keep + rng.below(n - keep - k + 1);
                    let (a, b) = (a.min(b), a.max(b));
                    if a + k <= b {
                        let (x, y) = d.split_at_mut(b);
                        x[a..a + k].swap_with_slice(&mut y[..k]);
                    }
                }
            }
            // A chunk copied from elsewhere in the file.
            7 => {
                if n > 0 {
                    let k = 1 + rng.below(n.min(2048));
                    let from = rng.below(n - k + 1);
                    let chunk = d[from..from + k].to_vec();
                    let pos = pos.min(d.len());
                    d.splice(pos..pos, chunk);
                }
            }
            // Extreme byte values: zeros or 0xff runs (binary lengths, counts).
            8 => {
                let k = 1 + rng.below(8);
                let v = if rng.chance(50) { 0xff } else { 0 };
                for i in pos..(pos + k).min(d.len()) {
                    d[i] = v;
                }
            }
            // Text: a number replaced by a huge or odd one.
            9 | 10 => {
                let with = rng.pick(HUGE_NUMBERS).as_bytes();
                replace_number(&mut d, pos.min(n), with);
            }
            // Text: invalid UTF-8.
            11 => {
                let bad = rng.pick(BAD_UTF8);
                d.splice(pos.min(n)..pos.min(n), bad.iter().copied());
            }
            // Text: a line duplicated or removed, or a CR / NUL / overlong line.
            12 => {
                let s = d[..pos.min(n)].iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
                let e = d[pos.min(n)..].iter().position(|&b| b == b'\n').map_or(n, |p| p + pos.min(n) + 1);
                match rng.below(5) {
                    0 => {
                        let line = d[s..e].to_vec();
                        d.splice(e..e, line);
                    }
                    1 => {
                        d.drain(s..e);
                    }
                    2 => d.insert(pos.min(n), b'\r'),
                    3 => d.insert(pos.min(n), 0),
                    _ => {
                        let long = vec![b'x'; 100_000 + rng.below(2_000_000)];
                        d.splice(pos.min(n)..pos.min(n), long);
                    }
                }
            }
            // JSON: deep nesting, open or closed.
            _ => {
                let depth = 1 + rng.below(200_000);
                let (open, close): (&[u8], &[u8]) = match rng.below(3) {
                    0 => (b"[", b"]"),
                    1 => (b"{\"a\":", b"}"),
                    _ => (b"{\"args\":[", b"]}"),
                };
                let mut nest = open.repeat(depth);
                if rng.chance(50) {
                    nest.extend(b"1");
                    nest.extend(close.repeat(depth));
                }
                d.splice(pos.min(n)..pos.min(n), nest);
            }
        }
    }
    d
}

/// A seed input: a name for messages and its bytes.
pub struct Seed {
    pub name: String,
    pub data: Vec<u8>,
}

impl Seed {
    pub fn new(name: impl Into<String>, data: impl Into<Vec<u8>>) -> Seed {
        Seed { name: name.into(), data: data.into() }
    }
}

/// Takes a window of at most `max` bytes of a large seed, so that one case
/// stays quick (the window's ends are truncations too).
pub fn window(rng: &mut Rng, data: &[u8], max: usize) -> Vec<u8> {
    if data.len() <= max {
        return data.to_vec();
    }
    // Half the time from the start (headers matter), else anywhere.
    let start = if rng.chance(50) { 0 } else { rng.below(data.len() - max + 1) };
    data[start..start + max].to_vec()
}

/// Outcome counts of one reader's run.
#[derive(Debug, Default)]
pub struct Tally {
    pub ok: usize,
    pub err: usize,
    pub cases: usize,
    pub slowest: Duration,
    pub peak_extra: usize,
}

/// Runs `cases()` mutated inputs through `read` (which returns whether the
/// reader said Ok), each on its own thread under the per-case bound, within
/// the reader's time budget. `make` builds case `i`'s input. A panic, a case
/// past its bound or an allocation peak beyond `mem_limit(input)` fails with
/// the input written under `target/fuzz-repro/`.
pub fn run<M, R>(reader: &str, mut make: M, read: R) -> Tally
where
    M: FnMut(&mut Rng, usize, usize) -> Vec<u8>,
    R: Fn(&[u8]) -> bool + Send + Sync + 'static + Clone,
{
    let total = cases();
    let budget = budget();
    let bound = case_limit();
    let started = Instant::now();
    let mut rng = Rng::new(0xC0FFEE ^ reader.bytes().fold(0u64, |h, b| h.wrapping_mul(131).wrapping_add(b as u64)));
    let mut t = Tally::default();
    // Quiet the default hook's message for expected-to-be-caught panics: we report them ourselves.
    for i in 0..total {
        if started.elapsed() >= budget {
            eprintln!("fuzz {reader}: time budget spent after {i} of {total} cases");
            break;
        }
        let input = make(&mut rng, i, total);
        let len = input.len();
        let input = std::sync::Arc::new(input);
        let (tx, rx) = mpsc::channel();
        let r = read.clone();
        let inp = input.clone();
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let t0 = Instant::now();
        std::thread::Builder::new()
            .name(format!("fuzz-{reader}-{i}"))
            .stack_size(64 << 20)
            .spawn(move || {
                let out = catch_unwind(AssertUnwindSafe(|| r(&inp)));
                let _ = tx.send(out.map_err(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                }));
            })
            .expect("spawn fuzz case");
        let out = rx.recv_timeout(bound);
        let took = t0.elapsed();
        let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
        let fail = |why: String| -> ! {
            let dir = repro_dir();
            let _ = std::fs::create_dir_all(&dir);
            let path = dir.join(format!("{reader}-{i}.bin"));
            let _ = std::fs::write(&path, &*input);
            panic!("fuzz {reader}: case {i} ({len} bytes) {why}; input kept in {}", path.display());
        };
        match out {
            Ok(Ok(ok)) => {
                if ok {
                    t.ok += 1
                } else {
                    t.err += 1
                }
            }
            Ok(Err(msg)) => fail(format!("panicked: {msg}")),
            Err(_) => fail(format!("did not finish within {bound:?}")),
        }
        let limit = mem_limit(len);
        if peak > limit {
            fail(format!("allocated {peak} bytes at peak (limit {limit})"));
        }
        t.cases += 1;
        t.slowest = t.slowest.max(took);
        t.peak_extra = t.peak_extra.max(peak);
    }
    eprintln!(
        "fuzz {reader}: {} cases ({} ok, {} errors) in {:.2?}; slowest {:.2?}; peak {} MiB",
        t.cases,
        t.ok,
        t.err,
        started.elapsed(),
        t.slowest,
        t.peak_extra >> 20
    );
    t
}

/// The allocation bound of one case: 1 GiB plus 64 bytes per input byte
/// (tests of one binary run in parallel, so the peak is the process's).
pub fn mem_limit(input_len: usize) -> usize {
    (1usize << 30) + 64 * input_len
}

/// Silences the panic hook's output for the whole binary (the harness
/// reports caught panics with their message and reproducer itself).
pub fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name().is_some_and(|n| n.starts_with("fuzz-")) {
                return;
            }
            default(info);
        }));
    });
}
