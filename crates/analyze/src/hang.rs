//! Which collective stalled first, and who is to blame: NCCLX's fault-analyzer
//! rule over per-rank in-flight dumps ([`commlens_core::inflight`]).
//!
//! Assumptions (NCCLX §7.3): the job has hung long enough for everything that
//! could finish to finish, and an operation that has not started on a rank is
//! waiting, directly or not, for what runs on that rank. So every pending
//! operation on rank r is *blocked on* r's running operations. An operation
//! instance — (commHash, seq), the same on every member — that runs somewhere
//! and is blocked nowhere is a *root*: the first failure. Its members that
//! never reached it did not join; if all joined, the one with the least
//! progress stopped first. With running operations but no root, every
//! instance waits on another: a deadlock, and the cycle is reported.

use commlens_core::inflight::{CommInflight, InflightOp, RankInflight};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// An operation instance across ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Instance {
    pub comm_hash: u64,
    pub seq: u64,
}

/// Where one member of a communicator stands with respect to an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MemberState {
    /// Completed it (listed in `past`, or an older sequence number).
    Done,
    /// Its kernel runs.
    Running,
    /// Enqueued, kernel not started.
    Pending,
    /// The rank's dump shows the communicator but not this operation: it never got there.
    NotReached,
    /// No dump mentions this member.
    NoDump,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemberRow {
    /// Rank inside the communicator.
    pub comm_rank: u32,
    /// `r3` (global rank) or `host:pid` of the dumping process; `?` without a dump.
    pub who: String,
    pub state: MemberState,
    pub progress: Option<(u64, u64)>,
    /// How long it has been running at dump time (ns).
    pub running_for_ns: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Verdict {
    /// Nothing is running or pending: the dumps show no hang.
    NotHung,
    /// The first stalled operation runs on some members and others never
    /// reached it (NCCLX `RANK_NOT_JOIN`).
    RankDidNotJoin { ranks: Vec<String> },
    /// Every member entered it; the one with the least progress stopped first
    /// (a ring stuck mid-way: a dead link, NIC or GPU).
    StuckInside { lowest_progress: Option<String> },
    /// Running operations wait on each other in a cycle.
    Deadlock { cycle: Vec<Instance> },
    /// Every member has been running it for less than the threshold.
    StillRunning { longest_ns: i64 },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HangReport {
    pub verdict: Verdict,
    /// The first stalled operation and its members.
    pub first_stalled: Option<StalledOp>,
    /// Other roots (independent stalls), earliest first.
    pub other_roots: Vec<Instance>,
    /// (blocked instance, on rank, blocked by instance)
    pub blocked: Vec<(Instance, String, Instance)>,
    pub ranks_dumped: usize,
    /// Dumps left out because they were written before an operation that
    /// another dump shows open on one of their communicators was enqueued:
    /// they describe an earlier, finished wait, not this stall (a rank
    /// written once by the timeout, then never stuck in NCCL again). Their
    /// members count as without a dump. (who, seconds older than that enqueue)
    #[serde(default)]
    pub stale: Vec<(String, f64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StalledOp {
    pub instance: Instance,
    pub desc: String,
    pub op: String,
    pub bytes: u64,
    pub nranks: u32,
    pub members: Vec<MemberRow>,
}

/// Members without a dump listed one by one in [`StalledOp::members`]; the
/// rest are named as ranges in the verdict (a dump may declare any `nranks`).
pub const MAX_NO_DUMP_ROWS: u32 = 64;

/// Analyzes dumps of all (or some) ranks. `still_running_below_ns`: a root
/// whose members have all run it for less than this is `StillRunning`.
/// Dumps older than the stall the others describe are set aside first
/// ([`HangReport::stale`]).
pub fn analyze(dumps: &[RankInflight], still_running_below_ns: i64) -> HangReport {
    // Per communicator, the latest enqueue of an operation some dump shows open.
    let mut open_since: BTreeMap<u64, i64> = BTreeMap::new();
    for d in dumps {
        for c in &d.comms {
            if let Some(t) = c.current.iter().chain(&c.pending).filter_map(|o| o.enqueue_ns).max() {
                let e = open_since.entry(c.comm_hash).or_insert(t);
                *e = (*e).max(t);
            }
        }
    }
    let mut fresh = Vec::with_capacity(dumps.len());
    let mut stale = Vec::new();
    for d in dumps {
        let newer = d.comms.iter().filter_map(|c| open_since.get(&c.comm_hash)).copied().max().filter(|&t| t > d.time_ns);
        match newer {
            Some(t) => stale.push((who(d), (t - d.time_ns) as f64 / 1e9)),
            None => fresh.push(d),
        }
    }
    let mut report = analyze_fresh(&fresh, still_running_below_ns);
    report.ranks_dumped = dumps.len();
    report.stale = stale;
    report
}

fn who(d: &RankInflight) -> String {
    d.global_rank.map_or_else(|| format!("{}:{}", d.host, d.pid), |g| format!("r{g}"))
}

/// [`analyze`] over dumps of one moment.
fn analyze_fresh(dumps: &[&RankInflight], still_running_below_ns: i64) -> HangReport {
    // comm hash → member rank → (dump index, view).
    let mut comms: BTreeMap<u64, BTreeMap<u32, (usize, &CommInflight)>> = BTreeMap::new();
    for (i, d) in dumps.iter().enumerate() {
        for c in &d.comms {
            comms.entry(c.comm_hash).or_default().insert(c.rank, (i, c));
        }
    }
    // Edges: on each rank, every pending op is blocked on the rank's running
    // ops; one edge per pending op (the first running op) keeps this linear.
    let mut blocked = Vec::new();
    let mut pending_somewhere: BTreeSet<Instance> = BTreeSet::new();
    let mut running: BTreeMap<Instance, (i64, &InflightOp, &CommInflight)> = BTreeMap::new();
    for d in dumps {
        let running_here: Vec<Instance> = d
            .comms
            .iter()
            .flat_map(|c| c.current.iter().map(move |o| Instance { comm_hash: c.comm_hash, seq: o.seq }))
            .collect();
        for c in &d.comms {
            for o in &c.current {
                let inst = Instance { comm_hash: c.comm_hash, seq: o.seq };
                let start = o.start_ns.unwrap_or(i64::MAX);
                let e = running.entry(inst).or_insert((start, o, c));
                e.0 = e.0.min(start);
            }
            for p in &c.pending {
                let inst = Instance { comm_hash: c.comm_hash, seq: p.seq };
                if let Some(r) = running_here.iter().find(|r| **r != inst) {
                    pending_somewhere.insert(inst);
                    blocked.push((inst, who(d), *r));
                }
            }
        }
    }
    let mut roots: Vec<(i64, Instance)> =
        running.iter().filter(|(i, _)| !pending_somewhere.contains(i)).map(|(i, (t, _, _))| (*t, *i)).collect();
    roots.sort();
    let report = |verdict, first_stalled, other_roots| HangReport {
        verdict,
        first_stalled,
        other_roots,
        blocked: blocked.clone(),
        ranks_dumped: dumps.len(),
        stale: Vec::new(),
    };
    if running.is_empty() {
        return report(Verdict::NotHung, None, Vec::new());
    }
    let Some(&(_, root)) = roots.first() else {
        return report(Verdict::Deadlock { cycle: find_cycle(dumps) }, None, Vec::new());
    };
    let (_, op, view) = running[&root];
    let members_map = &comms[&root.comm_hash];
    let now = |i: usize| dumps[i].time_ns;
    // Rows for the members that dumped, and for the members without a dump;
    // the declared size is not trusted: ranks no dump names are listed one by
    // one up to `MAX_NO_DUMP_ROWS`, then as ranges, so the work follows the
    // dumps, not `nranks`.
    let mut members: Vec<MemberRow> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let mut no_dump_rows = 0u32;
    let mut add_no_dump = |lo: u32, hi: u32, members: &mut Vec<MemberRow>, missing: &mut Vec<String>| {
        // [lo, hi): ranks without a dump.
        let mut r = lo;
        while r < hi && no_dump_rows < MAX_NO_DUMP_ROWS {
            members.push(MemberRow { comm_rank: r, who: "?".into(), state: MemberState::NoDump, progress: None, running_for_ns: None });
            missing.push(format!("comm rank {r} (no dump)"));
            no_dump_rows += 1;
            r += 1;
        }
        if r < hi {
            missing.push(if hi - r == 1 { format!("comm rank {r} (no dump)") } else { format!("comm ranks {r}-{} (no dump)", hi - 1) });
        }
    };
    let mut next = 0u32;
    for (&r, &(i, c)) in members_map.range(..view.nranks) {
        add_no_dump(next, r, &mut members, &mut missing);
        let (state, op) = member_state(c, root.seq);
        let row = MemberRow {
            comm_rank: r,
            who: who(&dumps[i]),
            state,
            progress: op.and_then(|o| Some((o.progress_done?, o.progress_total?))),
            running_for_ns: op.and_then(|o| o.start_ns).filter(|_| state == MemberState::Running).map(|s| now(i) - s),
        };
        if state == MemberState::NotReached {
            missing.push(row.who.clone());
        }
        members.push(row);
        next = r + 1;
    }
    add_no_dump(next, view.nranks, &mut members, &mut missing);
    let longest = members.iter().filter_map(|m| m.running_for_ns).max().unwrap_or(0);
    let verdict = if !missing.is_empty() {
        Verdict::RankDidNotJoin { ranks: missing }
    } else if longest < still_running_below_ns {
        Verdict::StillRunning { longest_ns: longest }
    } else {
        let lowest = members
            .iter()
            .filter(|m| m.state == MemberState::Running)
            .filter_map(|m| m.progress.map(|(d, t)| (d as f64 / t.max(1) as f64, m)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .filter(|(frac, _)| {
                // Only name a rank when progress differs between members.
                members.iter().filter_map(|m| m.progress).any(|(d, t)| (d as f64 / t.max(1) as f64) > *frac)
            })
            .map(|(_, m)| m.who.clone());
        Verdict::StuckInside { lowest_progress: lowest }
    };
    let stalled = StalledOp {
        instance: root,
        desc: view.desc.clone(),
        op: op.op.clone(),
        bytes: op.bytes,
        nranks: view.nranks,
        members,
    };
    report(verdict, Some(stalled), roots[1..].iter().map(|r| r.1).collect())
}

/// State of a member with respect to sequence `seq`, and its record if listed.
fn member_state(c: &CommInflight, seq: u64) -> (MemberState, Option<&InflightOp>) {
    if let Some(o) = c.current.iter().find(|o| o.seq == seq) {
        return (MemberState::Running, Some(o));
    }
    if let Some(o) = c.pending.iter().find(|o| o.seq == seq) {
        return (MemberState::Pending, Some(o));
    }
    if let Some(o) = c.past.iter().find(|o| o.seq == seq) {
        return (MemberState::Done, Some(o));
    }
    let beyond = c.current.iter().chain(&c.pending).chain(&c.past).any(|o| o.seq > seq);
    if beyond {
        (MemberState::Done, None)
    } else {
        (MemberState::NotReached, None)
    }
}

/// A cycle in the "pending instance → running instance on the same rank"
/// graph, found by walking from any running instance.
fn find_cycle(dumps: &[&RankInflight]) -> Vec<Instance> {
    let mut next: BTreeMap<Instance, Instance> = BTreeMap::new();
    for d in dumps {
        let run: Vec<Instance> = d
            .comms
            .iter()
            .flat_map(|c| c.current.iter().map(move |o| Instance { comm_hash: c.comm_hash, seq: o.seq }))
            .collect();
        for c in &d.comms {
            for p in &c.pending {
                if let Some(r) = run.first() {
                    next.entry(Instance { comm_hash: c.comm_hash, seq: p.seq }).or_insert(*r);
                }
            }
        }
    }
    // Each node has one successor: walk from every unvisited node, marking
    // nodes with the walk that reached them; meeting the current walk closes a
    // cycle, meeting an earlier one does not. Linear in the nodes.
    let mut walk_of: BTreeMap<Instance, usize> = BTreeMap::new();
    for (w, &start) in next.keys().enumerate() {
        if walk_of.contains_key(&start) {
            continue;
        }
        let mut path = vec![start];
        walk_of.insert(start, w);
        let mut cur = start;
        while let Some(&n) = next.get(&cur) {
            match walk_of.get(&n) {
                Some(&v) if v == w => {
                    let pos = path.iter().position(|&x| x == n).unwrap_or(0);
                    return path[pos..].to_vec();
                }
                Some(_) => break,
                None => {
                    walk_of.insert(n, w);
                    path.push(n);
                    cur = n;
                }
            }
        }
    }
    Vec::new()
}

#[cfg(test)]
#[path = "hang_tests.rs"]
mod tests;
