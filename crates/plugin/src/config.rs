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
        Config {
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
