//! The front ends' common intermediate form: one [`RawTrace`] per rank file, a list of
//! [`RawNode`]s with their dependencies by node id and what each becomes ([`What`]). Also the
//! name heuristics every format shares: collective kind from a collective or kernel name,
//! compute kind from an op or kernel name, element type from a PyTorch type string.

use crate::ComputeKind;
use commlens_core::{DataType, OpKind, RedOp};

/// What a node becomes in the program.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum What {
    /// Not a task (CPU-side op of a trace that also has its GPU side, metadata, memory
    /// node): dependencies through it are kept.
    Skip,
    Compute {
        kind: ComputeKind,
        time_us: Option<f64>,
        flops: f64,
        mem_bytes: f64,
    },
    Coll {
        kind: OpKind,
        count: u64,
        dtype: DataType,
        redop: Option<RedOp>,
        root: u32,
        sync: bool,
        pg: Option<String>,
    },
    /// One Send or Recv; `peer` is a global rank.
    P2p {
        send: bool,
        peer: u32,
        count: u64,
        dtype: DataType,
        tag: u64,
        pg: Option<String>,
    },
    /// End of iteration `iter` (every stream's earlier work done).
    IterEnd { iter: u32 },
}

impl What {
    pub fn is_comm(&self) -> bool {
        matches!(self, What::Coll { .. } | What::P2p { .. })
    }
}

#[derive(Debug, Clone)]
pub(crate) struct RawNode {
    pub id: u64,
    pub name: String,
    /// Dependencies whose absence is an error.
    pub data_deps: Vec<u64>,
    /// Dependencies that may name nodes the trace left out (ignored, counted).
    pub ctrl_deps: Vec<u64>,
    pub what: What,
    /// The trace's stream (CUDA stream id) when it names one.
    pub stream_hint: Option<i64>,
    pub phase: crate::Phase,
}

/// A process group a trace declares (`## process_group:init ##`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PgDecl {
    pub name: String,
    /// Global ranks; empty when the trace leaves them out (the default group: every rank).
    pub ranks: Vec<u32>,
    pub size: Option<u32>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct RawTrace {
    /// File (and archive member) the trace came from.
    pub source: String,
    pub nodes: Vec<RawNode>,
    pub pgs: Vec<PgDecl>,
    /// Ranks of the job, as the trace states it.
    pub world_hint: Option<u32>,
    /// This trace's own global rank, as the trace states it.
    pub rank_hint: Option<u32>,
    pub notes: Vec<String>,
}

/// Collective kind from a collective name (`all_reduce`, `allreduce`, `all_to_allv`,
/// `_allgather_base`, `nccl:reduce_scatter`, …) or an NCCL kernel name
/// (`ncclKernel_AllReduce_RING_LL_Sum_float`, `ncclDevKernel_SendRecv`). `None` when it names
/// no collective; `Some(None)`-like barriers are reported as AllReduce by the callers.
pub(crate) fn coll_kind_from_name(name: &str) -> Option<OpKind> {
    let l: String = name
        .to_ascii_lowercase()
        .chars()
        .filter(|c| *c != '_' && *c != ' ')
        .collect();
    let l = l.trim_start_matches("nccl:").trim_start_matches("c10d::");
    // kernel names: ncclkernelallreduce..., nccldevkernelsendrecv...
    let core = l
        .strip_prefix("nccldevkernel")
        .or_else(|| l.strip_prefix("ncclkernel"))
        .or_else(|| l.strip_prefix("ncclm"))
        .unwrap_or(l);
    let table: [(&str, OpKind); 13] = [
        ("reducescatter", OpKind::ReduceScatter),
        ("allreduce", OpKind::AllReduce),
        ("allgather", OpKind::AllGather),
        ("alltoall", OpKind::AllToAll),
        ("broadcast", OpKind::Broadcast),
        ("bcast", OpKind::Broadcast),
        ("sendrecv", OpKind::AllToAll),
        ("gather", OpKind::Gather),
        ("scatter", OpKind::Scatter),
        ("reduce", OpKind::Reduce),
        ("barrier", OpKind::AllReduce),
        ("send", OpKind::Send),
        ("recv", OpKind::Recv),
    ];
    for (key, kind) in table {
        if core.starts_with(key) {
            return Some(kind);
        }
    }
    None
}

/// Chakra's `CollectiveCommType` integer.
pub(crate) fn coll_kind_from_chakra(v: i64) -> Option<OpKind> {
    Some(match v {
        0 => OpKind::AllReduce,
        1 => OpKind::Reduce,
        2 => OpKind::AllGather,
        3 => OpKind::Gather,
        4 => OpKind::Scatter,
        5 => OpKind::Broadcast,
        6 => OpKind::AllToAll,
        7 | 8 => OpKind::ReduceScatter,
        9 => OpKind::AllReduce, // BARRIER: a tiny all-reduce
        _ => return None,
    })
}

/// Compute kind guessed from an op or kernel name.
pub(crate) fn compute_kind(name: &str) -> ComputeKind {
    let l = name.to_ascii_lowercase().replace("fbgemm", "");
    let op = l.split("::").last().unwrap_or(&l);
    let op = op.split(['(', '.', ' ']).next().unwrap_or(op);
    let any = |keys: &[&str]| keys.iter().any(|k| l.contains(k));
    if any(&[
        "attention",
        "flash",
        "sdpa",
        "scaled_dot_product",
        "fmha",
        "mha_",
    ]) {
        ComputeKind::Attention
    } else if any(&["embedding", "tbe_", "lookup_function"]) {
        ComputeKind::Embedding
    } else if any(&["gemm", "cublas", "cutlass", "matmul", "linear", "xmma"])
        || matches!(
            op,
            "mm" | "addmm" | "bmm" | "baddbmm" | "addmv" | "mv" | "addbmm" | "einsum"
        )
        || l.contains("backward: mmbackward")
        || l.contains("backward: addmmbackward")
    {
        ComputeKind::Gemm
    } else if any(&[
        "optimizer",
        "adam",
        "adagrad",
        "sgd",
        "lamb",
        "_foreach",
        "multi_tensor",
    ]) {
        ComputeKind::Optimizer
    } else if l.starts_with("aten::")
        || any(&["elementwise", "reduce_kernel", "at::native", "triton"])
    {
        ComputeKind::Elementwise
    } else {
        ComputeKind::Other
    }
}

/// Element type from a PyTorch ET type string (`Tensor(float)`, `GenericList[Tensor(c10::Half)]`,
/// `long int`, `Float`, `BFloat16`).
pub(crate) fn dtype_from_torch(s: &str) -> Option<DataType> {
    let inner = match (s.rfind('('), s.find(')')) {
        (Some(a), Some(b)) if b > a => &s[a + 1..b],
        _ => s,
    };
    let inner = inner.trim();
    if let Some(d) = DataType::from_name(inner) {
        return Some(d);
    }
    Some(
        match inner.to_ascii_lowercase().trim_start_matches("c10::") {
            "long int" | "int64_t" => DataType::Int64,
            "unsigned char" | "bool" => DataType::Uint8,
            "signed char" => DataType::Int8,
            "short" | "short int" => DataType::Float16, // 2-byte stand-in: only the size matters
            _ => return None,
        },
    )
}

/// The element type of a given byte width, when only the width is known.
pub(crate) fn dtype_of_width(w: u64) -> Option<DataType> {
    Some(match w {
        1 => DataType::Uint8,
        2 => DataType::Float16,
        4 => DataType::Float32,
        8 => DataType::Float64,
        _ => return None,
    })
}

/// Reduction operator from a kernel name (`…_Sum_float`).
pub(crate) fn redop_from_name(name: &str) -> Option<RedOp> {
    for part in name.split(['_', '(']) {
        if let Some(r) = RedOp::from_name(part) {
            return Some(r);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            coll_kind_from_name("ncclKernel_AllReduce_RING_LL_Sum_float(x)"),
            Some(OpKind::AllReduce)
        );
        assert_eq!(
            coll_kind_from_name("ncclDevKernel_SendRecv"),
            Some(OpKind::AllToAll)
        );
        assert_eq!(coll_kind_from_name("all_to_allv"), Some(OpKind::AllToAll));
        assert_eq!(
            coll_kind_from_name("_reduce_scatter_base"),
            Some(OpKind::ReduceScatter)
        );
        assert_eq!(
            coll_kind_from_name("nccl:all_gather"),
            Some(OpKind::AllGather)
        );
        assert_eq!(
            coll_kind_from_name("c10d::broadcast_(0)"),
            Some(OpKind::Broadcast)
        );
        assert_eq!(coll_kind_from_name("wait"), None);
        assert_eq!(compute_kind("aten::addmm"), ComputeKind::Gemm);
        assert_eq!(compute_kind("aten::embedding_bag"), ComputeKind::Embedding);
        assert_eq!(
            compute_kind("fbgemm::split_embedding_codegen_lookup_adagrad_function"),
            ComputeKind::Embedding
        );
        assert_eq!(
            compute_kind("fbgemm::permute_2D_sparse_data"),
            ComputeKind::Other
        );
        assert_eq!(
            compute_kind("Optimizer.step#Adagrad.step"),
            ComputeKind::Optimizer
        );
        assert_eq!(compute_kind("aten::relu"), ComputeKind::Elementwise);
        assert_eq!(
            dtype_from_torch("GenericList[Tensor(float)]"),
            Some(DataType::Float32)
        );
        assert_eq!(dtype_from_torch("Tensor(long int)"), Some(DataType::Int64));
        assert_eq!(
            dtype_from_torch("Tensor(c10::Half)"),
            Some(DataType::Float16)
        );
    }
}
