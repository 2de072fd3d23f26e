//! Constructed hangs: a rank that never joined, a ring stuck mid-way, a
//! deadlock, a job still running, and a job that is not hung.

use super::*;
use commlens_core::inflight::{HANG_DUMP_FORMAT, HANG_DUMP_VERSION};

const TP: u64 = 0x7e57;
const DP: u64 = 0xd0d0;
const S: i64 = 1_000_000_000;

fn op(seq: u64, name: &str, start: Option<i64>, progress: Option<(u64, u64)>) -> InflightOp {
    InflightOp {
        seq,
        op: name.into(),
        bytes: 1 << 20,
        peer: None,
        enqueue_ns: Some(0),
        start_ns: start,
        end_ns: None,
        progress_done: progress.map(|p| p.0),
        progress_total: progress.map(|p| p.1),
    }
}

fn comm(hash: u64, nranks: u32, rank: u32, past: u64, current: Vec<InflightOp>, pending: Vec<InflightOp>) -> CommInflight {
    CommInflight {
        comm_hash: hash,
        nranks,
        rank,
        desc: if hash == TP { "TP0".into() } else { "DP0".into() },
        past: (past.saturating_sub(3)..past).map(|s| op(s, "AllReduce", Some(0), None)).collect(),
        current,
        pending,
    }
}

fn dump(g: u32, comms: Vec<CommInflight>) -> RankInflight {
    RankInflight {
        format: HANG_DUMP_FORMAT.into(),
        version: HANG_DUMP_VERSION,
        host: "node0".into(),
        pid: 100 + g,
        global_rank: Some(g),
        time_ns: 100 * S,
        reason: "timeout".into(),
        comms,
    }
}

#[test]
fn rank_that_never_joined_is_named() {
    // TP group of 4: ranks 0-2 run AllReduce seq 7; rank 3 finished seq 6 and
    // never enqueued 7 (a model bug). DP work is pending behind it on 0-2.
    let mut dumps = Vec::new();
    for r in 0..3 {
        dumps.push(dump(
            r,
            vec![
                comm(TP, 4, r, 7, vec![op(7, "AllReduce", Some(10 * S), None)], vec![]),
                comm(DP, 2, 0, 2, vec![], vec![op(2, "AllReduce", None, None)]),
            ],
        ));
    }
    dumps.push(dump(3, vec![comm(TP, 4, 3, 7, vec![], vec![])]));
    let r = analyze(&dumps, S);
    let s = r.first_stalled.as_ref().unwrap();
    assert_eq!(s.instance, Instance { comm_hash: TP, seq: 7 });
    assert_eq!(s.desc, "TP0");
    assert_eq!(r.verdict, Verdict::RankDidNotJoin { ranks: vec!["r3".into()] });
    assert_eq!(s.members[3].state, MemberState::NotReached);
    assert_eq!(r.blocked.len(), 3, "the DP op is blocked behind TP on ranks 0-2");
    assert!(r.other_roots.is_empty());
}

#[test]
fn missing_dump_counts_as_not_joined() {
    let dumps: Vec<_> =
        (0..3).map(|r| dump(r, vec![comm(TP, 4, r, 7, vec![op(7, "AllReduce", Some(10 * S), None)], vec![])])).collect();
    let r = analyze(&dumps, S);
    assert_eq!(r.verdict, Verdict::RankDidNotJoin { ranks: vec!["comm rank 3 (no dump)".into()] });
}

#[test]
fn ring_stuck_midway_names_the_rank_that_stopped_first() {
    let progress = [(12, 16), (12, 16), (3, 16), (12, 16)];
    let dumps: Vec<_> = (0..4)
        .map(|r| {
            dump(
                r,
                vec![comm(TP, 4, r, 12, vec![op(12, "AllReduce", Some(20 * S), Some(progress[r as usize]))], vec![])],
            )
        })
        .collect();
    let r = analyze(&dumps, S);
    assert_eq!(r.first_stalled.as_ref().unwrap().instance.seq, 12);
    assert_eq!(r.verdict, Verdict::StuckInside { lowest_progress: Some("r2".into()) });
}

#[test]
fn equal_progress_names_nobody() {
    let dumps: Vec<_> = (0..2)
        .map(|r| dump(r, vec![comm(TP, 2, r, 3, vec![op(3, "AllGather", Some(0), Some((5, 8)))], vec![])]))
        .collect();
    assert_eq!(analyze(&dumps, S).verdict, Verdict::StuckInside { lowest_progress: None });
}

#[test]
fn crossed_order_is_a_deadlock() {
    // Rank 0 runs TP seq 5 with DP seq 9 pending; rank 1 runs DP 9 with TP 5 pending.
    let dumps = vec![
        dump(0, vec![
            comm(TP, 2, 0, 5, vec![op(5, "AllReduce", Some(S), None)], vec![]),
            comm(DP, 2, 0, 9, vec![], vec![op(9, "AllReduce", None, None)]),
        ]),
        dump(1, vec![
            comm(TP, 2, 1, 5, vec![], vec![op(5, "AllReduce", None, None)]),
            comm(DP, 2, 1, 9, vec![op(9, "AllReduce", Some(S), None)], vec![]),
        ]),
    ];
    let r = analyze(&dumps, S);
    match r.verdict {
        Verdict::Deadlock { cycle } => {
            let set: BTreeSet<_> = cycle.into_iter().collect();
            assert_eq!(set, [Instance { comm_hash: TP, seq: 5 }, Instance { comm_hash: DP, seq: 9 }].into());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn young_operations_are_still_running() {
    let dumps: Vec<_> =
        (0..2).map(|r| dump(r, vec![comm(TP, 2, r, 3, vec![op(3, "AllReduce", Some(100 * S - 1000), None)], vec![])])).collect();
    assert_eq!(analyze(&dumps, S).verdict, Verdict::StillRunning { longest_ns: 1000 });
}

#[test]
fn nothing_running_is_not_hung() {
    let dumps: Vec<_> = (0..2).map(|r| dump(r, vec![comm(TP, 2, r, 3, vec![], vec![])])).collect();
    let r = analyze(&dumps, S);
    assert_eq!(r.verdict, Verdict::NotHung);
    assert!(r.first_stalled.is_none());
}

/// A dump declaring 2^31 members: the rows follow the dumps, the ranks
/// without one are named as a range (no per-declared-rank work).
#[test]
fn huge_declared_nranks_is_bounded() {
    let dumps = vec![dump(0, vec![comm(TP, u32::MAX / 2 + 1, 0, 3, vec![op(3, "AllReduce", Some(S), None)], vec![])])];
    // Bounded by the dumps, not the declaration: per-declared-rank work
    // would be 2^31 rows (memory and minutes), not a timed assert.
    let r = analyze(&dumps, S);
    let s = r.first_stalled.expect("stalled op");
    assert_eq!(s.nranks, 1 << 31);
    assert_eq!(s.members.len(), 1 + MAX_NO_DUMP_ROWS as usize);
    let Verdict::RankDidNotJoin { ranks } = r.verdict else { panic!("{:?}", r.verdict) };
    assert_eq!(ranks.len(), MAX_NO_DUMP_ROWS as usize + 1);
    assert_eq!(ranks.last().unwrap(), &format!("comm ranks {}-{} (no dump)", MAX_NO_DUMP_ROWS + 1, (1u64 << 31) - 1));
}

/// Many communicators, each with a running and a pending op, on every rank:
/// one blocking edge per pending op (not pending × running), and the cycle
/// search stays linear.
#[test]
fn many_communicators_are_linear() {
    let n = 3000u64;
    let dumps: Vec<RankInflight> = (0..4)
        .map(|g| {
            dump(g, (0..n).map(|h| comm(h + 1, 4, g, 3, vec![op(3, "AllReduce", Some(S), None)], vec![op(4, "AllReduce", None, None)])).collect())
        })
        .collect();
    let r = analyze(&dumps, S);
    assert_eq!(r.blocked.len(), 4 * n as usize);
}

#[test]
fn a_dump_older_than_the_stall_is_left_out() {
    // Ranks 0-2 stall in TP AllReduce seq 7, enqueued at 90 s, dumped at 100 s.
    // Rank 3's only dump is from 80 s, an earlier wait (seq 4, long finished):
    // it cannot say whether rank 3 entered seq 7, so it counts as no dump.
    let mut dumps = Vec::new();
    for r in 0..3 {
        let mut o = op(7, "AllReduce", Some(91 * S), None);
        o.enqueue_ns = Some(90 * S);
        dumps.push(dump(r, vec![comm(TP, 4, r, 7, vec![o], vec![])]));
    }
    let mut old = op(4, "AllReduce", Some(77 * S), None);
    old.enqueue_ns = Some(76 * S);
    let mut d3 = dump(3, vec![comm(TP, 4, 3, 4, vec![old], vec![])]);
    d3.time_ns = 80 * S;
    dumps.push(d3);
    let r = analyze(&dumps, S);
    assert_eq!(r.stale, vec![("r3".to_string(), 10.0)]);
    assert_eq!(r.ranks_dumped, 4);
    assert_eq!(r.verdict, Verdict::RankDidNotJoin { ranks: vec!["comm rank 3 (no dump)".into()] });
    assert_eq!(r.first_stalled.unwrap().instance, Instance { comm_hash: TP, seq: 7 });
    // Written after the enqueue, the same dump counts (it saw seq 4 still running).
    dumps[3].time_ns = 95 * S;
    let r = analyze(&dumps, S);
    assert!(r.stale.is_empty());
}
