//! Configuration from environment variables, read once per loaded image.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `COMMLENS_PLUGIN_DIR` | `.` | folder of the output files (created if missing) |
//! | `COMMLENS_PLUGIN_MASK` | `0x1F4F` | event mask handed to NCCL (decimal or `0x` hex), clipped to the bits of the API version NCCL loaded |
//! | `COMMLENS_PLUGIN_BUF_KB` | `1024` | per-thread buffer in KiB (rounded up to a power of two, 4 KiB to 1 GiB) |
//! | `COMMLENS_PLUGIN_FLUSH_MS` | `100` | period of the background writer; `0`: no writer, files are written at finalize, exit and on demand only |
//! | `COMMLENS_PLUGIN_CUDA_PROBE` | `1` | `0` disables asking the (already loaded) CUDA driver for the communicator's device |
//! | `COMMLENS_PLUGIN_HANG_SIGNAL` | `10` (`SIGUSR1`) | signal that makes every rank of the process write its in-flight dump; `0`: install no handler |
//! | `COMMLENS_PLUGIN_HANG_TIMEOUT_S` | `300` | an operation open longer than this (seconds, fractions allowed) writes the dumps once per stall; `0`: off |
//! | `COMMLENS_PLUGIN_TEST_PANIC_STATE` | unset | test hook: `recordEventState` with this state panics inside the plugin (the panic is caught) |
//! | `COMMLENS_PLUGIN_PROM_DIR` | unset | folder for live metrics: `commlens-<host>-<pid>.prom` (Prometheus text format, written to a hidden temporary file and renamed), for node_exporter's textfile collector; removed when the session ends |
//! | `COMMLENS_PLUGIN_PROM_PORT` | unset | serve the same metrics on `http://ADDR:PORT/metrics` (`PORT + $LOCAL_RANK` when `LOCAL_RANK` is set, so the processes of a node do not collide; `0`: any free port, logged) |
//! | `COMMLENS_PLUGIN_PROM_ADDR` | `127.0.0.1` | address the metrics port binds to |
//! | `COMMLENS_PLUGIN_PROM_INTERVAL_MS` | `5000` | how often the background writer refreshes the metrics (file and HTTP body) |
//! | `COMMLENS_PLUGIN_PROM_JOB` | `$SLURM_JOB_ID`, else `nccl` | the `job` label of every series |
//! | `COMMLENS_PLUGIN_PROM_MAX_COMMS` | `32` | communicators with series of their own; the rest are folded into `comm="other"` |
//! | `COMMLENS_PLUGIN_METRICS_WINDOW` | `16` | operations per rolling bandwidth window and per slow-rank window |
//! | `COMMLENS_PLUGIN_SLOW_FRACTION` | `0.7` | a window is low when a rank's busbw is below this fraction of the median of the communicator's other ranks in this process |
//! | `COMMLENS_PLUGIN_SLOW_WINDOWS` | `2` | consecutive low windows that make a rank slow (logged once per episode) |
//! | `COMMLENS_PLUGIN_SLOW_MIN_BYTES` | `1048576` | smaller collectives do not enter slow-rank windows (their time is latency) |
//!
//! Metrics are on when `COMMLENS_PLUGIN_PROM_DIR` or `COMMLENS_PLUGIN_PROM_PORT`
//! is set ([`crate::metrics`]); like the hang triggers they are refreshed by the
//! background writer, so they need `COMMLENS_PLUGIN_FLUSH_MS` > 0 (else only
//! `commlens_profiler_write_metrics()` refreshes them).
//!
//! The default mask is GroupApi, CollApi, P2pApi, KernelLaunch, Group, Coll,
//! P2p, ProxyOp, KernelCh and CeColl. ProxyStep (`0x10`), ProxyCtrl (`0x20`)
//! and NetPlugin (`0x80`) are opt-in: they multiply the event volume.
//!
//! The signal and the timeout are serviced by the background writer, so they
//! need `COMMLENS_PLUGIN_FLUSH_MS` > 0 (with `0` no handler is installed and
//! only `commlens_profiler_dump_inflight()` writes dumps).

use crate::abi::ev;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Mask used when `COMMLENS_PLUGIN_MASK` is unset or invalid.
pub const DEFAULT_MASK: u64 = ev::GROUP_API
    | ev::COLL_API
    | ev::P2P_API
    | ev::KERNEL_LAUNCH
    | ev::GROUP
    | ev::COLL
    | ev::P2P
    | ev::PROXY_OP
    | ev::KERNEL_CH
    | ev::CE_COLL;

/// `SIGUSR1` on Linux (x86-64, aarch64, powerpc64).
pub const DEFAULT_HANG_SIGNAL: i32 = 10;
/// Default of `COMMLENS_PLUGIN_HANG_TIMEOUT_S`: below the 10-minute watchdog after which
/// PyTorch aborts a job whose collective does not finish, so the dumps exist by then.
pub const DEFAULT_HANG_TIMEOUT_S: u64 = 300;

/// Settings read once. Holds no heap memory (unless a variable was invalid), so nothing
/// is left behind when NCCL really unloads the plugin.
#[derive(Debug, Clone)]
pub struct Config {
    pub mask: u64,
    pub ring_bytes: usize,
    pub flush_ms: u64,
    pub cuda_probe: bool,
    pub panic_state: Option<i32>,
    /// Signal that requests in-flight dumps (0: none).
    pub hang_signal: i32,
    /// Age (ns) past which an open operation triggers in-flight dumps (0: never).
    pub hang_timeout_ns: u64,
    /// `COMMLENS_PLUGIN_PROM_DIR` or `COMMLENS_PLUGIN_PROM_PORT` is set: accumulate metrics.
    pub metrics: bool,
    /// Port to serve metrics on, `$LOCAL_RANK` already added (None: no HTTP).
    pub prom_port: Option<u16>,
    pub prom_interval_ms: u64,
    pub prom_max_comms: usize,
    /// Slow-rank rule and rolling windows ([`crate::slow_rank::SlowConfig`]).
    pub window: usize,
    pub slow_fraction: f64,
    pub slow_windows: u32,
    pub slow_min_bytes: u64,
    /// Problems met while reading the variables, reported through NCCL's logger at init.
    pub warnings: Vec<String>,
}

/// Parses `123` or `0x7b`.
pub fn parse_int(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

impl Config {
    /// Builds a configuration from a variable lookup (the environment in production).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Config {
        let mut warnings = Vec::new();
        let mut num = |name: &str, default: u64| -> u64 {
            match get(name) {
                None => default,
                Some(v) => parse_int(&v).unwrap_or_else(|| {
                    warnings.push(format!("{name}={v:?} is not a number; using {default:#x}"));
                    default
                }),
            }
        };
        let mask = num("COMMLENS_PLUGIN_MASK", DEFAULT_MASK);
        let kb = num("COMMLENS_PLUGIN_BUF_KB", 1024).clamp(4, 1 << 20);
        let flush_ms = num("COMMLENS_PLUGIN_FLUSH_MS", 100);
        let cuda_probe = num("COMMLENS_PLUGIN_CUDA_PROBE", 1) != 0;
        let panic_state = get("COMMLENS_PLUGIN_TEST_PANIC_STATE").and_then(|v| parse_int(&v)).map(|v| v as i32);
        let mut hang_signal = num("COMMLENS_PLUGIN_HANG_SIGNAL", DEFAULT_HANG_SIGNAL as u64);
        let prom_interval_ms = num("COMMLENS_PLUGIN_PROM_INTERVAL_MS", 5000).max(1);
        let prom_max_comms = num("COMMLENS_PLUGIN_PROM_MAX_COMMS", 32).clamp(1, 4096) as usize;
        let window = num("COMMLENS_PLUGIN_METRICS_WINDOW", 16).clamp(1, 4096) as usize;
        let slow_windows = num("COMMLENS_PLUGIN_SLOW_WINDOWS", 2).clamp(1, 1000) as u32;
        let slow_min_bytes = num("COMMLENS_PLUGIN_SLOW_MIN_BYTES", 1 << 20);
        if hang_signal > 64 || hang_signal == 9 || hang_signal == 19 {
            warnings.push(format!(
                "COMMLENS_PLUGIN_HANG_SIGNAL={hang_signal} cannot be caught; using {DEFAULT_HANG_SIGNAL}"
            ));
            hang_signal = DEFAULT_HANG_SIGNAL as u64;
        }
        let hang_timeout_ns = match get("COMMLENS_PLUGIN_HANG_TIMEOUT_S") {
            None => DEFAULT_HANG_TIMEOUT_S * 1_000_000_000,
            Some(v) => match v.trim().parse::<f64>() {
                Ok(s) if s.is_finite() && s >= 0.0 => (s * 1e9).min(u64::MAX as f64 / 2.0) as u64,
                _ => {
                    warnings.push(format!(
                        "COMMLENS_PLUGIN_HANG_TIMEOUT_S={v:?} is not a number of seconds; using {DEFAULT_HANG_TIMEOUT_S}"
                    ));
                    DEFAULT_HANG_TIMEOUT_S * 1_000_000_000
                }
            },
        };
        let prom_dir = get("COMMLENS_PLUGIN_PROM_DIR").is_some_and(|d| !d.is_empty());
        let prom_port = match get("COMMLENS_PLUGIN_PROM_PORT") {
            None => None,
            Some(v) if v.trim().is_empty() => None,
            Some(v) => {
                let local = get("LOCAL_RANK").and_then(|r| r.trim().parse::<u64>().ok()).unwrap_or(0);
                match parse_int(&v) {
                    Some(0) => Some(0),
                    Some(p) if p + local <= u16::MAX as u64 => Some((p + local) as u16),
                    _ => {
                        warnings.push(format!("COMMLENS_PLUGIN_PROM_PORT={v:?} is not a port; no metrics port"));
                        None
                    }
                }
            }
        };
        let slow_fraction = match get("COMMLENS_PLUGIN_SLOW_FRACTION") {
            None => 0.7,
            Some(v) => match v.trim().parse::<f64>() {
                Ok(f) if f > 0.0 && f < 1.0 => f,
                _ => {
                    warnings
                        .push(format!("COMMLENS_PLUGIN_SLOW_FRACTION={v:?} is not a fraction in (0, 1); using 0.7"));
                    0.7
                }
            },
        };
        Config {
            metrics: prom_dir || prom_port.is_some(),
            prom_port,
            prom_interval_ms,
            prom_max_comms,
            window,
            slow_fraction,
            slow_windows,
            slow_min_bytes,
            mask,
            ring_bytes: ((kb as usize) * 1024).next_power_of_two(),
            flush_ms,
            cuda_probe,
            panic_state,
            hang_signal: hang_signal as i32,
            hang_timeout_ns,
            warnings,
        }
    }
}

/// `COMMLENS_PLUGIN_DIR` (default `.`), read when a session starts.
pub fn output_dir() -> PathBuf {
    PathBuf::from(std::env::var("COMMLENS_PLUGIN_DIR").ok().filter(|d| !d.is_empty()).unwrap_or_else(|| ".".into()))
}

/// `COMMLENS_PLUGIN_PROM_DIR` (None: no metrics file), read when metrics start.
pub fn prom_dir() -> Option<PathBuf> {
    std::env::var("COMMLENS_PLUGIN_PROM_DIR").ok().filter(|d| !d.is_empty()).map(PathBuf::from)
}

/// `COMMLENS_PLUGIN_PROM_ADDR` (default `127.0.0.1`), read when metrics start.
pub fn prom_addr() -> String {
    std::env::var("COMMLENS_PLUGIN_PROM_ADDR")
        .ok()
        .filter(|a| !a.trim().is_empty())
        .unwrap_or_else(|| "127.0.0.1".into())
}

/// The `job` label: `COMMLENS_PLUGIN_PROM_JOB`, else `SLURM_JOB_ID`, else `nccl`.
pub fn prom_job() -> String {
    ["COMMLENS_PLUGIN_PROM_JOB", "SLURM_JOB_ID"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "nccl".into())
}

/// The process's configuration (environment read on first use).
pub fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| Config::from_lookup(|k| std::env::var(k).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(vars: &[(&str, &str)]) -> Config {
        Config::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn defaults() {
        let c = cfg(&[]);
        assert_eq!(c.mask, 0x1F4F);
        assert_eq!(c.ring_bytes, 1 << 20);
        assert_eq!(c.flush_ms, 100);
        assert!(c.cuda_probe && c.panic_state.is_none() && c.warnings.is_empty());
        assert_eq!((c.hang_signal, c.hang_timeout_ns), (10, 300_000_000_000));
        assert!(!c.metrics && c.prom_port.is_none());
        assert_eq!((c.prom_interval_ms, c.prom_max_comms, c.window, c.slow_windows), (5000, 32, 16, 2));
        assert_eq!((c.slow_fraction, c.slow_min_bytes), (0.7, 1 << 20));
    }

    #[test]
    fn metrics_settings() {
        let c = cfg(&[("COMMLENS_PLUGIN_PROM_DIR", "/tmp/prom")]);
        assert!(c.metrics && c.prom_port.is_none());
        let c = cfg(&[("COMMLENS_PLUGIN_PROM_PORT", "9400"), ("LOCAL_RANK", "3")]);
        assert_eq!((c.metrics, c.prom_port), (true, Some(9403)), "one port per local rank");
        let c = cfg(&[("COMMLENS_PLUGIN_PROM_PORT", "0"), ("LOCAL_RANK", "3")]);
        assert_eq!(c.prom_port, Some(0), "any free port stays any free port");
        let c = cfg(&[
            ("COMMLENS_PLUGIN_PROM_PORT", "70000"),
            ("COMMLENS_PLUGIN_SLOW_FRACTION", "1.5"),
            ("COMMLENS_PLUGIN_METRICS_WINDOW", "4"),
        ]);
        assert_eq!((c.metrics, c.prom_port, c.slow_fraction, c.window, c.warnings.len()), (false, None, 0.7, 4, 2));
    }

    #[test]
    fn hang_triggers() {
        let c = cfg(&[("COMMLENS_PLUGIN_HANG_SIGNAL", "0"), ("COMMLENS_PLUGIN_HANG_TIMEOUT_S", "0.25")]);
        assert_eq!((c.hang_signal, c.hang_timeout_ns), (0, 250_000_000));
        let c = cfg(&[("COMMLENS_PLUGIN_HANG_SIGNAL", "12"), ("COMMLENS_PLUGIN_HANG_TIMEOUT_S", "0")]);
        assert_eq!((c.hang_signal, c.hang_timeout_ns), (12, 0));
        let c = cfg(&[("COMMLENS_PLUGIN_HANG_SIGNAL", "9"), ("COMMLENS_PLUGIN_HANG_TIMEOUT_S", "soon")]);
        assert_eq!((c.hang_signal, c.hang_timeout_ns, c.warnings.len()), (10, 300_000_000_000, 2));
    }

    #[test]
    fn values_and_bad_values() {
        let c = cfg(&[
            ("COMMLENS_PLUGIN_MASK", "0xFFF"),
            ("COMMLENS_PLUGIN_BUF_KB", "3"),
            ("COMMLENS_PLUGIN_FLUSH_MS", "zero"),
            ("COMMLENS_PLUGIN_TEST_PANIC_STATE", "99"),
        ]);
        assert_eq!(c.mask, 0xFFF);
        assert_eq!(c.ring_bytes, 4096, "clamped to 4 KiB");
        assert_eq!(c.flush_ms, 100, "invalid value falls back to the default");
        assert_eq!(c.warnings.len(), 1);
        assert_eq!(c.panic_state, Some(99));
        assert_eq!(cfg(&[("COMMLENS_PLUGIN_BUF_KB", "100")]).ring_bytes, 128 * 1024);
        assert_eq!(parse_int(" 42 "), Some(42));
        assert_eq!(parse_int("0x1f"), Some(31));
        assert_eq!(parse_int("-1"), None);
    }
}
