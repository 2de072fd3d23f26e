//! Compact, contiguous copies of the features the dynamic program compares:
//! one [`LogSig`] (24 bytes) per record and one [`KernelSig`] (32 bytes) per
//! kernel of a stream, with every enum folded into a byte (0 = unknown), so the
//! inner loop reads two small arrays instead of chasing indices into the
//! caller's structs.

use crate::entry::{KernelEntry, KernelKind, LogEntry};
use commlens_core::{Algorithm, DataType, OpKind, Protocol, RedOp};

/// Kind code of a Generic kernel.
pub const GENERIC: u8 = 0xff;
/// Kind code of SendRecv.
pub const SEND_RECV: u8 = OpKind::SendRecv as u8;
/// "Unknown" for sizes and times.
pub const NO_BYTES: u64 = u64::MAX;
pub const NO_TIME: i64 = i64::MIN;

/// A record's features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogSig {
    pub kind: u8,
    pub p2p: bool,
    /// Datatype and reduction op are meaningful (AllReduce, ReduceScatter, Reduce).
    pub reduces: bool,
    pub dtype: u8,
    pub redop: u8,
    pub algo: u8,
    pub proto: u8,
    pub bytes: u64,
    pub ts: i64,
}

/// A kernel's features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSig {
    pub kind: u8,
    pub dtype: u8,
    pub redop: u8,
    pub algo: u8,
    pub proto: u8,
    pub bytes: u64,
    pub launch: i64,
    pub start: i64,
}

impl LogSig {
    pub fn of(l: &LogEntry) -> LogSig {
        LogSig {
            kind: l.kind as u8,
            // NCCL runs AllToAll, Gather and Scatter as grouped point-to-point:
            // their kernels are SendRecv (seen in the HTA traces).
            p2p: runs_as_p2p(l.kind),
            reduces: matches!(
                l.kind,
                OpKind::AllReduce | OpKind::ReduceScatter | OpKind::Reduce
            ),
            dtype: dtype_code(l.dtype),
            redop: redop_code(l.redop),
            algo: algo_code(l.algo),
            proto: proto_code(l.proto),
            bytes: l.bytes.unwrap_or(NO_BYTES),
            ts: l.cpu_ts_ns.unwrap_or(NO_TIME),
        }
    }
}

impl KernelSig {
    pub fn of(k: &KernelEntry) -> KernelSig {
        KernelSig {
            kind: match k.kind {
                KernelKind::Op(op) => op as u8,
                KernelKind::Generic => GENERIC,
            },
            dtype: dtype_code(k.dtype),
            redop: redop_code(k.redop),
            algo: algo_code(k.algo),
            proto: proto_code(k.proto),
            bytes: k.bytes.unwrap_or(NO_BYTES),
            launch: k.launch_ns.unwrap_or(NO_TIME),
            start: k.start_ns,
        }
    }
}

fn dtype_code(d: Option<DataType>) -> u8 {
    match d {
        None | Some(DataType::Unknown(_)) => 0,
        Some(DataType::Int8) => 1,
        Some(DataType::Uint8) => 2,
        Some(DataType::Int32) => 3,
        Some(DataType::Uint32) => 4,
        Some(DataType::Int64) => 5,
        Some(DataType::Uint64) => 6,
        Some(DataType::Float16) => 7,
        Some(DataType::Float32) => 8,
        Some(DataType::Float64) => 9,
        Some(DataType::Bfloat16) => 10,
        Some(DataType::Float8E4M3) => 11,
        Some(DataType::Float8E5M2) => 12,
    }
}

fn redop_code(r: Option<RedOp>) -> u8 {
    match r {
        None | Some(RedOp::Unknown(_)) => 0,
        Some(RedOp::Sum) => 1,
        Some(RedOp::Prod) => 2,
        Some(RedOp::Max) => 3,
        Some(RedOp::Min) => 4,
        Some(RedOp::Avg) => 5,
        // User ops: distinct codes per value (collisions only beyond 250 ops).
        Some(RedOp::User(v)) => 6 + (v.rem_euclid(250)) as u8,
    }
}

fn algo_code(a: Option<Algorithm>) -> u8 {
    a.map_or(0, |a| a as u8 + 1)
}

fn proto_code(p: Option<Protocol>) -> u8 {
    p.map_or(0, |p| p as u8 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_keep_unknown_apart() {
        let mut l = LogEntry::of_kind(OpKind::AllReduce);
        assert_eq!(LogSig::of(&l).dtype, 0);
        l.dtype = Some(DataType::Unknown(42));
        assert_eq!(LogSig::of(&l).dtype, 0);
        l.dtype = Some(DataType::Bfloat16);
        l.algo = Some(Algorithm::Ring);
        let s = LogSig::of(&l);
        assert!(s.dtype != 0 && s.algo != 0 && s.reduces && !s.p2p);
        assert_eq!((s.bytes, s.ts), (NO_BYTES, NO_TIME));
        assert_eq!(
            KernelSig::of(&KernelEntry::of_kind(KernelKind::Generic)).kind,
            GENERIC
        );
        assert_eq!(
            KernelSig::of(&KernelEntry::of_kind(KernelKind::Op(OpKind::SendRecv))).kind,
            SEND_RECV
        );
        assert_ne!(
            redop_code(Some(RedOp::User(5))),
            redop_code(Some(RedOp::User(6)))
        );
    }
}

/// Operations whose kernels are `SendRecv`: Send/Recv, and the collectives
/// NCCL builds from grouped point-to-point (AllToAll, Gather, Scatter).
pub fn runs_as_p2p(k: OpKind) -> bool {
    k.is_p2p() || matches!(k, OpKind::AllToAll | OpKind::Gather | OpKind::Scatter)
}
