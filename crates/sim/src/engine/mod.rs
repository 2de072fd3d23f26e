//! The simulator's engine: a [`Workload`] executed as discrete events over its ranks.
//!
//! Owns [`run`] and what it returns ([`Run`]: per-rank operation records, compute spans,
//! iteration ends, and the SimAI-style [`Summary`]), its options and its errors. The event loop
//! lives in `exec`, the time breakdown (compute, exposed communication per parallelism,
//! bubble) in `summary`.
//!
//! Semantics, in short:
//! * Only ranks that are their own representative are simulated; a represented rank "arrives
//!   with" its representative, so a group's expected arrivals are its members mapped through
//!   [`Workload::representative_of`], deduplicated. The network still sees the whole group.
//! * Per rank and stream, tasks run in program order; a task also waits for its `deps` and for
//!   the latest earlier `sync` collective of its rank (the CPU blocked on it).
//! * A collective is handed to the network once, at the latest arrival, when every expected
//!   member has arrived; the i-th collective a rank issues on a group matches the i-th of the
//!   other members. Send/Recv match per (group role, source, destination) in FIFO order; each
//!   matched pair is one network operation; a grouped call completes with its last pair.
//! * `Peer::Next`/`Peer::Prev` are the neighbours in the group's rank order, wrapping around
//!   (a ring, as Megatron's interleaved pipeline uses it: the last stage sends to the first);
//!   a one-member group has none ([`SimError::Peer`]).
//! * Nothing can progress but tasks remain → [`SimError::Stall`] naming the first stuck rank,
//!   task, and what it waits for.
//!
//! Deterministic: events are ordered by (time, insertion number); maps are only looked up,
//! never iterated into results (diagnosis sorts what it reads).

mod exec;
mod summary;

use commlens_core::{DataType, OpKind, RedOp};
use commlens_workload::{GroupId, GroupKind, Phase, Stream, Workload};
use serde::Serialize;

use crate::compute::ComputeCost;
use crate::network::{LinkUsage, NetOpId, Network};
use commlens_core::timing::Phase as Timed;
use rayon::prelude::*;

pub use summary::{breakdown, Breakdown, KindTime};

/// How to run.
#[derive(Clone, Copy)]
pub struct EngineOptions<'a> {
    /// Keep per-operation records and compute spans in the [`Run`] (needed for the table and
    /// traces). Without it only the per-rank breakdown and the summary are kept, which bounds
    /// the result of a long run.
    pub record: bool,
    /// Called now and then with (tasks done, tasks in all simulated programs).
    pub progress: Option<&'a dyn Fn(u64, u64)>,
}

impl Default for EngineOptions<'_> {
    fn default() -> Self {
        EngineOptions { record: true, progress: None }
    }
}

/// Why a run could not finish.
#[derive(Debug, Clone, PartialEq)]
pub enum SimError {
    /// The workload's tables disagree (sizes of the per-rank tables, a program whose task
    /// depends on a later one, a representative that is not simulated).
    Program(String),
    /// The workload is inconsistent (a task names a group its rank is not in, a program index
    /// out of range, a compute step with no finite time).
    Workload { rank: u32, task: u32, msg: String },
    /// A Send or Recv names a peer that does not exist (Prev of the first member, Next of the
    /// last, a communicator rank past the group's size).
    Peer { rank: u32, task: u32, msg: String },
    /// Nothing can progress and tasks remain: the first stuck rank, its earliest unfinished
    /// task, and what that task waits for; `stuck_ranks` counts the ranks left unfinished.
    Stall { rank: u32, task: u32, waits_for: String, stuck_ranks: usize },
    /// The network backend reported a completion time but completed nothing there.
    Backend(String),
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::Program(m) => write!(f, "workload: {m}"),
            SimError::Workload { rank, task, msg } => write!(f, "rank {rank} task {task}: {msg}"),
            SimError::Peer { rank, task, msg } => write!(f, "rank {rank} task {task}: {msg}"),
            SimError::Stall { rank, task, waits_for, stuck_ranks } => write!(
                f,
                "deadlock: rank {rank} is stuck at task {task}, waiting for {waits_for} ({stuck_ranks} rank(s) unfinished)"
            ),
            SimError::Backend(m) => write!(f, "network backend: {m}"),
        }
    }
}

impl std::error::Error for SimError {}

/// One communication call on one simulated rank (a collective, or one Send/Recv of a grouped
/// call).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpRecord {
    /// Index of the task in the rank's program.
    pub task: u32,
    /// Position of the call inside its grouped Send/Recv (0 for collectives).
    pub call: u32,
    pub kind: OpKind,
    /// The group as resolved for this rank.
    pub group: GroupId,
    pub group_kind: GroupKind,
    /// NCCL's `count × sizeof(dtype)`.
    pub bytes: u64,
    pub count: u64,
    pub dtype: DataType,
    pub redop: Option<RedOp>,
    pub root: u32,
    /// Communicator rank of the peer of a Send/Recv.
    pub peer: Option<u32>,
    pub stream: Stream,
    pub phase: Phase,
    /// When this rank reached the call.
    pub arrive_us: f64,
    /// When the network started it (the last member's arrival, or the match of a pair).
    pub start_us: f64,
    /// When the network completed it.
    pub end_us: f64,
    /// The network operation that carried it (shared by every member).
    pub net_op: NetOpId,
}

/// One compute step on one simulated rank; its name is the task's in the program.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ComputeRecord {
    pub task: u32,
    pub start_us: f64,
    pub end_us: f64,
}

/// What one simulated rank did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankRun {
    pub rank: u32,
    /// How many ranks share this timing (itself included).
    pub represents: u32,
    /// Communication calls in program order (task, then call).
    pub ops: Vec<OpRecord>,
    /// Compute steps in program order.
    pub compute: Vec<ComputeRecord>,
    /// Time of each `IterationEnd`, in program order.
    pub iteration_end_us: Vec<f64>,
    /// When the rank's last task finished.
    pub end_us: f64,
    /// Time split over `[0, job end]`.
    pub breakdown: Breakdown,
}

/// The job as SimAI summarises it, taken on the rank that finishes last.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub world: u32,
    pub ranks_simulated: u32,
    /// End of the last task of any rank, µs.
    pub total_us: f64,
    /// Iterations seen (`IterationEnd` markers; 1 when the programs have none).
    pub iterations: u32,
    /// Per iteration: the latest end over ranks minus the previous one.
    pub iteration_us: Vec<f64>,
    pub mean_iteration_us: f64,
    /// The rank that finishes last (lowest on ties); the figures below are its.
    pub slowest_rank: u32,
    pub compute_us: f64,
    /// Communication time (union over kinds), overlapped or not.
    pub comm_us: f64,
    /// Communication not hidden under compute, per parallelism (SimAI's DP, DP_EP, TP, EP, PP
    /// always; other kinds when present).
    pub exposed_us: Vec<KindTime>,
    pub exposed_comm_us: f64,
    /// Neither computing nor communicating (waiting for peers, pipeline bubbles).
    pub bubble_us: f64,
}

impl Summary {
    /// Exposed time of one parallelism (0 when absent).
    pub fn exposed(&self, kind: GroupKind) -> f64 {
        self.exposed_us.iter().find(|k| k.kind == kind).map_or(0.0, |k| k.us)
    }
}

/// Counters of the run itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EngineStats {
    pub tasks: u64,
    pub events: u64,
    pub net_ops: u64,
}

/// The result of [`run`]: every simulated rank in ascending rank order, the summary and the
/// network's link usage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    pub ranks: Vec<RankRun>,
    pub summary: Summary,
    pub link_usage: Vec<LinkUsage>,
    pub stats: EngineStats,
}

impl Run {
    /// The record of simulated rank `rank`.
    pub fn rank(&self, rank: u32) -> Option<&RankRun> {
        self.ranks.binary_search_by_key(&rank, |r| r.rank).ok().map(|i| &self.ranks[i])
    }
}

/// Runs `w` on `net`, compute steps timed by `compute`.
pub fn run(w: &Workload, compute: &dyn ComputeCost, net: &mut dyn Network, opts: &EngineOptions) -> Result<Run, SimError> {
    let ph = Timed::start("engine setup");
    let progs = exec::prog_infos(w)?;
    let mut sim = exec::Sim::new(w, &progs, compute, &mut *net, opts)?;
    ph.end();
    let ph = Timed::start("engine loop");
    sim.run_loop()?;
    ph.end();
    let ph = Timed::start("engine results");
    let (mut ranks, stats) = sim.finish()?;
    let link_usage = net.link_usage();
    ph.end();
    let ph = Timed::start("breakdown and summary");
    let total = ranks.iter().map(|r| r.end_us).fold(0.0, f64::max);
    // Each rank's sweep reads only its own records: one task per rank.
    ranks.par_iter_mut().for_each(|r| r.breakdown = breakdown(&r.compute, &r.ops, total));
    let summary = summary::summarize(w, &ranks, total);
    ph.end();
    if !opts.record {
        for r in &mut ranks {
            r.ops = Vec::new();
            r.compute = Vec::new();
        }
    }
    Ok(Run { ranks, summary, link_usage, stats })
}
