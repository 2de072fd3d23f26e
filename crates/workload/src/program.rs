//! The workload model: what every rank of a training job runs, in order.
//!
//! Owns the types every front end produces and every consumer reads: [`Workload`] (the job:
//! ranks, communication groups, one [`Program`] per distinct rank behaviour) and [`Task`] (one
//! compute step, collective, grouped Send/Recv, or wait). The simulator executes it,
//! `commlens-synth` renders it as NCCL log lines, and the volume model sums its bytes, so the
//! three can never disagree about what a configuration communicates.
//!
//! Scale: a 100,000-rank job does not hold 100,000 programs. Ranks that behave alike (the data
//! replicas of a pipeline stage, every rank of an AICB file) share one program; a task names
//! its group by *role* ([`GroupSel`]), and [`Workload::group_of`] resolves the role for a rank.
//! Programs are therefore rank-independent, and memory grows with ranks only through the
//! membership table (a few `u32` per rank).
//!
//! Streams: each task runs on a stream of its rank ([`Stream`]). Tasks on one stream run in
//! order; a task may also wait for earlier tasks of other streams (`deps`, indices into the same
//! program). Compute and communication overlap exactly where streams allow it.

use commlens_core::{DataType, OpKind, RedOp};
use rayon::slice::ParallelSliceMut;
use serde::{Deserialize, Serialize};

/// What a communication group is for (the parallelism it serves).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum GroupKind {
    /// Tensor parallel (Megatron's model-parallel group of one stage).
    Tp,
    /// Data parallel (gradient reduction of non-expert weights).
    Dp,
    /// Pipeline parallel (adjacent stages; Send/Recv).
    Pp,
    /// Expert parallel (token all-to-all).
    Ep,
    /// Expert data parallel (gradient reduction of expert weights; AICB's `_DP_EP`).
    DpEp,
    /// Context parallel.
    Cp,
    /// Tensor × pipeline (Megatron's model-parallel group: grad norm).
    Mp,
    /// First and last pipeline stage (tied word-embedding gradient).
    Embedding,
    /// Every rank.
    World,
    /// A group a trace named that fits no role above (Chakra `pg_name`, …).
    Other,
    /// AxoNN's X dimension of the tensor grid (`G_x`; output AllReduce of transposed layers,
    /// input-gradient AllReduce of the others).
    TensorX,
    /// AxoNN's Y dimension (`G_y`; output AllReduce of the non-transposed layers).
    TensorY,
    /// AxoNN's Z dimension (`G_z`; weight AllGather and gradient ReduceScatter: the FSDP
    /// dimension of the grid).
    TensorZ,
    /// Replicas of a hybrid-sharded model (FSDP `HYBRID_SHARD`): the AllReduce of each shard's
    /// gradient across the shard groups.
    DpReplica,
}

impl GroupKind {
    pub const ALL: [GroupKind; 14] = [
        GroupKind::Tp,
        GroupKind::Dp,
        GroupKind::Pp,
        GroupKind::Ep,
        GroupKind::DpEp,
        GroupKind::Cp,
        GroupKind::Mp,
        GroupKind::Embedding,
        GroupKind::World,
        GroupKind::Other,
        GroupKind::TensorX,
        GroupKind::TensorY,
        GroupKind::TensorZ,
        GroupKind::DpReplica,
    ];

    /// Short label as reports print it (`TP`, `DP`, `DP_EP`, …; SimAI's names where it has one).
    pub fn label(self) -> &'static str {
        match self {
            GroupKind::Tp => "TP",
            GroupKind::Dp => "DP",
            GroupKind::Pp => "PP",
            GroupKind::Ep => "EP",
            GroupKind::DpEp => "DP_EP",
            GroupKind::Cp => "CP",
            GroupKind::Mp => "MP",
            GroupKind::Embedding => "EMB",
            GroupKind::World => "WORLD",
            GroupKind::Other => "OTHER",
            GroupKind::TensorX => "TP_X",
            GroupKind::TensorY => "TP_Y",
            GroupKind::TensorZ => "TP_Z",
            GroupKind::DpReplica => "DP_REP",
        }
    }
}

/// Index into [`Workload::groups`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupId(pub u32);

/// One communicator: its role and its members' global ranks in communicator-rank order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub kind: GroupKind,
    /// Distinguishes several groups of one kind a rank belongs to (Chakra process groups);
    /// 0 for the usual one-per-kind case.
    pub tag: u32,
    /// A name for people (`tp0`, `pg:3`, …).
    pub name: String,
    pub ranks: Vec<u32>,
}

/// How a task names its group: by role, resolved per rank ([`Workload::group_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GroupSel {
    pub kind: GroupKind,
    pub tag: u32,
}

impl GroupSel {
    pub const fn of(kind: GroupKind) -> GroupSel {
        GroupSel { kind, tag: 0 }
    }
}

/// Which queue of its rank a task runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Stream {
    /// The default stream: compute, and communication the framework issues in line
    /// (Megatron's TP collectives, PP Send/Recv).
    Compute,
    /// A communication stream (overlapped gradient reduction, prefetch); several by number.
    Comm(u8),
}

/// What kind of work a compute step is, for the roofline (compute- or memory-bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ComputeKind {
    Gemm,
    Attention,
    Elementwise,
    Embedding,
    Optimizer,
    Other,
}

/// One compute step (a submodule or kernel).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compute {
    /// Name as the source gave it (`attention_layer fwd`, a kernel name, …); looked up in a
    /// measured kernel table before the roofline is used.
    pub name: String,
    pub kind: ComputeKind,
    /// Floating-point operations (0 when unknown).
    pub flops: f64,
    /// Bytes moved to and from device memory (0 when unknown).
    pub mem_bytes: f64,
    /// Time the source stated (AICB ticks, a trace's duration), microseconds. When present it
    /// wins over the roofline unless the user asks for another GPU.
    pub time_us: Option<f64>,
}

/// A collective call as the framework makes it (NCCL's arguments).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollCall {
    pub group: GroupSel,
    pub kind: OpKind,
    /// Element count as passed to NCCL (per-rank send count for AllGather, per-rank receive
    /// count for ReduceScatter, whole buffer for AllReduce/Broadcast/AllToAll).
    pub count: u64,
    pub dtype: DataType,
    pub redop: Option<RedOp>,
    pub root: u32,
    /// The CPU waits for the result (`.item()`, barrier): the rank's streams all wait.
    pub sync: bool,
    /// Buffer identity for generators (same tag = same allocation); 0 when unknown.
    pub tag: u64,
}

impl CollCall {
    /// The gradient-norm AllReduce of one fp32 on `group` that the CPU waits for (gradient
    /// clipping before the optimizer step), as Megatron and DeepSpeed issue it.
    pub fn grad_norm(group: GroupKind) -> CollCall {
        CollCall {
            group: GroupSel::of(group),
            kind: OpKind::AllReduce,
            count: 1,
            dtype: DataType::Float32,
            redop: Some(RedOp::Sum),
            root: 0,
            sync: true,
            tag: 0x800,
        }
    }

    /// `count × sizeof(dtype)`: the bytes NCCL logs for the call (0 for unknown types).
    pub fn bytes(&self) -> u64 {
        self.dtype.size_bytes().map_or(0, |s| self.count.saturating_mul(s))
    }
}

/// The peer of a Send or Recv.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Peer {
    /// Next member of the group (next pipeline stage), wrapping from the last to the first.
    Next,
    /// Previous member of the group, wrapping from the first to the last.
    Prev,
    /// A fixed communicator rank.
    Rank(u32),
}

/// One Send or Recv of a grouped call (`ncclGroupStart … ncclGroupEnd`, `batch_isend_irecv`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct P2pCall {
    pub send: bool,
    pub peer: Peer,
    pub count: u64,
    pub dtype: DataType,
    pub tag: u64,
}

impl P2pCall {
    pub fn bytes(&self) -> u64 {
        self.dtype.size_bytes().map_or(0, |s| self.count.saturating_mul(s))
    }
}

/// What one task does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Work {
    Compute(Compute),
    Coll(CollCall),
    /// A grouped Send/Recv on one group; completes when every matching peer call has.
    P2p { group: GroupSel, calls: Vec<P2pCall> },
    /// Marks the end of an iteration (`iter` counts from 0); takes no time.
    IterationEnd { iter: u32 },
}

/// One step of a program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub stream: Stream,
    /// Earlier tasks of this program (indices) that must finish first, besides the previous
    /// task of the same stream.
    pub deps: Vec<u32>,
    /// What the step is for (`fwd`, `wg`, `ig`, layer name): the simulator's summary groups by
    /// it; empty when unknown.
    pub phase: Phase,
    pub work: Work,
}

/// Which part of a training step a task belongs to (SimAI's split of a layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Phase {
    Forward,
    /// Backward, input gradient.
    InputGrad,
    /// Backward, weight gradient (and its reduction).
    WeightGrad,
    /// Optimizer step and what follows it.
    Optimizer,
    Other,
}

/// The per-rank program shared by every rank that behaves alike.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub tasks: Vec<Task>,
}

/// Where a workload came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Origin {
    /// Megatron-LM (or DeepSpeed) layout from a `model.conf`.
    ModelConf,
    /// An AICB / SimAI workload text file.
    Aicb,
    /// Chakra execution traces (protobuf `.et` or PyTorch ET JSON), one per rank.
    Chakra,
    /// A measured run replayed.
    Measured,
}

/// A training job as the simulator and generators see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub name: String,
    pub origin: Origin,
    /// Number of ranks (GPUs).
    pub world: u32,
    /// GPUs per node the workload assumes (placement of consecutive ranks), when it says.
    pub gpus_per_node: Option<u32>,
    /// Iterations the programs contain (each ends with a [`Work::IterationEnd`]).
    pub iterations: u32,
    pub groups: Vec<Group>,
    pub programs: Vec<Program>,
    /// `rank_program[r]`: index into `programs` of rank `r`'s program.
    pub rank_program: Vec<u32>,
    /// `membership[r]`: the groups rank `r` belongs to (its role → group table).
    pub membership: Vec<Vec<GroupId>>,
    /// `representative[r]`: a rank whose timing rank `r` shares by construction (same
    /// program, symmetric groups: the data replicas of a pipeline stage, every rank of an AICB
    /// file). The engine simulates only ranks that are their own representative and lets the
    /// others arrive with theirs. Empty: every rank is simulated.
    pub representative: Vec<u32>,
    /// Notes a front end made (filled header keys, skipped records), for people.
    pub notes: Vec<String>,
}

impl Workload {
    /// The program rank `r` runs.
    pub fn program_of(&self, rank: u32) -> &Program {
        &self.programs[self.rank_program[rank as usize] as usize]
    }

    /// The group rank `r` uses for role `sel`, if it belongs to one.
    pub fn group_of(&self, rank: u32, sel: GroupSel) -> Option<GroupId> {
        self.membership[rank as usize]
            .iter()
            .copied()
            .find(|g| {
                let grp = &self.groups[g.0 as usize];
                grp.kind == sel.kind && grp.tag == sel.tag
            })
    }

    pub fn group(&self, g: GroupId) -> &Group {
        &self.groups[g.0 as usize]
    }

    /// Position of `rank` in group `g` (its communicator rank).
    pub fn comm_rank(&self, g: GroupId, rank: u32) -> Option<u32> {
        self.group(g).ranks.iter().position(|&r| r == rank).map(|p| p as u32)
    }

    /// The rank whose timing `rank` shares (itself when the workload declares no symmetry).
    pub fn representative_of(&self, rank: u32) -> u32 {
        self.representative.get(rank as usize).copied().unwrap_or(rank)
    }

    /// Checks the invariants every consumer relies on; the message says which one broke.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.world as usize;
        if !self.representative.is_empty() {
            if self.representative.len() != n {
                return Err(format!("{} ranks but {} representatives", n, self.representative.len()));
            }
            for (r, &rep) in self.representative.iter().enumerate() {
                if rep as usize >= n || self.representative[rep as usize] != rep {
                    return Err(format!("rank {r}'s representative {rep} is not its own representative"));
                }
                if self.rank_program[r] != self.rank_program[rep as usize] {
                    return Err(format!("rank {r} and its representative {rep} run different programs"));
                }
            }
        }
        if self.rank_program.len() != n || self.membership.len() != n {
            return Err(format!(
                "{} ranks but {} program assignments and {} membership rows",
                n,
                self.rank_program.len(),
                self.membership.len()
            ));
        }
        if let Some(r) = self.rank_program.iter().position(|&p| p as usize >= self.programs.len()) {
            return Err(format!("rank {r} runs program {} of {}", self.rank_program[r], self.programs.len()));
        }
        for (gi, g) in self.groups.iter().enumerate() {
            if let Some(&r) = g.ranks.iter().find(|&&r| r >= self.world) {
                return Err(format!("group {} ({}) holds rank {r} of a {}-rank job", gi, g.name, self.world));
            }
        }
        // Every (rank, group) pair the groups hold, sorted: membership is checked by binary
        // search, so a 100,000-rank world group costs n log n, not n².
        let mut held: Vec<(u32, u32)> = Vec::with_capacity(self.groups.iter().map(|g| g.ranks.len()).sum());
        for (gi, g) in self.groups.iter().enumerate() {
            held.extend(g.ranks.iter().map(|&r| (r, gi as u32)));
        }
        // Sorted on every core: at 100,000 ranks this is most of the check's time.
        held.par_sort_unstable();
        for (r, gs) in self.membership.iter().enumerate() {
            for g in gs {
                let grp = self.groups.get(g.0 as usize).ok_or_else(|| format!("rank {r} in missing group {}", g.0))?;
                if held.binary_search(&(r as u32, g.0)).is_err() {
                    return Err(format!("rank {r} listed in group {} ({}) that does not hold it", g.0, grp.name));
                }
            }
        }
        for (pi, p) in self.programs.iter().enumerate() {
            for (ti, t) in p.tasks.iter().enumerate() {
                if let Some(&d) = t.deps.iter().find(|&&d| d as usize >= ti) {
                    return Err(format!("program {pi} task {ti} depends on later task {d}"));
                }
            }
        }
        Ok(())
    }
}
