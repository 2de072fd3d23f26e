//! The canonical operation table: who communicated (processes, devices),
//! through what (communicator handles grouped into logical communicators), and
//! every operation as one [`CollOp`] row.
//!
//! Indices (`ProcIdx`, `DevIdx`, `CommIdx`, `LogicalCommIdx`) are positions in
//! the [`OpTable`]'s vectors; they are only meaningful inside one table.
//! Operations are stored per rank (`OpTable::per_rank[d]` holds the operations
//! of device `d`), in the order the source emitted them, so that per-rank work
//! can run in parallel and stream.

use crate::enums::{Algorithm, DataType, NcclVersion, OpKind, Protocol, RedOp};
use crate::rank_ops::RankOps;
use crate::topo::Topology;
use serde::{Deserialize, Serialize};

macro_rules! index_type {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub struct $name(pub u32);
        impl $name {
            #[inline]
            pub fn ix(self) -> usize {
                self.0 as usize
            }
        }
    };
}

index_type!(
    /// Index into [`OpTable::processes`].
    ProcIdx
);
index_type!(
    /// Index into [`OpTable::devices`] and [`OpTable::per_rank`].
    DevIdx
);
index_type!(
    /// Index into [`OpTable::comms`].
    CommIdx
);
index_type!(
    /// Index into [`OpTable::logical`].
    LogicalCommIdx
);

/// Where the rows of a table came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SourceKind {
    NcclLog,
    Nsys,
    Kineto,
    Plugin,
    Inspector,
    Simulated,
}

/// One operating-system process that called NCCL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Process {
    pub host: String,
    pub pid: u32,
    pub nccl_version: Option<NcclVersion>,
}

/// One GPU driven by a process: the unit NCCL calls a rank. A process driving
/// two GPUs (nccl-tests `-g 2`) has two devices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub proc: ProcIdx,
    /// CUDA device ordinal inside the process (`cudaDev`).
    pub cuda_dev: Option<u32>,
    /// NVML index (`nvmlDev`); differs from `cuda_dev` when visibility is remapped.
    pub nvml_dev: Option<u32>,
    /// PCI bus id as NCCL prints it (`busId 17000` = 0x17000).
    pub bus_id: Option<u64>,
    /// Rank in the world communicator, assigned by [`crate::assemble`].
    pub global_rank: Option<u32>,
    /// Position among the GPUs of its host.
    pub local_rank: Option<u32>,
}

/// What an `ncclCommSplit` Init line logs of the split that made a handle
/// (`… parent 0x… splitCount 2 color 1121016176 key 1 - Init COMPLETE`, NCCL
/// 2.28). The members of one split group share the parent communicator, its
/// split counter (every parent member calls the split, colorless ones too) and
/// the color; the parent's pointer differs per process but its `commId` does
/// not, which is what [`crate::assemble`] groups by when the child logs no
/// `commId` of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitOrigin {
    /// The parent's `comm 0x…` pointer in this process.
    pub parent: u64,
    pub split_count: u32,
    pub color: i64,
}

/// A communicator as one process sees it: NCCL's `ncclComm_t` pointer.
/// The same logical group has a different pointer in every process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommMember {
    pub proc: ProcIdx,
    /// The `comm 0x…` pointer value.
    pub ptr: u64,
    /// `commId`/`commHash`: shared by all members of one communicator, when logged.
    pub comm_id: Option<u64>,
    pub nranks: Option<u32>,
    /// This member's rank inside the communicator.
    pub rank: Option<u32>,
    pub device: Option<DevIdx>,
    pub n_nodes: Option<u32>,
    pub local_ranks: Option<u32>,
    pub local_rank: Option<u32>,
    pub init_complete: bool,
    /// Ring order per channel (`Channel 00/24 : 0 1`).
    pub rings: Vec<Vec<u32>>,
    /// Tree per channel: (channel, children, parent); -1 means none.
    pub trees: Vec<TreeChannel>,
    /// Transport per connection (`Channel 00/0 : 1[1] -> 0[0] via P2P/IPC`).
    pub connections: Vec<Connection>,
    /// What init logged about tuning (search graphs, thresholds, table).
    pub tuning: Option<Box<crate::tuning::TuningInfo>>,
    /// How `ncclCommSplit` made this handle, when its Init line says so.
    #[serde(default)]
    pub split: Option<SplitOrigin>,
    /// Number of operations seen on this handle.
    pub n_ops: u64,
    /// Order-sensitive hash of the operation kinds seen (thesis eq. 4.4), used
    /// to group handles into logical communicators when no `commId` is logged.
    pub op_seq_hash: u64,
    pub logical: Option<LogicalCommIdx>,
}

impl CommMember {
    pub fn new(proc: ProcIdx, ptr: u64) -> Self {
        CommMember {
            proc,
            ptr,
            comm_id: None,
            nranks: None,
            rank: None,
            device: None,
            n_nodes: None,
            local_ranks: None,
            local_rank: None,
            init_complete: false,
            rings: Vec::new(),
            trees: Vec::new(),
            connections: Vec::new(),
            tuning: None,
            split: None,
            n_ops: 0,
            op_seq_hash: SEQ_HASH_SEED,
            logical: None,
        }
    }

    /// Folds one operation into [`CommMember::op_seq_hash`] (FNV-1a over kinds).
    #[inline]
    pub fn note_op(&mut self, kind: OpKind) {
        self.n_ops += 1;
        self.op_seq_hash = (self.op_seq_hash ^ (kind as u64 + 1)).wrapping_mul(0x0000_0100_0000_01b3);
    }
}

const SEQ_HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeChannel {
    pub channel: u32,
    pub children: Vec<i32>,
    pub parent: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Connection {
    pub channel: u32,
    pub from_rank: u32,
    pub to_rank: u32,
    /// e.g. `P2P/IPC`, `SHM/direct/direct`, `NET/IB/0/GDRDMA`.
    pub transport: String,
}

/// How the members of a logical communicator were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Grouping {
    /// Same `commId` logged by every member.
    CommId,
    /// Identical operation sequences (thesis eq. 4.5), split to `nranks` members.
    OpSequence,
    /// Only one member was seen.
    Single,
}

/// A communicator as a whole: the handles of all its members.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogicalComm {
    pub name: String,
    pub comm_id: Option<u64>,
    pub nranks: u32,
    /// Member handles, ordered by rank inside the communicator where known.
    pub members: Vec<CommIdx>,
    pub grouping: Grouping,
}

/// GPU execution interval of an operation's kernel (trace clock, nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GpuSpan {
    pub start_ns: i64,
    pub end_ns: i64,
}

/// GPU kernel details, present when a kernel trace was fused in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelInfo {
    pub name: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem_bytes: u32,
    pub registers: u32,
    pub correlation_id: u64,
}

/// One communication operation on one rank: the row of the canonical table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollOp {
    pub proc: ProcIdx,
    /// The rank (GPU) that ran the operation; always `comms[comm].device`.
    pub dev: DevIdx,
    pub comm: CommIdx,
    /// Position of this operation among those of its communicator handle
    /// (0, 1, …). Unlike `seq` it never repeats: some NCCL versions log
    /// `opCount 0` for every call.
    pub comm_seq: u64,
    /// Emitting thread id.
    pub tid: u32,
    /// NCCL's per-communicator `opCount` (a sequence number; Send/Recv of one
    /// group share it).
    pub seq: u64,
    pub kind: OpKind,
    /// Element count as passed to the API (per-rank send count for AllGather).
    pub count: u64,
    pub dtype: DataType,
    /// `count × sizeof(dtype)` (thesis eq. 4.9). Meaningful only when the
    /// size is known: an operation whose type is unknown (`DataType::Unknown`,
    /// which readers also set when the source gave no count) has `bytes` 0
    /// and an *unknown* size; read it through [`CollOp::size`].
    pub bytes: u64,
    pub redop: Option<RedOp>,
    /// Root rank of rooted collectives (Broadcast, Reduce, …).
    pub root: Option<u32>,
    /// Peer rank of Send/Recv.
    pub peer: Option<u32>,
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    /// Channel range `{lo..hi}` NCCL chose.
    pub channels: Option<(u16, u16)>,
    pub sendbuff: u64,
    pub recvbuff: u64,
    pub stream: Option<u64>,
    /// CPU enqueue time (epoch ns) when the source had timestamps.
    pub cpu_ts_ns: Option<i64>,
    pub gpu: Option<GpuSpan>,
    /// Shared, so that reading an operation out of [`crate::RankOps`] never allocates.
    #[serde(default, with = "shared_kernel")]
    pub kernel: Option<std::sync::Arc<KernelInfo>>,
    /// 1-based line (or record) number in the source file.
    pub line: u64,
    /// Rebuilt from a line broken by interleaved writers; trailing fields may be missing.
    pub recovered: bool,
}

/// Serde of the shared kernel: the same JSON as a plain `Option<KernelInfo>`
/// (serde's `rc` feature is not enabled in the workspace).
mod shared_kernel {
    use super::KernelInfo;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::sync::Arc;

    pub fn serialize<S: Serializer>(k: &Option<Arc<KernelInfo>>, s: S) -> Result<S::Ok, S::Error> {
        k.as_deref().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<KernelInfo>>, D::Error> {
        Ok(Option::<KernelInfo>::deserialize(d)?.map(Arc::new))
    }
}

impl CollOp {
    /// The message size in bytes, `None` when the source did not say (a
    /// kernel-only trace, an unknown data type): sinks show it as unknown,
    /// never as 0 B, and leave it out of sums and bandwidths.
    #[inline]
    pub fn size(&self) -> Option<u64> {
        self.dtype.size_bytes().map(|_| self.bytes)
    }

    /// An operation with its identity, kind and size; every optional field
    /// empty, `bytes = count × sizeof(dtype)` (0 for unknown types), line 0.
    /// Readers and tests fill in the rest with struct update syntax.
    #[inline]
    pub fn new(proc: ProcIdx, dev: DevIdx, comm: CommIdx, kind: OpKind, count: u64, dtype: DataType) -> CollOp {
        CollOp {
            proc,
            dev,
            comm,
            comm_seq: 0,
            tid: 0,
            seq: 0,
            kind,
            count,
            dtype,
            bytes: dtype.size_bytes().map_or(0, |s| count.saturating_mul(s)),
            redop: None,
            root: None,
            peer: None,
            algo: None,
            proto: None,
            channels: None,
            sendbuff: 0,
            recvbuff: 0,
            stream: None,
            cpu_ts_ns: None,
            gpu: None,
            kernel: None,
            line: 0,
            recovered: false,
        }
    }
}

/// The canonical table: everything commlens knows about one run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OpTable {
    pub sources: Vec<String>,
    pub processes: Vec<Process>,
    pub devices: Vec<Device>,
    pub comms: Vec<CommMember>,
    pub logical: Vec<LogicalComm>,
    /// `per_rank[d]`: operations of device `d`, in source order, packed.
    pub per_rank: Vec<RankOps>,
    /// One topology per host (first block NCCL printed there).
    pub topologies: Vec<Topology>,
}

impl OpTable {
    pub fn n_ops(&self) -> usize {
        self.per_rank.iter().map(RankOps::len).sum()
    }

    /// Iterates over all operations, rank after rank (materialised rows).
    pub fn ops(&self) -> impl Iterator<Item = CollOp> + Clone + '_ {
        self.per_rank.iter().flatten()
    }

    /// Heap bytes of the operations (rows and their side tables), for
    /// measuring the memory per operation.
    pub fn op_bytes(&self) -> usize {
        self.per_rank.iter().map(RankOps::heap_bytes).sum()
    }

    pub fn comm(&self, c: CommIdx) -> &CommMember {
        &self.comms[c.ix()]
    }

    /// Global rank of the device behind a communicator handle.
    pub fn global_rank_of(&self, c: CommIdx) -> Option<u32> {
        self.comms[c.ix()].device.and_then(|d| self.devices[d.ix()].global_rank)
    }

    /// Human label of a device: `r3 host:pid/dev1`.
    pub fn device_label(&self, d: DevIdx) -> String {
        let dev = &self.devices[d.ix()];
        let p = &self.processes[dev.proc.ix()];
        let rank = dev.global_rank.map_or_else(|| "r?".to_string(), |r| format!("r{r}"));
        let cuda = dev.cuda_dev.map_or_else(|| "?".to_string(), |c| c.to_string());
        format!("{rank} {}:{}/dev{cuda}", p.host, p.pid)
    }

    pub fn topology_of_host(&self, host: &str) -> Option<&Topology> {
        self.topologies.iter().find(|t| t.host == host)
    }
}
#[cfg(test)]
mod size_guard {
    /// The table commands (fuse, report, diff, export) hold every operation:
    /// its size is memory per operation, so it must not creep up unnoticed.
    #[test]
    fn coll_op_stays_small() {
        assert!(std::mem::size_of::<super::CollOp>() <= 192, "{}", std::mem::size_of::<super::CollOp>());
    }

    /// What the table stores per operation: a packed row (the side tables
    /// are shared by the operations of a rank).
    #[test]
    fn stored_row_is_at_most_64_bytes() {
        assert!(crate::rank_ops::ROW_BYTES <= 64, "{}", crate::rank_ops::ROW_BYTES);
    }
}
