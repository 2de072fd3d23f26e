//! The packed row of one operation ([`OpRow`], 48 bytes) and the codes of the
//! enums it packs into one 32-bit word. Everything an operation carries that
//! does not fit here lives in the rank's side tables (see [`super::RankOps`]).

use crate::enums::{Algorithm, DataType, OpKind, Protocol, RedOp};

/// One operation of a rank, packed. `cpu_ts` uses `i64::MIN` for `None`;
/// `bits` holds the kind, data type, reduction, algorithm, protocol, channel
/// range and presence flags; `buf` indexes the rank's (sendbuff, recvbuff)
/// pairs; `extra` is 0 or 1 + an index into the rank's extras.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpRow {
    pub count: u64,
    pub cpu_ts: i64,
    pub comm: u32,
    pub comm_seq: u32,
    pub seq: u32,
    pub line: u32,
    /// The root or the peer, whichever the flags say is present.
    pub root_or_peer: u32,
    pub bits: u32,
    pub buf: u32,
    pub extra: u32,
}

pub(crate) const NO_TS: i64 = i64::MIN;

// Bit layout of `OpRow::bits` (low to high).
const KIND_SHIFT: u32 = 0; // 4 bits: OpKind, or KIND_FULL
const DTYPE_SHIFT: u32 = 4; // 4 bits: DataType, DTYPE_RAW = Unknown(extra.dtype_raw)
const REDOP_SHIFT: u32 = 8; // 3 bits: 0 none, 1..=5 builtin, 6 User, 7 Unknown (raw in extra)
const ALGO_SHIFT: u32 = 11; // 3 bits: 0 none, 1..=7
const PROTO_SHIFT: u32 = 14; // 2 bits: 0 none, 1..=3
const CH_LO_SHIFT: u32 = 16; // 6 bits
const CH_HI_SHIFT: u32 = 22; // 6 bits
pub(crate) const F_RECOVERED: u32 = 1 << 28;
pub(crate) const F_ROOT: u32 = 1 << 29;
pub(crate) const F_PEER: u32 = 1 << 30;
pub(crate) const F_CHANNELS: u32 = 1 << 31;

/// Kind code of a row whose operation is stored whole in its extra: it did
/// not fit the row (a value above 32 bits, a size that is not
/// `count × sizeof(dtype)`, another process or device than the rank's, …).
pub(crate) const KIND_FULL: u32 = 15;
pub(crate) const DTYPE_RAW: u32 = 12;
pub(crate) const REDOP_USER: u32 = 6;
pub(crate) const REDOP_RAW: u32 = 7;
/// Channel ids up to 63 fit the row: NCCL's `MAXCHANNELS` is 64. Larger
/// ones (a future NCCL) make the operation a full one, nothing is lost.
pub(crate) const CH_MAX: u16 = 63;

const DTYPES: [DataType; 12] = [
    DataType::Int8,
    DataType::Uint8,
    DataType::Int32,
    DataType::Uint32,
    DataType::Int64,
    DataType::Uint64,
    DataType::Float16,
    DataType::Float32,
    DataType::Float64,
    DataType::Bfloat16,
    DataType::Float8E4M3,
    DataType::Float8E5M2,
];
const REDOPS: [RedOp; 5] = [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg];
const ALGOS: [Algorithm; 7] = Algorithm::ALL;
const PROTOS: [Protocol; 3] = Protocol::ALL;

#[inline]
fn field(bits: u32, shift: u32, width: u32) -> u32 {
    (bits >> shift) & ((1 << width) - 1)
}

#[inline]
pub(crate) fn kind_code(bits: u32) -> u32 {
    field(bits, KIND_SHIFT, 4)
}

#[inline]
pub(crate) fn kind_of(bits: u32) -> OpKind {
    OpKind::ALL[kind_code(bits) as usize]
}

/// The enum codes of an operation, with the raw integers of the open enum
/// variants (`DataType::Unknown`, `RedOp::User`/`Unknown`) that go to the extra.
pub(crate) struct Codes {
    pub bits: u32,
    pub dtype_raw: i32,
    pub redop_raw: i32,
}

/// Packs the enum fields and flags; `None` when the channel range does not fit.
pub(crate) fn encode(
    kind: OpKind,
    dtype: DataType,
    redop: Option<RedOp>,
    algo: Option<Algorithm>,
    proto: Option<Protocol>,
    channels: Option<(u16, u16)>,
    recovered: bool,
) -> Option<Codes> {
    let k = OpKind::ALL.iter().position(|&x| x == kind)? as u32;
    let (d, dtype_raw) = match dtype {
        DataType::Unknown(v) => (DTYPE_RAW, v),
        t => (DTYPES.iter().position(|&x| x == t)? as u32, 0),
    };
    let (r, redop_raw) = match redop {
        None => (0, 0),
        Some(RedOp::User(v)) => (REDOP_USER, v),
        Some(RedOp::Unknown(v)) => (REDOP_RAW, v),
        Some(op) => (1 + REDOPS.iter().position(|&x| x == op)? as u32, 0),
    };
    let a = algo.map_or(Some(0), |x| ALGOS.iter().position(|&y| y == x).map(|p| p as u32 + 1))?;
    let p = proto.map_or(Some(0), |x| PROTOS.iter().position(|&y| y == x).map(|p| p as u32 + 1))?;
    let mut bits = k << KIND_SHIFT | d << DTYPE_SHIFT | r << REDOP_SHIFT | a << ALGO_SHIFT | p << PROTO_SHIFT;
    if let Some((lo, hi)) = channels {
        if lo > CH_MAX || hi > CH_MAX {
            return None;
        }
        bits |= F_CHANNELS | (lo as u32) << CH_LO_SHIFT | (hi as u32) << CH_HI_SHIFT;
    }
    if recovered {
        bits |= F_RECOVERED;
    }
    Some(Codes { bits, dtype_raw, redop_raw })
}

#[inline]
pub(crate) fn dtype_of(bits: u32, raw: i32) -> DataType {
    match field(bits, DTYPE_SHIFT, 4) {
        DTYPE_RAW => DataType::Unknown(raw),
        d => DTYPES[d as usize],
    }
}

#[inline]
pub(crate) fn redop_of(bits: u32, raw: i32) -> Option<RedOp> {
    match field(bits, REDOP_SHIFT, 3) {
        0 => None,
        REDOP_USER => Some(RedOp::User(raw)),
        REDOP_RAW => Some(RedOp::Unknown(raw)),
        r => Some(REDOPS[r as usize - 1]),
    }
}

#[inline]
pub(crate) fn algo_of(bits: u32) -> Option<Algorithm> {
    match field(bits, ALGO_SHIFT, 3) {
        0 => None,
        a => Some(ALGOS[a as usize - 1]),
    }
}

#[inline]
pub(crate) fn proto_of(bits: u32) -> Option<Protocol> {
    match field(bits, PROTO_SHIFT, 2) {
        0 => None,
        p => Some(PROTOS[p as usize - 1]),
    }
}

#[inline]
pub(crate) fn channels_of(bits: u32) -> Option<(u16, u16)> {
    (bits & F_CHANNELS != 0).then(|| (field(bits, CH_LO_SHIFT, 6) as u16, field(bits, CH_HI_SHIFT, 6) as u16))
}

/// Whether an open-enum variant needs the extra (its raw integer lives there).
#[inline]
pub(crate) fn needs_raw(bits: u32) -> bool {
    field(bits, DTYPE_SHIFT, 4) == DTYPE_RAW || field(bits, REDOP_SHIFT, 3) >= REDOP_USER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_is_48_bytes() {
        assert!(std::mem::size_of::<OpRow>() <= 64, "{}", std::mem::size_of::<OpRow>());
        assert_eq!(std::mem::size_of::<OpRow>(), 48);
    }

    #[test]
    fn every_enum_value_round_trips() {
        for &k in &OpKind::ALL {
            for &d in DTYPES.iter().chain(&[DataType::Unknown(-7)]) {
                for r in [None, Some(RedOp::Avg), Some(RedOp::Sum), Some(RedOp::User(9)), Some(RedOp::Unknown(-1))] {
                    for a in std::iter::once(None).chain(ALGOS.iter().copied().map(Some)) {
                        for p in std::iter::once(None).chain(PROTOS.iter().copied().map(Some)) {
                            for ch in [None, Some((0, 63)), Some((5, 7))] {
                                let c = encode(k, d, r, a, p, ch, true).unwrap();
                                assert_eq!(kind_of(c.bits), k);
                                assert_eq!(dtype_of(c.bits, c.dtype_raw), d);
                                assert_eq!(redop_of(c.bits, c.redop_raw), r);
                                assert_eq!((algo_of(c.bits), proto_of(c.bits), channels_of(c.bits)), (a, p, ch));
                                assert!(c.bits & F_RECOVERED != 0);
                            }
                        }
                    }
                }
            }
        }
        assert!(encode(OpKind::Send, DataType::Int8, None, None, None, Some((0, 64)), false).is_none());
    }
}
