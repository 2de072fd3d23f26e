//! Ground truth of a generated run, for exact checks of parsers and analyses.
//!
//! Owns the [`Truth`] types (ranks, communicators, per-(rank, communicator, op) line and byte
//! totals, tuning-line counts, corruption of the combined file) and their lookup helpers.
//! Everything here is derived from what was actually written, not from formulas.

use serde::{Deserialize, Serialize};

/// Ground truth of a [`crate::GeneratedRun`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truth {
    /// `tp * pp * dp`.
    pub world_size: usize,
    /// Tensor-parallel size.
    pub tp: usize,
    /// Pipeline-parallel size.
    pub pp: usize,
    /// Data-parallel size.
    pub dp: usize,
    /// Expert-parallel size (1 without experts).
    #[serde(default = "one")]
    pub ep: usize,
    /// NCCL version string written in the logs.
    pub nccl_version: String,
    /// One entry per global rank, indexed by rank.
    pub ranks: Vec<RankTruth>,
    /// Communicators in creation order (WORLD, DP*, MP*, TP*, PP*, EMB*, EP*, EDP*).
    pub communicators: Vec<CommTruth>,
    /// Op-line totals, sorted by (rank, comm, op); only non-zero entries.
    pub ops: Vec<OpTruth>,
    /// `Bytes -> Algo` lines per global rank.
    pub tuning_lines: Vec<usize>,
    /// The interleaved file, when generated.
    pub combined: Option<CombinedTruth>,
    /// Collective instances slowed by `RunConfig::slowdowns` (absent from the JSON when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub injected: Vec<InjectedOp>,
}

/// One collective instance an injected slowdown made slow (on every member).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InjectedOp {
    /// Communicator name (`TP0`, `DP1`, ...; [`CommTruth::name`]).
    pub comm: String,
    /// Its members' global ranks, in communicator-rank order.
    pub members: Vec<usize>,
    /// `opCount` of the instance on that communicator.
    pub opcount: u64,
    /// `AllReduce`, `AllGather`, ...
    pub kind: String,
    /// Program iteration (optimizer steps before it).
    pub iteration: usize,
}

fn one() -> usize {
    1
}

/// One process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankTruth {
    /// Global rank.
    pub rank: usize,
    /// Host name.
    pub host: String,
    /// Process id (= thread id of the op lines).
    pub pid: u32,
    /// CUDA device (`[dev]` of every line, `cudaDev`, `nvmlDev`).
    pub cuda_dev: usize,
    /// Node index.
    pub node: usize,
    /// Rank within the node.
    pub local_rank: usize,
    /// Tensor-parallel rank.
    pub tp_rank: usize,
    /// Pipeline stage.
    pub pp_rank: usize,
    /// Data-parallel rank.
    pub dp_rank: usize,
    /// PCI bus id as printed (`7000`).
    pub bus_id: String,
    /// File holding this process's log.
    pub file: String,
    /// Lines of that file.
    pub lines: usize,
}

/// One communicator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommTruth {
    /// `WORLD`, `DP0`, `MP0`, `TP1`, `PP0`, `EMB1`, ...
    pub name: String,
    /// `WORLD`, `DP`, `MP`, `TP`, `PP`, `EMB`, `EP` or `EDP` (expert data-parallel).
    pub kind: String,
    /// The strategy whose traffic it carries: `world`, `dp`, `dp-zero1`, `mp`, `tp`, `tp-sp`,
    /// `pp`, `pp-vpp`, `emb`, `ep-a2a` or `ep-allgather` (expert-DP groups say `dp`/`dp-zero1`).
    #[serde(default)]
    pub strategy: String,
    /// The shared `commId`.
    pub comm_id: u64,
    /// `commId` as printed (`0x...`).
    pub comm_id_hex: String,
    /// Size.
    pub nranks: usize,
    /// Global ranks in comm-rank order.
    pub members: Vec<usize>,
    /// `comm 0x...` pointer printed by each member (same order as `members`).
    pub comm_ptrs: Vec<String>,
    /// Nodes spanned.
    pub n_nodes: usize,
    /// Collective channels.
    pub channels: usize,
}

/// Totals of the op lines of one (rank, communicator, op kind).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpTruth {
    /// Global rank.
    pub rank: usize,
    /// Communicator name.
    pub comm: String,
    /// `AllReduce`, `Broadcast`, `AllGather`, `ReduceScatter`, `Send`, `Recv`.
    pub op: String,
    /// Number of `opCount` lines.
    pub lines: usize,
    /// Sum of `count x sizeof(datatype)`.
    pub bytes: u64,
}

/// The interleaved `combined.log`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CombinedTruth {
    /// File name.
    pub file: String,
    /// Physical lines of the file.
    pub lines: usize,
    /// Op lines that are still complete (all op lines minus the broken ones).
    pub intact_op_lines: usize,
    /// The corrupted lines, in file order.
    pub broken: Vec<BrokenLine>,
}

/// An op line cut mid-way by another process's line (the rest of the cut line is lost).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokenLine {
    /// 0-based index of the physical line in the combined file.
    pub line: usize,
    /// Byte offset in the original line where it was cut (= where the intruder starts).
    pub cut_at: usize,
    /// Rank whose op line was cut.
    pub victim_rank: usize,
    /// Rank whose complete line follows the cut without a newline.
    pub intruder_rank: usize,
    /// The victim line as it would have been written.
    pub original: String,
}

impl Truth {
    /// Totals of one (rank, communicator name, op), if that rank wrote such lines.
    pub fn op(&self, rank: usize, comm: &str, op: &str) -> Option<&OpTruth> {
        self.ops
            .iter()
            .find(|o| o.rank == rank && o.comm == comm && o.op == op)
    }

    /// Op lines written by one rank.
    pub fn op_lines_of_rank(&self, rank: usize) -> usize {
        self.ops
            .iter()
            .filter(|o| o.rank == rank)
            .map(|o| o.lines)
            .sum()
    }

    /// Op lines of one op kind summed over all ranks and communicators.
    pub fn op_lines_of_kind(&self, op: &str) -> usize {
        self.ops
            .iter()
            .filter(|o| o.op == op)
            .map(|o| o.lines)
            .sum()
    }

    /// All op lines of the run.
    pub fn total_op_lines(&self) -> usize {
        self.ops.iter().map(|o| o.lines).sum()
    }

    /// Communicator by name.
    pub fn comm(&self, name: &str) -> Option<&CommTruth> {
        self.communicators.iter().find(|c| c.name == name)
    }

    /// Names of the communicators a rank belongs to, in creation order.
    pub fn comms_of_rank(&self, rank: usize) -> Vec<&str> {
        self.communicators
            .iter()
            .filter(|c| c.members.contains(&rank))
            .map(|c| c.name.as_str())
            .collect()
    }

    /// Short human-readable summary (one line per rank and per communicator).
    pub fn summary(&self) -> String {
        let mut s = format!(
            "world {} (tp {} pp {} dp {}), NCCL {}\n",
            self.world_size, self.tp, self.pp, self.dp, self.nccl_version
        );
        for c in &self.communicators {
            s.push_str(&format!(
                "  {:<6} {} nranks {} members {:?} ({})\n",
                c.name, c.comm_id_hex, c.nranks, c.members, c.strategy
            ));
        }
        for r in &self.ranks {
            let per: Vec<String> = self
                .ops
                .iter()
                .filter(|o| o.rank == r.rank)
                .map(|o| format!("{}/{} {}", o.comm, o.op, o.lines))
                .collect();
            s.push_str(&format!(
                "  rank {} {}:{} [{}] {} lines, {} tuning: {}\n",
                r.rank,
                r.host,
                r.pid,
                r.cuda_dev,
                r.lines,
                self.tuning_lines[r.rank],
                per.join(", ")
            ));
        }
        if let Some(c) = &self.combined {
            s.push_str(&format!(
                "  {}: {} lines, {} broken\n",
                c.file,
                c.lines,
                c.broken.len()
            ));
        }
        s
    }
}
