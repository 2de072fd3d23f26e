//! The tracker's state machine on its own: pending → current → past, channel
//! counting, stream-order retirement of earlier plans, proxy-step progress,
//! bounds, and the one-dump-per-stall rule. Each test uses its own
//! communicator numbers (the table is process-wide).

use super::*;
use crate::abi::ev;

const MASK: u32 = (ev::KERNEL_CH | ev::COLL) as u32;

fn task(plan: u64, nch: u8) -> Hook {
    Hook::Task(Task {
        nccl_seq: Some(9),
        func: 1,
        dtype: 2,
        count: 64,
        peer: -1,
        n_channels: nch,
        plan,
        ..Task::default()
    })
}

fn snap(idx: u32) -> Snapshot {
    snapshot(false).into_iter().find(|s| s.idx == idx).expect("live handle")
}

#[test]
fn pending_current_past() {
    register(101, 0xAB, 1, 4, Some(1), b"TP0", MASK);
    on_start(&task(7, 2), 101, 1000, 0, 10);
    on_start(&task(8, 1), 101, 2000, 0, 11);
    let s = snap(101);
    assert_eq!((s.open.len(), s.open[0].seq, s.open[1].seq, s.open[0].start), (2, 0, 1, 0));
    // The first channel of op 1000 starts: it runs; the KernelCh must be remembered.
    assert_eq!(on_start(&Hook::KernelCh { p_timer: 0 }, 101, 1001, 1000, 20), Some(1000));
    assert_eq!(on_start(&Hook::KernelCh { p_timer: 0 }, 101, 1002, 1000, 21), Some(1000));
    assert_eq!(on_start(&Hook::KernelCh { p_timer: 0 }, 101, 1003, 4242, 21), None, "unknown parent");
    on_kernel_ch_stop(101, 1000, 30, 0);
    let s = snap(101);
    assert_eq!((s.open[0].start, s.open[0].ch_started, s.open[0].ch_stopped), (20, 2, 1));
    on_kernel_ch_stop(101, 1000, 31, 0);
    let s = snap(101);
    assert_eq!(s.open.len(), 1);
    assert_eq!((s.past[0].id, s.past[0].enqueue, s.past[0].start, s.past[0].end), (1000, 10, 20, 31));
    assert_eq!((s.name.as_str(), s.rank, s.nranks, s.dev), ("TP0", 1, 4, Some(1)));
}

#[test]
fn a_later_plan_retires_earlier_ones() {
    register(102, 0xAC, 0, 2, None, b"", MASK);
    on_start(&task(1, 2), 102, 10, 0, 1); // plan 1, its KernelCh events get lost
    on_start(&task(2, 1), 102, 20, 0, 2); // plan 2, same group as the next
    on_start(&task(2, 1), 102, 30, 0, 3);
    on_start(&Hook::KernelCh { p_timer: 0 }, 102, 31, 30, 5);
    let s = snap(102);
    assert_eq!(s.open.iter().map(|o| o.id).collect::<Vec<_>>(), vec![20, 30], "plan 1 finished before plan 2 ran");
    assert_eq!((s.past[0].id, s.past[0].end), (10, 0), "end unknown");
    // Unknown plans (0) never retire anything.
    on_start(&task(0, 1), 102, 40, 0, 6);
    on_start(&Hook::KernelCh { p_timer: 0 }, 102, 41, 40, 7);
    assert_eq!(snap(102).open.len(), 3);
}

#[test]
fn proxy_steps_count_progress() {
    register(103, 0xAD, 0, 2, Some(0), b"", MASK | ev::PROXY_STEP as u32 | ev::PROXY_OP as u32);
    on_start(&task(1, 1), 103, 10, 0, 1);
    on_start(&Hook::ProxyOp { n_steps: 8 }, 103, 11, 10, 2);
    on_start(&Hook::ProxyOp { n_steps: 8 }, 103, 12, 10, 2);
    for p in [11, 11, 12, 99] {
        on_start(&Hook::ProxyStep, 103, 0, p, 3);
    }
    let s = snap(103);
    assert!(s.proxy_steps);
    assert_eq!((s.open[0].steps_posted, s.open[0].steps_total), (3, 16));
}

#[test]
fn bounded_and_untracked() {
    register(104, 0xAE, 0, 2, Some(0), b"", MASK);
    for i in 0..(MAX_OPEN as u64 + 5) {
        on_start(&task(0, 1), 104, 100 + i, 0, 1);
    }
    let s = snap(104);
    assert_eq!((s.open.len(), s.forgotten, s.open[0].seq), (MAX_OPEN, 5, 5));
    for i in 0..(PAST as u64 + 3) {
        let id = 100 + 5 + i;
        on_start(&Hook::KernelCh { p_timer: 0 }, 104, id + 10_000, id, 2);
        on_kernel_ch_stop(104, id, 3, 0);
    }
    let s = snap(104);
    assert_eq!((s.past.len(), s.past[0].seq, s.past[PAST - 1].seq), (PAST, 8, PAST as u64 + 7));
    // Without KernelCh in the mask nothing is listed, but sequence numbers still count.
    register(105, 0xAF, 0, 2, Some(0), b"", ev::COLL as u32);
    on_start(&task(1, 1), 105, 1, 0, 1);
    on_start(&Hook::CeColl, 105, 2, 0, 1);
    on_start(&task(1, 1), 105, 3, 0, 1);
    assert!(snap(105).open.is_empty());
    retire(105);
    assert!(snapshot(false).iter().all(|s| s.idx != 105));
}

#[test]
fn one_dump_per_stall() {
    register(106, 0xB0, 0, 2, Some(0), b"", MASK);
    on_start(&task(1, 1), 106, 10, 0, 1_000);
    let over = |now| {
        // Only this handle's view matters here: check it alone.
        let t = track(106).unwrap();
        let s = lock(&t.st);
        let covered = |o: &Op| s.mark.is_some_and(|(below, done)| o.seq < below && done == s.completed);
        s.open.iter().any(|o| now - o.enqueue > 500 && !covered(o))
    };
    assert!(!over(1_400));
    assert!(over(1_600));
    snapshot(true); // a dump covers it
    assert!(!over(5_000), "the same stall does not dump again");
    on_start(&task(2, 1), 106, 20, 0, 2_000); // enqueued behind it, after the dump
    assert!(over(2_600), "an operation the dump did not see");
    snapshot(true);
    assert!(!over(9_000));
    on_start(&Hook::KernelCh { p_timer: 0 }, 106, 11, 10, 3_000);
    on_kernel_ch_stop(106, 10, 3_001, 0); // progress: the handle completed something
    assert!(over(9_000), "op 20 is stuck after the earlier stall resolved: a new stall");
    assert!(overdue(u64::MAX / 2, 500));
}

#[test]
fn kch_map_probes_and_forgets() {
    let mut m = KchMap::new();
    for id in 1..=300u64 {
        assert!(m.insert(id << 3, 1, id));
    }
    assert_eq!(m.take(5 << 3), Some((1, 5)));
    assert_eq!(m.take(5 << 3), None);
    assert_eq!(m.take(0), None);
    let full = (1000..1400u64).filter(|&id| !m.insert(id, 2, id)).count();
    assert!(full > 0, "a full neighbourhood refuses instead of overwriting");
}

fn p2p(plan: u64, peer: i32) -> Hook {
    Hook::Task(Task { p2p: true, func: 3, dtype: 2, count: 64, peer, n_channels: 2, plan, ..Task::default() })
}

#[test]
fn self_p2p_is_done_at_once() {
    // NCCL 2.28's all-to-all on rank 1 of 4: a Send and a Recv to itself, which never get KernelCh.
    register(107, 0xB1, 1, 4, Some(0), b"", MASK);
    for (id, peer) in [(10, 1), (11, 1), (12, 0), (13, 0)] {
        on_start(&p2p(5, peer), 107, id, 0, 100);
    }
    let s = snap(107);
    assert_eq!(s.open.iter().map(|o| o.id).collect::<Vec<_>>(), [12, 13], "only the real transfers wait");
    assert_eq!(s.past.iter().map(|o| (o.id, o.seq, o.start, o.end)).collect::<Vec<_>>(), [(10, 0, 0, 0), (11, 1, 0, 0)]);
}

#[test]
fn lagged_handle_waits_for_proxy_ops() {
    register(108, 0xB2, 0, 4, Some(0), b"", MASK | ev::PROXY_OP as u32);
    // Before any self p2p too, an operation with ProxyOps waits for the last one's stop.
    on_start(&task(1, 1), 108, 10, 0, 1);
    assert_eq!(on_start(&Hook::ProxyOp { n_steps: 1 }, 108, 11, 10, 2), Some(10));
    on_start(&Hook::KernelCh { p_timer: 0 }, 108, 12, 10, 3);
    on_kernel_ch_stop(108, 10, 4, 0);
    assert_eq!(snap(108).open.len(), 1, "kernel channels stopped, the proxy not yet");
    on_proxy_op_stop(108, 10, 4);
    assert!(snap(108).open.is_empty());
    // A self p2p: from now on NCCL's KernelCh events of this handle come early.
    on_start(&p2p(2, 0), 108, 20, 0, 5);
    on_start(&task(3, 1), 108, 30, 0, 6); // the stalled AllReduce
    assert_eq!(on_start(&Hook::ProxyOp { n_steps: 6 }, 108, 31, 30, 7), Some(30));
    assert_eq!(on_start(&Hook::ProxyOp { n_steps: 6 }, 108, 32, 30, 7), Some(30));
    on_start(&Hook::KernelCh { p_timer: 0 }, 108, 33, 30, 8);
    on_kernel_ch_stop(108, 30, 9, 0); // an earlier work's stop, delivered for this one
    let s = snap(108);
    assert_eq!((s.open.len(), s.open[0].id, s.open[0].proxy_open), (1, 30, 2), "still waiting for the peer");
    on_proxy_op_stop(108, 30, 6_000);
    assert_eq!(snap(108).open.len(), 1);
    on_proxy_op_stop(108, 30, 6_001);
    let s = snap(108);
    assert!(s.open.is_empty());
    assert_eq!((s.past.last().unwrap().id, s.past.last().unwrap().end), (30, 6_001));
    // A later plan's (early) KernelCh start no longer retires earlier plans.
    on_start(&task(4, 1), 108, 40, 0, 7_000);
    on_start(&task(5, 1), 108, 50, 0, 7_001);
    on_start(&Hook::KernelCh { p_timer: 0 }, 108, 51, 50, 7_002);
    assert_eq!(snap(108).open.len(), 2);
}
