//! In-flight view per communicator handle, NCCLX CollTrace style: the
//! operations enqueued whose kernel has not started (*pending*), those whose
//! kernel runs (*current*), and a ring of the last [`PAST`] completed ones
//! (*past*). [`crate::hang`] turns it into `commlens-hang` dumps.
//!
//! What moves an operation (a Coll or P2p event of a local context):
//!
//! * **pending** at its START (NCCL emits it right after the kernel launch);
//!   `Coll`/`P2p` STOP only means "enqueued" and changes nothing;
//! * **current** at its first KernelCh START: NCCL's proxy thread saw the
//!   kernel begin this operation on a channel. ProxyOp/ProxyStep starts are not
//!   taken as evidence (the proxy posts them before the kernel runs);
//! * **done** when as many KernelChStop states as the operation has channels
//!   (`nChannels`, or the channels seen if more) arrived; also, by stream
//!   order, when an operation of a *later plan* (kernel launch) of the same
//!   handle starts or completes: NCCL runs one handle's kernels one after the
//!   other, so everything of earlier plans has finished (this also retires
//!   operations whose KernelCh events NCCL lost).
//! * **self p2p** (a Send or Recv whose peer is the handle's own rank): done at
//!   its START. NCCL copies it inside the kernel without a proxy operation, so it
//!   never gets KernelCh events (NCCL 2.28: `addP2pToPlan` creates no proxy ops
//!   for `sendRank == rank`, the profiler's included).
//! * **lagged handles**: that same self p2p still advances the kernel's per-channel
//!   work counter while the host's copy of it stays behind, so from then on NCCL
//!   pairs each KernelCh with the timers and progress of an *earlier* work of the
//!   channel: it starts and stops too early (a stalled collective looks done at
//!   once). On such a handle a KernelCh start no longer retires earlier plans.
//! * **ProxyOps**: on every handle, an operation that has ProxyOps is done only
//!   when its kernel channels stopped *and* its last ProxyOp stopped (the proxy
//!   finishes a network transfer only when the peer took part). Stale KernelCh
//!   timers were also seen on a world communicator that ran no self p2p (the
//!   8-rank real capture: a 6 s stall looked done in 4 µs on 4 of 8 ranks).
//!
//! `seq` is this handle's operation counter (0, 1, … over Coll, P2p and CeColl
//! starts). NCCL's `seqNumber` counts per *function* (AllReduce and AllGather
//! both have a number 7), which does not name one operation of a
//! communicator; the counter does, and it is the same on every member as long
//! as they issue the same operations, which NCCL requires for collectives.
//! NCCL's number is kept as `nccl_seq`. Copy-engine collectives are counted
//! but not listed (NCCL reports no completion for them). Without KernelCh in
//! the event mask there is no kernel evidence and nothing is listed.
//!
//! Progress: with ProxyStep events on, proxy steps posted / steps of the
//! operation's ProxyOps (posting runs at most `NCCL_STEPS` ahead of
//! completion); otherwise kernel channels stopped / channels.
//!
//! Locking: one small mutex per handle, taken only at Coll/P2p/CeColl,
//! KernelCh, ProxyOp and ProxyStep starts and at KernelChStop; never by other
//! events. Handles are found through a lock-free two-level table indexed by the
//! context's communicator number. A KernelChStop carries only the event handle,
//! so the thread that started the KernelCh (NCCL's proxy thread, which also
//! stops it) remembers `handle → (comm, operation)` in a small per-thread map
//! ([`KchMap`]). Nothing here allocates after a handle's queues reached their
//! working size.
//!
//! Metrics: when they are on, each handle also owns a fixed-size
//! [`crate::metrics::CommAcc`], updated under the same mutex when an operation
//! completes ([`State::finish`]) and read by the writer ([`metrics_views`]).

use crate::metrics::{CommAcc, HandleView};
use crate::session::lock;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::Mutex;

/// Completed operations kept per handle.
pub const PAST: usize = 64;
/// Open (pending + current) operations kept per handle; the oldest are
/// forgotten (and counted) beyond this.
pub const MAX_OPEN: usize = 1024;
const CHUNK: usize = 256;
const CHUNKS: usize = 256;
const PROXY_RING: usize = 64;

/// What a START tells the tracker, decided by the callback that decoded it.
#[derive(Clone, Copy)]
pub enum Hook {
    None,
    Task(Task),
    CeColl,
    /// `p_timer`: the GPU timer at the channel's start (0: none).
    KernelCh {
        p_timer: u64,
    },
    ProxyOp {
        n_steps: i32,
    },
    ProxyStep,
}

/// A Coll or P2p START.
#[derive(Clone, Copy, Default)]
pub struct Task {
    pub p2p: bool,
    /// NCCL's per-function `seqNumber` (Coll only).
    pub nccl_seq: Option<u64>,
    /// Interned string ids (resolved at dump time).
    pub func: u32,
    pub dtype: u32,
    pub count: u64,
    /// Root (Coll) or peer (P2p).
    pub peer: i32,
    pub n_channels: u8,
    /// The plan (kernel launch) it belongs to: its Group event handle, 0 when unknown.
    pub plan: u64,
}

/// One tracked operation. Times are `CLOCK_MONOTONIC` ns, 0 = unknown.
#[derive(Clone, Copy, Default, Debug)]
pub struct Op {
    pub id: u64,
    pub seq: u64,
    pub nccl_seq: Option<u64>,
    pub p2p: bool,
    pub func: u32,
    pub dtype: u32,
    pub count: u64,
    pub peer: i32,
    pub plan: u64,
    pub enqueue: u64,
    pub start: u64,
    pub end: u64,
    /// GPU timers (`pTimer`, the GPU's own clock): earliest channel start, latest channel stop.
    pub gpu_start: u64,
    pub gpu_end: u64,
    pub ch_total: u16,
    pub ch_started: u16,
    pub ch_stopped: u16,
    pub steps_total: u32,
    pub steps_posted: u32,
    /// ProxyOps started and not yet stopped.
    pub proxy_open: u16,
}

/// A communicator handle of this process.
pub struct Track {
    pub idx: u32,
    pub comm_hash: u64,
    pub rank: i32,
    pub nranks: i32,
    pub dev: Option<i32>,
    pub name: String,
    /// KernelCh is in the handle's event mask: operations are listed.
    pub kernel_ch: bool,
    /// ProxyStep is in the mask: progress counts proxy steps.
    pub proxy_steps: bool,
    st: Mutex<State>,
}

struct State {
    live: bool,
    next_seq: u64,
    completed: u64,
    /// Open operations forgotten because more than [`MAX_OPEN`] were open.
    forgotten: u64,
    open: VecDeque<Op>,
    past: VecDeque<Op>,
    /// Recent ProxyOps: (ProxyOp handle, operation handle).
    proxy: Vec<(u64, u64)>,
    proxy_next: usize,
    /// At the last timeout dump: (next seq, completed). Operations older than the first
    /// value are covered by that dump until the handle completes another one.
    mark: Option<(u64, u64)>,
    /// A self p2p ran: NCCL's KernelCh events of this handle belong to earlier works (see the module doc).
    lagged: bool,
    /// Metrics accumulators (metrics on only).
    acc: Option<Box<CommAcc>>,
}

type Chunk = [AtomicPtr<Track>; CHUNK];
static TABLE: [AtomicPtr<Chunk>; CHUNKS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS];
/// Highest communicator number registered.
static HIGH: AtomicU32 = AtomicU32::new(0);

#[inline]
fn track(comm: u32) -> Option<&'static Track> {
    let i = comm as usize;
    let chunk = TABLE.get(i / CHUNK)?.load(Ordering::Acquire);
    if chunk.is_null() {
        return None;
    }
    // SAFETY: chunks and tracks are freed only by `reset`, when no callback can run.
    unsafe { (*chunk)[i % CHUNK].load(Ordering::Acquire).as_ref() }
}

/// Registers communicator number `idx` (called under the registry lock), with
/// metrics accumulators when the configuration turns metrics on.
#[allow(clippy::too_many_arguments)]
pub fn register(idx: u32, comm_hash: u64, rank: i32, nranks: i32, dev: Option<i32>, name: &[u8], mask: u32) {
    register_with(idx, comm_hash, rank, nranks, dev, name, mask, crate::config::config().metrics);
}

/// [`register`] with metrics on or off explicitly.
#[allow(clippy::too_many_arguments)]
pub fn register_with(
    idx: u32,
    comm_hash: u64,
    rank: i32,
    nranks: i32,
    dev: Option<i32>,
    name: &[u8],
    mask: u32,
    metrics: bool,
) {
    let i = idx as usize;
    if i / CHUNK >= CHUNKS {
        return; // more than 65535 communicators in one session: the rest are not tracked
    }
    let slot = &TABLE[i / CHUNK];
    if slot.load(Ordering::Acquire).is_null() {
        let chunk: Box<Chunk> = Box::new([const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNK]);
        slot.store(Box::into_raw(chunk), Ordering::Release);
    }
    let track = Box::new(Track {
        idx,
        comm_hash,
        rank,
        nranks,
        dev,
        name: String::from_utf8_lossy(name).into_owned(),
        kernel_ch: mask as u64 & crate::abi::ev::KERNEL_CH != 0,
        proxy_steps: mask as u64 & crate::abi::ev::PROXY_STEP != 0,
        st: Mutex::new(State {
            live: true,
            next_seq: 0,
            completed: 0,
            forgotten: 0,
            open: VecDeque::with_capacity(16),
            past: VecDeque::with_capacity(PAST),
            proxy: Vec::with_capacity(PROXY_RING),
            proxy_next: 0,
            mark: None,
            lagged: false,
            acc: metrics.then(CommAcc::new),
        }),
    });
    // SAFETY: checked non-null above; a chunk is never freed while tracks are registered.
    let old = unsafe { (*slot.load(Ordering::Acquire))[i % CHUNK].swap(Box::into_raw(track), Ordering::AcqRel) };
    if !old.is_null() {
        // SAFETY: from Box::into_raw; numbers are not reused within a session.
        drop(unsafe { Box::from_raw(old) });
    }
    HIGH.fetch_max(idx, Ordering::AcqRel);
}

/// The handle was finalized: it leaves the dumps and its queues are freed.
pub fn retire(idx: u32) {
    if let Some(t) = track(idx) {
        let mut s = lock(&t.st);
        s.live = false;
        (s.open, s.past, s.proxy) = (VecDeque::new(), VecDeque::new(), Vec::new());
        s.acc = None;
    }
}

/// Frees every track (a forked child's first init, or the image going away).
///
/// # Safety
/// No callback may run concurrently or later use a track registered before.
pub unsafe fn reset() {
    for slot in TABLE.iter() {
        let chunk = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if chunk.is_null() {
            continue;
        }
        for t in (*chunk).iter() {
            let p = t.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !p.is_null() {
                drop(Box::from_raw(p));
            }
        }
        drop(Box::from_raw(chunk));
    }
    HIGH.store(0, Ordering::Release);
}

impl State {
    fn find(&self, id: u64) -> Option<usize> {
        self.open.iter().position(|o| o.id == id)
    }

    fn finish(&mut self, op: Op) {
        if let Some(acc) = self.acc.as_mut() {
            acc.record(&op);
        }
        if self.past.len() == PAST {
            self.past.pop_front();
        }
        self.past.push_back(op);
        self.completed += 1;
    }

    /// Stream order: operations of earlier plans than `open[i]`'s have finished.
    /// Returns `open[i]`'s index afterwards.
    fn retire_earlier_plans(&mut self, mut i: usize) -> usize {
        let plan = self.open[i].plan;
        if plan == 0 {
            return i;
        }
        let mut j = 0;
        while j < i {
            let p = self.open[j].plan;
            if p != 0 && p != plan {
                let op = self.open.remove(j).expect("j < i < len");
                self.finish(op);
                i -= 1;
            } else {
                j += 1;
            }
        }
        i
    }
}

/// Applies a START of a local context (`comm` ≠ 0). Returns the operation a
/// KernelCh belongs to when it must be remembered for its KernelChStop.
#[inline]
pub fn on_start(hook: &Hook, comm: u32, id: u64, parent: u64, t: u64) -> Option<u64> {
    match hook {
        Hook::None => None,
        Hook::Task(k) => {
            on_task(comm, id, t, k);
            None
        }
        _ => on_other(hook, comm, id, parent, t),
    }
}

/// A Coll or P2p START: the hottest path here (one lock, one push).
#[inline]
fn on_task(comm: u32, id: u64, t: u64, k: &Task) {
    let Some(tr) = track(comm) else { return };
    let mut s = lock(&tr.st);
    let seq = s.next_seq;
    s.next_seq += 1;
    if !tr.kernel_ch || !s.live {
        return;
    }
    #[rustfmt::skip]
    let op = Op {
        id, seq, nccl_seq: k.nccl_seq, p2p: k.p2p, func: k.func, dtype: k.dtype, count: k.count,
        peer: k.peer, plan: k.plan, enqueue: t, ch_total: k.n_channels as u16, ..Op::default()
    };
    if k.p2p && k.peer == tr.rank {
        // No KernelCh will ever come for it; and the kernel's work counter now runs ahead.
        s.lagged = true;
        s.finish(op);
        return;
    }
    if s.open.len() >= MAX_OPEN {
        s.open.pop_front();
        s.forgotten += 1;
    }
    s.open.push_back(op);
}

fn on_other(hook: &Hook, comm: u32, id: u64, parent: u64, t: u64) -> Option<u64> {
    let tr = track(comm)?;
    let mut s = lock(&tr.st);
    if !s.live {
        return None;
    }
    match *hook {
        Hook::None | Hook::Task(_) => None,
        Hook::CeColl => {
            s.next_seq += 1;
            None
        }
        Hook::KernelCh { p_timer } => {
            let i = s.find(parent)?;
            let op = &mut s.open[i];
            op.ch_started = op.ch_started.saturating_add(1);
            if p_timer != 0 && (op.gpu_start == 0 || p_timer < op.gpu_start) {
                op.gpu_start = p_timer;
            }
            let first = op.start == 0;
            if first {
                op.start = t;
                if !s.lagged {
                    s.retire_earlier_plans(i);
                }
            }
            Some(parent)
        }
        Hook::ProxyOp { n_steps } => {
            let i = s.find(parent)?;
            s.open[i].steps_total = s.open[i].steps_total.saturating_add(n_steps.max(0) as u32);
            let at = s.proxy_next;
            if s.proxy.len() < PROXY_RING {
                s.proxy.push((id, parent));
            } else {
                s.proxy[at] = (id, parent);
            }
            s.proxy_next = (at + 1) % PROXY_RING;
            // The ProxyOp's stop is completion evidence on every handle: NCCL's
            // KernelCh timers can run ahead of the work they name (a self p2p
            // does that, and so did something else on a world communicator of
            // the 8-rank real capture), while the proxy finishes a network
            // transfer only when the peer took part.
            s.open[i].proxy_open = s.open[i].proxy_open.saturating_add(1);
            Some(parent)
        }
        Hook::ProxyStep => {
            let &(_, op) = s.proxy.iter().find(|(p, _)| *p == parent)?;
            let i = s.find(op)?;
            s.open[i].steps_posted = s.open[i].steps_posted.saturating_add(1);
            None
        }
    }
}

/// A KernelChStop of operation `op` of handle `comm`; `gpu`: its GPU timer (0: none).
pub fn on_kernel_ch_stop(comm: u32, op: u64, t: u64, gpu: u64) {
    let Some(tr) = track(comm) else { return };
    let mut s = lock(&tr.st);
    let Some(i) = s.find(op) else { return };
    let o = &mut s.open[i];
    o.ch_stopped = o.ch_stopped.saturating_add(1);
    o.gpu_end = o.gpu_end.max(gpu);
    s.complete_if_done(i, t);
}

/// The stop of a ProxyOp of operation `op` of handle `comm` (see [`on_start`]).
pub fn on_proxy_op_stop(comm: u32, op: u64, t: u64) {
    let Some(tr) = track(comm) else { return };
    let mut s = lock(&tr.st);
    let Some(i) = s.find(op) else { return };
    s.open[i].proxy_open = s.open[i].proxy_open.saturating_sub(1);
    s.complete_if_done(i, t);
}

impl State {
    /// `open[i]` is done when every kernel channel stopped and no ProxyOp of it is open.
    fn complete_if_done(&mut self, i: usize, t: u64) {
        let o = &self.open[i];
        if o.ch_stopped >= o.ch_total.max(o.ch_started) && o.ch_stopped > 0 && o.proxy_open == 0 {
            let i = self.retire_earlier_plans(i);
            let mut o = self.open.remove(i).expect("index in range");
            o.end = t;
            self.finish(o);
        }
    }
}

/// A copy of one live handle's view.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub idx: u32,
    pub comm_hash: u64,
    pub rank: i32,
    pub nranks: i32,
    pub dev: Option<i32>,
    pub name: String,
    pub proxy_steps: bool,
    pub past: Vec<Op>,
    pub open: Vec<Op>,
    pub forgotten: u64,
}

/// Every live handle's view, in registration order. `mark`: remember what this
/// (timeout) dump covered (see [`overdue`]).
pub fn snapshot(mark: bool) -> Vec<Snapshot> {
    let mut out = Vec::new();
    for idx in 1..=HIGH.load(Ordering::Acquire) {
        let Some(t) = track(idx) else { continue };
        let mut s = lock(&t.st);
        if !s.live {
            continue;
        }
        if mark {
            s.mark = Some((s.next_seq, s.completed));
        }
        out.push(Snapshot {
            idx,
            comm_hash: t.comm_hash,
            rank: t.rank,
            nranks: t.nranks,
            dev: t.dev,
            name: t.name.clone(),
            proxy_steps: t.proxy_steps,
            past: s.past.iter().copied().collect(),
            open: s.open.iter().copied().collect(),
            forgotten: s.forgotten,
        });
    }
    out
}

/// True when some operation has been open for more than `timeout` ns at `now`
/// and no earlier dump covered it: a dump covers the operations open at that
/// time until their handle completes another operation (one dump per stall).
pub fn overdue(now: u64, timeout: u64) -> bool {
    (1..=HIGH.load(Ordering::Acquire)).any(|idx| {
        let Some(t) = track(idx) else { return false };
        let s = lock(&t.st);
        let covered = |o: &Op| s.mark.is_some_and(|(below, done)| o.seq < below && done == s.completed);
        s.live && s.open.iter().any(|o| now.saturating_sub(o.enqueue) > timeout && !covered(o))
    })
}

/// What the metrics writer needs of every live handle: its accumulators (and the
/// samples completed since the last call), open operations and the oldest one's
/// enqueue time, and how many are open longer than `timeout` ns (0: none counted).
pub fn metrics_views(now: u64, timeout: u64) -> Vec<HandleView> {
    let mut out = Vec::new();
    for idx in 1..=HIGH.load(Ordering::Acquire) {
        let Some(t) = track(idx) else { continue };
        let mut s = lock(&t.st);
        if !s.live {
            continue;
        }
        let oldest = s.open.iter().map(|o| o.enqueue).min();
        let overdue = if timeout == 0 {
            0
        } else {
            s.open.iter().filter(|o| now.saturating_sub(o.enqueue) > timeout).count() as u64
        };
        let open = s.open.len() as u64;
        let Some(acc) = s.acc.as_mut() else { continue };
        out.push(HandleView {
            idx,
            comm_hash: t.comm_hash,
            rank: t.rank,
            nranks: t.nranks,
            dev: t.dev,
            name: t.name.clone(),
            kinds: acc.kinds,
            samples: acc.take_samples(),
            lost_samples: acc.lost_samples,
            open,
            oldest_enqueue: oldest,
            overdue,
        });
    }
    out
}

/// Per-thread `KernelCh handle → (comm, operation)` for the KernelChStop that
/// carries only the handle: 512 slots, 16 probes, no allocation after creation.
pub struct KchMap {
    slots: [(u64, u32, u64); KCH_SLOTS],
    /// Entries held: `take` returns at once when none (every STOP asks the ProxyOp map).
    len: usize,
}

const KCH_SLOTS: usize = 512;
const KCH_PROBES: usize = 16;

impl KchMap {
    pub fn new() -> Box<KchMap> {
        Box::new(KchMap { slots: [(0, 0, 0); KCH_SLOTS], len: 0 })
    }

    #[inline]
    fn home(id: u64) -> usize {
        (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 55) as usize
    }

    /// Remembers `id`; false when its slots are taken (the stop will not be seen).
    pub fn insert(&mut self, id: u64, comm: u32, op: u64) -> bool {
        let h = Self::home(id);
        for k in 0..KCH_PROBES {
            let s = &mut self.slots[(h + k) % KCH_SLOTS];
            if s.0 == 0 {
                *s = (id, comm, op);
                self.len += 1;
                return true;
            }
        }
        false
    }

    /// Forgets `id` and returns what it was remembered with.
    #[inline]
    pub fn take(&mut self, id: u64) -> Option<(u32, u64)> {
        if id == 0 || self.len == 0 {
            return None;
        }
        let h = Self::home(id);
        for k in 0..KCH_PROBES {
            let s = &mut self.slots[(h + k) % KCH_SLOTS];
            if s.0 == id {
                s.0 = 0;
                self.len -= 1;
                return Some((s.1, s.2));
            }
        }
        None
    }
}

#[cfg(test)]
#[path = "inflight_tests.rs"]
mod tests;
