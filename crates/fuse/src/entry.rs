//! The two inputs of alignment, source-agnostic: [`LogEntry`] (one NCCL log
//! record: what the library was asked to do) and [`KernelEntry`] (one GPU
//! kernel from a trace: what ran, and when).
//!
//! Readers fill these from whatever they parse (NCCL debug logs, the profiler
//! plugin, nsys SQLite exports, Kineto JSON). [`LogEntry::from_coll_op`] converts
//! the canonical [`CollOp`]; [`parse_kernel_name`] decodes the NCCL kernel-name
//! grammars of both generations (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`,
//! `ncclKernel_AllReduce_RING_LL_Sum_float`) for readers that want it.
//!
//! Every field a source may lack is an `Option`; alignment scores only the
//! features both sides carry.

use commlens_core::{Algorithm, CollOp, DataType, OpKind, Protocol, RedOp};

/// One operation as an NCCL log (or any CPU-side record) describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEntry {
    /// Operation kind as logged (`Send`/`Recv` for point-to-point; logs never say `SendRecv`).
    pub kind: OpKind,
    pub dtype: Option<DataType>,
    pub redop: Option<RedOp>,
    /// `count × sizeof(dtype)`, when known.
    pub bytes: Option<u64>,
    /// From the tuning line (`… Bytes -> Algo RING proto LL …`), when it was logged.
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    /// Communicator key: the `comm 0x…` pointer, or any id unique per handle within the rank.
    pub comm: u64,
    /// The CUDA stream pointer the log printed (`stream 0x…`), when it did.
    pub stream: Option<u64>,
    /// NCCL's `opCount`; point-to-point operations of one group share it.
    pub op_count: Option<u64>,
    /// CPU enqueue time (host clock, ns).
    pub cpu_ts_ns: Option<i64>,
}

impl LogEntry {
    /// A bare record with only a kind (other features unknown), on communicator 0.
    pub fn of_kind(kind: OpKind) -> LogEntry {
        LogEntry {
            kind,
            dtype: None,
            redop: None,
            bytes: None,
            algo: None,
            proto: None,
            comm: 0,
            stream: None,
            op_count: None,
            cpu_ts_ns: None,
        }
    }

    /// Converts a canonical operation. `comm` becomes the table-local communicator
    /// index (unique per handle, which is all alignment needs); an unknown datatype
    /// (and hence `bytes == 0`) becomes `None`.
    pub fn from_coll_op(op: &CollOp) -> LogEntry {
        let dtype = match op.dtype {
            DataType::Unknown(_) => None,
            d => Some(d),
        };
        LogEntry {
            kind: op.kind,
            dtype,
            redop: op.redop,
            bytes: (dtype.is_some() && op.bytes > 0).then_some(op.bytes),
            algo: op.algo,
            proto: op.proto,
            comm: u64::from(op.comm.0),
            stream: op.stream,
            op_count: Some(op.seq),
            cpu_ts_ns: op.cpu_ts_ns,
        }
    }

    /// Converts one rank's operations (`OpTable::per_rank[d]`), keeping their order.
    pub fn from_coll_ops<O: std::borrow::Borrow<CollOp>>(ops: impl IntoIterator<Item = O>) -> Vec<LogEntry> {
        ops.into_iter().map(|o| LogEntry::from_coll_op(o.borrow())).collect()
    }

    /// The key that groups records by execution queue: the stream pointer when
    /// logged, else the communicator (tagged so the two never collide).
    pub fn queue_key(&self) -> u64 {
        match self.stream {
            Some(s) => s & !(1 << 63),
            None => self.comm | (1 << 63),
        }
    }
}

impl From<&CollOp> for LogEntry {
    fn from(op: &CollOp) -> LogEntry {
        LogEntry::from_coll_op(op)
    }
}

/// Operation kind as a kernel name carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelKind {
    /// A named collective or `SendRecv` (`ncclDevKernel_AllReduce_…`, `ncclDevKernel_SendRecv`).
    Op(OpKind),
    /// `ncclDevKernel_Generic` or a name whose collective could not be read.
    Generic,
}

impl KernelKind {
    pub fn op(self) -> Option<OpKind> {
        match self {
            KernelKind::Op(k) => Some(k),
            KernelKind::Generic => None,
        }
    }
}

/// One GPU kernel from a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelEntry {
    pub kind: KernelKind,
    /// Present when the name carries it (reducing collectives in both generations).
    pub dtype: Option<DataType>,
    pub redop: Option<RedOp>,
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    /// Message size when the source carries one (Kineto `In msg nelems`, NCCL NVTX
    /// payloads), in the log's convention (`count × sizeof(dtype)` of the call).
    pub bytes: Option<u64>,
    /// Trace stream id (nsys `streamId`, Kineto `stream`); not comparable to the log's pointer.
    pub stream: u64,
    /// GPU start and end (trace clock, ns).
    pub start_ns: i64,
    pub end_ns: i64,
    /// CPU time of the runtime call that launched the kernel (trace clock, ns):
    /// nsys `CUPTI_ACTIVITY_KIND_RUNTIME.start` joined on `correlationId`, Kineto's
    /// `cudaLaunchKernel` linked by `correlation`. Unlike `start_ns` it does not
    /// wait for earlier GPU work, so it follows the record's CPU time closely.
    pub launch_ns: Option<i64>,
}

impl KernelEntry {
    /// A bare kernel of the given kind on stream 0 (timing zero).
    pub fn of_kind(kind: KernelKind) -> KernelEntry {
        KernelEntry {
            kind,
            dtype: None,
            redop: None,
            algo: None,
            proto: None,
            bytes: None,
            stream: 0,
            start_ns: 0,
            end_ns: 0,
            launch_ns: None,
        }
    }

    /// A kernel whose features come from its name (see [`parse_kernel_name`]).
    pub fn from_name(name: &str, stream: u64, start_ns: i64, end_ns: i64) -> KernelEntry {
        let p = parse_kernel_name(name);
        KernelEntry {
            kind: p.kind,
            dtype: p.dtype,
            redop: p.redop,
            algo: p.algo,
            proto: p.proto,
            bytes: None,
            stream,
            start_ns,
            end_ns,
            launch_ns: None,
        }
    }
}

/// What an NCCL kernel name says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelName {
    pub kind: KernelKind,
    pub dtype: Option<DataType>,
    pub redop: Option<RedOp>,
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
}

/// Decodes `ncclDevKernel_<Coll>_<Op>_<type>_<ALGO>_<PROTO>` and the older
/// `ncclKernel_<Coll>_<ALGO>_<PROTO>_<Op>_<type>` (argument lists ignored, field
/// order free). When the prefix is missing the collective is found by substring,
/// as the thesis's fallback does; otherwise the kind is [`KernelKind::Generic`].
pub fn parse_kernel_name(name: &str) -> KernelName {
    let base = name.split('(').next().unwrap_or(name).trim();
    let rest = base
        .find("ncclDevKernel_")
        .map(|p| &base[p + "ncclDevKernel_".len()..])
        .or_else(|| {
            base.find("ncclKernel_")
                .map(|p| &base[p + "ncclKernel_".len()..])
        });
    let mut out = KernelName {
        kind: KernelKind::Generic,
        dtype: None,
        redop: None,
        algo: None,
        proto: None,
    };
    let Some(rest) = rest else {
        out.kind = kind_by_substring(base);
        return out;
    };
    let tokens: Vec<&str> = rest.split('_').filter(|t| !t.is_empty()).collect();
    if let Some(first) = tokens.first() {
        out.kind = match OpKind::from_name(first.as_bytes()) {
            Some(k) => KernelKind::Op(k),
            None => KernelKind::Generic,
        };
    }
    let mut i = 1;
    while i < tokens.len() {
        let t = tokens[i];
        if let Some(next) = tokens.get(i + 1) {
            let joined = format!("{t}_{next}");
            if let Some(a) =
                Algorithm::from_name(joined.as_bytes()).filter(|_| is_two_token_algo(t))
            {
                out.algo = Some(a);
                i += 2;
                continue;
            }
        }
        if let Some(p) = Protocol::from_name(t.as_bytes()) {
            out.proto = Some(p);
        } else if let Some(a) = Algorithm::from_name(t.as_bytes()) {
            out.algo = Some(a);
        } else if let Some(r) = RedOp::from_name(t) {
            out.redop = Some(r);
        } else if let Some(d) = kernel_dtype(t) {
            out.dtype = Some(d);
        }
        i += 1;
    }
    out
}

fn is_two_token_algo(first: &str) -> bool {
    first.eq_ignore_ascii_case("COLLNET") || first.eq_ignore_ascii_case("NVLS")
}

/// Datatype spellings of kernel names (`f32`, `F16`, `bf16`, `float`, `int8_t` split as `int8`).
fn kernel_dtype(t: &str) -> Option<DataType> {
    let lower = t.to_ascii_lowercase();
    Some(match lower.as_str() {
        "i8" => DataType::Int8,
        "u8" => DataType::Uint8,
        "i32" => DataType::Int32,
        "u32" => DataType::Uint32,
        "i64" => DataType::Int64,
        "u64" => DataType::Uint64,
        "half" => DataType::Float16,
        "f8e4m3" => DataType::Float8E4M3,
        "f8e5m2" => DataType::Float8E5M2,
        _ => return DataType::from_name(&lower),
    })
}

fn kind_by_substring(name: &str) -> KernelKind {
    // Longest names first: "AllReduce" contains "Reduce", "ReduceScatter" contains "Scatter".
    const ORDER: [OpKind; 11] = [
        OpKind::ReduceScatter,
        OpKind::AllReduce,
        OpKind::AllGather,
        OpKind::AllToAll,
        OpKind::Broadcast,
        OpKind::SendRecv,
        OpKind::Reduce,
        OpKind::Gather,
        OpKind::Scatter,
        OpKind::Send,
        OpKind::Recv,
    ];
    ORDER
        .iter()
        .find(|k| name.contains(k.name()))
        .map_or(KernelKind::Generic, |&k| KernelKind::Op(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_generation_names() {
        let p = parse_kernel_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
        assert_eq!(p.kind, KernelKind::Op(OpKind::AllReduce));
        assert_eq!(p.redop, Some(RedOp::Sum));
        assert_eq!(p.dtype, Some(DataType::Float32));
        assert_eq!(p.algo, Some(Algorithm::Ring));
        assert_eq!(p.proto, Some(Protocol::Ll));
        let p = parse_kernel_name(
            "ncclDevKernel_AllReduce_Sum_F16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
        );
        assert_eq!(
            (p.dtype, p.proto),
            (Some(DataType::Float16), Some(Protocol::Ll))
        );
        let p =
            parse_kernel_name("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
        assert_eq!(p.kind, KernelKind::Op(OpKind::AllGather));
        assert_eq!((p.dtype, p.redop), (None, None));
        assert_eq!(
            parse_kernel_name("ncclDevKernel_SendRecv").kind,
            KernelKind::Op(OpKind::SendRecv)
        );
        assert_eq!(
            parse_kernel_name("ncclDevKernel_Generic").kind,
            KernelKind::Generic
        );
        let p = parse_kernel_name("ncclDevKernel_AllReduce_Sum_bf16_NVLS_TREE_SIMPLE");
        assert_eq!(
            (p.algo, p.proto),
            (Some(Algorithm::NvlsTree), Some(Protocol::Simple))
        );
        assert_eq!(p.dtype, Some(DataType::Bfloat16));
    }

    #[test]
    fn older_generation_and_fallback() {
        let p = parse_kernel_name("ncclKernel_AllReduce_RING_LL_Sum_float");
        assert_eq!(p.kind, KernelKind::Op(OpKind::AllReduce));
        assert_eq!(
            (p.algo, p.proto, p.redop),
            (Some(Algorithm::Ring), Some(Protocol::Ll), Some(RedOp::Sum))
        );
        assert_eq!(p.dtype, Some(DataType::Float32));
        let p = parse_kernel_name("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)");
        assert_eq!(p.kind, KernelKind::Op(OpKind::SendRecv));
        assert_eq!(p.dtype, Some(DataType::Int8));
        assert_eq!(
            parse_kernel_name("void AllReduceKernel<float>").kind,
            KernelKind::Op(OpKind::AllReduce)
        );
        assert_eq!(
            parse_kernel_name("my_ReduceScatter_kernel").kind,
            KernelKind::Op(OpKind::ReduceScatter)
        );
        assert_eq!(parse_kernel_name("gemm_kernel").kind, KernelKind::Generic);
    }

    #[test]
    fn log_entry_from_coll_op_keeps_features() {
        use commlens_core::{CommIdx, DevIdx, ProcIdx};
        let op = CollOp {
            proc: ProcIdx(0),
            dev: DevIdx(0),
            comm: CommIdx(3),
            comm_seq: 0,
            tid: 1,
            seq: 7,
            kind: OpKind::AllReduce,
            count: 1024,
            dtype: DataType::Bfloat16,
            bytes: 2048,
            redop: Some(RedOp::Sum),
            root: None,
            peer: None,
            algo: Some(Algorithm::Ring),
            proto: Some(Protocol::Ll128),
            channels: None,
            sendbuff: 0,
            recvbuff: 0,
            stream: Some(0xabc),
            cpu_ts_ns: Some(5),
            gpu: None,
            kernel: None,
            line: 1,
            recovered: false,
        };
        let e = LogEntry::from(&op);
        assert_eq!(
            (e.kind, e.bytes, e.comm, e.op_count),
            (OpKind::AllReduce, Some(2048), 3, Some(7))
        );
        assert_eq!(e.queue_key(), 0xabc);
        let mut unknown = op.clone();
        unknown.dtype = DataType::Unknown(42);
        unknown.bytes = 0;
        unknown.stream = None;
        let e = LogEntry::from_coll_op(&unknown);
        assert_eq!((e.dtype, e.bytes), (None, None));
        assert_eq!(e.queue_key(), 3 | (1 << 63));
    }
}
