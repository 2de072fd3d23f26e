//! Process-wide state: the registry of per-thread rings, the output session,
//! communicator contexts (init/finalize), interned strings, and the hot-path
//! thread-local producer state. Writing the file is [`crate::flush`]'s job.
//!
//! Hot path (`Local`, thread-local): a ring pointer, an event-id counter and a
//! small string cache; no lock, no allocation after the thread's first event.
//! Locks are taken only to register a thread, intern a string the thread has
//! not seen, init/finalize a communicator, and drain (the registry mutex
//! serializes the single consumer of every ring); and, for the in-flight view
//! ([`crate::inflight`]), the handle's own small mutex at Coll/P2p/KernelCh/
//! ProxyOp/ProxyStep starts and KernelChStop (a proxy thread's `Local` keeps
//! the open KernelCh handles for the latter).
//!
//! Handles and contexts are numbers, never pointers: an event handle is
//! `thread_index << 40 | counter` (never 0, never dereferenced), a context is
//! `salt << 32 | comm_index` where `salt` is random per loaded image, so a
//! context from another process (PXN) is recognised as foreign.

use crate::abi::LogFn;
use crate::config::{config, Config};
use crate::inflight::{self, KchMap};
use crate::record::{self, kind, Enc};
use crate::ring::{Pushed, Ring};
use crate::sys;
use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_void};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::{JoinHandle, Thread};

const STR_CACHE: usize = 64;

/// Per-thread producer state.
pub struct Local {
    ring: *const Ring,
    next_id: u64,
    cached_tail: u64,
    strings: [(usize, u32); STR_CACHE],
    /// Open KernelCh handles of this thread (allocated at its first tracked KernelCh).
    kch: *mut KchMap,
    /// Open ProxyOp handles of this thread whose stop the in-flight view waits for (lagged handles).
    pxo: *mut KchMap,
}

impl Drop for Local {
    fn drop(&mut self) {
        if !self.ring.is_null() {
            // SAFETY: the registry frees a ring only after this store (ring dead and drained).
            unsafe { (*self.ring).alive.store(false, Ordering::Release) };
        }
        if !self.kch.is_null() {
            // SAFETY: from Box::into_raw in `kch_insert`, freed once.
            drop(unsafe { Box::from_raw(std::mem::replace(&mut self.kch, std::ptr::null_mut())) });
        }
        if !self.pxo.is_null() {
            // SAFETY: from Box::into_raw in `pxo_insert`, freed once.
            drop(unsafe { Box::from_raw(std::mem::replace(&mut self.pxo, std::ptr::null_mut())) });
        }
    }
}

thread_local! {
    static LOCAL: UnsafeCell<Local> = const {
        UnsafeCell::new(Local {
            ring: std::ptr::null(),
            next_id: 0,
            cached_tail: 0,
            strings: [(0, 0); STR_CACHE],
            kch: std::ptr::null_mut(),
            pxo: std::ptr::null_mut(),
        })
    };
}

/// Events that could not be recorded at all (thread-local storage already torn down).
pub(crate) static LOST: AtomicU64 = AtomicU64::new(0);
/// Panics caught at the FFI boundary.
pub static PANICS: AtomicU64 = AtomicU64::new(0);
static SALT: AtomicU32 = AtomicU32::new(0);
static PID: AtomicU32 = AtomicU32::new(0);
/// `CLOCK_REALTIME − CLOCK_MONOTONIC` at session start (0: no session yet).
static EPOCH_OFFSET: AtomicI64 = AtomicI64::new(0);
pub(crate) static WRITER_GEN: AtomicU64 = AtomicU64::new(0);
/// The running writer's handle, for `unpark` from the hot path. Boxes are leaked on purpose
/// (one per writer start) so the pointer is always valid.
pub(crate) static WRITER_THREAD: AtomicPtr<Thread> = AtomicPtr::new(std::ptr::null_mut());

/// Runs `f` with this thread's producer state, registering a ring on first use.
/// `None` while the thread's TLS is being torn down (the event is counted as lost).
#[inline]
pub fn with_local<R>(f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    let r = LOCAL.try_with(|c| {
        // SAFETY: the cell is only touched by this thread and callbacks do not re-enter.
        let l = unsafe { &mut *c.get() };
        if l.ring.is_null() {
            register_thread(l);
        }
        f(l)
    });
    if r.is_err() {
        LOST.fetch_add(1, Ordering::Relaxed);
    }
    r.ok()
}

impl Local {
    /// A fresh event handle value.
    #[inline]
    pub fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Appends a finished record to this thread's ring (dropped and counted when full).
    #[inline]
    pub fn push(&mut self, rec: &[u8]) {
        // SAFETY: the ring is registered and this thread is its only producer.
        let ring = unsafe { &*self.ring };
        // SAFETY: as above.
        if unsafe { ring.push(&mut self.cached_tail, rec) } != Pushed::Ok {
            poke_writer();
        }
    }

    /// Id of a static NCCL string (0 for NULL), cached by pointer in a 2-way
    /// direct-mapped cache (a miss takes the string-table lock).
    #[inline]
    pub fn intern(&mut self, p: *const c_char) -> u32 {
        if p.is_null() {
            return 0;
        }
        let slot = ((p as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize & !1;
        for s in [slot, slot + 1] {
            if self.strings[s].0 == p as usize {
                return self.strings[s].1;
            }
        }
        let id = intern_ptr(p);
        // Keep the most recent in the first way.
        self.strings[slot + 1] = self.strings[slot];
        self.strings[slot] = (p as usize, id);
        id
    }

    /// Remembers an open KernelCh of operation `op` for its KernelChStop.
    pub fn kch_insert(&mut self, id: u64, comm: u32, op: u64) {
        if self.kch.is_null() {
            self.kch = Box::into_raw(KchMap::new());
        }
        // SAFETY: owned by this thread's Local.
        unsafe { (*self.kch).insert(id, comm, op) };
    }

    /// The (comm, operation) of an open KernelCh of this thread, forgotten.
    #[inline]
    pub fn kch_take(&mut self, id: u64) -> Option<(u32, u64)> {
        if self.kch.is_null() {
            return None;
        }
        // SAFETY: owned by this thread's Local.
        unsafe { (*self.kch).take(id) }
    }

    /// Remembers an open ProxyOp of operation `op` for its stop; false when no slot was free.
    pub fn pxo_insert(&mut self, id: u64, comm: u32, op: u64) -> bool {
        if self.pxo.is_null() {
            self.pxo = Box::into_raw(KchMap::new());
        }
        // SAFETY: owned by this thread's Local.
        unsafe { (*self.pxo).insert(id, comm, op) }
    }

    /// The (comm, operation) of a remembered ProxyOp of this thread, forgotten. Every STOP
    /// asks: nothing to look up until a lagged handle made this thread remember one.
    #[inline]
    pub fn pxo_take(&mut self, id: u64) -> Option<(u32, u64)> {
        if self.pxo.is_null() {
            return None;
        }
        // SAFETY: owned by this thread's Local.
        unsafe { (*self.pxo).take(id) }
    }
}

/// `CLOCK_REALTIME − CLOCK_MONOTONIC` of the session (add to a record time for epoch ns).
pub fn epoch_offset() -> Option<i64> {
    Some(EPOCH_OFFSET.load(Ordering::Relaxed)).filter(|&o| o != 0)
}

/// Runs `f` with a resolver of interned string ids (under the string-table lock).
pub fn with_strings<R>(f: impl FnOnce(&dyn Fn(u32) -> String) -> R) -> R {
    let s = lock(&STRINGS);
    let text = |id: u32| {
        id.checked_sub(1)
            .and_then(|i| s.by_text.get(i as usize))
            .map_or_else(String::new, |(t, _)| String::from_utf8_lossy(t).into_owned())
    };
    f(&text)
}

#[inline]
fn poke_writer() {
    let t = WRITER_THREAD.load(Ordering::Acquire);
    if !t.is_null() {
        // SAFETY: boxes stored in WRITER_THREAD are leaked, never freed.
        unsafe { (*t).unpark() };
    }
}

/// True in a child forked after the session started: it must not write the parent's file.
pub(crate) fn forked() -> bool {
    let p = PID.load(Ordering::Relaxed);
    p != 0 && p != std::process::id()
}

/// The process id, cached at the first init.
#[inline]
pub fn pid() -> i32 {
    PID.load(Ordering::Relaxed) as i32
}

/// `(comm index, flags)` of a context NCCL passed: ours, foreign (PXN) or NULL.
#[inline]
pub fn decode_ctx(ctx: *mut c_void) -> (u32, u8) {
    if ctx.is_null() {
        return (0, record::flag::CTX_NULL);
    }
    let v = ctx as u64;
    let salt = SALT.load(Ordering::Relaxed);
    if salt != 0 && (v >> 32) as u32 == salt && v as u32 != 0 {
        (v as u32, 0)
    } else {
        (0, record::flag::CTX_FOREIGN)
    }
}

// ---- registry -----------------------------------------------------------------

pub(crate) struct RingEntry {
    pub(crate) ring: Box<Ring>,
    pub(crate) reported_drops: u64,
}

pub(crate) struct Session {
    pub(crate) path: PathBuf,
    pub(crate) file: Option<BufWriter<File>>,
}

pub(crate) struct Registry {
    pub(crate) session: Option<Session>,
    pub(crate) rings: Vec<RingEntry>,
    pub(crate) comms: Vec<bool>,
    pub(crate) active: u32,
    pub(crate) cold: Vec<u8>,
    pub(crate) next_thread: u32,
    pub(crate) writer: Option<JoinHandle<()>>,
    pub(crate) logfn: LogFn,
    /// Drops of rings already freed.
    pub(crate) reaped_drops: u64,
    pub(crate) io_errors: u64,
    /// END written and no communicator initialized since.
    pub(crate) ended: bool,
    /// Handles of earlier writers, kept reachable: a producer may still hold the pointer.
    pub(crate) retired_writers: Vec<usize>,
}

pub(crate) static REG: Mutex<Registry> = Mutex::new(Registry {
    session: None,
    rings: Vec::new(),
    comms: Vec::new(),
    active: 0,
    cold: Vec::new(),
    next_thread: 0,
    writer: None,
    logfn: None,
    reaped_drops: 0,
    io_errors: 0,
    ended: false,
    retired_writers: Vec::new(),
});

pub(crate) struct Strings {
    pub(crate) by_ptr: Vec<(usize, u32)>,
    pub(crate) by_text: Vec<(Vec<u8>, u32)>,
    pub(crate) pending: Vec<u8>,
}

pub(crate) static STRINGS: Mutex<Strings> =
    Mutex::new(Strings { by_ptr: Vec::new(), by_text: Vec::new(), pending: Vec::new() });

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn intern_locked(s: &mut Strings, text: Vec<u8>) -> u32 {
    if let Some(&(_, id)) = s.by_text.iter().find(|(t, _)| *t == text) {
        return id;
    }
    let id = s.by_text.len() as u32 + 1;
    push_string_record(&mut s.pending, id, &text);
    crate::metrics::note_string(id, &text);
    s.by_text.push((text, id));
    id
}

fn push_string_record(out: &mut Vec<u8>, id: u32, text: &[u8]) {
    let mut e = Enc::new(kind::STRING, 0);
    e.u32(id).bytes(text);
    out.extend_from_slice(e.finish());
}

fn intern_ptr(p: *const c_char) -> u32 {
    let mut s = lock(&STRINGS);
    if let Some(&(_, id)) = s.by_ptr.iter().find(|(q, _)| *q == p as usize) {
        return id;
    }
    // SAFETY: NCCL's descriptor strings are static NUL-terminated strings.
    let text = unsafe { sys::c_string(p, record::MAX_STRING) };
    let id = intern_locked(&mut s, text);
    if s.by_ptr.len() < 4096 {
        s.by_ptr.push((p as usize, id));
    }
    id
}

/// Id of a string copied by value (communicator names).
pub fn intern_text(text: &[u8]) -> u32 {
    if text.is_empty() {
        return 0;
    }
    let mut s = lock(&STRINGS);
    intern_locked(&mut s, text[..text.len().min(record::MAX_STRING)].to_vec())
}

fn register_thread(l: &mut Local) {
    let cfg = config();
    let mut reg = lock(&REG);
    reg.next_thread += 1;
    let idx = reg.next_thread;
    let ring = Ring::new(cfg.ring_bytes, idx);
    l.ring = &*ring;
    l.next_id = ((idx as u64) << 40) | 1;
    l.cached_tail = 0;
    reg.rings.push(RingEntry { ring, reported_drops: 0 });
    let mut e = Enc::new(kind::THREAD, 0);
    e.u32(idx).u32(sys::gettid());
    reg.cold.extend_from_slice(e.finish());
}

pub(crate) fn log(logfn: LogFn, level: c_int, msg: &str) {
    let Some(f) = logfn else { return };
    let Ok(c) = std::ffi::CString::new(msg.replace('\0', " ")) else {
        return;
    };
    // SAFETY: NCCL's logger is printf-like; "%s" with a NUL-terminated string.
    unsafe { f(level, 0x1, c"commlens-plugin".as_ptr(), 0, c"%s".as_ptr(), c.as_ptr()) };
}

pub(crate) const LOG_WARN: c_int = 2;
const LOG_INFO: c_int = 3;

fn create_session(cfg: &Config) -> Result<Session, String> {
    let host = sys::hostname();
    let pid = std::process::id();
    let real = sys::real_ns();
    let mono = sys::mono_ns();
    let salt = ((real ^ (real >> 29) ^ ((pid as u64) << 13)) as u32 | 1) & 0x7fff_ffff;
    if SALT.load(Ordering::Relaxed) == 0 {
        SALT.store(salt, Ordering::Relaxed);
    }
    PID.store(pid, Ordering::Relaxed);
    EPOCH_OFFSET.store((real as i64).wrapping_sub(mono as i64), Ordering::Relaxed);
    let dir = crate::config::output_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(format!("commlens-{host}-{pid}-{real:x}.clp"));
    let file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let mut w = BufWriter::with_capacity(1 << 16, file);
    let line = record::header_line(&[
        ("host", host),
        ("pid", pid.to_string()),
        ("session", format!("{real:x}")),
        ("mono_ns", mono.to_string()),
        ("real_ns", real.to_string()),
        ("ring_bytes", cfg.ring_bytes.to_string()),
        ("mask", format!("{:#x}", cfg.mask)),
        ("flush_ms", cfg.flush_ms.to_string()),
        ("writer", format!("commlens-plugin/{}", env!("CARGO_PKG_VERSION"))),
    ]);
    w.write_all(line.as_bytes())
        .and_then(|_| w.write_all(b"\n"))
        .and_then(|_| w.flush())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(Session { path, file: Some(w) })
}

/// Registers a communicator and returns its context value (`salt << 32 | index`);
/// `None` when no output file can be created (the reason goes to NCCL's log).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[allow(clippy::too_many_arguments)]
pub unsafe fn init_comm(
    api: u8,
    comm_hash: u64,
    name: *const c_char,
    n_nodes: c_int,
    nranks: c_int,
    rank: c_int,
    logfn: LogFn,
    mask: u32,
) -> Option<*mut c_void> {
    let cfg = config();
    let (dev, bus) = if cfg.cuda_probe { sys::current_cuda_device() } else { (None, None) };
    let name_text = sys::c_string(name, record::MAX_STRING);
    let name_id = intern_text(&name_text);
    let mut reg = lock(&REG);
    if forked() {
        // A child forked after the parent's session started: start its own file, drop
        // what it inherited (the parent writes that), forget the parent's writer thread.
        reg.session = None;
        reg.cold.clear();
        reg.comms.clear();
        reg.active = 0;
        std::mem::forget(reg.writer.take());
        WRITER_THREAD.store(std::ptr::null_mut(), Ordering::Release);
        for e in &reg.rings {
            e.ring.release(e.ring.head.load(Ordering::Acquire));
        }
        // SAFETY: only this thread exists in the child, and it is here.
        unsafe { inflight::reset() };
        crate::metrics::forget_after_fork();
        // The child's file needs every string id its threads have cached.
        let mut st = lock(&STRINGS);
        let Strings { by_text, pending, .. } = &mut *st;
        pending.clear();
        for (text, id) in by_text.iter() {
            push_string_record(pending, *id, text);
        }
    }
    if reg.logfn.is_none() {
        reg.logfn = logfn;
    }
    let mut first = false;
    if reg.session.is_none() {
        match create_session(cfg) {
            Ok(s) => {
                reg.session = Some(s);
                first = true;
            }
            Err(msg) => {
                drop(reg);
                log(logfn, LOG_WARN, &format!("commlens profiler plugin disabled: {msg}"));
                return None;
            }
        }
    }
    reg.comms.push(true);
    reg.active += 1;
    reg.ended = false;
    let idx = reg.comms.len() as u32;
    let mut e = Enc::new(kind::COMM_INIT, api);
    e.u32(idx).u64(comm_hash).i32(rank).i32(nranks).i32(n_nodes).u64(sys::mono_ns());
    e.i32(dev.unwrap_or(-1)).i64(bus.unwrap_or(-1)).u32(name_id).u32(mask);
    reg.cold.extend_from_slice(e.finish());
    inflight::register(idx, comm_hash, rank, nranks, dev, &name_text, mask);
    if reg.writer.is_none() && cfg.flush_ms > 0 {
        spawn_writer(&mut reg, cfg.flush_ms);
        // The writer services the signal, so the handler exists only while it runs.
        crate::signal::install(cfg.hang_signal);
    }
    let path = reg.session.as_ref().map(|s| s.path.display().to_string()).unwrap_or_default();
    let logfn = reg.logfn;
    drop(reg);
    if cfg.metrics {
        crate::metrics::start(logfn);
    }
    if first {
        log(logfn, LOG_INFO, &format!("commlens profiler plugin: writing {path}, event mask {mask:#x} (API v{api})"));
        for w in &cfg.warnings {
            log(logfn, LOG_WARN, &format!("commlens profiler plugin: {w}"));
        }
    }
    let v = ((SALT.load(Ordering::Relaxed) as u64) << 32) | idx as u64;
    Some(v as *mut c_void)
}

/// Finalizes a communicator; after the last one, stops the writer and writes everything.
pub fn finalize_comm(ctx: *mut c_void) {
    let (idx, flags) = decode_ctx(ctx);
    if flags != 0 {
        return;
    }
    let mut reg = lock(&REG);
    let i = idx as usize - 1;
    if i >= reg.comms.len() || !reg.comms[i] {
        return;
    }
    reg.comms[i] = false;
    reg.active -= 1;
    inflight::retire(idx);
    let mut e = Enc::new(kind::COMM_FINI, 0);
    e.u32(idx).u64(sys::mono_ns());
    reg.cold.extend_from_slice(e.finish());
    if reg.active > 0 {
        drain(&mut reg);
        return;
    }
    drop(reg);
    shutdown(false);
}

pub(crate) use crate::flush::{drain, shutdown, spawn_writer};
