//! Wall time per phase of a command, printed to stderr when the environment
//! variable `COMMLENS_TIMINGS` is `1` (one line per phase: `timing: NAME
//! SECONDS s (cpu CPU s, this thread T s)`: the process's CPU time over the
//! phase, all threads, and the timing thread's own, from `/proc` on Linux;
//! CPU near wall is one busy core, near twice wall two; phases that run side
//! by side each count the other's CPU in the first figure, not in the second). Lives here, below every other crate, so the loader, the
//! report's sections and the command line can each time their own phases
//! without passing a clock around. With the variable unset a phase costs one
//! relaxed atomic load and no clock read.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

/// 0: not looked up yet, 1: off, 2: on.
static STATE: AtomicU8 = AtomicU8::new(0);

/// Whether `COMMLENS_TIMINGS=1` is set (looked up once).
pub fn enabled() -> bool {
    match STATE.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let on = std::env::var_os("COMMLENS_TIMINGS").is_some_and(|v| v == "1");
            STATE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            on
        }
    }
}

/// CPU seconds (user and system) of this process so far, every thread; 0
/// where `/proc/self/stat` cannot be read. Clock ticks of 1/100 s.
fn cpu_seconds() -> f64 {
    stat_cpu("/proc/self/stat")
}

/// CPU seconds of the calling thread so far: a phase that runs on one
/// thread next to others (the report's sections) is told apart by this.
fn thread_cpu_seconds() -> f64 {
    stat_cpu("/proc/thread-self/stat")
}

fn stat_cpu(path: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(path) else { return 0.0 };
    // Fields after the command name (in parentheses, which may hold spaces):
    // utime and stime are the 12th and 13th of them.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// A phase being timed: prints its line when dropped (or [`Phase::end`]ed).
#[must_use = "the phase ends when this is dropped"]
pub struct Phase {
    started: Option<(&'static str, Instant, f64, f64)>,
}

impl Phase {
    /// Starts timing `name` (nothing happens when timings are off).
    pub fn start(name: &'static str) -> Phase {
        Phase { started: enabled().then(|| (name, Instant::now(), cpu_seconds(), thread_cpu_seconds())) }
    }

    /// Ends the phase now.
    pub fn end(self) {}
}

impl Drop for Phase {
    fn drop(&mut self) {
        if let Some((name, t0, c0, th0)) = self.started.take() {
            eprintln!(
                "timing: {name} {:.3} s (cpu {:.2} s, this thread {:.2} s)",
                t0.elapsed().as_secs_f64(),
                cpu_seconds() - c0,
                thread_cpu_seconds() - th0
            );
        }
    }
}

/// Prints a duration measured elsewhere (a sum over many short stretches).
pub fn report(name: &str, d: std::time::Duration) {
    if enabled() {
        eprintln!("timing: {name} {:.3} s", d.as_secs_f64());
    }
}

/// Runs `f` as the phase `name`.
pub fn time<T>(name: &'static str, f: impl FnOnce() -> T) -> T {
    let _p = Phase::start(name);
    f()
}
