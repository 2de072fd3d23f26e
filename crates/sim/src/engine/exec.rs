//! The engine's event loop: per-rank stream cursors over flat arenas, the event heap, the
//! collective rendezvous, Send/Recv matching, network completions, and the diagnosis of a
//! stall.
//!
//! Layout (SimAI's lesson: index, don't chase pointers): simulated ranks are numbered `ri`
//! 0.. in rank order; every per-task fact lives in one flat vector at `task_base[ri] + task`,
//! every per-stream cursor at `slot_base[ri] + slot`. What all ranks of a program share (the
//! stream lists, sync barriers, compute times) is computed once per program.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use commlens_core::OpKind;
use commlens_workload::{CollCall, GroupId, GroupKind, GroupSel, P2pCall, Peer, Stream, Task, Work, Workload};
use rustc_hash::FxHashMap;

use super::{ComputeRecord, EngineOptions, EngineStats, OpRecord, RankRun, SimError};
use crate::compute::ComputeCost;
use crate::network::{NetOp, NetOpId, Network};

mod diagnose;

const NONE: u32 = u32::MAX;

/// What every rank running one program shares.
pub(super) struct ProgInfo {
    n_slots: usize,
    /// Per task: its stream's slot.
    slot: Vec<u8>,
    /// Per task: the latest earlier `sync` collective (NONE when there is none). Waiting for
    /// the latest suffices: it waited for the one before.
    barrier: Vec<u32>,
    /// Per slot: its tasks in order.
    streams: Vec<Vec<u32>>,
}

/// Per-program facts, for every program of `w`.
pub(super) fn prog_infos(w: &Workload) -> Result<Vec<ProgInfo>, SimError> {
    let mut out = Vec::with_capacity(w.programs.len());
    for (pi, p) in w.programs.iter().enumerate() {
        let mut kinds: Vec<Stream> = p.tasks.iter().map(|t| t.stream).collect();
        kinds.sort_unstable();
        kinds.dedup();
        if kinds.len() > u8::MAX as usize {
            return Err(SimError::Program(format!("program {pi} uses more than 255 streams")));
        }
        let mut streams = vec![Vec::new(); kinds.len()];
        let (mut slot, mut barrier) = (Vec::with_capacity(p.tasks.len()), Vec::with_capacity(p.tasks.len()));
        let mut last_sync = NONE;
        for (ti, t) in p.tasks.iter().enumerate() {
            let s = kinds.binary_search(&t.stream).expect("stream listed") as u8;
            slot.push(s);
            streams[s as usize].push(ti as u32);
            barrier.push(last_sync);
            if let Some(&d) = t.deps.iter().find(|&&d| d as usize >= ti) {
                return Err(SimError::Program(format!("program {pi} task {ti} depends on later task {d}")));
            }
            if matches!(&t.work, Work::Coll(c) if c.sync) {
                last_sync = ti as u32;
            }
        }
        out.push(ProgInfo { n_slots: kinds.len(), slot, barrier, streams });
    }
    Ok(out)
}

/// A compute step ends (the only events the engine schedules; network completions come from
/// the backend).
struct Ev {
    t: f64,
    seq: u64,
    ri: u32,
    task: u32,
}

impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    /// Reversed: `BinaryHeap` pops the earliest, ties in insertion order.
    fn cmp(&self, o: &Self) -> Ordering {
        o.t.total_cmp(&self.t).then(o.seq.cmp(&self.seq))
    }
}

/// (rank index, task, record index) of one member's part in a network operation.
type Part = (u32, u32, u32);

/// A collective instance waiting for members.
struct Pending {
    need: usize,
    arrivals: Vec<Part>,
}

enum Flight {
    Coll(Vec<Part>),
    Pair([Part; 2]),
}

#[derive(Clone, Copy)]
struct P2pWait {
    part: Part,
    src: u32,
    dst: u32,
    bytes: u64,
}

#[derive(Default)]
struct P2pQueue {
    sends: VecDeque<P2pWait>,
    recvs: VecDeque<P2pWait>,
}

/// A group as the engine needs it, built on first use (huge jobs touch few groups when
/// representatives stand in).
struct GroupInfo {
    /// Expected arrivals: members' representatives, as rank indices, sorted, distinct.
    expect: Vec<u32>,
    /// (global rank, communicator rank), sorted by rank.
    pos: Vec<(u32, u32)>,
}

pub(super) struct Sim<'a> {
    w: &'a Workload,
    compute: &'a dyn ComputeCost,
    net: &'a mut dyn Network,
    progress: Option<&'a dyn Fn(u64, u64)>,
    progs: &'a [ProgInfo],
    /// ri → global rank, and back (NONE for represented ranks).
    ranks: Vec<u32>,
    ri_of: Vec<u32>,
    prog_of: Vec<u32>,
    task_base: Vec<usize>,
    /// Finish time per task; NaN while unfinished.
    fin: Vec<f64>,
    slot_base: Vec<usize>,
    cursor: Vec<u32>,
    started: Vec<bool>,
    /// Compute time per (program, task), NaN until asked (ranks of a program share it).
    compute_us: Vec<Vec<f64>>,
    heap: BinaryHeap<Ev>,
    ev_seq: u64,
    groups: Vec<Option<GroupInfo>>,
    coll_seq: FxHashMap<(u32, u32), u64>,
    pending: FxHashMap<(u32, u64), Pending>,
    p2p: FxHashMap<(GroupKind, u32, u32, u32), P2pQueue>,
    p2p_left: FxHashMap<usize, u32>,
    flights: FxHashMap<NetOpId, Flight>,
    next_id: NetOpId,
    ops: Vec<Vec<OpRecord>>,
    comp: Vec<Vec<ComputeRecord>>,
    iter_end: Vec<Vec<f64>>,
    end_us: Vec<f64>,
    done: u64,
    total: u64,
    events: u64,
    report_every: u64,
}

impl<'a> Sim<'a> {
    pub(super) fn new(
        w: &'a Workload,
        progs: &'a [ProgInfo],
        compute: &'a dyn ComputeCost,
        net: &'a mut dyn Network,
        opts: &EngineOptions<'a>,
    ) -> Result<Sim<'a>, SimError> {
        let n = w.world as usize;
        let bad = SimError::Program;
        if w.rank_program.len() != n || w.membership.len() != n {
            return Err(bad(format!("{n} ranks but {} program assignments and {} membership rows", w.rank_program.len(), w.membership.len())));
        }
        if !w.representative.is_empty() && w.representative.len() != n {
            return Err(bad(format!("{n} ranks but {} representatives", w.representative.len())));
        }
        let mut ri_of = vec![NONE; n];
        let (mut ranks, mut prog_of, mut task_base, mut slot_base) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut n_tasks, mut n_slots) = (0usize, 0usize);
        for r in 0..w.world {
            if w.representative_of(r) != r {
                continue;
            }
            let p = w.rank_program[r as usize];
            let info = progs.get(p as usize).ok_or_else(|| SimError::Program(format!("rank {r} runs program {p} of {}", progs.len())))?;
            ri_of[r as usize] = ranks.len() as u32;
            ranks.push(r);
            prog_of.push(p);
            task_base.push(n_tasks);
            slot_base.push(n_slots);
            n_tasks += info.slot.len();
            n_slots += info.n_slots;
        }
        for (r, &rep) in w.representative.iter().enumerate() {
            if rep as usize >= n || ri_of[rep as usize] == NONE {
                return Err(SimError::Program(format!("rank {r}'s representative {rep} is not its own representative")));
            }
        }
        let nr = ranks.len();
        Ok(Sim {
            w,
            compute,
            net,
            progress: opts.progress,
            progs,
            ranks,
            ri_of,
            prog_of,
            task_base,
            fin: vec![f64::NAN; n_tasks],
            slot_base,
            cursor: vec![0; n_slots],
            started: vec![false; n_slots],
            compute_us: progs.iter().map(|p| vec![f64::NAN; p.slot.len()]).collect(),
            heap: BinaryHeap::new(),
            ev_seq: 0,
            groups: (0..w.groups.len()).map(|_| None).collect(),
            coll_seq: FxHashMap::default(),
            pending: FxHashMap::default(),
            p2p: FxHashMap::default(),
            p2p_left: FxHashMap::default(),
            flights: FxHashMap::default(),
            next_id: 0,
            ops: vec![Vec::new(); nr],
            comp: vec![Vec::new(); nr],
            iter_end: vec![Vec::new(); nr],
            end_us: vec![0.0; nr],
            done: 0,
            total: n_tasks as u64,
            events: 0,
            report_every: (n_tasks as u64 / 200).max(1),
        })
    }

    fn task(&self, ri: u32, t: u32) -> &'a Task {
        let w = self.w;
        &w.programs[self.prog_of[ri as usize] as usize].tasks[t as usize]
    }

    fn is_done(&self, ri: u32, t: u32) -> bool {
        !self.fin[self.task_base[ri as usize] + t as usize].is_nan()
    }

    /// Runs until nothing is left to do.
    pub(super) fn run_loop(&mut self) -> Result<(), SimError> {
        for ri in 0..self.ranks.len() as u32 {
            self.pump(ri, 0.0)?;
        }
        let mut idle_calls = 0u32;
        loop {
            let tn = self.net.next_completion();
            let te = self.heap.peek().map(|e| e.t);
            let net_first = match (tn, te) {
                (None, None) => return Ok(()),
                (Some(a), Some(b)) => a <= b,
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            match (net_first, tn, te) {
                (true, Some(a), _) => {
                    let ids = self.net.advance(a);
                    if ids.is_empty() {
                        idle_calls += 1;
                        if idle_calls > 3 {
                            return Err(SimError::Backend(format!("reports a completion at {a} µs but completes nothing there")));
                        }
                        continue;
                    }
                    idle_calls = 0;
                    for id in ids {
                        self.net_done(id, a)?;
                    }
                }
                (_, _, Some(b)) => {
                    let ev = self.heap.pop().expect("peeked");
                    // Bring the network's clock here first: the step may start operations now.
                    for id in self.net.advance(b) {
                        self.net_done(id, b)?;
                    }
                    self.events += 1;
                    self.complete(ev.ri, ev.task, b);
                    self.pump(ev.ri, b)?;
                }
                _ => unreachable!("one of the two has a time"),
            }
        }
    }

    /// Marks a task done and moves its stream on.
    fn complete(&mut self, ri: u32, t: u32, now: f64) {
        let (r, tu) = (ri as usize, t as usize);
        self.fin[self.task_base[r] + tu] = now;
        let slot = self.progs[self.prog_of[r] as usize].slot[tu] as usize;
        self.cursor[self.slot_base[r] + slot] += 1;
        self.started[self.slot_base[r] + slot] = false;
        if now > self.end_us[r] {
            self.end_us[r] = now;
        }
        self.done += 1;
        if let Some(p) = self.progress {
            if self.done % self.report_every == 0 || self.done == self.total {
                p(self.done, self.total);
            }
        }
    }

    /// Starts every stream head of rank `ri` that is ready, until none is (instant tasks
    /// complete on the spot and may free the next).
    fn pump(&mut self, ri: u32, now: f64) -> Result<(), SimError> {
        let r = ri as usize;
        let progs = self.progs;
        let info = &progs[self.prog_of[r] as usize];
        loop {
            let mut progressed = false;
            for s in 0..info.n_slots {
                let i = self.slot_base[r] + s;
                let Some(&t) = info.streams[s].get(self.cursor[i] as usize) else { continue };
                if self.started[i] || !self.ready(ri, info, t) {
                    continue;
                }
                self.started[i] = true;
                if self.start(ri, t, now)? {
                    self.complete(ri, t, now);
                    progressed = true;
                }
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    fn ready(&self, ri: u32, info: &ProgInfo, t: u32) -> bool {
        let b = info.barrier[t as usize];
        (b == NONE || self.is_done(ri, b)) && self.task(ri, t).deps.iter().all(|&d| self.is_done(ri, d))
    }

    /// Starts task `t`; true when it completed at once.
    fn start(&mut self, ri: u32, t: u32, now: f64) -> Result<bool, SimError> {
        let task = self.task(ri, t);
        match &task.work {
            Work::Compute(c) => {
                let p = self.prog_of[ri as usize] as usize;
                let mut d = self.compute_us[p][t as usize];
                if d.is_nan() {
                    d = self.compute.time_us(c);
                    if !(d.is_finite() && d >= 0.0) {
                        return Err(SimError::Workload { rank: self.ranks[ri as usize], task: t, msg: format!("compute step '{}' takes {d} µs", c.name) });
                    }
                    self.compute_us[p][t as usize] = d;
                }
                self.comp[ri as usize].push(ComputeRecord { task: t, start_us: now, end_us: now + d });
                self.heap.push(Ev { t: now + d, seq: self.ev_seq, ri, task: t });
                self.ev_seq += 1;
                Ok(false)
            }
            Work::Coll(call) => {
                self.arrive_coll(ri, t, task, call, now)?;
                Ok(false)
            }
            Work::P2p { group, calls } => self.arrive_p2p(ri, t, task, *group, calls, now),
            Work::IterationEnd { .. } => {
                self.iter_end[ri as usize].push(now);
                Ok(true)
            }
        }
    }

    fn resolve(&mut self, ri: u32, t: u32, sel: GroupSel) -> Result<GroupId, SimError> {
        let rank = self.ranks[ri as usize];
        let g = self.w.group_of(rank, sel).ok_or_else(|| SimError::Workload {
            rank,
            task: t,
            msg: format!("rank is in no {} group (tag {})", sel.kind.label(), sel.tag),
        })?;
        if self.groups[g.0 as usize].is_none() {
            let grp = self.w.group(g);
            let mut expect: Vec<u32> = grp.ranks.iter().map(|&m| self.ri_of[self.w.representative_of(m) as usize]).collect();
            expect.sort_unstable();
            expect.dedup();
            let mut pos: Vec<(u32, u32)> = grp.ranks.iter().enumerate().map(|(i, &m)| (m, i as u32)).collect();
            pos.sort_unstable();
            self.groups[g.0 as usize] = Some(GroupInfo { expect, pos });
        }
        Ok(g)
    }

    fn record(&mut self, ri: u32, rec: OpRecord) -> u32 {
        let v = &mut self.ops[ri as usize];
        v.push(rec);
        v.len() as u32 - 1
    }

    fn arrive_coll(&mut self, ri: u32, t: u32, task: &Task, call: &CollCall, now: f64) -> Result<(), SimError> {
        let g = self.resolve(ri, t, call.group)?;
        let seq = self.coll_seq.entry((ri, g.0)).or_insert(0);
        let key = (g.0, *seq);
        *seq += 1;
        let rec = self.record(ri, OpRecord {
            task: t,
            call: 0,
            kind: call.kind,
            group: g,
            group_kind: call.group.kind,
            bytes: call.bytes(),
            count: call.count,
            dtype: call.dtype,
            redop: call.redop,
            root: call.root,
            peer: None,
            stream: task.stream,
            phase: task.phase,
            arrive_us: now,
            start_us: f64::NAN,
            end_us: f64::NAN,
            net_op: NetOpId::MAX,
        });
        let need = self.groups[g.0 as usize].as_ref().expect("resolved").expect.len();
        let p = self.pending.entry(key).or_insert_with(|| Pending { need, arrivals: Vec::with_capacity(need) });
        p.arrivals.push((ri, t, rec));
        if p.arrivals.len() < p.need {
            return Ok(());
        }
        let p = self.pending.remove(&key).expect("present");
        let id = self.launch(&p.arrivals, now);
        let w = self.w;
        let grp = w.group(g);
        self.net.start(now, NetOp { id, kind: call.kind, bytes: call.bytes(), ranks: grp.ranks.clone(), group_kind: grp.kind, root: call.root });
        self.flights.insert(id, Flight::Coll(p.arrivals));
        Ok(())
    }

    /// Numbers a network operation and stamps its start on the members' records.
    fn launch(&mut self, parts: &[Part], now: f64) -> NetOpId {
        let id = self.next_id;
        self.next_id += 1;
        for &(ri, _, rec) in parts {
            let o = &mut self.ops[ri as usize][rec as usize];
            o.start_us = now;
            o.net_op = id;
        }
        id
    }

    /// Posts every Send/Recv of a grouped call; true when it has none (done at once).
    fn arrive_p2p(&mut self, ri: u32, t: u32, task: &Task, sel: GroupSel, calls: &[P2pCall], now: f64) -> Result<bool, SimError> {
        if calls.is_empty() {
            return Ok(true);
        }
        let g = self.resolve(ri, t, sel)?;
        let rank = self.ranks[ri as usize];
        let w = self.w;
        let grp = w.group(g);
        let info = self.groups[g.0 as usize].as_ref().expect("resolved");
        let me = info.pos[info.pos.binary_search_by_key(&rank, |p| p.0).expect("member of its group")].1;
        let n = grp.ranks.len() as u32;
        self.p2p_left.insert(self.task_base[ri as usize] + t as usize, calls.len() as u32);
        for (ci, c) in calls.iter().enumerate() {
            let peer = match c.peer {
                // The group is a ring (Megatron's interleaved schedule sends from the last stage
                // to the first stage's next model chunk); a 1-member group has no neighbour.
                Peer::Next => Some((me + 1) % n).filter(|_| n > 1),
                Peer::Prev => Some((me + n - 1) % n).filter(|_| n > 1),
                Peer::Rank(p) => Some(p).filter(|&p| p < n),
            };
            let Some(pc) = peer else {
                return Err(SimError::Peer {
                    rank,
                    task: t,
                    msg: format!(
                        "{} to {:?} of communicator rank {me} in {}-rank group {} ({}): no such peer",
                        if c.send { "Send" } else { "Recv" },
                        c.peer,
                        n,
                        grp.name,
                        grp.kind.label()
                    ),
                });
            };
            let other = grp.ranks[pc as usize];
            let (src, dst) = if c.send { (rank, other) } else { (other, rank) };
            let rec = self.record(ri, OpRecord {
                task: t,
                call: ci as u32,
                kind: if c.send { OpKind::Send } else { OpKind::Recv },
                group: g,
                group_kind: sel.kind,
                bytes: c.bytes(),
                count: c.count,
                dtype: c.dtype,
                redop: None,
                root: 0,
                peer: Some(pc),
                stream: task.stream,
                phase: task.phase,
                arrive_us: now,
                start_us: f64::NAN,
                end_us: f64::NAN,
                net_op: NetOpId::MAX,
            });
            let wait = P2pWait { part: (ri, t, rec), src, dst, bytes: c.bytes() };
            let key = (sel.kind, sel.tag, w.representative_of(src), w.representative_of(dst));
            let q = self.p2p.entry(key).or_default();
            let matched = if c.send { q.recvs.pop_front() } else { q.sends.pop_front() };
            match matched {
                None if c.send => q.sends.push_back(wait),
                None => q.recvs.push_back(wait),
                Some(o) => {
                    let (s, r) = if c.send { (wait, o) } else { (o, wait) };
                    let id = self.launch(&[s.part, r.part], now);
                    self.net.start(now, NetOp { id, kind: OpKind::Send, bytes: s.bytes, ranks: vec![s.src, s.dst], group_kind: sel.kind, root: 0 });
                    self.flights.insert(id, Flight::Pair([s.part, r.part]));
                }
            }
        }
        Ok(false)
    }

    fn net_done(&mut self, id: NetOpId, now: f64) -> Result<(), SimError> {
        self.events += 1;
        match self.flights.remove(&id) {
            None => Err(SimError::Backend(format!("completed operation {id}, which is not in flight"))),
            Some(Flight::Coll(parts)) => {
                for &(ri, t, rec) in &parts {
                    self.ops[ri as usize][rec as usize].end_us = now;
                    self.complete(ri, t, now);
                }
                for &(ri, _, _) in &parts {
                    self.pump(ri, now)?;
                }
                Ok(())
            }
            Some(Flight::Pair(parts)) => {
                for (ri, t, rec) in parts {
                    self.ops[ri as usize][rec as usize].end_us = now;
                    let k = self.task_base[ri as usize] + t as usize;
                    let left = self.p2p_left.get_mut(&k).expect("grouped call in flight");
                    *left -= 1;
                    if *left == 0 {
                        self.p2p_left.remove(&k);
                        self.complete(ri, t, now);
                        self.pump(ri, now)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// The per-rank results, or the diagnosis when tasks remain.
    pub(super) fn finish(mut self) -> Result<(Vec<RankRun>, EngineStats), SimError> {
        if self.done < self.total {
            return Err(self.diagnose());
        }
        let mut represents = vec![0u32; self.ranks.len()];
        for r in 0..self.w.world {
            represents[self.ri_of[self.w.representative_of(r) as usize] as usize] += 1;
        }
        let stats = EngineStats { tasks: self.total, events: self.events, net_ops: self.next_id };
        let mut out = Vec::with_capacity(self.ranks.len());
        for (ri, &rank) in self.ranks.iter().enumerate() {
            let mut ops = std::mem::take(&mut self.ops[ri]);
            ops.sort_by_key(|o| (o.task, o.call));
            let mut compute = std::mem::take(&mut self.comp[ri]);
            compute.sort_by_key(|c| c.task);
            out.push(RankRun {
                rank,
                represents: represents[ri],
                ops,
                compute,
                iteration_end_us: std::mem::take(&mut self.iter_end[ri]),
                end_us: self.end_us[ri],
                breakdown: Default::default(),
            });
        }
        Ok((out, stats))
    }
}
