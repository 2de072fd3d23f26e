//! Execution of the per-rank programs: simulated clocks, cross-rank waits and the log lines.
//!
//! Owns the discrete-event run of every process's [`Step`] list, the thread ids that write
//! each line, `opCount` bookkeeping (per communicator, hex; one value per p2p group), the lazy
//! connection lines, and the counters that become the ground truth. The op and
//! `Bytes -> Algo` tuning line text is rendered by `sim_text`; the completion of blocking
//! steps (the cross-rank waits below) is `sim_wait`.
//!
//! Time model: each process has its own clock (microseconds since the epoch), its GPU's as
//! much as its CPU's (the CPU is paced by the GPU). Compute steps advance it by their GPU
//! duration. Every collective and batched p2p group waits for the other side, as its kernel
//! does on the GPU: a collective the CPU does not read ends when the last member's kernel,
//! launched at most `NCCL_LAUNCH_US + NCCL_LAUNCH_SPREAD_US` after its op line, has moved
//! its bytes, or when the CPU has written the call's lines, whichever is later (the lines
//! take CPU time under the transfer, not after it); communicator init (all members),
//! collectives whose result the CPU reads (barriers, start time, grad norm; all members) and
//! batched p2p groups (Megatron synchronises after `batch_isend_irecv`; matching Send/Recv)
//! add the CPU's wake-up. So the same collective has close enqueue times on all members,
//! pipeline bubbles show in the clocks, and the trace generator's GPU never runs behind
//! them. Durations are the simulator's: the collective model on the run's cluster for
//! collectives and Send/Recv, the roofline for compute (`crate::timing`; compute is priced
//! in `traffic`).

use crate::config::{LogFormat, NcclVersion, RunConfig};
use crate::init;
use crate::layout::Layout;
use crate::rng::{mix64, SplitMix64};
use crate::sim_text::op_text;
use crate::timing::Timing;
use crate::topo;
use crate::traces::{NCCL_LAUNCH_SPREAD_US, NCCL_LAUNCH_US};
use crate::traffic::{dtype_size, CollCall, P2pCall, Step};
use commlens_core::OpKind;
use std::collections::{BTreeMap, HashMap, HashSet};

pub(crate) use crate::sim_text::tuning_text;

/// Kind of an emitted line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LineKind {
    Info,
    Op,
    Tuning,
    Call,
}

/// One line of a process's log, before the prefix is rendered.
#[derive(Clone, Debug)]
pub(crate) struct Line {
    /// Microseconds since the epoch.
    pub t: u64,
    pub tid: u32,
    pub kind: LineKind,
    /// Message after `NCCL INFO ` (after `NCCL CALL ` for [`LineKind::Call`]).
    pub text: String,
}

/// What a run produced, before rendering.
pub(crate) struct SimOutput {
    pub lines: Vec<Vec<Line>>,
    /// (global rank, comm index, op name) -> (op lines, bytes).
    pub ops: BTreeMap<(usize, usize, &'static str), (usize, u64)>,
    pub tuning: Vec<usize>,
    /// Per rank, what the GPU-trace generator (`crate::traces`) needs: every op line's
    /// structured fields and every compute step, in program order. Recording only.
    pub events: Vec<Vec<SimEvent>>,
}

/// One op line as structured data (the `traces` module turns these into kernels).
#[derive(Clone, Debug)]
pub(crate) struct OpRec {
    /// Index of the op line in the rank's [`SimOutput::lines`].
    pub line: usize,
    pub comm: usize,
    /// Log name (`AllReduce`, `Send`, ...).
    pub name: &'static str,
    pub opcount: u64,
    pub count: u64,
    pub dtype: u8,
    pub redop: u8,
    pub bytes: u64,
    /// Whether the op is part of a Send/Recv group (same `opcount` = same group).
    pub p2p: bool,
    /// The CPU waits for the result.
    pub sync: bool,
    /// Simulated GPU transfer time, microseconds.
    pub dur_us: f64,
    /// Factor of the injected slowdowns already in `dur_us` (1 when none; `crate::slowdown`).
    pub slowed: f64,
}

/// A recorded step; times are the rank's simulated clock in microseconds.
#[derive(Clone, Debug)]
pub(crate) enum SimEvent {
    Op { t_us: f64, rec: OpRec },
    Compute { t_us: f64, dur_us: f64 },
    IterEnd { t_us: f64, dur_us: f64 },
    /// A blocking step (init, sync collective, p2p group) completed.
    Done { t_us: f64 },
}

type PairKey = (usize, usize, usize);

/// How many members issued a blocking step, and the latest time one did: what completion
/// needs, in O(1) per member (a list of times would be scanned by every member).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Issued {
    pub count: usize,
    pub latest: f64,
    /// Members past the step (only counted where the entry is dropped once all are).
    pub completed: usize,
}

impl Default for Issued {
    fn default() -> Self {
        Issued { count: 0, latest: f64::MIN, completed: 0 }
    }
}

impl Issued {
    fn push(&mut self, t: f64) {
        self.count += 1;
        self.latest = self.latest.max(t);
    }
}

pub(crate) enum Pending {
    Init(usize),
    Sync { comm: usize, seq: u64, dur: f64 },
    /// A collective the CPU does not wait for: the rank goes on when its GPU would have
    /// finished it, which needs every member's launch (`t_op`: this rank's launch; `gpu_us`:
    /// launch delay and transfer; `cpu_us`: the call's own CPU time).
    Coll { comm: usize, seq: u64, t_op: f64, gpu_us: f64, cpu_us: f64 },
    P2p(Vec<(PairKey, usize, bool, f64)>),
}

pub(crate) struct RankState {
    pc: usize,
    pub(crate) clock: f64,
    lines: Vec<Line>,
    opcount: HashMap<usize, u64>,
    connected: HashSet<usize>,
    p2p_connected: HashSet<(usize, usize, bool)>,
    pair_idx: HashMap<(PairKey, bool), usize>,
    sync_seq: HashMap<usize, u64>,
    /// Per communicator, the collectives the CPU does not wait for issued so far.
    coll_seq: HashMap<usize, u64>,
    started: bool,
    pending: Option<Pending>,
    pub(crate) rng: SplitMix64,
    events: Vec<SimEvent>,
    /// Whether [`SimEvent`]s are kept (only the trace generator reads them).
    record: bool,
    /// Optimizer steps passed (the iteration of the next operation) and, per communicator,
    /// the operations issued in this iteration: where injected slowdowns apply.
    iter: usize,
    iter_ops: HashMap<usize, u64>,
}

impl RankState {
    fn note(&mut self, e: SimEvent) {
        if self.record {
            self.events.push(e);
        }
    }
}

/// Takes a rank's finished lines, writes them somewhere and empties the list: how
/// [`run`] streams logs out instead of holding every rank's lines (large worlds).
pub(crate) type Flush<'f> = &'f mut dyn FnMut(usize, &mut Vec<Line>);

pub(crate) struct Sim<'a> {
    pub(crate) cfg: &'a RunConfig,
    pub(crate) ver: NcclVersion,
    pub(crate) layout: &'a Layout,
    driver: u32,
    programs: Vec<Vec<Step>>,
    pub(crate) st: Vec<RankState>,
    /// Per communicator: members that issued their init, and the latest issue time.
    pub(crate) init_issue: HashMap<usize, Issued>,
    /// Per (communicator, n-th blocking collective): the same.
    pub(crate) sync_issue: HashMap<(usize, u64), Issued>,
    /// Per (communicator, n-th collective the CPU does not wait for): members that launched
    /// it and the latest launch; dropped once every member is past it.
    pub(crate) coll_issue: HashMap<(usize, u64), Issued>,
    pub(crate) sends: HashMap<PairKey, Vec<f64>>,
    pub(crate) recvs: HashMap<PairKey, Vec<f64>>,
    ops: BTreeMap<(usize, usize, &'static str), (usize, u64)>,
    tuning: Vec<usize>,
    /// Transfer durations (the collective model on the run's cluster).
    pub(crate) timing: Timing,
}

/// Runs all programs to completion. Panics on a deadlock (a bug in `traffic`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    cfg: &RunConfig,
    ver: NcclVersion,
    driver: u32,
    layout: &Layout,
    programs: Vec<Vec<Step>>,
    timing: Timing,
    rng: &mut SplitMix64,
    mut flush: Option<Flush<'_>>,
) -> SimOutput {
    let record = flush.is_none();
    let world = layout.procs.len();
    let base = cfg.start_epoch_s as f64 * 1e6;
    let st = (0..world)
        .map(|r| {
            let mut rng = rng.fork(r as u64);
            let node_delay = (mix64(layout.procs[r].node as u64 ^ cfg.seed) % 40_000) as f64;
            let clock = base + node_delay + rng.range(0, 400_000) as f64;
            RankState {
                pc: 0,
                clock,
                lines: Vec::new(),
                opcount: HashMap::new(),
                connected: HashSet::new(),
                p2p_connected: HashSet::new(),
                pair_idx: HashMap::new(),
                sync_seq: HashMap::new(),
                coll_seq: HashMap::new(),
                started: false,
                pending: None,
                rng,
                events: Vec::new(),
                record,
                iter: 0,
                iter_ops: HashMap::new(),
            }
        })
        .collect();
    let mut sim = Sim {
        cfg,
        ver,
        layout,
        driver,
        programs,
        st,
        init_issue: HashMap::new(),
        sync_issue: HashMap::new(),
        coll_issue: HashMap::new(),
        sends: HashMap::new(),
        recvs: HashMap::new(),
        ops: BTreeMap::new(),
        tuning: vec![0; world],
        timing,
    };
    loop {
        let mut progress = false;
        let mut done = true;
        for r in 0..world {
            while sim.step(r) {
                progress = true;
            }
            if let Some(f) = flush.as_mut() {
                if !sim.st[r].lines.is_empty() {
                    f(r, &mut sim.st[r].lines);
                }
            }
            if sim.st[r].pc < sim.programs[r].len() {
                done = false;
            }
        }
        if done {
            break;
        }
        assert!(
            progress,
            "synthetic program deadlocked (bug in commlens-synth traffic)"
        );
    }
    let (lines, events) = sim.st.into_iter().map(|s| (s.lines, s.events)).unzip();
    SimOutput {
        lines,
        ops: sim.ops,
        tuning: sim.tuning,
        events,
    }
}

impl Sim<'_> {
    pub(crate) fn tid(&self, rank: usize, comm: usize, off: u32) -> u32 {
        let k = self.layout.proc_comms[rank]
            .iter()
            .position(|&c| c == comm)
            .unwrap_or(0) as u32;
        self.layout.procs[rank].pid + 40 + 5 * k + off
    }

    fn emit(&mut self, r: usize, tid: u32, kind: LineKind, text: String) {
        let s = &mut self.st[r];
        s.lines.push(Line {
            t: s.clock.round() as u64,
            tid,
            kind,
            text,
        });
        s.clock += s.rng.range(2, 9) as f64;
    }

    pub(crate) fn emit_spread(&mut self, r: usize, tid: u32, texts: Vec<String>, gap_lo: u64, gap_hi: u64) {
        for t in texts {
            self.emit(r, tid, LineKind::Info, t);
            let g = self.st[r].rng.range(gap_lo, gap_hi) as f64;
            self.st[r].clock += g;
        }
    }

    fn buf(&self, r: usize, tag: u64, bytes: u64) -> u64 {
        let p = &self.layout.procs[r];
        let h = mix64(tag ^ (p.rank as u64) << 32 ^ self.cfg.seed);
        if bytes < 1 << 20 {
            p.dev_base + 0x2_0000_0000 + (h % 0x4000) * 0x200
        } else {
            p.dev_base + (h % 0x1000) * 0x20_0000
        }
    }

    fn step(&mut self, r: usize) -> bool {
        if let Some(p) = self.st[r].pending.take() {
            if self.try_complete(r, &p) {
                // The CPU waited for nothing it reads: no completion to record.
                if !matches!(p, Pending::Coll { .. }) {
                    let t_us = self.st[r].clock;
                    self.st[r].note(SimEvent::Done { t_us });
                }
                self.st[r].pc += 1;
                return true;
            }
            self.st[r].pending = Some(p);
            return false;
        }
        let pc = self.st[r].pc;
        let Some(step) = self.programs[r].get(pc).cloned() else {
            return false;
        };
        match step {
            Step::Init(c) => self.issue_init(r, c),
            Step::Coll(call) => self.issue_coll(r, &call),
            Step::P2p(c, calls) => self.issue_p2p(r, c, &calls),
            Step::Compute(us) => {
                let s = &mut self.st[r];
                let (t_us, dur_us) = (s.clock, s.rng.jitter(us, 0.05));
                s.note(SimEvent::Compute { t_us, dur_us });
                s.clock += dur_us;
                s.pc += 1;
            }
            Step::IterEnd(us) => {
                let s = &mut self.st[r];
                let (t_us, dur_us) = (s.clock, s.rng.jitter(us, 0.1));
                s.note(SimEvent::IterEnd { t_us, dur_us });
                s.clock += dur_us;
                s.iter += 1;
                s.iter_ops.clear();
                s.pc += 1;
            }
            Step::Destroy(c) => {
                let text = init::destroy_line(self.layout, &self.layout.comms[c], r);
                let tid = self.layout.procs[r].pid + 90;
                self.emit(r, tid, LineKind::Info, text);
                let g = self.st[r].rng.range(200, 3000) as f64;
                self.st[r].clock += g;
                self.st[r].pc += 1;
            }
        }
        true
    }

    fn issue_init(&mut self, r: usize, c: usize) {
        let first = !self.st[r].started;
        if first {
            self.st[r].started = true;
            let p = &self.layout.procs[r];
            for t in topo::preamble(self.cfg, &self.ver, p, self.driver) {
                self.emit(r, p.pid, LineKind::Info, t);
            }
            let g = self.st[r].rng.range(400, 3000) as f64;
            self.st[r].clock += g;
        }
        let tid = self.tid(r, c, 0);
        let texts = init::init_start_lines(&self.ver, self.layout, &self.layout.comms[c], r, first);
        self.emit_spread(r, tid, texts, 20, 400);
        let t = self.st[r].clock;
        self.init_issue.entry(c).or_default().push(t);
        self.st[r].pending = Some(Pending::Init(c));
    }

    /// Factor of the injected slowdowns on rank `r`'s next operation on communicator `c`
    /// (counted in its iteration); 1 without slowdowns.
    fn slowdown(&mut self, r: usize, c: usize, p2p: bool) -> f64 {
        if self.cfg.slowdowns.is_empty() {
            return 1.0;
        }
        // Collectives are counted (every member issues the same ones); p2p groups are not.
        let s = &mut self.st[r];
        let k = s.iter_ops.entry(c).or_insert(0);
        *k += u64::from(!p2p);
        crate::slowdown::factor(&self.cfg.slowdowns, self.layout, c, s.iter, k.saturating_sub(1), p2p)
    }

    fn issue_coll(&mut self, r: usize, call: &CollCall) {
        let layout = self.layout;
        let c = call.comm;
        let comm = &layout.comms[c];
        let cr = comm.crank(r);
        let bytes = call.count * dtype_size(call.dtype);
        let oc = *self.st[r].opcount.entry(c).or_insert(0);
        self.st[r].opcount.insert(c, oc + 1);
        let buf = self.buf(r, call.tag, bytes);
        // AllGather/ReduceScatter write a separate (gathered / full-size) buffer.
        let recv = if call.kind.in_place() {
            buf
        } else {
            self.buf(r, call.tag ^ (1 << 20), bytes * comm.nranks() as u64)
        };
        let name = call.kind.name();
        let text = op_text(
            &self.ver,
            name,
            oc,
            Some(buf),
            recv,
            call.count,
            call.dtype,
            call.redop,
            call.root,
            comm.ptrs[cr],
            comm.nranks(),
            comm.streams[cr],
        );
        let main = self.layout.procs[r].pid;
        let (line, t_op) = (self.st[r].lines.len(), self.st[r].clock);
        self.emit(r, main, LineKind::Op, text);
        let e = self.ops.entry((r, c, name)).or_insert((0, 0));
        e.0 += 1;
        e.1 += bytes;
        if self.cfg.call_lines {
            let call_text = format!(
                "nccl{name}({buf:x},{recv:x},{},{},{},{},{:#x},{:#x})",
                call.count, call.dtype, call.redop, call.root, comm.ptrs[cr], comm.streams[cr]
            );
            self.emit(r, main, LineKind::Call, call_text);
        }
        self.connect_ring(r, c);
        let tuning = tuning_text(name, bytes, comm.nranks(), comm.channels);
        self.emit(r, main, LineKind::Tuning, tuning);
        self.tuning[r] += 1;
        let slowed = self.slowdown(r, c, false);
        let dur = self.timing.transfer_us(call.kind.op_kind(), bytes, comm.nranks(), comm.n_nodes) * slowed;
        let rec = OpRec {
            line,
            comm: c,
            name,
            opcount: oc,
            count: call.count,
            dtype: call.dtype,
            redop: call.redop,
            bytes,
            p2p: false,
            sync: call.sync,
            dur_us: dur,
            slowed,
        };
        self.st[r].note(SimEvent::Op { t_us: t_op, rec });
        if call.sync {
            let seq = *self.st[r].sync_seq.entry(c).or_insert(0);
            self.st[r].sync_seq.insert(c, seq + 1);
            let t = self.st[r].clock;
            self.sync_issue.entry((c, seq)).or_default().push(t);
            self.st[r].pending = Some(Pending::Sync { comm: c, seq, dur });
        } else {
            // The GPU runs the transfer while the CPU writes the call's lines and launches it;
            // the next step comes when the later of the two is done: the kernel's end (the
            // last member's launch, at the latest start the trace generator may give it, plus
            // the transfer), or the CPU's call overhead (`sim_wait`).
            let s = &mut self.st[r];
            let gpu_us = NCCL_LAUNCH_US + NCCL_LAUNCH_SPREAD_US + dur;
            let cpu_us = s.clock - t_op + s.rng.range(4, 15) as f64;
            let seq = *s.coll_seq.entry(c).and_modify(|k| *k += 1).or_insert(0);
            self.coll_issue.entry((c, seq)).or_default().push(t_op);
            self.st[r].pending = Some(Pending::Coll { comm: c, seq, t_op, gpu_us, cpu_us });
        }
    }

    /// Runtime connection of the rings at the first collective of a communicator.
    fn connect_ring(&mut self, r: usize, c: usize) {
        if !self.ver.runtime_connect() || !self.st[r].connected.insert(c) {
            return;
        }
        let tid = self.tid(r, c, 2);
        let texts = init::ring_connect_lines(&self.ver, self.layout, &self.layout.comms[c], r);
        self.emit_spread(r, tid, texts, 150, 900);
        let g = self.st[r].rng.range(2_000, 12_000) as f64;
        self.st[r].clock += g;
    }

    fn issue_p2p(&mut self, r: usize, c: usize, calls: &[P2pCall]) {
        let layout = self.layout;
        let comm = &layout.comms[c];
        let cr = comm.crank(r);
        let oc = *self.st[r].opcount.entry(c).or_insert(0);
        self.st[r].opcount.insert(c, oc + 1);
        let slowed = self.slowdown(r, c, true);
        let main = self.layout.procs[r].pid;
        if self.cfg.call_lines {
            self.emit(r, main, LineKind::Call, "ncclGroupStart()".to_string());
        }
        let mut waits = Vec::new();
        let mut new_conns = Vec::new();
        for op in calls {
            let bytes = op.count * dtype_size(op.dtype);
            let buf = self.buf(r, op.tag, bytes);
            let name = if op.send { "Send" } else { "Recv" };
            let text = op_text(
                &self.ver,
                name,
                oc,
                None,
                buf,
                op.count,
                op.dtype,
                0,
                op.peer,
                comm.ptrs[cr],
                comm.nranks(),
                comm.streams[cr],
            );
            let (line, t_op) = (self.st[r].lines.len(), self.st[r].clock);
            self.emit(r, main, LineKind::Op, text);
            if self.cfg.call_lines {
                let t = format!(
                    "nccl{name}(0,{buf:x},{},{},0,{},{:#x},{:#x})",
                    op.count, op.dtype, op.peer, comm.ptrs[cr], comm.streams[cr]
                );
                self.emit(r, main, LineKind::Call, t);
            }
            let e = self.ops.entry((r, c, name)).or_insert((0, 0));
            e.0 += 1;
            e.1 += bytes;
            let key = if op.send {
                (c, cr, op.peer)
            } else {
                (c, op.peer, cr)
            };
            let idx = self.st[r].pair_idx.entry((key, op.send)).or_insert(0);
            let k = *idx;
            *idx += 1;
            let t = self.st[r].clock;
            let list = if op.send {
                &mut self.sends
            } else {
                &mut self.recvs
            };
            list.entry(key).or_default().push(t);
            let peer_g = comm.members[op.peer];
            // One Send between the pair, as the simulator times a matched Send/Recv.
            let nodes = 1 + usize::from(self.layout.procs[peer_g].node != self.layout.procs[r].node);
            let kind = if op.send { OpKind::Send } else { OpKind::Recv };
            let dur = self.timing.transfer_us(kind, bytes, 2, nodes) * slowed;
            waits.push((key, k, op.send, dur));
            let rec = OpRec {
                line,
                comm: c,
                name,
                opcount: oc,
                count: op.count,
                dtype: op.dtype,
                redop: 0,
                bytes,
                p2p: true,
                sync: true,
                dur_us: dur,
                slowed,
            };
            self.st[r].note(SimEvent::Op { t_us: t_op, rec });
            // A Send/Recv to itself (all-to-all) is a local copy: no connection lines.
            if op.peer != cr && self.st[r].p2p_connected.insert((c, op.peer, op.send)) {
                new_conns.push((op.peer, op.send));
            }
        }
        if self.cfg.call_lines {
            self.emit(r, main, LineKind::Call, "ncclGroupEnd()".to_string());
        }
        for (peer, send) in new_conns {
            let tid = self.tid(r, c, 2);
            let texts = init::p2p_connect_lines(self.layout, comm, r, peer, send);
            self.emit_spread(r, tid, texts, 100, 600);
            let g = self.st[r].rng.range(1_000, 6_000) as f64;
            self.st[r].clock += g;
        }
        self.st[r].pending = Some(Pending::P2p(waits));
    }
}
