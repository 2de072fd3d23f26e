//! Live metrics: what the hot path accumulates and what the writer does with it.
//!
//! **Hot path** ([`CommAcc`], one per communicator handle, inside the handle's
//! in-flight state and under its existing mutex, see [`crate::inflight`]): when
//! an operation completes, one [`KindAcc`] per function (AllReduce, Send, …; a
//! fixed 12 slots, the rest folded into an "other" slot) counts operations,
//! bytes and a latency histogram of fixed power-of-two buckets, and one
//! [`Sample`] goes into a fixed ring of 256 for the writer. Bytes are
//! `count × datatype size`, the size looked up in a table filled when the
//! datatype's name was interned ([`note_string`]). No allocation, no extra lock.
//!
//! **Writer** ([`poll`], called by the background writer thread; [`write_now`]
//! from `commlens_profiler_write_metrics()`): every `COMMLENS_PLUGIN_PROM_INTERVAL_MS`
//! it copies every live handle's accumulators and new samples
//! ([`crate::inflight::metrics_views`]), computes per-operation algbw/busbw and
//! their rolling mean/min over the last `COMMLENS_PLUGIN_METRICS_WINDOW`
//! operations per handle × function, feeds the slow-rank rule
//! ([`crate::slow_rank`], whose episodes it logs through NCCL's logger), renders
//! the Prometheus text ([`crate::prom`]), writes it to
//! `$COMMLENS_PLUGIN_PROM_DIR/commlens-<host>-<pid>.prom` through a hidden
//! temporary file and a rename, and hands it to the HTTP endpoint
//! ([`crate::http`]). The file is removed when the session ends, so
//! node_exporter stops exporting a finished process.
//!
//! Durations: from the GPU timers of the operation's kernel channels (earliest
//! channel start to latest channel stop) when NCCL gave them, else from the
//! CPU times at which the proxy thread saw the first channel start and the
//! last one stop. Operations retired by stream order (their KernelCh stops
//! were not seen) are counted without a duration.

use crate::abi::LogFn;
use crate::config::config;
use crate::inflight::Op;
use crate::prom;
use crate::session::{self, lock, log, LOG_WARN};
use crate::slow_rank::{Detector, Obs, SlowConfig, SlowEvent};
use crate::{http, sys};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

/// Function slots per handle; the last one takes every function beyond the first 11.
pub const KIND_SLOTS: usize = 12;
/// Finite histogram buckets: upper bounds 2^2 … 2^23 µs (4 µs … 8.4 s), then +Inf.
pub const FINITE_BUCKETS: usize = 22;
pub const BUCKETS: usize = FINITE_BUCKETS + 1;
/// Completed operations buffered per handle between two writer passes.
pub const SAMPLE_RING: usize = 256;
/// Function id of the overflow slot.
pub const OTHER_FUNC: u32 = u32::MAX;
const DTYPE_IDS: usize = 1024;

/// Upper bound (seconds) of finite bucket `i`.
pub fn bucket_le_seconds(i: usize) -> f64 {
    (1u64 << (i + 2)) as f64 * 1e-6
}

/// Histogram bucket of a duration: the smallest `2^k µs` (k ≥ 2) it does not exceed.
#[inline]
pub fn bucket_of(dur_ns: u64) -> usize {
    let us = dur_ns.div_ceil(1000).max(1);
    let ceil_log2 = 64 - (us - 1).leading_zeros() as usize;
    ceil_log2.saturating_sub(2).min(FINITE_BUCKETS)
}

/// Datatype sizes by interned string id (0: not a datatype, or unknown).
static DTYPE_SIZE: [AtomicU8; DTYPE_IDS] = [const { AtomicU8::new(0) }; DTYPE_IDS];

/// Called once per new interned string: remembers the sizes of datatype names.
pub fn note_string(id: u32, text: &[u8]) {
    let size = std::str::from_utf8(text).map_or(0, crate::hang::dtype_size);
    if size > 0 && (id as usize) < DTYPE_IDS {
        DTYPE_SIZE[id as usize].store(size as u8, Ordering::Relaxed);
    }
}

#[inline]
fn dtype_size(id: u32) -> u64 {
    DTYPE_SIZE.get(id as usize).map_or(0, |s| s.load(Ordering::Relaxed) as u64)
}

/// Totals of one function on one handle.
#[derive(Clone, Copy, Debug)]
pub struct KindAcc {
    /// Interned function name; [`OTHER_FUNC`] for the overflow slot; 0 while unused.
    pub func: u32,
    pub p2p: bool,
    pub ops: u64,
    pub bytes: u64,
    /// Operations with a duration (the histogram's count).
    pub timed: u64,
    pub dur_ns: u64,
    /// Non-cumulative bucket counts.
    pub hist: [u64; BUCKETS],
}

const EMPTY_KIND: KindAcc = KindAcc { func: 0, p2p: false, ops: 0, bytes: 0, timed: 0, dur_ns: 0, hist: [0; BUCKETS] };

/// One completed operation, for the writer's rolling windows and the slow-rank rule.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    pub seq: u64,
    pub func: u32,
    pub p2p: bool,
    pub bytes: u64,
    /// 0: no duration known.
    pub dur_ns: u64,
    /// CPU time (`CLOCK_MONOTONIC`) at which the proxy saw the first channel start.
    pub cpu_start: u64,
}

/// A handle's metrics accumulators: fixed size, allocated once at registration.
pub struct CommAcc {
    pub kinds: [KindAcc; KIND_SLOTS],
    samples: Box<[Sample; SAMPLE_RING]>,
    written: u64,
    read: u64,
    /// Samples overwritten before the writer read them.
    pub lost_samples: u64,
}

impl CommAcc {
    pub fn new() -> Box<CommAcc> {
        Box::new(CommAcc {
            kinds: [EMPTY_KIND; KIND_SLOTS],
            samples: Box::new([Sample::default(); SAMPLE_RING]),
            written: 0,
            read: 0,
            lost_samples: 0,
        })
    }

    /// Duration of a completed operation: GPU timers first, then the CPU times.
    #[inline]
    fn duration(op: &Op) -> u64 {
        const HOUR_NS: u64 = 3_600_000_000_000;
        if op.gpu_start != 0 && op.gpu_end > op.gpu_start && op.gpu_end - op.gpu_start < HOUR_NS {
            op.gpu_end - op.gpu_start
        } else if op.start != 0 && op.end > op.start {
            op.end - op.start
        } else {
            0
        }
    }

    /// Accounts one completed operation (hot path: no allocation, no lock of its own).
    #[inline]
    pub fn record(&mut self, op: &Op) {
        let slot = match self.kinds[..KIND_SLOTS - 1].iter().position(|k| k.func == op.func || k.func == 0) {
            Some(i) => i,
            None => KIND_SLOTS - 1,
        };
        let k = &mut self.kinds[slot];
        if k.func == 0 {
            k.func = if slot == KIND_SLOTS - 1 { OTHER_FUNC } else { op.func };
            k.p2p = op.p2p;
        }
        let bytes = op.count.saturating_mul(dtype_size(op.dtype));
        let dur = Self::duration(op);
        k.ops += 1;
        k.bytes = k.bytes.wrapping_add(bytes);
        if dur > 0 {
            k.timed += 1;
            k.dur_ns = k.dur_ns.wrapping_add(dur);
            k.hist[bucket_of(dur)] += 1;
        }
        let s = Sample { seq: op.seq, func: op.func, p2p: op.p2p, bytes, dur_ns: dur, cpu_start: op.start };
        self.samples[(self.written % SAMPLE_RING as u64) as usize] = s;
        self.written += 1;
    }

    /// The samples recorded since the last call (writer side).
    pub fn take_samples(&mut self) -> Vec<Sample> {
        let behind = self.written - self.read;
        if behind > SAMPLE_RING as u64 {
            self.lost_samples += behind - SAMPLE_RING as u64;
            self.read = self.written - SAMPLE_RING as u64;
        }
        let out = (self.read..self.written).map(|i| self.samples[(i % SAMPLE_RING as u64) as usize]).collect();
        self.read = self.written;
        out
    }
}

/// A copy of one live handle's metrics state, taken by the writer.
#[derive(Clone, Debug)]
pub struct HandleView {
    pub idx: u32,
    pub comm_hash: u64,
    pub rank: i32,
    pub nranks: i32,
    pub dev: Option<i32>,
    pub name: String,
    pub kinds: [KindAcc; KIND_SLOTS],
    pub samples: Vec<Sample>,
    pub lost_samples: u64,
    /// Open (pending + running) operations, the oldest one's enqueue time, and
    /// how many are older than the hang timeout.
    pub open: u64,
    pub oldest_enqueue: Option<u64>,
    pub overdue: u64,
}

/// `(algorithm bytes, busbw / algbw)` under the nccl-tests convention, by NCCL function name.
pub fn bus_terms(func: &str, bytes: u64, nranks: i32) -> (f64, f64) {
    let n = nranks.max(1) as f64;
    let f = func.to_ascii_lowercase();
    match f.as_str() {
        "allreduce" => (bytes as f64, 2.0 * (n - 1.0) / n),
        "allgather" | "reducescatter" | "alltoall" | "gather" | "scatter" => (bytes as f64 * n, (n - 1.0) / n),
        _ => (bytes as f64, 1.0),
    }
}

/// Per-operation bandwidths of the last `window` timed operations of one handle × function.
#[derive(Debug, Default, Clone)]
pub struct Rolling {
    /// `(algbw, busbw)` in bytes per second, newest last.
    pub recent: VecDeque<(f64, f64)>,
}

impl Rolling {
    pub fn push(&mut self, algbw: f64, busbw: f64, window: usize) {
        if self.recent.len() == window {
            self.recent.pop_front();
        }
        self.recent.push_back((algbw, busbw));
    }

    /// `(last, mean, min)` of algbw (`bus` false) or busbw.
    pub fn stats(&self, bus: bool) -> Option<(f64, f64, f64)> {
        let v = |p: &(f64, f64)| if bus { p.1 } else { p.0 };
        let last = v(self.recent.back()?);
        let mean = self.recent.iter().map(v).sum::<f64>() / self.recent.len() as f64;
        let min = self.recent.iter().map(v).fold(f64::INFINITY, f64::min);
        Some((last, mean, min))
    }
}

/// Hang-dump counts by reason, for the watchdog metrics (incremented by [`crate::hang::dump`]).
pub static DUMPS_SIGNAL: AtomicU64 = AtomicU64::new(0);
pub static DUMPS_TIMEOUT: AtomicU64 = AtomicU64::new(0);
pub static DUMPS_REQUEST: AtomicU64 = AtomicU64::new(0);
/// `CLOCK_REALTIME` ns of the last hang dump (0: none).
pub static LAST_DUMP_NS: AtomicU64 = AtomicU64::new(0);

/// The writer's state: everything that lives between two passes.
pub struct Writer {
    pub job: String,
    pub host: String,
    pub pid: u32,
    dir: Option<PathBuf>,
    http: Option<http::Server>,
    logfn: LogFn,
    last_ns: u64,
    pub writes: u64,
    rolling: HashMap<(u32, u32), Rolling>,
    detector: Detector,
}

static WRITER: Mutex<Option<Writer>> = Mutex::new(None);

/// Starts metrics for a new session (no-op when they are off or already running):
/// binds the HTTP port and logs where the metrics go.
pub fn start(logfn: LogFn) {
    let cfg = config();
    if !cfg.metrics {
        return;
    }
    let mut w = lock(&WRITER);
    if w.is_some() {
        return;
    }
    let host = sys::hostname();
    let pid = std::process::id();
    let dir = crate::config::prom_dir();
    let mut wheres = Vec::new();
    if let Some(d) = &dir {
        match std::fs::create_dir_all(d) {
            Ok(()) => wheres.push(d.join(file_name(&host, pid)).display().to_string()),
            Err(e) => log(logfn, LOG_WARN, &format!("commlens profiler plugin: cannot create {}: {e}", d.display())),
        }
    }
    let http = cfg.prom_port.and_then(|port| {
        let addr = crate::config::prom_addr();
        match http::Server::start(&addr, port) {
            Ok(s) => {
                wheres.push(format!("http://{}/metrics", s.local_addr()));
                Some(s)
            }
            Err(e) => {
                let msg = format!("commlens profiler plugin: no metrics port ({addr}:{port}: {e})");
                log(logfn, LOG_WARN, &msg);
                None
            }
        }
    });
    if !wheres.is_empty() {
        let every = cfg.prom_interval_ms;
        log(logfn, 3, &format!("commlens profiler plugin: metrics at {} every {every} ms", wheres.join(" and ")));
    }
    if cfg.flush_ms == 0 {
        let msg = "commlens profiler plugin: COMMLENS_PLUGIN_FLUSH_MS=0: metrics are refreshed only by commlens_profiler_write_metrics()";
        log(logfn, LOG_WARN, msg);
    }
    let slow = SlowConfig {
        window: cfg.window,
        fraction: cfg.slow_fraction,
        min_windows: cfg.slow_windows,
        min_bytes: cfg.slow_min_bytes,
    };
    *w = Some(Writer {
        job: crate::config::prom_job(),
        host,
        pid,
        dir: dir.filter(|d| d.is_dir()),
        http,
        logfn,
        last_ns: 0,
        writes: 0,
        rolling: HashMap::new(),
        detector: Detector::new(slow),
    });
}

fn file_name(host: &str, pid: u32) -> String {
    format!("commlens-{host}-{pid}.prom")
}

/// Background writer's hook: refreshes the metrics when the interval has passed.
pub fn poll() {
    let mut g = lock(&WRITER);
    let Some(w) = g.as_mut() else { return };
    let now = sys::mono_ns();
    if now.saturating_sub(w.last_ns) < config().prom_interval_ms.saturating_mul(1_000_000) {
        return;
    }
    let _ = refresh(w, now);
}

/// Refreshes the metrics now. Returns the number of outputs written (file and/or
/// HTTP body); 0 when metrics are off or no session runs.
pub fn write_now() -> Result<usize, String> {
    let mut g = lock(&WRITER);
    let Some(w) = g.as_mut() else { return Ok(0) };
    refresh(w, sys::mono_ns())
}

/// Stops metrics at the end of a session: the HTTP thread is joined and the file removed.
pub fn stop() {
    let Some(w) = lock(&WRITER).take() else {
        return;
    };
    if let Some(d) = &w.dir {
        let _ = std::fs::remove_file(d.join(file_name(&w.host, w.pid)));
    }
    if let Some(s) = w.http {
        s.stop();
    }
}

/// In a child forked after metrics started: the parent's server thread does not
/// exist here and its file is the parent's; forget both without touching them.
pub fn forget_after_fork() {
    if let Some(w) = lock(&WRITER).take() {
        std::mem::forget(w);
    }
}

fn refresh(w: &mut Writer, now: u64) -> Result<usize, String> {
    if session::forked() {
        return Ok(0);
    }
    w.last_ns = now;
    let cfg = config();
    let views = crate::inflight::metrics_views(now, cfg.hang_timeout_ns);
    let funcs: BTreeMap<u32, String> = session::with_strings(|text| {
        let ids = views.iter().flat_map(|v| v.kinds.iter().map(|k| k.func).chain(v.samples.iter().map(|s| s.func)));
        ids.filter(|&f| f != 0 && f != OTHER_FUNC).map(|f| (f, text(f))).collect()
    });
    let name = |f: u32| funcs.get(&f).map_or("", String::as_str);
    // Rolling bandwidths, and the slow-rank observations.
    let mut obs = Vec::new();
    for v in &views {
        for s in &v.samples {
            let (algo_bytes, factor) = bus_terms(name(s.func), s.bytes, v.nranks);
            if s.dur_ns == 0 || s.bytes == 0 {
                continue;
            }
            let algbw = algo_bytes / (s.dur_ns as f64 * 1e-9);
            w.rolling.entry((v.idx, s.func)).or_default().push(algbw, algbw * factor, cfg.window);
            if !s.p2p {
                let bus_bytes = algo_bytes * factor;
                obs.push((
                    v.idx,
                    Obs { seq: s.seq, func: s.func, start: s.cpu_start, dur_ns: s.dur_ns, bus_bytes, bytes: s.bytes },
                ));
            }
        }
    }
    let live: Vec<(u32, u64)> = views.iter().map(|v| (v.idx, v.comm_hash)).collect();
    w.rolling.retain(|(idx, _), _| live.iter().any(|(i, _)| i == idx));
    for ev in w.detector.update(&live, &obs) {
        if let Some(v) = views.iter().find(|v| v.idx == ev.idx) {
            log_episode(w.logfn, v, &ev);
        }
    }
    let text = prom::render(w, &views, &|f| name(f).to_string(), sys::real_ns());
    let mut written = 0;
    let mut result = Ok(());
    if let Some(d) = &w.dir {
        let fname = file_name(&w.host, w.pid);
        let (tmp, path) = (d.join(format!(".{fname}.tmp")), d.join(&fname));
        match std::fs::write(&tmp, text.as_bytes()).and_then(|_| std::fs::rename(&tmp, &path)) {
            Ok(()) => written += 1,
            Err(e) => result = Err(format!("cannot write {}: {e}", path.display())),
        }
    }
    if let Some(s) = &w.http {
        s.publish(text.into_bytes());
        written += 1;
    }
    w.writes += 1;
    if let Err(e) = &result {
        if w.writes == 1 || w.writes.is_power_of_two() {
            log(w.logfn, LOG_WARN, &format!("commlens profiler plugin: metrics: {e}"));
        }
    }
    result.map(|_| written)
}

fn log_episode(logfn: LogFn, v: &HandleView, ev: &SlowEvent) {
    let dev = v.dev.map_or_else(|| "unknown".to_string(), |d| d.to_string());
    let what = if ev.slow { "is slow" } else { "is no longer slow" };
    let msg = format!(
        "commlens profiler plugin: rank {} of communicator {:#018x} ({}, device {dev}) {what}: busbw {:.3} GB/s over its last {} operations, {:.2} x the median ({:.3} GB/s) of the communicator's {} other rank(s) in this process",
        v.rank,
        v.comm_hash,
        v.name,
        ev.busbw / 1e9,
        ev.window,
        ev.ratio,
        ev.median / 1e9,
        ev.others
    );
    log(logfn, if ev.slow { LOG_WARN } else { 3 }, &msg);
}

/// The writer's per-handle figures, for rendering.
impl Writer {
    pub fn rolling(&self, idx: u32, func: u32) -> Option<&Rolling> {
        self.rolling.get(&(idx, func))
    }
    pub fn detector(&self) -> &Detector {
        &self.detector
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_microseconds() {
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(4_000), 0);
        assert_eq!(bucket_of(4_001), 1, "just above 4 us goes to the 8 us bucket");
        assert_eq!(bucket_of(8_000), 1);
        assert_eq!(bucket_of(1_000_000), 8, "1 ms <= 1024 us");
        assert_eq!(bucket_of(8_388_608_000), FINITE_BUCKETS - 1);
        assert_eq!(bucket_of(8_388_608_001), FINITE_BUCKETS, "+Inf");
        assert_eq!(bucket_of(u64::MAX), FINITE_BUCKETS);
        assert!((bucket_le_seconds(8) - 1.024e-3).abs() < 1e-12);
        for ns in [1u64, 999, 4_000, 5_000, 123_456, 9_999_999] {
            let b = bucket_of(ns);
            assert!(ns as f64 * 1e-9 <= bucket_le_seconds(b) + 1e-15);
            assert!(b == 0 || ns as f64 * 1e-9 > bucket_le_seconds(b - 1));
        }
    }

    #[test]
    fn accumulates_per_function_with_overflow_slot() {
        note_string(900, b"ncclFloat32");
        let mut acc = CommAcc::new();
        let op = |func: u32, seq: u64, gpu: (u64, u64), cpu: (u64, u64)| Op {
            seq,
            func,
            dtype: 900,
            count: 1000,
            gpu_start: gpu.0,
            gpu_end: gpu.1,
            start: cpu.0,
            end: cpu.1,
            ..Op::default()
        };
        acc.record(&op(5, 0, (100, 2_100), (10, 9_000)));
        acc.record(&op(5, 1, (0, 0), (10, 6_010)));
        acc.record(&op(5, 2, (0, 0), (0, 0)));
        let k = acc.kinds[0];
        assert_eq!((k.func, k.ops, k.bytes, k.timed, k.dur_ns), (5, 3, 12_000, 2, 2_000 + 6_000));
        assert_eq!((k.hist[0], k.hist[1]), (1, 1), "2 us (GPU timers win over 8.9 us of CPU time) and 6 us");
        for f in 10..30 {
            acc.record(&op(f, f as u64, (1, 2), (0, 0)));
        }
        assert_eq!(acc.kinds[KIND_SLOTS - 1].func, OTHER_FUNC);
        assert_eq!(acc.kinds[KIND_SLOTS - 1].ops, 20 - (KIND_SLOTS as u64 - 2));
        let s = acc.take_samples();
        assert_eq!(s.len(), 23);
        assert_eq!((s[0].dur_ns, s[0].bytes, s[2].dur_ns), (2_000, 4_000, 0));
        assert!(acc.take_samples().is_empty());
        for i in 0..(SAMPLE_RING as u64 + 10) {
            acc.record(&op(5, i, (1, 2), (0, 0)));
        }
        assert_eq!((acc.take_samples().len(), acc.lost_samples), (SAMPLE_RING, 10));
    }

    #[test]
    fn bus_factors_follow_nccl_tests() {
        assert_eq!(bus_terms("AllReduce", 100, 4), (100.0, 1.5));
        assert_eq!(bus_terms("AllGather", 100, 4), (400.0, 0.75));
        assert_eq!(bus_terms("Send", 100, 4), (100.0, 1.0));
        let mut r = Rolling::default();
        for (i, v) in [4.0, 2.0, 6.0, 8.0].iter().enumerate() {
            r.push(*v, 2.0 * v, 3);
            assert_eq!(r.recent.len(), (i + 1).min(3));
        }
        assert_eq!(r.stats(false), Some((8.0, 16.0 / 3.0, 2.0)));
        assert_eq!(r.stats(true), Some((16.0, 32.0 / 3.0, 4.0)));
    }
}
