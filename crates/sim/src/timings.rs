//! Per-phase timings of a simulation, on stderr when `COMMLENS_TIMINGS=1`.
//!
//! Owns [`Phase`]: one line per phase, `timing: <phase>: <wall> s wall, <cpu> s cpu`, where
//! cpu is the process's user + system time over the phase (all threads), so cpu / wall says
//! how many cores the phase kept busy. The engine times its own phases (loop, breakdown); the
//! `simulate` command times the rest (workload build, table, Parquet, traces). Off by default:
//! the check is one environment read, cached.

use std::sync::OnceLock;
use std::time::Instant;

/// Whether `COMMLENS_TIMINGS=1` is set.
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("COMMLENS_TIMINGS").is_some_and(|v| v == "1"))
}

/// Process CPU time (user + system, all threads), seconds; 0 where it cannot be read.
fn cpu_s() -> f64 {
    #[cfg(unix)]
    {
        // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is always valid.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } == 0 {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
            return tv(u.ru_utime) + tv(u.ru_stime);
        }
    }
    0.0
}

/// A phase being timed; [`Phase::end`] prints its line (when timings are on).
pub struct Phase {
    name: &'static str,
    wall: Instant,
    /// Process CPU time at the start; NaN for a phase that runs beside others (the process's
    /// CPU time would count theirs too), whose line gives wall time only.
    cpu: f64,
}

impl Phase {
    pub fn start(name: &'static str) -> Phase {
        Phase { name, wall: Instant::now(), cpu: if enabled() { cpu_s() } else { 0.0 } }
    }

    /// A phase running at the same time as others: its line gives wall time only.
    pub fn concurrent(name: &'static str) -> Phase {
        Phase { name, wall: Instant::now(), cpu: f64::NAN }
    }

    pub fn end(self) {
        if enabled() {
            let wall = self.wall.elapsed().as_secs_f64();
            if self.cpu.is_nan() {
                eprintln!("timing: {}: {:.3} s wall (beside other phases)", self.name, wall);
            } else {
                eprintln!("timing: {}: {:.3} s wall, {:.3} s cpu", self.name, wall, cpu_s() - self.cpu);
            }
        }
    }
}
