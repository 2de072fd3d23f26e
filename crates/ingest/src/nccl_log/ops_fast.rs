//! Shortcut for the opCount line, the most frequent line of a log: a parse
//! for the one field order every NCCL version prints, reading each value in
//! the pass that finds its end.
//!
//! [`parse_op_canonical`] gives exactly what
//! [`super::ops::parse_op_line_general`] gives, or nothing (the caller then
//! runs the general parser); it remembers the line tails of recent lines
//! ([`OpMemo`]), from ` count ` and from ` comm ` on, which repeat on almost
//! every line of a thread.
//! The memo itself ([`Recent`], its wide compare) is `ops_memo`.
//! [`parse_op_fields_fast`] reads the fields of a line cut by another writer:
//! the canonical fields as far as they go, then the general key/value loop for
//! the rest. [`parse_tuning_canonical_at`] does the same for the tuning line.
//! The tests in `tests/fast_paths.rs` read every real log both ways; the
//! byte-level pieces (the memo's wide compare, the 16-byte hex run, the
//! opCount's short-run read) are tested against plain references in
//! `ops_fast_tests.rs`.

use super::ops::{continue_op_fields, decode_algo, decode_proto, take_sign, OpLine, OpLineError, SignedDec, TuningLine};
use super::state_ops::CanonOp;
use crate::bytes::hex_digit;

#[path = "ops_memo.rs"]
mod memo;
pub(super) use memo::Recent;
use commlens_core::OpKind;

/// Fast path for the field order every NCCL from 2.7 to 2.28 prints:
/// `opCount sendbuff recvbuff count datatype op root comm [nranks=N] stream`.
/// Returns `None` on any deviation; the general parser then decides. Each
/// value is read in the same pass that checks its end, and accepts exactly
/// what the general parser's value parsers accept (see `Cursor`).
pub(super) fn parse_op_canonical(msg: &[u8], colon: usize, memo: &mut OpMemo) -> Option<CanonOp> {
    if !msg[colon + 1..].starts_with(b" opCount ") {
        return None;
    }
    parse_op_canonical_after(msg, colon, memo)
}

/// [`parse_op_canonical`] for a message known to hold ` opCount ` after the
/// colon (the reader tested it to tell the line's kind; testing it again
/// cost every operation line).
pub(super) fn parse_op_canonical_after(msg: &[u8], colon: usize, memo: &mut OpMemo) -> Option<CanonOp> {
    debug_assert!(msg[colon + 1..].starts_with(b" opCount "));
    let kind = OpKind::from_name(&msg[..colon])?;
    // Literal, then value, each called directly: passed as function values
    // (`field`) the pointer reads stopped being inlined.
    let mut c = Cursor { s: msg, p: colon + 1 + b" opCount ".len() };
    let op_count = c.hex()?;
    c.lit(b" sendbuff ")?;
    let sendbuff = c.pointer()?;
    c.lit(b" recvbuff ")?;
    let recvbuff = c.pointer()?;
    // What follows is a function of the tail's bytes alone: a remembered
    // tail gives the fields it gave before. Tails from ` count ` repeat on
    // most lines of a thread, tails from ` comm ` on nearly all.
    let count_tail = &msg[c.p..];
    // A hit is copied once, from the memo into the result (a value
    // returned by `lookup` was copied out and then again into the result).
    if let Some(t) = memo.counts.lookup(count_tail) {
        return Some(CanonOp { kind, op_count, sendbuff, recvbuff, tail: *t });
    }
    let count = c.field(b" count ", Cursor::dec)?;
    let datatype = c.field(b" datatype ", Cursor::signed)?;
    let redop = c.field(b" op ", Cursor::signed)?;
    let root = c.field(b" root ", Cursor::signed)?;
    let comm_tail = &msg[c.p..];
    let comm = match memo.comms.lookup(comm_tail) {
        Some(t) => *t,
        None => {
            let t = parse_comm_tail(comm_tail)?;
            memo.comms.insert(comm_tail, t);
            t
        }
    };
    let t = CountTail { count, datatype, redop, root, comm };
    memo.counts.insert(count_tail, t);
    Some(CanonOp { kind, op_count, sendbuff, recvbuff, tail: t })
}

/// `␠comm 0x… [␠[nranks=N]] ␠stream 0x…` up to the end of the message.
fn parse_comm_tail(tail: &[u8]) -> Option<CommTail> {
    let mut c = Cursor { s: tail, p: 0 };
    let comm = c.field(b" comm ", Cursor::pointer)?;
    let mut nranks = None;
    if c.lit(b" [nranks=").is_some() {
        let n = c.digits()?;
        c.lit(b"]")?;
        nranks = Some(u32::try_from(n).ok()?);
    }
    c.lit(b" stream ")?;
    let stream = c.pointer()?;
    (c.p == tail.len()).then_some(CommTail { comm, nranks, stream })
}

/// Shortcut for the tuning line as recent NCCL prints it, single-spaced:
/// `<Op>: <n> Bytes -> Algo <A> proto <P>` and, optionally, ` channel{Lo..Hi}={a..b}`
/// ending the message. Gives exactly what [`parse_tuning_line`] gives, or
/// `None` on any deviation (the caller then runs it): every token is read
/// where it stands and must end where splitting at spaces would end it.
/// `colon` is the first colon among the first 24 bytes (the caller has it).
pub(super) fn parse_tuning_canonical_at(msg: &[u8], colon: usize) -> Option<TuningLine> {
    let kind = OpKind::from_name(&msg[..colon])?;
    let mut c = Cursor { s: msg, p: colon + 1 };
    c.lit(b" ")?;
    let bytes = c.digits()?;
    c.lit(b" Bytes -> Algo ")?;
    let algo = c.word()?;
    c.lit(b" proto ")?;
    let proto = c.word()?;
    let mut channels = None;
    if c.p < msg.len() {
        c.lit(b" channel{Lo..Hi}={")?;
        let lo = u16::try_from(c.digits()?).ok()?;
        c.lit(b"..")?;
        let hi = u16::try_from(c.digits()?).ok()?;
        c.lit(b"}")?;
        if c.p != msg.len() {
            return None;
        }
        channels = Some((lo, hi));
    }
    Some(TuningLine { kind, bytes, algo: decode_algo(algo), proto: decode_proto(proto), channels })
}

/// The fields a line tail from ` comm ` gives.
#[derive(Clone, Copy, Default, Debug)]
pub(super) struct CommTail {
    pub(super) comm: u64,
    pub(super) nranks: Option<u32>,
    pub(super) stream: u64,
}

/// The fields a line tail from ` count ` gives.
#[derive(Clone, Copy, Default, Debug)]
pub(super) struct CountTail {
    pub(super) count: u64,
    pub(super) datatype: i64,
    pub(super) redop: i64,
    pub(super) root: i64,
    pub(super) comm: CommTail,
}

/// The line tails of recent opCount lines that the canonical parse accepted.
#[derive(Default)]
pub(super) struct OpMemo {
    counts: Recent<CountTail>,
    comms: Recent<CommTail>,
}

/// [`super::ops::parse_op_fields`], reading the canonical fields first.
///
/// The general loop reads `key value` pairs from left to right, and what it
/// does with a pair depends only on that pair: it stores the value, or it
/// stops. The canonical read below stores a pair only when the general loop
/// would store the same value and go on: the key is followed by one space and
/// the value, the value is followed by a space (so it is complete even in
/// partial mode) and is accepted by the same rules. It stops before the first
/// pair it is not sure of, and the general loop takes over there, in the
/// state it would have reached by itself.
pub(super) fn parse_op_fields_fast(
    msg: &[u8],
    colon: usize,
    partial: bool,
) -> Result<(OpLine, bool), OpLineError> {
    let Some(kind) = OpKind::from_name(&msg[..colon]) else {
        return Err(OpLineError::UnknownOp);
    };
    let mut op = OpLine { kind: Some(kind), ..OpLine::default() };
    let at = canonical_prefix(msg, colon, &mut op);
    let last_ok = continue_op_fields(&mut op, &msg[at..], partial);
    Ok((op, last_ok))
}

/// Reads the canonical fields from `colon + 1` while each is `␠key␠value`
/// with a valid value followed by a space, storing them in `op`. Returns the
/// position of the space before the first field not read.
fn canonical_prefix(msg: &[u8], colon: usize, op: &mut OpLine) -> usize {
    let mut c = Cursor { s: msg, p: colon + 1 };
    macro_rules! field {
        ($lit:expr, $read:ident, $slot:ident) => {
            let start = c.p;
            match if c.lit($lit).is_some() { c.$read() } else { None } {
                Some(v) if c.at_space() => op.$slot = Some(v),
                _ => return start,
            }
        };
    }
    field!(b" opCount ", hex, op_count);
    field!(b" sendbuff ", pointer, sendbuff);
    field!(b" recvbuff ", pointer, recvbuff);
    field!(b" count ", dec, count);
    field!(b" datatype ", signed, datatype);
    field!(b" op ", signed, redop);
    field!(b" root ", signed, root);
    field!(b" comm ", pointer, comm);
    let start = c.p;
    if c.lit(b" [nranks=").is_some() {
        // The general loop takes `[nranks=N]` as one token and parses N.
        match c.digits().and_then(|v| u32::try_from(v).ok()) {
            Some(v) if c.lit(b"]").is_some() && c.at_space() => op.nranks = Some(v),
            _ => return start,
        }
    }
    field!(b" stream ", pointer, stream);
    c.p
}

/// Reads the fixed-order opCount line. Every value must end at a space or at
/// the end of the message, as a space-delimited token would, and is accepted
/// by the same rules as `hex_u64`, `pointer`, `dec_u64` and `dec_i64`.
struct Cursor<'a> {
    s: &'a [u8],
    p: usize,
}

impl SignedDec for Cursor<'_> {
    #[inline(always)]
    fn sign(&mut self) -> Option<bool> {
        take_sign(self.s, &mut self.p)
    }
    #[inline(always)]
    fn unsigned(&mut self) -> Option<u64> {
        self.dec()
    }
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    fn lit(&mut self, l: &[u8]) -> Option<()> {
        if self.s.get(self.p..self.p + l.len())? == l {
            self.p += l.len();
            Some(())
        } else {
            None
        }
    }

    #[inline(always)]
    fn at_space(&self) -> bool {
        self.s.get(self.p) == Some(&b' ')
    }

    /// `lit`, then a value read by `read`.
    #[inline(always)]
    fn field<T>(&mut self, lit: &[u8], read: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        self.lit(lit)?;
        read(self)
    }

    /// A non-empty run of bytes other than a space.
    #[inline(always)]
    fn word(&mut self) -> Option<&'a [u8]> {
        let start = self.p;
        while self.s.get(self.p).is_some_and(|&b| b != b' ') {
            self.p += 1;
        }
        (self.p > start).then(|| &self.s[start..self.p])
    }

    /// At a value's end: a space or the end of the message.
    #[inline(always)]
    fn value_end(&self) -> Option<()> {
        match self.s.get(self.p) {
            None | Some(b' ') => Some(()),
            _ => None,
        }
    }

    /// 1 to 20 decimal digits without overflow (not checking the end).
    #[inline(always)]
    fn digits(&mut self) -> Option<u64> {
        let start = self.p;
        let mut i = start;
        let mut v: u64 = 0;
        // Up to 19 digits cannot overflow; the 20th is checked.
        while let Some(&b) = self.s.get(i) {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            if i - start >= 19 {
                v = v.checked_mul(10)?.checked_add(d as u64)?;
            } else {
                v = v * 10 + d as u64;
            }
            i += 1;
        }
        if i == start || i - start > 20 {
            return None;
        }
        self.p = i;
        Some(v)
    }

    #[inline(always)]
    fn dec(&mut self) -> Option<u64> {
        // One digit and a space: `datatype 7 op 0 root 0`.
        if let (Some(&b), Some(b' ')) = (self.s.get(self.p), self.s.get(self.p + 1)) {
            let d = b.wrapping_sub(b'0');
            if d <= 9 {
                self.p += 1;
                return Some(d as u64);
            }
        }
        let v = self.digits()?;
        self.value_end()?;
        Some(v)
    }

    /// 1 to 16 hex digits after an optional `0x`/`0X`.
    #[inline(always)]
    fn hex(&mut self) -> Option<u64> {
        if self.s.get(self.p) == Some(&b'0') && matches!(self.s.get(self.p + 1), Some(b'x' | b'X')) {
            self.p += 2;
        }
        // OpCounts are short (1 to 3 digits on every line of the bench
        // sample): a byte at a time, a run of up to three digits that a space
        // ends is the value `hex_digits` reads, for fewer instructions than
        // its 16-byte read. Anything else goes to `hex_digits`. The four
        // bytes are taken at once (an opCount line has them: the sendbuff
        // follows), so that no byte is bounds-checked on its own.
        if let Some(w) = self.s.get(self.p..self.p + 4) {
            let w: &[u8; 4] = w.try_into().expect("4 bytes");
            let (mut v, mut k) = (0u64, 0);
            while k < 3 {
                let d = hex_digit(w[k]);
                if d > 15 {
                    break;
                }
                v = (v << 4) | d as u64;
                k += 1;
            }
            if k > 0 && w[k] == b' ' {
                self.p += k;
                return Some(v);
            }
        }
        self.hex_digits()
    }

    /// 1 to 16 hex digits and the value's end.
    #[inline(always)]
    fn hex_digits(&mut self) -> Option<u64> {
        // Sixteen bytes at once where the message has them (pointers and
        // opCounts are read on every operation line; a digit at a time was
        // a quarter of this parse).
        let (k, v) = match self.s.get(self.p..self.p + 16) {
            Some(w) => hex_run16(w),
            None => hex_run_short(&self.s[self.p.min(self.s.len())..]),
        };
        // With k == 16 a 17th digit makes the run too long: it is no value
        // end either, so both ways give `None`.
        if k == 0 || k > 16 {
            return None;
        }
        self.p += k;
        self.value_end()?;
        Some(v)
    }

    /// `(nil)`, or `0x`/`0X` and hex digits.
    #[inline(always)]
    fn pointer(&mut self) -> Option<u64> {
        // `0x` and the 16 bytes `hex_digits` reads, bounds-checked once
        // (pointers are read on every operation line); what this reads is
        // what the general arm below reads from the same bytes.
        if let Some(w) = self.s.get(self.p..self.p + 18) {
            let w: &[u8; 18] = w.try_into().expect("18 bytes");
            // `0x` or `0X` in one 16-bit compare: setting bit 5 of the
            // second byte maps `X` (and only `X`) onto `x`.
            if u16::from_le_bytes([w[0], w[1] | 0x20]) == u16::from_le_bytes(*b"0x") {
                let (k, v) = hex_run16(&w[2..]);
                // k == 16: a 17th digit is no value end either (see `hex_digits`).
                if k == 0 {
                    return None;
                }
                self.p += 2 + k;
                self.value_end()?;
                return Some(v);
            }
        }
        match self.s.get(self.p..self.p + 2) {
            Some(b"0x" | b"0X") => {
                self.p += 2;
                self.hex_digits()
            }
            _ => {
                self.lit(b"(nil)")?;
                self.value_end()?;
                Some(0)
            }
        }
    }
}

/// [`hex_run16`] for fewer than 16 bytes (the end of a message): the run's
/// length (17 for any longer run) and value.
#[inline(never)]
fn hex_run_short(s: &[u8]) -> (usize, u64) {
    let mut v: u64 = 0;
    for (i, &b) in s.iter().enumerate() {
        let d = hex_digit(b);
        if d > 15 {
            return (i, v);
        }
        if i == 16 {
            return (17, 0);
        }
        v = (v << 4) | d as u64;
    }
    (s.len().min(17), v)
}

/// Bytes whose high bit marks lanes, and their complement.
const HIGH: u64 = 0x8080_8080_8080_8080;
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const fn rep(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

/// The high bit of each byte of `w` that is a hex digit (`0-9a-fA-F`), as
/// [`crate::bytes::hex_digit`] accepts them. Range tests on the low seven
/// bits (no carry leaves a byte: each sum stays under 0x100), then bytes with
/// the high bit set are dropped.
#[inline(always)]
fn hex_lanes(w: u64) -> u64 {
    let x = w & LOW7;
    let digit = x.wrapping_add(rep(0x80 - b'0')) & !x.wrapping_add(rep(0x7f - b'9'));
    let lower = (w | rep(0x20)) & LOW7;
    let alpha = lower.wrapping_add(rep(0x80 - b'a')) & !lower.wrapping_add(rep(0x7f - b'f'));
    (digit | alpha) & !w & HIGH
}

/// The eight hex digits of `w` (first byte most significant) as a number;
/// bytes that are no digit must be zero in `nibbles`.
#[inline(always)]
fn pack8(nibbles: u64) -> u64 {
    let n = ((nibbles & 0x000f_000f_000f_000f) << 4) | ((nibbles & 0x0f00_0f00_0f00_0f00) >> 8);
    let n = ((n & 0x0000_00ff_0000_00ff) << 8) | ((n & 0x00ff_0000_00ff_0000) >> 16);
    ((n & 0xffff) << 16) | ((n >> 32) & 0xffff)
}

/// The run of hex digits at the start of `w` (16 bytes): its length (0 to
/// 16) and the value of those digits.
#[inline(always)]
pub(super) fn hex_run16(w: &[u8]) -> (usize, u64) {
    #[cfg(target_arch = "x86_64")]
    {
        hex_run16_sse2(w)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        hex_run16_swar(w)
    }
}

/// [`hex_run16`] in SSE2 (every x86-64 has it): a third of the instructions
/// of the word-at-a-time version.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn hex_run16_sse2(w: &[u8]) -> (usize, u64) {
    use std::arch::x86_64::*;
    let w: &[u8; 16] = w[..16].try_into().expect("16 bytes");
    // SAFETY: SSE2 is part of x86-64; the load reads the 16 bytes of `w`.
    unsafe {
        let v = _mm_loadu_si128(w.as_ptr() as *const __m128i);
        let set = |b: u8| _mm_set1_epi8(b as i8);
        // Unsigned `x <= n` as `min(x, n) == x`.
        let digit = _mm_sub_epi8(v, set(b'0'));
        let is_digit = _mm_cmpeq_epi8(_mm_min_epu8(digit, set(9)), digit);
        let alpha = _mm_sub_epi8(_mm_or_si128(v, set(0x20)), set(b'a'));
        let is_alpha = _mm_cmpeq_epi8(_mm_min_epu8(alpha, set(5)), alpha);
        let mask = _mm_movemask_epi8(_mm_or_si128(is_digit, is_alpha)) as u32;
        let k = (!mask | 0x1_0000).trailing_zeros() as usize;
        if k == 0 {
            return (0, 0);
        }
        // A digit's value is its low nibble, plus 9 for a letter (bit 6 set).
        let letter = _mm_cmpeq_epi8(_mm_and_si128(v, set(0x40)), set(0x40));
        let nib = _mm_add_epi8(_mm_and_si128(v, set(0x0f)), _mm_and_si128(letter, set(9)));
        // Pairs of digits into bytes, the first digit high; then the 8 bytes
        // as one big-endian number of 16 digits.
        let pairs = _mm_or_si128(_mm_slli_epi16(nib, 4), _mm_srli_epi16(nib, 8));
        let bytes = _mm_packus_epi16(_mm_and_si128(pairs, _mm_set1_epi16(0xff)), _mm_setzero_si128());
        let all = (_mm_cvtsi128_si64(bytes) as u64).swap_bytes();
        (k, all >> (4 * (16 - k)))
    }
}

/// [`hex_run16`] a word at a time, for other targets.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn hex_run16_swar(w: &[u8]) -> (usize, u64) {
    let a = u64::from_le_bytes(w[..8].try_into().expect("8 bytes"));
    let b = u64::from_le_bytes(w[8..16].try_into().expect("8 bytes"));
    let not_a = !hex_lanes(a) & HIGH;
    let k = if not_a != 0 {
        (not_a.trailing_zeros() / 8) as usize
    } else {
        8 + ((!hex_lanes(b) & HIGH).trailing_zeros() / 8) as usize
    };
    if k == 0 {
        return (0, 0);
    }
    // A digit's value is its low nibble, plus 9 for a letter (bit 6 set).
    let nib = |w: u64| (w & rep(0x0f)) + ((w >> 6) & rep(1)) * 9;
    let keep = |n: usize| if n >= 8 { u64::MAX } else { (1u64 << (8 * n)) - 1 };
    let hi = pack8(nib(a) & keep(k));
    let lo = if k > 8 { pack8(nib(b) & keep(k - 8)) } else { 0 };
    (k, ((hi << 32) | lo) >> (4 * (16 - k)))
}

#[cfg(test)]
#[path = "ops_fast_tests.rs"]
mod tests;
