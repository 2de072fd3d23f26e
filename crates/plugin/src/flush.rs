//! Getting records to disk: the drain (the single consumer of every ring,
//! serialized by the registry mutex), the background writer thread, the
//! on-demand flush, the END record and file closing at the last finalize, and
//! the exit/unload handler (`.fini_array`), which also frees what the statics
//! own when the image really goes away. The writer also services the
//! in-flight dump triggers ([`crate::hang::poll`]) and refreshes the live
//! metrics ([`crate::metrics::poll`]); the end of a session restores the
//! signal handler that was there before ([`crate::signal`]) and stops the
//! metrics (HTTP thread joined, file removed).

use crate::record::{self, kind, Enc};
use crate::session::{
    forked, lock, log, Registry, Strings, LOG_WARN, LOST, PANICS, REG, STRINGS, WRITER_GEN, WRITER_THREAD,
};
use crate::sys;
use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::thread::Thread;

/// Stops the writer, writes the END record and every pending byte, closes the file.
/// Used by the last finalize and at exit/unload (`at_exit`: even with live communicators).
pub(crate) fn shutdown(at_exit: bool) {
    if forked() {
        // The writer thread and the file belong to the parent.
        return;
    }
    let writer = {
        // Under the lock: a writer that an init spawns after this point keeps running.
        let mut reg = lock(&REG);
        WRITER_GEN.fetch_add(1, Ordering::SeqCst);
        reg.writer.take()
    };
    if let Some(w) = writer {
        w.thread().unpark();
        let _ = w.join();
    }
    let mut reg = lock(&REG);
    if reg.session.is_none() {
        if at_exit {
            crate::signal::uninstall();
        }
        return;
    }
    if (reg.active > 0 && !at_exit) || (at_exit && reg.ended && reg.active == 0) {
        // A communicator was created meanwhile (keep the session running), or the
        // last finalize already closed it: write what is left.
        drain(&mut reg);
        if at_exit {
            crate::signal::uninstall();
            crate::metrics::stop();
            if let Some(s) = reg.session.as_mut() {
                s.file = None;
            }
        }
        return;
    }
    reg.ended = true;
    crate::signal::uninstall();
    crate::metrics::stop();
    // Everything buffered first, then END as the file's last record.
    drain(&mut reg);
    let drops = reg.reaped_drops + reg.rings.iter().map(|e| e.ring.drops.load(Ordering::Relaxed)).sum::<u64>();
    let mut e = Enc::new(kind::END, 0);
    e.u64(sys::mono_ns()).u64(drops + LOST.load(Ordering::Relaxed)).u64(PANICS.load(Ordering::Relaxed));
    let rec = e.finish().to_vec();
    reg.cold.extend_from_slice(&rec);
    drain(&mut reg);
    if let Some(s) = reg.session.as_mut() {
        s.file = None;
    }
}

pub(crate) fn spawn_writer(reg: &mut Registry, period_ms: u64) {
    let generation = WRITER_GEN.load(Ordering::SeqCst);
    let period = std::time::Duration::from_millis(period_ms);
    let spawned = std::thread::Builder::new().name("commlens-writer".into()).spawn(move || loop {
        std::thread::park_timeout(period);
        if WRITER_GEN.load(Ordering::SeqCst) != generation {
            break;
        }
        drain(&mut lock(&REG));
        crate::hang::poll();
        crate::metrics::poll();
    });
    match spawned {
        Ok(h) => {
            let t = Box::into_raw(Box::new(h.thread().clone()));
            let old = WRITER_THREAD.swap(t, Ordering::AcqRel);
            if !old.is_null() {
                reg.retired_writers.push(old as usize);
            }
            reg.writer = Some(h);
        }
        Err(e) => log(reg.logfn, LOG_WARN, &format!("commlens profiler plugin: no background writer ({e})")),
    }
}

/// Writes every pending record (global, then per thread) as chunks; frees dead, drained rings.
/// Returns false when the file could not be written.
pub(crate) fn drain(reg: &mut Registry) -> bool {
    if reg.session.is_none() || forked() {
        return true;
    }
    let strings = std::mem::take(&mut lock(&STRINGS).pending);
    let pending = !strings.is_empty()
        || !reg.cold.is_empty()
        || reg.rings.iter().any(|e| {
            e.ring.head.load(Ordering::Acquire) != e.ring.tail.load(Ordering::Relaxed)
                || e.ring.drops.load(Ordering::Relaxed) != e.reported_drops
                || !e.ring.alive.load(Ordering::Acquire)
        });
    if !pending {
        return true;
    }
    let mut drop_recs = Vec::new();
    let mut ok = true;
    let reg = &mut *reg;
    let sess = reg.session.as_mut().expect("checked above");
    if sess.file.is_none() {
        match OpenOptions::new().append(true).open(&sess.path) {
            Ok(f) => sess.file = Some(BufWriter::with_capacity(1 << 16, f)),
            Err(_) => ok = false,
        }
    }
    let mut out = sess.file.as_mut();
    let mut write = |thread: u32, a: &[u8], b: &[u8]| {
        if a.is_empty() && b.is_empty() {
            return;
        }
        let Some(w) = out.as_mut() else { return };
        let h = record::chunk_header(thread, (a.len() + b.len()) as u32);
        if w.write_all(&h).and_then(|_| w.write_all(a)).and_then(|_| w.write_all(b)).is_err() {
            ok = false;
        }
    };
    write(0, &strings, &[]);
    write(0, &reg.cold, &[]);
    reg.cold.clear();
    let mut reaped = 0;
    let mut dead_rings = Vec::new();
    for e in reg.rings.iter_mut() {
        let dead = !e.ring.alive.load(Ordering::Acquire);
        dead_rings.push(dead);
        // SAFETY: the registry lock makes this the only consumer.
        let (a, b, head) = unsafe { e.ring.readable() };
        write(e.ring.thread_index, a, b);
        e.ring.release(head);
        let d = e.ring.drops.load(Ordering::Relaxed);
        if d != e.reported_drops {
            let mut r = Enc::new(kind::DROPS, 0);
            r.u32(e.ring.thread_index).u64(d);
            drop_recs.extend_from_slice(r.finish());
            e.reported_drops = d;
        }
        if dead {
            reaped += d;
        }
    }
    write(0, &drop_recs, &[]);
    if let Some(w) = out {
        if w.flush().is_err() {
            ok = false;
        }
    }
    reg.reaped_drops += reaped;
    // A ring seen dead before its last drain gets no more records: free it.
    let mut i = 0;
    reg.rings.retain(|_| {
        i += 1;
        !dead_rings[i - 1]
    });
    if !ok {
        reg.io_errors += 1;
        if reg.io_errors == 1 {
            let path = reg.session.as_ref().map(|s| s.path.display().to_string()).unwrap_or_default();
            log(reg.logfn, LOG_WARN, &format!("commlens profiler plugin: cannot write {path}; records are lost"));
        }
    }
    ok
}

/// On-demand flush (exported as `commlens_profiler_flush`).
pub fn flush() -> bool {
    let mut reg = lock(&REG);
    drain(&mut reg)
}

/// Output file of the running session, if any.
pub fn output_path() -> Option<PathBuf> {
    lock(&REG).session.as_ref().map(|s| s.path.clone())
}

/// Runs when the image is unloaded (`dlclose`) or the process exits: everything still
/// buffered is written.
extern "C" fn at_unload() {
    let _ = std::panic::catch_unwind(|| {
        shutdown(true);
        // With no thread left that could produce (all rings dead and freed), nothing can
        // read the writer handles any more: free them.
        // After a real dlclose the statics vanish: free what they own, so nothing leaks.
        let mut reg = lock(&REG);
        if reg.rings.is_empty() {
            let cur = WRITER_THREAD.swap(std::ptr::null_mut(), Ordering::AcqRel);
            let mut all = std::mem::take(&mut reg.retired_writers);
            all.push(cur as usize);
            for p in all.into_iter().filter(|&p| p != 0) {
                // SAFETY: these came from Box::into_raw in spawn_writer and are freed once.
                drop(unsafe { Box::from_raw(p as *mut Thread) });
            }
            reg.session = None;
            (reg.comms, reg.cold, reg.rings) = (Vec::new(), Vec::new(), Vec::new());
            // SAFETY: no thread that ran plugin code is left (all rings died and were freed).
            unsafe { crate::inflight::reset() };
            drop(reg);
            *lock(&STRINGS) = Strings { by_ptr: Vec::new(), by_text: Vec::new(), pending: Vec::new() };
        }
    });
}

#[used]
#[link_section = ".fini_array"]
static AT_UNLOAD: extern "C" fn() = at_unload;
