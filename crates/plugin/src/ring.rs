//! A single-producer single-consumer byte ring: the per-thread event buffer.
//!
//! The owning thread appends whole records (`push`), lock-free: it copies the
//! bytes, then publishes them with a release store of `head`. One consumer at
//! a time (the drain, serialized by the registry mutex) reads `[tail, head)`
//! and hands the space back with a release store of `tail`. A record that does
//! not fit is dropped and counted in `drops`; the producer never waits.
//! Positions are 64-bit byte counters that never wrap; the buffer index is
//! `position & (cap - 1)`.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub struct Ring {
    buf: Box<[UnsafeCell<u8>]>,
    mask: u64,
    /// Bytes ever published by the producer.
    pub head: AtomicU64,
    /// Bytes ever consumed.
    pub tail: AtomicU64,
    /// Records dropped because the ring was full (written by the producer only).
    pub drops: AtomicU64,
    /// Cleared by the owning thread's TLS destructor; a dead, drained ring is freed.
    pub alive: AtomicBool,
    /// Thread index (1, 2, …) of the owner; 0 is reserved for global records.
    pub thread_index: u32,
}

// SAFETY: the byte buffer is shared between exactly one producer (writes to
// `[head, tail + cap)`) and one consumer (reads `[tail, head)`); the regions
// never overlap and are handed over with acquire/release on `head`/`tail`.
unsafe impl Sync for Ring {}
unsafe impl Send for Ring {}

/// Outcome of [`Ring::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    Ok,
    /// Stored, and the ring just passed half full: time to wake the writer.
    Half,
    Dropped,
}

impl Ring {
    /// A ring of `cap` bytes (a power of two).
    pub fn new(cap: usize, thread_index: u32) -> Box<Ring> {
        assert!(cap.is_power_of_two() && cap >= 256);
        let buf: Box<[UnsafeCell<u8>]> = (0..cap).map(|_| UnsafeCell::new(0)).collect();
        // Touch every page now (thread registration) rather than on the hot path's first lap.
        for i in (0..cap).step_by(4096) {
            // SAFETY: in bounds; nobody else sees the buffer yet.
            unsafe { std::ptr::write_volatile(buf[i].get(), 0) };
        }
        Box::new(Ring {
            buf,
            mask: cap as u64 - 1,
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            drops: AtomicU64::new(0),
            alive: AtomicBool::new(true),
            thread_index,
        })
    }

    pub fn capacity(&self) -> u64 {
        self.mask + 1
    }

    #[inline]
    fn base(&self) -> *mut u8 {
        // UnsafeCell<u8> has the layout of u8.
        self.buf.as_ptr() as *mut u8
    }

    /// Appends one record. `cached_tail` is the producer's last view of `tail`
    /// (refreshed only when the ring looks full).
    ///
    /// # Safety
    /// Only the ring's single producer may call this.
    #[inline]
    pub unsafe fn push(&self, cached_tail: &mut u64, rec: &[u8]) -> Pushed {
        let len = rec.len() as u64;
        let cap = self.mask + 1;
        let head = self.head.load(Ordering::Relaxed);
        if head + len - *cached_tail > cap {
            *cached_tail = self.tail.load(Ordering::Acquire);
            if head + len - *cached_tail > cap {
                self.drops.store(self.drops.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                return Pushed::Dropped;
            }
        }
        let at = (head & self.mask) as usize;
        let first = rec.len().min(cap as usize - at);
        std::ptr::copy_nonoverlapping(rec.as_ptr(), self.base().add(at), first);
        if first < rec.len() {
            std::ptr::copy_nonoverlapping(rec.as_ptr().add(first), self.base(), rec.len() - first);
        }
        self.head.store(head + len, Ordering::Release);
        let half = cap / 2;
        if head - *cached_tail <= half && head + len - *cached_tail > half {
            Pushed::Half
        } else {
            Pushed::Ok
        }
    }

    /// The published, unconsumed bytes as one or two slices, and the head
    /// position they end at.
    ///
    /// # Safety
    /// Only the single consumer may call this, and it must call [`Ring::release`]
    /// with the returned position before the next call.
    pub unsafe fn readable(&self) -> (&[u8], &[u8], u64) {
        let head = self.head.load(Ordering::Acquire);
        let tail = self.tail.load(Ordering::Relaxed);
        let n = (head - tail) as usize;
        let cap = (self.mask + 1) as usize;
        let at = (tail & self.mask) as usize;
        let first = n.min(cap - at);
        let a = std::slice::from_raw_parts(self.base().add(at), first);
        let b = std::slice::from_raw_parts(self.base(), n - first);
        (a, b, head)
    }

    /// Hands `[tail, upto)` back to the producer.
    pub fn release(&self, upto: u64) {
        self.tail.store(upto, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(r: &Ring, out: &mut Vec<u8>) {
        // SAFETY: single consumer in these tests.
        let (a, b, h) = unsafe { r.readable() };
        out.extend_from_slice(a);
        out.extend_from_slice(b);
        r.release(h);
    }

    #[test]
    fn wraps_and_drops() {
        let r = Ring::new(256, 1);
        let mut tail = 0;
        let rec: Vec<u8> = (0..100u8).collect();
        let mut out = Vec::new();
        // SAFETY: single producer.
        unsafe {
            assert_eq!(r.push(&mut tail, &rec), Pushed::Ok);
            assert_eq!(r.push(&mut tail, &rec), Pushed::Half);
            assert_eq!(r.push(&mut tail, &rec), Pushed::Dropped);
            assert_eq!(r.drops.load(Ordering::Relaxed), 1);
            drain(&r, &mut out);
            // This one wraps around the end of the buffer.
            assert_ne!(r.push(&mut tail, &rec), Pushed::Dropped);
        }
        drain(&r, &mut out);
        assert_eq!(out.len(), 300);
        assert!(out.chunks(100).all(|c| c == &rec[..]));
    }

    #[test]
    fn concurrent_producer_consumer_keeps_every_byte() {
        let r: &'static Ring = Box::leak(Ring::new(1024, 1));
        let n = 20_000u32;
        let prod = std::thread::spawn(move || {
            let mut tail = 0;
            let mut sent = 0u32;
            let mut i = 0u32;
            while i < n {
                let rec = [(i % 251) as u8; 13];
                // SAFETY: this thread is the only producer.
                if unsafe { r.push(&mut tail, &rec) } != Pushed::Dropped {
                    sent += 1;
                    i += 1;
                } else {
                    std::thread::yield_now();
                }
            }
            sent
        });
        let mut out = Vec::new();
        while out.len() < n as usize * 13 {
            drain(r, &mut out);
        }
        assert_eq!(prod.join().unwrap(), n);
        for (i, c) in out.chunks(13).enumerate() {
            assert!(c.iter().all(|&b| b == (i as u32 % 251) as u8), "record {i} corrupted");
        }
    }
}
