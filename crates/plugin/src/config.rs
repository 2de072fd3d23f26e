//! Configuration from environment variables, read once per loaded image.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `COMMLENS_PLUGIN_DIR` | `.` | folder of the output files (created if missing) |
//! | `COMMLENS_PLUGIN_MASK` | `0x1F4F` | event mask handed to NCCL (decimal or `0x` hex), clipped to the bits of the API version NCCL loaded |
//! | `COMMLENS_PLUGIN_BUF_KB` | `1024` | per-thread buffer in KiB (rounded up to a power of two, 4 KiB to 1 GiB) |
//! | `COMMLENS_PLUGIN_FLUSH_MS` | `100` | period of the background writer; `0`: no writer, files are written at finalize, exit and on demand only |
//! | `COMMLENS_PLUGIN_CUDA_PROBE` | `1` | `0` disables asking the (already loaded) CUDA driver for the communicator's device |
//! | `COMMLENS_PLUGIN_TEST_PANIC_STATE` | unset | test hook: `recordEventState` with this state panics inside the plugin (the panic is caught) |
//!
//! The default mask is GroupApi, CollApi, P2pApi, KernelLaunch, Group, Coll,
//! P2p, ProxyOp, KernelCh and CeColl. ProxyStep (`0x10`), ProxyCtrl (`0x20`)
//! and NetPlugin (`0x80`) are opt-in: they multiply the event volume.

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

/// Settings read once. Holds no heap memory (unless a variable was invalid), so nothing
/// is left behind when NCCL really unloads the plugin.
#[derive(Debug, Clone)]
pub struct Config {
    pub mask: u64,
    pub ring_bytes: usize,
    pub flush_ms: u64,
    pub cuda_probe: bool,
    pub panic_state: Option<i32>,
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
        Config {
            mask,
            ring_bytes: ((kb as usize) * 1024).next_power_of_two(),
            flush_ms,
            cuda_probe,
            panic_state,
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
