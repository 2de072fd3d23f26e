//! Parsers for the per-operation lines: `<Op>: opCount …` (enqueue) and
//! `NCCL CALL`/TRACE API lines such as `ncclSend(0,7f1f…,256,2,0,0,0x55…,0x55…)`;
//! the tuning line that may follow an operation is `ops_tuning`'s (its
//! items are re-exported here).
//!
//! The opCount grammar is parsed as key/value pairs so that field order and
//! extra fields of other NCCL versions do not break it; `[nranks=N]` is the
//! only bracketed token. A line cut by another writer parses in *partial* mode:
//! it is accepted when everything up to and including `comm` is present.
//! API call arguments are read where they stand, each in one pass (`ops_call`,
//! its items re-exported here).

use crate::bytes::{dec_i64, dec_u64, hex_u64, pointer};
use commlens_core::OpKind;

pub use super::ops_call::{parse_call_args, CallArgs};
pub use super::ops_tuning::{looks_like_tuning_line, parse_tuning_line, TuningLine};
pub(super) use super::ops_tuning::{decode_algo, decode_proto};

/// Fields of an opCount line, undecoded (enums need the NCCL version).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpLine {
    pub kind: Option<OpKind>,
    pub op_count: Option<u64>,
    pub sendbuff: Option<u64>,
    pub recvbuff: Option<u64>,
    pub count: Option<u64>,
    pub datatype: Option<i64>,
    pub redop: Option<i64>,
    pub root: Option<i64>,
    pub comm: Option<u64>,
    pub nranks: Option<u32>,
    pub stream: Option<u64>,
}

/// Why an opCount line was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpLineError {
    UnknownOp,
    /// A required field is missing or malformed; names the field.
    Field(&'static str),
}

/// Is this message an opCount line? (`<Name>: opCount `)
#[inline]
pub fn is_op_line(msg: &[u8]) -> Option<usize> {
    let colon = colon_in_24(msg)?;
    if msg[colon + 1..].starts_with(b" opCount ") {
        Some(colon)
    } else {
        None
    }
}

/// The first `:` among the first 24 bytes of `msg`, where the name of an
/// operation ends. Eight bytes at a time: a byte of `w ^ ':'` is zero where
/// `w` has a colon, and the lowest byte that the zero-byte test flags is a
/// true zero (a false flag needs a borrow from a lower zero byte).
#[inline]
pub(super) fn colon_in_24(msg: &[u8]) -> Option<usize> {
    byte_in_24(msg, b':')
}

/// The first `needle` among the first 24 bytes of `msg` (see [`colon_in_24`]).
#[inline]
pub(super) fn byte_in_24(msg: &[u8], needle: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let n = msg.len().min(24);
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(msg[i..i + 8].try_into().expect("8 bytes")) ^ (ONES * u64::from(needle));
        let zero = x.wrapping_sub(ONES) & !x & (ONES << 7);
        if zero != 0 {
            return Some(i + (zero.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    msg[i..n].iter().position(|&b| b == needle).map(|p| i + p)
}

/// Parses an opCount line. With `partial`, missing fields after `comm` are
/// tolerated (the line was cut by another writer).
pub fn parse_op_line(msg: &[u8], colon: usize, partial: bool) -> Result<OpLine, OpLineError> {
    if !partial {
        let mut memo = super::ops_fast::OpMemo::default();
        if let Some(op) = super::ops_fast::parse_op_canonical(msg, colon, &mut memo) {
            return Ok(op.to_line());
        }
    }
    parse_op_line_general(msg, colon, partial)
}

/// [`parse_op_line`] without the fixed-order shortcut: the reference it is
/// tested against.
pub fn parse_op_line_general(msg: &[u8], colon: usize, partial: bool) -> Result<OpLine, OpLineError> {
    let (op, last_ok) = parse_op_fields(msg, colon, partial)?;
    if let Some(missing) = op.missing_required() {
        return Err(OpLineError::Field(missing));
    }
    if !partial && (!last_ok || op.stream.is_none()) {
        return Err(OpLineError::Field("stream"));
    }
    Ok(op)
}

/// Reads whatever fields an opCount line has, stopping at the first malformed
/// (or, with `partial`, possibly truncated) value. The flag says whether the
/// line ended cleanly.
pub fn parse_op_fields(msg: &[u8], colon: usize, partial: bool) -> Result<(OpLine, bool), OpLineError> {
    let mut op = OpLine { kind: OpKind::from_name(&msg[..colon]), ..OpLine::default() };
    if op.kind.is_none() {
        return Err(OpLineError::UnknownOp);
    }
    let last_ok = continue_op_fields(&mut op, &msg[colon + 1..], partial);
    Ok((op, last_ok))
}

/// The key/value loop of [`parse_op_fields`] over `rest`, storing into `op`;
/// returns whether the line ended cleanly.
pub(super) fn continue_op_fields(op: &mut OpLine, mut rest: &[u8], partial: bool) -> bool {
    let mut last_ok = true;
    loop {
        let (key, r) = crate::bytes::next_token(rest);
        if key.is_empty() {
            break;
        }
        if key.starts_with(b"[nranks=") && key.ends_with(b"]") {
            op.nranks = dec_u64(&key[8..key.len() - 1]).and_then(|v| u32::try_from(v).ok());
            rest = r;
            continue;
        }
        let (val, r2) = crate::bytes::next_token(r);
        // A value is known complete when a space follows it.
        let terminated = r.len() > r.iter().position(|&b| b != b' ').unwrap_or(r.len()) + val.len();
        let complete = terminated || !partial;
        if val.is_empty() {
            last_ok = false;
            break;
        }
        let ok = match key {
            b"opCount" => set(&mut op.op_count, hex_u64(val)),
            b"sendbuff" => set(&mut op.sendbuff, pointer(val)),
            b"recvbuff" => set(&mut op.recvbuff, pointer(val)),
            b"count" => set(&mut op.count, dec_u64(val)),
            b"datatype" => set(&mut op.datatype, dec_i64(val)),
            b"op" => set(&mut op.redop, dec_i64(val)),
            b"root" => set(&mut op.root, dec_i64(val)),
            b"comm" => set(&mut op.comm, pointer(val)),
            b"stream" => set(&mut op.stream, pointer(val)),
            _ => true,
        };
        if !ok || !complete {
            // A malformed or possibly truncated value: drop it and stop.
            match key {
                b"opCount" => op.op_count = None,
                b"sendbuff" => op.sendbuff = None,
                b"recvbuff" => op.recvbuff = None,
                b"stream" => op.stream = None,
                b"comm" => op.comm = None,
                b"root" => op.root = None,
                b"op" => op.redop = None,
                b"datatype" => op.datatype = None,
                b"count" => op.count = None,
                _ => {}
            }
            last_ok = false;
            break;
        }
        rest = r2;
    }
    last_ok
}

impl OpLine {
    /// The first field a usable record needs that is missing.
    pub fn missing_required(&self) -> Option<&'static str> {
        if self.op_count.is_none() {
            Some("opCount")
        } else if self.count.is_none() {
            Some("count")
        } else if self.datatype.is_none() {
            Some("datatype")
        } else if self.comm.is_none() {
            Some("comm")
        } else {
            None
        }
    }

    /// Completes a line cut by another writer with the arguments of the API
    /// call line that NCCL prints right after it on the same thread. Returns
    /// false (changing nothing) when the two disagree on a field both have.
    pub fn fill_from_call(&mut self, call: &CallArgs) -> bool {
        if self.kind != Some(call.kind) {
            return false;
        }
        let agree = |a: Option<u64>, b: u64| a.is_none_or(|a| a == b);
        if !agree(self.sendbuff, call.sendbuff)
            || !agree(self.recvbuff, call.recvbuff)
            || !agree(self.count, call.count)
            || !agree(self.comm, call.comm)
            || self.datatype.is_some_and(|d| d != call.datatype)
            || self.root.is_some_and(|r| r != call.root)
        {
            return false;
        }
        self.sendbuff = Some(call.sendbuff);
        self.recvbuff = Some(call.recvbuff);
        self.count = Some(call.count);
        self.datatype = Some(call.datatype);
        self.redop = Some(call.redop);
        self.root = Some(call.root);
        self.comm = Some(call.comm);
        self.stream = Some(call.stream);
        true
    }
}

/// A byte cursor that reads a decimal run (`unsigned`, each cursor with its
/// own rule for where a value ends) and so, with an optional sign, a signed
/// value (`dec_i64`'s grammar). The API call reader and the opCount line's
/// cursor (`ops_fast`) share [`SignedDec::signed`].
pub(super) trait SignedDec {
    /// Consumes a `-` (`Some(true)`) or `+` (`Some(false)`); `None` when
    /// neither is there.
    fn sign(&mut self) -> Option<bool>;
    fn unsigned(&mut self) -> Option<u64>;

    /// An optional sign, then [`SignedDec::unsigned`].
    #[inline(always)]
    fn signed(&mut self) -> Option<i64> {
        let neg = self.sign();
        let v = i64::try_from(self.unsigned()?).ok()?;
        Some(if neg == Some(true) { -v } else { v })
    }
}

/// [`SignedDec::sign`] over `s` at `*p`.
#[inline(always)]
pub(super) fn take_sign(s: &[u8], p: &mut usize) -> Option<bool> {
    let neg = match s.get(*p) {
        Some(b'-') => true,
        Some(b'+') => false,
        _ => return None,
    };
    *p += 1;
    Some(neg)
}

#[inline]
fn set<T>(slot: &mut Option<T>, v: Option<T>) -> bool {
    let ok = v.is_some();
    *slot = v;
    ok
}

/// An API call line: `ncclSend(0,7f1f…,256,2,0,0,0x55…,0x55…)` → name and args.
pub fn parse_call(msg: &[u8]) -> Option<(&[u8], usize)> {
    let open = memchr::memchr(b'(', msg)?;
    let name = &msg[..open];
    if !name.starts_with(b"nccl") || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_') {
        return None;
    }
    let close = memchr::memchr(b')', &msg[open..])? + open;
    let args = &msg[open + 1..close];
    let n_args = if args.is_empty() { 0 } else { args.iter().filter(|&&b| b == b',').count() + 1 };
    Some((name, n_args))
}

#[cfg(test)]
mod tests {
    use super::super::ops_fast::parse_op_canonical;
    use super::*;
    use commlens_core::{Algorithm, Protocol};

    const AR: &[u8] = b"AllReduce: opCount 1f sendbuff 0x720000000 recvbuff 0x920000000 count 2097152 datatype 7 op 0 root 0 comm 0x55b6aa64a990 [nranks=2] stream 0x55b6a98daaf0";

    #[test]
    fn full_op_line() {
        let c = is_op_line(AR).unwrap();
        let op = parse_op_line(AR, c, false).unwrap();
        assert_eq!(op.kind, Some(OpKind::AllReduce));
        assert_eq!(op.op_count, Some(0x1f));
        assert_eq!(op.count, Some(2097152));
        assert_eq!(op.datatype, Some(7));
        assert_eq!(op.redop, Some(0));
        assert_eq!(op.comm, Some(0x55b6aa64a990));
        assert_eq!(op.nranks, Some(2));
        assert_eq!(op.stream, Some(0x55b6a98daaf0));
    }

    #[test]
    fn fast_path_agrees_with_general_parser() {
        let lines: [&[u8]; 4] = [
            AR,
            b"Send: opCount 0 sendbuff (nil) recvbuff 0x7f1fd2c00000 count 256 datatype 2 op 0 root 3 comm 0x55f7d902f5e0 [nranks=4] stream 0x55f7d84eb710",
            b"AllReduce: opCount 0 sendbuff 0x7fd9f7780000 recvbuff 0x7fd9f7780000 count 131072 datatype 6 op 0 root 0 comm 0x447b8890 stream 0x32dc6760",
            b"Broadcast: opCount 3 sendbuff 0x1 recvbuff 0x2 count 9 datatype 0 op 0 root 1 comm 0x3 [nranks=2] stream 0x4 extra 5",
        ];
        for l in lines {
            let c = is_op_line(l).unwrap();
            let general = parse_op_fields(l, c, false).unwrap().0;
            assert_eq!(parse_op_line(l, c, false).unwrap(), general, "{}", String::from_utf8_lossy(l));
        }
        // A trailing unknown field is left to the general parser.
        assert!(parse_op_canonical(lines[3], is_op_line(lines[3]).unwrap(), &mut Default::default()).is_none());
        assert!(parse_op_canonical(AR, is_op_line(AR).unwrap(), &mut Default::default()).is_some());
    }

    /// The canonical-first field reader agrees with the general loop on every
    /// truncation of canonical lines, and on lines with one byte changed.
    #[test]
    fn fast_field_reader_agrees_with_general_loop() {
        use super::super::ops_fast::parse_op_fields_fast;
        let lines: [&[u8]; 4] = [
            AR,
            b"Send: opCount 0 sendbuff (nil) recvbuff 0x7f1fd2c00000 count 256 datatype 2 op 0 root 3 comm 0x55f7d902f5e0 [nranks=4] stream 0x55f7d84eb710",
            b"AllReduce: opCount 0 sendbuff 0x7fd9f7780000 recvbuff 0x7fd9f7780000 count 131072 datatype -6 op +0 root 0 comm 0X447b8890 stream 0x32dc6760 x 1",
            b"Broadcast: opCount 3 sendbuff 0x1 recvbuff 0x2 count 18446744073709551615 datatype 0 op 0 root 1 comm 0x3 [nranks=4294967295] stream 0x4 stream 0x5",
        ];
        let check = |l: &[u8]| {
            let Some(c) = is_op_line(l) else { return };
            for partial in [true, false] {
                assert_eq!(parse_op_fields_fast(l, c, partial), parse_op_fields(l, c, partial), "{}", String::from_utf8_lossy(l));
            }
            let canonical = parse_op_canonical(l, c, &mut Default::default());
            if let Some(op) = canonical {
                assert_eq!(Ok(op.to_line()), parse_op_line_general(l, c, false), "{}", String::from_utf8_lossy(l));
            }
        };
        for l in lines {
            for cut in 0..=l.len() {
                check(&l[..cut]);
            }
            for at in 0..l.len() {
                for b in *b"0 x9f(-+]:[" {
                    let mut m = l.to_vec();
                    m[at] = b;
                    check(&m);
                    m.insert(at, b);
                    check(&m);
                }
                let mut m = l.to_vec();
                m.remove(at);
                check(&m);
            }
        }
    }

    #[test]
    fn thesis_form_without_nranks() {
        let l = b"AllReduce: opCount 0 sendbuff 0x7fd9f7780000 recvbuff 0x7fd9f7780000 count 131072 datatype 6 op 0 root 0 comm 0x447b8890 stream 0x32dc6760";
        let op = parse_op_line(l, is_op_line(l).unwrap(), false).unwrap();
        assert_eq!(op.nranks, None);
        assert_eq!(op.comm, Some(0x447b8890));
    }

    #[test]
    fn send_with_nil_sendbuff() {
        let l = b"Send: opCount 0 sendbuff (nil) recvbuff 0x7f1fd2c00000 count 256 datatype 2 op 0 root 3 comm 0x55f7d902f5e0 [nranks=4] stream 0x55f7d84eb710";
        let op = parse_op_line(l, is_op_line(l).unwrap(), false).unwrap();
        assert_eq!(op.kind, Some(OpKind::Send));
        assert_eq!(op.sendbuff, Some(0));
        assert_eq!(op.root, Some(3));
    }

    #[test]
    fn every_truncation_is_handled() {
        // Strict mode rejects every proper prefix that ends before the stream
        // value (a cut inside the last value looks like a shorter pointer);
        // partial mode accepts exactly those that keep the whole comm pointer.
        let comm_end = memchr::memmem::find(AR, b"0x55b6aa64a990").unwrap() + 14;
        let stream_value = memchr::memmem::find(AR, b"stream 0x").unwrap() + 9;
        for cut in 0..AR.len() {
            let msg = &AR[..cut];
            let Some(c) = is_op_line(msg) else { continue };
            if cut <= stream_value {
                assert!(parse_op_line(msg, c, false).is_err(), "strict accepted cut {cut}");
            }
            let partial = parse_op_line(msg, c, true);
            if cut > comm_end {
                let op = partial.unwrap();
                assert_eq!(op.comm, Some(0x55b6aa64a990), "cut {cut}");
                assert_eq!(op.stream, None);
            } else {
                assert!(partial.is_err(), "partial accepted cut {cut}");
            }
        }
    }

    #[test]
    fn rejects_bad_values() {
        let l = b"AllGather: opCount 5 sendbuff 0x70237e000000 recvbuff 0x70237e000000 count 0 datatype 7 op 0 root 0 comm 9 NCCL TRACE ncclAllGather(1,2)";
        assert_eq!(parse_op_line(l, is_op_line(l).unwrap(), false), Err(OpLineError::Field("comm")));
        let l = b"Frobnicate: opCount 0 count 1";
        assert_eq!(parse_op_line(l, is_op_line(l).unwrap(), false), Err(OpLineError::UnknownOp));
    }

    #[test]
    fn tuning_lines() {
        let t = parse_tuning_line(b"AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}").unwrap();
        assert_eq!(t.kind, OpKind::AllReduce);
        assert_eq!(t.bytes, 8388608);
        assert_eq!(t.algo, Some(Algorithm::Ring));
        assert_eq!(t.proto, Some(Protocol::Simple));
        assert_eq!(t.channels, Some((0, 23)));
        let t = parse_tuning_line(b"AllReduce:     1048576 Bytes -> Algo 0 proto 1 time 33.360001").unwrap();
        assert_eq!((t.algo, t.proto, t.channels), (Some(Algorithm::Tree), Some(Protocol::Ll128), None));
        assert!(parse_tuning_line(b"AllReduce: x Bytes -> Algo RING").is_none());
        assert!(parse_tuning_line(b"AllReduce: 12 Bytes").is_none());
        // The spellings decoded first give what the general decoding gives.
        Algorithm::ALL.iter().for_each(|a| assert_eq!(decode_algo(a.name().as_bytes()), Algorithm::from_name(a.name().as_bytes())));
        Protocol::ALL.iter().for_each(|p| assert_eq!(decode_proto(p.name().as_bytes()), Protocol::from_name(p.name().as_bytes())));
    }

    #[test]
    fn broken_line_completed_by_call() {
        let l = b"Send: opCount d sendbuff (nil";
        let (mut op, _) = parse_op_fields(l, is_op_line(l).unwrap(), true).unwrap();
        assert_eq!((op.op_count, op.sendbuff, op.comm), (Some(0xd), None, None));
        let call = parse_call_args(b"ncclSend(0,7f4d52c06000,512,2,0,0,0x558e72d8e6a0,0x558e7224b640)").unwrap();
        assert!(op.fill_from_call(&call));
        assert_eq!(op.missing_required(), None);
        assert_eq!((op.count, op.comm, op.stream), (Some(512), Some(0x558e72d8e6a0), Some(0x558e7224b640)));
        // A call of another kind or with other values does not complete it.
        let (mut op2, _) = parse_op_fields(b"Recv: opCount d sendbuff (nil) recvbuff 0x1 count 9", 4, true).unwrap();
        assert!(!op2.fill_from_call(&call));
        let recv = parse_call_args(b"ncclRecv(0,7f4d53006000,512,2,0,0,0x558e72d8e6a0,0x558e7224b640)").unwrap();
        assert!(!op2.fill_from_call(&recv), "recvbuff differs");
        assert!(parse_call_args(b"ncclGroupEnd()").is_none());
        assert!(parse_call_args(b"ncclSend(0,7f4d,512,2,0,0,0x55").is_none());
        // Against splitting at the separators and the slice parsers, with
        // arguments at and past every limit (digits, signs, sixteen hex digits).
        let reference = |m: &[u8]| -> Option<CallArgs> {
            let open = m.iter().position(|&b| b == b'(')?;
            let close = open + m[open..].iter().position(|&b| b == b')')?;
            let a: Vec<&[u8]> = m[open + 1..close].split(|&b| b == b',').collect();
            if a.len() != 8 || !m[..open].iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_') {
                return None;
            }
            Some(CallArgs {
                kind: OpKind::from_name(m[..open].strip_prefix(b"nccl")?)?,
                sendbuff: hex_u64(a[0])?,
                recvbuff: hex_u64(a[1])?,
                count: dec_u64(a[2])?,
                datatype: dec_i64(a[3])?,
                redop: dec_i64(a[4])?,
                root: dec_i64(a[5])?,
                comm: hex_u64(a[6])?,
                stream: hex_u64(a[7])?,
            })
        };
        let hexes = ["0", "0x", "7f4d52c06000", "ffffffffffffffff", "1ffffffffffffffff", "0x0123456789abcdef", "0x0123456789abcdef0", "g1", ""];
        let decs = ["0", "-1", "+7", "-", "18446744073709551615", "18446744073709551616", "00000000000000000001", "000000000000000000001", "9223372036854775808", "-9223372036854775808", "1a"];
        for h in hexes {
            for d in decs {
                let m = format!("ncclAllReduce({h},{h},{d},{d},{d},{d},{h},{h})");
                assert_eq!(parse_call_args(m.as_bytes()), reference(m.as_bytes()), "{m}");
                let m = format!("ncclSend({h},7f,{d},2,0,{d},0x55,{h})");
                assert_eq!(parse_call_args(m.as_bytes()), reference(m.as_bytes()), "{m}");
            }
        }
    }

    #[test]
    fn call_lines() {
        assert_eq!(
            parse_call(b"ncclSend(0,7f1fd2c00000,256,2,0,0,0x55f7d902f5e0,0x55f7d84eb710)"),
            Some((&b"ncclSend"[..], 8))
        );
        assert_eq!(parse_call(b"ncclGroupEnd()"), Some((&b"ncclGroupEnd"[..], 0)));
        assert_eq!(parse_call(b"Send: opCount"), None);
        assert_eq!(parse_call(b"ncclGroupStar"), None);
    }
}
