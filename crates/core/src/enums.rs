//! NCCL's vocabulary as Rust enums: operation kinds, datatypes, reduction ops,
//! algorithms, protocols and the library version.
//!
//! Each enum decodes from the three spellings commlens meets: the integers of
//! `NCCL_DEBUG` log lines (decoded per NCCL version, since enums grew over time),
//! the words of log and kernel names (`AllReduce`, `RING`, `LL128`), and the
//! strings of profiler-plugin descriptors (`ncclFloat32`). Unknown values are
//! kept, never silently mapped to a neighbour.

use serde::{Deserialize, Serialize};
use std::fmt;

/// NCCL library version, e.g. `2.27.7` (from `NCCL version 2.27.7+cuda13.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NcclVersion {
    pub major: u16,
    pub minor: u16,
    pub patch: u16,
}

impl NcclVersion {
    pub const fn new(major: u16, minor: u16, patch: u16) -> Self {
        NcclVersion { major, minor, patch }
    }

    /// Parses `2.27.7`, `2.27.7+cuda13.0`, `2.26.6+cudaCUDA_MAJOR.CUDA_MINOR`.
    pub fn parse(s: &[u8]) -> Option<NcclVersion> {
        let end = s.iter().position(|&b| b == b'+' || b == b' ').unwrap_or(s.len());
        let mut it = s[..end].split(|&b| b == b'.');
        let num = |part: Option<&[u8]>| -> Option<u16> {
            let p = part?;
            if p.is_empty() || p.len() > 4 || !p.iter().all(u8::is_ascii_digit) {
                return None;
            }
            std::str::from_utf8(p).ok()?.parse().ok()
        };
        let major = num(it.next())?;
        let minor = num(it.next())?;
        let patch = num(it.next()).unwrap_or(0);
        Some(NcclVersion { major, minor, patch })
    }
}

impl fmt::Display for NcclVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Kind of a communication operation, as NCCL's API names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OpKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    Reduce,
    AllToAll,
    Gather,
    Scatter,
    Send,
    Recv,
    /// A fused send/receive kernel (`ncclDevKernel_SendRecv`); logs never print it.
    SendRecv,
}

impl OpKind {
    pub const ALL: [OpKind; 11] = [
        OpKind::AllReduce,
        OpKind::AllGather,
        OpKind::ReduceScatter,
        OpKind::Broadcast,
        OpKind::Reduce,
        OpKind::AllToAll,
        OpKind::Gather,
        OpKind::Scatter,
        OpKind::Send,
        OpKind::Recv,
        OpKind::SendRecv,
    ];

    /// Decodes the name NCCL prints in `<Op>: opCount …` lines and kernel names.
    #[inline]
    pub fn from_name(name: &[u8]) -> Option<OpKind> {
        // The readers ask on every operation line: by length first, then
        // fixed-size compares, which inline (a slice match called `bcmp`).
        fn is<const N: usize>(name: &[u8], lit: &[u8; N]) -> bool {
            <&[u8; N]>::try_from(name).is_ok_and(|a| a == lit)
        }
        let kind = match name.len() {
            4 if is(name, b"Send") => OpKind::Send,
            4 if is(name, b"Recv") => OpKind::Recv,
            9 if is(name, b"AllReduce") => OpKind::AllReduce,
            9 if is(name, b"AllGather") => OpKind::AllGather,
            _ => return Self::from_name_other(name),
        };
        Some(kind)
    }

    /// [`OpKind::from_name`] for the rarer names.
    fn from_name_other(name: &[u8]) -> Option<OpKind> {
        Some(match name {
            b"AllReduce" => OpKind::AllReduce,
            b"AllGather" => OpKind::AllGather,
            b"ReduceScatter" => OpKind::ReduceScatter,
            b"Broadcast" | b"Bcast" => OpKind::Broadcast,
            b"Reduce" => OpKind::Reduce,
            b"AllToAll" | b"AlltoAll" | b"Alltoall" => OpKind::AllToAll,
            b"Gather" => OpKind::Gather,
            b"Scatter" => OpKind::Scatter,
            b"Send" => OpKind::Send,
            b"Recv" => OpKind::Recv,
            b"SendRecv" => OpKind::SendRecv,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            OpKind::AllReduce => "AllReduce",
            OpKind::AllGather => "AllGather",
            OpKind::ReduceScatter => "ReduceScatter",
            OpKind::Broadcast => "Broadcast",
            OpKind::Reduce => "Reduce",
            OpKind::AllToAll => "AllToAll",
            OpKind::Gather => "Gather",
            OpKind::Scatter => "Scatter",
            OpKind::Send => "Send",
            OpKind::Recv => "Recv",
            OpKind::SendRecv => "SendRecv",
        }
    }

    /// Point-to-point operations address one peer instead of a whole communicator.
    #[inline]
    pub fn is_p2p(self) -> bool {
        matches!(self, OpKind::Send | OpKind::Recv | OpKind::SendRecv)
    }

    /// Whether `root` names a root rank (rooted collectives) rather than nothing.
    #[inline]
    pub fn is_rooted(self) -> bool {
        matches!(self, OpKind::Broadcast | OpKind::Reduce | OpKind::Gather | OpKind::Scatter)
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `ncclDataType_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DataType {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Float16,
    Float32,
    Float64,
    Bfloat16,
    Float8E4M3,
    Float8E5M2,
    /// A value this NCCL version does not define; the raw integer is kept.
    Unknown(i32),
}

impl DataType {
    /// Decodes the integer of a log line. `version` gates values that later
    /// releases added: bfloat16 (9) exists since NCCL 2.10, the two fp8 types
    /// (10, 11) since 2.24 (NCCL 2.24 introduced them: ROCm/rccl PR #1646
    /// ports "the FP8 feature from NCCL 2.24"; no log of ours shows one). With
    /// no version known, the newest enum is assumed.
    #[inline]
    pub fn from_nccl(v: i64, version: Option<NcclVersion>) -> DataType {
        let newer_than = |maj, min| version.is_none_or(|ver| ver >= NcclVersion::new(maj, min, 0));
        match v {
            0 => DataType::Int8,
            1 => DataType::Uint8,
            2 => DataType::Int32,
            3 => DataType::Uint32,
            4 => DataType::Int64,
            5 => DataType::Uint64,
            6 => DataType::Float16,
            7 => DataType::Float32,
            8 => DataType::Float64,
            9 if newer_than(2, 10) => DataType::Bfloat16,
            10 if newer_than(2, 24) => DataType::Float8E4M3,
            11 if newer_than(2, 24) => DataType::Float8E5M2,
            other => DataType::Unknown(other.clamp(i32::MIN as i64, i32::MAX as i64) as i32),
        }
    }

    /// Decodes profiler-plugin and Kineto spellings (`ncclFloat32`, `Float`, `c10::BFloat16`, `bf16`).
    pub fn from_name(name: &str) -> Option<DataType> {
        let n = name.trim_start_matches("ncclFloat8").to_ascii_lowercase();
        let n = n.trim_start_matches("nccl").trim_start_matches("c10::");
        Some(match n {
            "int8" | "char" => DataType::Int8,
            "uint8" | "byte" => DataType::Uint8,
            "int32" | "int" => DataType::Int32,
            "uint32" => DataType::Uint32,
            "int64" | "long" => DataType::Int64,
            "uint64" => DataType::Uint64,
            "float16" | "half" | "f16" | "fp16" => DataType::Float16,
            "float32" | "float" | "f32" | "fp32" => DataType::Float32,
            "float64" | "double" | "f64" | "fp64" => DataType::Float64,
            "bfloat16" | "bf16" => DataType::Bfloat16,
            "e4m3" | "float8e4m3" | "float8_e4m3fn" | "fp8_e4m3" => DataType::Float8E4M3,
            "e5m2" | "float8e5m2" | "float8_e5m2" | "fp8_e5m2" => DataType::Float8E5M2,
            _ => return None,
        })
    }

    /// Size of one element in bytes; `None` for unknown types.
    #[inline]
    pub fn size_bytes(self) -> Option<u64> {
        Some(match self {
            DataType::Int8 | DataType::Uint8 | DataType::Float8E4M3 | DataType::Float8E5M2 => 1,
            DataType::Float16 | DataType::Bfloat16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float32 => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Float64 => 8,
            DataType::Unknown(_) => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            DataType::Int8 => "int8",
            DataType::Uint8 => "uint8",
            DataType::Int32 => "int32",
            DataType::Uint32 => "uint32",
            DataType::Int64 => "int64",
            DataType::Uint64 => "uint64",
            DataType::Float16 => "float16",
            DataType::Float32 => "float32",
            DataType::Float64 => "float64",
            DataType::Bfloat16 => "bfloat16",
            DataType::Float8E4M3 => "float8e4m3",
            DataType::Float8E5M2 => "float8e5m2",
            DataType::Unknown(_) => "unknown",
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::Unknown(v) => write!(f, "unknown({v})"),
            other => f.write_str(other.name()),
        }
    }
}

/// `ncclRedOp_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
    /// `ncclAvg`, since NCCL 2.10.
    Avg,
    /// A user-created op (`ncclRedOpCreatePreMulSum`); NCCL numbers them from `ncclNumOps` up.
    User(i32),
    Unknown(i32),
}

impl RedOp {
    #[inline]
    pub fn from_nccl(v: i64, version: Option<NcclVersion>) -> RedOp {
        let has_avg = version.is_none_or(|ver| ver >= NcclVersion::new(2, 10, 0));
        let num_builtin = if has_avg { 5 } else { 4 };
        let v32 = v.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
        match v {
            0 => RedOp::Sum,
            1 => RedOp::Prod,
            2 => RedOp::Max,
            3 => RedOp::Min,
            4 if has_avg => RedOp::Avg,
            v if v >= num_builtin && has_avg => RedOp::User(v32),
            _ => RedOp::Unknown(v32),
        }
    }

    pub fn from_name(name: &str) -> Option<RedOp> {
        let n = name.to_ascii_lowercase();
        Some(match n.trim_start_matches("nccl") {
            "sum" => RedOp::Sum,
            "prod" | "product" => RedOp::Prod,
            "max" => RedOp::Max,
            "min" => RedOp::Min,
            "avg" | "premulsum" | "sumpostdiv" => RedOp::Avg,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Max => "max",
            RedOp::Min => "min",
            RedOp::Avg => "avg",
            RedOp::User(_) => "user",
            RedOp::Unknown(_) => "unknown",
        }
    }
}

impl fmt::Display for RedOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// NCCL collective algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Algorithm {
    Tree,
    Ring,
    CollNetDirect,
    CollNetChain,
    Nvls,
    NvlsTree,
    Pat,
}

impl Algorithm {
    /// Every algorithm, in NCCL's order (`NCCL_ALGO_TREE` = 0 … `NCCL_ALGO_PAT`).
    pub const ALL: [Algorithm; 7] = [
        Algorithm::Tree,
        Algorithm::Ring,
        Algorithm::CollNetDirect,
        Algorithm::CollNetChain,
        Algorithm::Nvls,
        Algorithm::NvlsTree,
        Algorithm::Pat,
    ];

    /// Decodes `RING`, `Ring`, `COLLNET_DIRECT`, `CollNetDirect`, `NVLS_TREE`, `PAT`.
    pub fn from_name(name: &[u8]) -> Option<Algorithm> {
        let mut buf = [0u8; 16];
        let mut n = 0;
        for &b in name {
            if b == b'_' {
                continue;
            }
            if n == buf.len() {
                return None;
            }
            buf[n] = b.to_ascii_uppercase();
            n += 1;
        }
        Some(match &buf[..n] {
            b"TREE" => Algorithm::Tree,
            b"RING" => Algorithm::Ring,
            b"COLLNETDIRECT" => Algorithm::CollNetDirect,
            b"COLLNETCHAIN" => Algorithm::CollNetChain,
            b"NVLS" => Algorithm::Nvls,
            b"NVLSTREE" => Algorithm::NvlsTree,
            b"PAT" => Algorithm::Pat,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Tree => "TREE",
            Algorithm::Ring => "RING",
            Algorithm::CollNetDirect => "COLLNET_DIRECT",
            Algorithm::CollNetChain => "COLLNET_CHAIN",
            Algorithm::Nvls => "NVLS",
            Algorithm::NvlsTree => "NVLS_TREE",
            Algorithm::Pat => "PAT",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// NCCL wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Protocol {
    Ll,
    Ll128,
    Simple,
}

impl Protocol {
    /// Every protocol, in NCCL's order (`NCCL_PROTO_LL` = 0, LL128, Simple).
    pub const ALL: [Protocol; 3] = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];

    pub fn from_name(name: &[u8]) -> Option<Protocol> {
        if name.eq_ignore_ascii_case(b"LL") {
            Some(Protocol::Ll)
        } else if name.eq_ignore_ascii_case(b"LL128") {
            Some(Protocol::Ll128)
        } else if name.eq_ignore_ascii_case(b"SIMPLE") {
            Some(Protocol::Simple)
        } else {
            None
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ll => "LL",
            Protocol::Ll128 => "LL128",
            Protocol::Simple => "SIMPLE",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_forms() {
        assert_eq!(NcclVersion::parse(b"2.27.7+cuda13.0"), Some(NcclVersion::new(2, 27, 7)));
        assert_eq!(
            NcclVersion::parse(b"2.26.6+cudaCUDA_MAJOR.CUDA_MINOR"),
            Some(NcclVersion::new(2, 26, 6))
        );
        assert_eq!(NcclVersion::parse(b"2.8"), Some(NcclVersion::new(2, 8, 0)));
        assert_eq!(NcclVersion::parse(b"x.1.2"), None);
        assert_eq!(NcclVersion::parse(b""), None);
        assert!(NcclVersion::new(2, 9, 9) < NcclVersion::new(2, 10, 0));
    }

    #[test]
    fn datatype_depends_on_version() {
        let old = Some(NcclVersion::new(2, 8, 4));
        let new = Some(NcclVersion::new(2, 27, 7));
        assert_eq!(DataType::from_nccl(9, old), DataType::Unknown(9));
        assert_eq!(DataType::from_nccl(9, new), DataType::Bfloat16);
        assert_eq!(DataType::from_nccl(10, Some(NcclVersion::new(2, 20, 5))), DataType::Unknown(10));
        assert_eq!(DataType::from_nccl(10, new), DataType::Float8E4M3);
        assert_eq!(DataType::from_nccl(7, None).size_bytes(), Some(4));
        assert_eq!(DataType::from_nccl(6, None).size_bytes(), Some(2));
        assert_eq!(DataType::from_nccl(-1, None).size_bytes(), None);
        assert_eq!(DataType::from_nccl(99, None), DataType::Unknown(99));
    }

    #[test]
    fn datatype_names() {
        assert_eq!(DataType::from_name("ncclFloat32"), Some(DataType::Float32));
        assert_eq!(DataType::from_name("ncclBfloat16"), Some(DataType::Bfloat16));
        assert_eq!(DataType::from_name("c10::BFloat16"), Some(DataType::Bfloat16));
        assert_eq!(DataType::from_name("Float"), Some(DataType::Float32));
        assert_eq!(DataType::from_name("complex"), None);
    }

    #[test]
    fn redop_depends_on_version() {
        assert_eq!(RedOp::from_nccl(4, Some(NcclVersion::new(2, 8, 4))), RedOp::Unknown(4));
        assert_eq!(RedOp::from_nccl(4, None), RedOp::Avg);
        assert_eq!(RedOp::from_nccl(7, None), RedOp::User(7));
        assert_eq!(RedOp::from_nccl(-3, None), RedOp::Unknown(-3));
    }

    #[test]
    fn algorithm_and_protocol_spellings() {
        assert_eq!(Algorithm::from_name(b"RING"), Some(Algorithm::Ring));
        assert_eq!(Algorithm::from_name(b"CollNetDirect"), Some(Algorithm::CollNetDirect));
        assert_eq!(Algorithm::from_name(b"COLLNET_CHAIN"), Some(Algorithm::CollNetChain));
        assert_eq!(Algorithm::from_name(b"NVLS_TREE"), Some(Algorithm::NvlsTree));
        assert_eq!(Algorithm::from_name(b"A_VERY_LONG_UNKNOWN_NAME"), None);
        assert_eq!(Protocol::from_name(b"LL128"), Some(Protocol::Ll128));
        assert_eq!(Protocol::from_name(b"Simple"), Some(Protocol::Simple));
        assert_eq!(Protocol::from_name(b"LL64"), None);
    }

    #[test]
    fn op_names_round_trip() {
        for k in OpKind::ALL {
            assert_eq!(OpKind::from_name(k.name().as_bytes()), Some(k));
        }
        assert!(OpKind::Send.is_p2p() && !OpKind::AllReduce.is_p2p());
    }
}
