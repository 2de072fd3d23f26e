//! `commlens-plugin`: an NCCL profiler plugin that records every profiler event
//! NCCL emits (group/collective/p2p API calls, kernel launches, groups,
//! collectives, p2p operations, proxy operations and steps, proxy control,
//! kernel channels with GPU timers, net-plugin and copy-engine events) into one
//! compact binary file per process, for `commlens_ingest::plugin_out`.
//!
//! * [`abi`]: `#[repr(C)]` mirror of NCCL's profiler ABI v4 – v7 with compile-time
//!   offset checks;
//! * [`callbacks`]: the `extern "C"` callbacks (panic-guarded);
//! * [`session`]: per-thread producer state, registry, communicators, strings;
//! * [`flush`]: drain, background writer, END record, exit/unload handler;
//! * [`inflight`]: per-communicator pending/current/past operations (hang view);
//! * [`hang`]: `commlens-hang` JSON dumps and their triggers; [`signal`]: the dump signal;
//! * [`metrics`]: live metrics (hot-path accumulators, the writer's refresh),
//!   [`slow_rank`]: online slow-rank rule, [`prom`]: Prometheus text format,
//!   [`http`]: the local metrics endpoint;
//! * [`ring`]: the single-producer single-consumer byte ring;
//! * [`record`]: the record encoder (the format is specified in `FORMAT.md`);
//! * [`config`]: environment variables; [`sys`]: the few OS calls.
//!
//! Exported symbols: `ncclProfiler_v7`, `ncclProfiler_v6`, `ncclProfiler_v5`,
//! `ncclProfiler_v4` (NCCL picks the newest it knows), `commlens_profiler_flush`,
//! `commlens_profiler_output_path`, `commlens_profiler_dump_inflight` and
//! `commlens_profiler_write_metrics`. Use it with
//! `NCCL_PROFILER_PLUGIN=/abs/path/libcommlens_plugin.so`.

pub mod abi;
pub mod callbacks;
pub mod config;
pub mod flush;
pub mod hang;
pub mod http;
pub mod inflight;
pub mod metrics;
pub mod prom;
pub mod record;
pub mod ring;
pub mod session;
pub mod signal;
pub mod slow_rank;
pub mod sys;

use abi::*;
use std::ffi::{c_char, c_int, CStr};

/// The plugin's name as NCCL logs it (`PROFILER/Plugin: Loaded commlens (v6)`).
pub const PLUGIN_NAME: &CStr = c"commlens";

#[no_mangle]
#[allow(non_upper_case_globals)]
pub static ncclProfiler_v7: ProfilerV7 = ProfilerV7 {
    name: PLUGIN_NAME.as_ptr(),
    init: Some(callbacks::init_v7),
    start_event: Some(callbacks::start_v7),
    stop_event: Some(callbacks::stop),
    record_event_state: Some(callbacks::record),
    finalize: Some(callbacks::finalize),
};

#[no_mangle]
#[allow(non_upper_case_globals)]
pub static ncclProfiler_v6: ProfilerV6 = ProfilerV6 {
    name: PLUGIN_NAME.as_ptr(),
    init: Some(callbacks::init_v6),
    start_event: Some(callbacks::start_v6),
    stop_event: Some(callbacks::stop),
    record_event_state: Some(callbacks::record),
    finalize: Some(callbacks::finalize),
};

#[no_mangle]
#[allow(non_upper_case_globals)]
pub static ncclProfiler_v5: ProfilerV5 = ProfilerV5 {
    name: PLUGIN_NAME.as_ptr(),
    init: Some(callbacks::init_v5),
    start_event: Some(callbacks::start_v5),
    stop_event: Some(callbacks::stop),
    record_event_state: Some(callbacks::record),
    finalize: Some(callbacks::finalize),
};

#[no_mangle]
#[allow(non_upper_case_globals)]
pub static ncclProfiler_v4: ProfilerV4 = ProfilerV4 {
    name: PLUGIN_NAME.as_ptr(),
    init: Some(callbacks::init_v4),
    start_event: Some(callbacks::start_v4),
    stop_event: Some(callbacks::stop),
    record_event_state: Some(callbacks::record),
    finalize: Some(callbacks::finalize),
};

/// Writes every buffered record to the output file now. Returns 0 (`ncclSuccess`),
/// or 2 (`ncclSystemError`) when the file could not be written. Reach it with
/// `dlopen("…/libcommlens_plugin.so", RTLD_NOLOAD)` + `dlsym`.
#[no_mangle]
pub extern "C" fn commlens_profiler_flush() -> c_int {
    callbacks::guard(|| if flush::flush() { NCCL_SUCCESS } else { NCCL_SYSTEM_ERROR })
}

/// Writes the in-flight dumps (`commlens-hang-<host>-<pid>-dev<N>.json`, one per device
/// this process drives, reason `request`) into `COMMLENS_PLUGIN_DIR` now. Returns the
/// number of files written (0 without a live communicator), or -1 on an I/O error.
#[no_mangle]
pub extern "C" fn commlens_profiler_dump_inflight() -> c_int {
    callbacks::guard(|| match hang::dump("request") {
        Ok(n) => n.min(c_int::MAX as usize) as c_int,
        Err(_) => -1,
    })
}

/// Refreshes the live metrics now (`COMMLENS_PLUGIN_PROM_DIR` file and/or the
/// HTTP body) instead of waiting for `COMMLENS_PLUGIN_PROM_INTERVAL_MS`. Returns
/// the number of outputs written (0 when metrics are off or no communicator
/// was initialized), or -1 when the file could not be written.
#[no_mangle]
pub extern "C" fn commlens_profiler_write_metrics() -> c_int {
    callbacks::guard(|| match metrics::write_now() {
        Ok(n) => n.min(c_int::MAX as usize) as c_int,
        Err(_) => -1,
    })
}

/// Copies the output file's path (NUL-terminated) into `buf` of `len` bytes.
/// Returns the path length, or -1 when no file is open or `buf` is too small.
///
/// # Safety
/// `buf` must be NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn commlens_profiler_output_path(buf: *mut c_char, len: usize) -> c_int {
    callbacks::guard(|| {
        let Some(p) = flush::output_path() else {
            return -1;
        };
        let s = p.to_string_lossy();
        if buf.is_null() || s.len() + 1 > len {
            return -1;
        }
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, s.len());
        *buf.add(s.len()) = 0;
        s.len() as c_int
    })
}
