//! The worker threads' malloc heaps, grown in one step when each thread of
//! the rayon pool starts ([`reserve_thread_heap`], installed by
//! [`install_pool`]).
//!
//! Why: glibc gives each thread after the first its own arena, a 64 MiB
//! reserve whose usable part grows with `mprotect` by just what an
//! allocation lacks (page by page: `M_TOP_PAD` does not apply there).
//! `stats --format json` on the 400 MB bench log made 1,309 such calls on
//! one thread and 1,412 on two (`strace -c`). Each takes the process's
//! mmap lock for writing, so on two threads they queued behind the other
//! thread's window mapping (a `MAP_POPULATE` of up to 16 MiB holds that lock
//! for reading): 12-16 ms of waiting per run in the kernel's
//! `lock:contention_*` events, nearly all in `mprotect`, against ~210 ms of
//! wall time, work a second core cannot absorb.
//!
//! How: one 16 MiB block is allocated and freed twice. The first comes from
//! `mmap` (above glibc's initial 128 KiB threshold), and freeing it raises
//! the dynamic mmap threshold to its size (the trim threshold to twice
//! that); the second is then carved from the thread's own heap, which grows
//! by one `mprotect`, and is freed to the heap's top, where it stays (it is
//! under the trim threshold). The pages are never touched, so nothing
//! becomes resident. After it: 37 `mprotect` calls on one thread, 119 on two
//! (most of the rest were the line reader's placeholder maps, since removed:
//! 12 and 14 now), and the lock waits left are the window mappings' own.
//! Another allocator sees one allocation and one free.

use std::cell::Cell;

/// The block [`reserve_thread_heap`] allocates: at most glibc's largest
/// dynamic mmap threshold (32 MiB). 8 MiB left 456 of the 1,309 calls on
/// one thread; 16 MiB and 30 MiB both left 37.
const RESERVE: usize = 16 << 20;

thread_local! {
    static RESERVED: Cell<bool> = const { Cell::new(false) };
}

/// Grows this thread's malloc heap by [`RESERVE`] in one step (see the
/// module doc); once per thread, later calls do nothing.
pub fn reserve_thread_heap() {
    if RESERVED.with(|r| r.replace(true)) {
        return;
    }
    for _ in 0..2 {
        let block: Vec<u8> = Vec::with_capacity(RESERVE);
        // Kept from being optimised away: the allocation is the point.
        std::hint::black_box(&block);
    }
}

/// Builds the global rayon pool (its size from `RAYON_NUM_THREADS` or the
/// cores, as rayon's default) with each thread's heap reserved as it starts.
/// Does nothing if the pool exists already.
pub fn install_pool() {
    let _ = rayon::ThreadPoolBuilder::new().start_handler(|_| reserve_thread_heap()).build_global();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mapping of `/proc/self/maps` holding `addr`: (size, permissions, name).
    #[cfg(target_os = "linux")]
    fn mapping_of(addr: usize) -> Option<(usize, String, String)> {
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        maps.lines().find_map(|l| {
            let mut f = l.split_whitespace();
            let (lo, hi) = f.next()?.split_once('-')?;
            let (lo, hi) = (usize::from_str_radix(lo, 16).ok()?, usize::from_str_radix(hi, 16).ok()?);
            let perms = f.next()?.to_string();
            let name = f.nth(3).unwrap_or("").to_string();
            (lo..hi).contains(&addr).then_some((hi - lo, perms, name))
        })
    }

    /// On glibc, a thread that reserved its heap holds at least the block's
    /// size of writable heap around its allocations: what it may allocate
    /// without another `mprotect`. A fresh thread's heap starts at 132 KiB,
    /// so this fails where the reserve does nothing.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_reserved_thread_heap_is_writable_for_the_whole_block() {
        let got = std::thread::spawn(|| {
            reserve_thread_heap();
            // Not a tiny one: those may come from the main arena.
            let block = vec![1u8; 4096];
            mapping_of(block.as_ptr() as usize)
        })
        .join()
        .unwrap();
        let (size, perms, name) = got.expect("the allocation lies in a mapping");
        // The main arena (`[heap]`, brk) serves a thread only when glibc ran
        // out of arenas; its growth is another matter.
        if name != "[heap]" {
            assert!(perms.starts_with("rw"), "{perms}");
            assert!(size >= RESERVE, "writable heap of {size} bytes after reserving {RESERVE}");
        }
    }
}
