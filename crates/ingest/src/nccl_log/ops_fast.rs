//! Shortcut for the opCount line, the most frequent line of a log: a parse
//! for the one field order every NCCL version prints, reading each value in
//! the pass that finds its end.
//!
//! It gives exactly what [`super::ops::parse_op_line_general`] gives, or
//! nothing (the caller then runs the general parser); the tests in
//! `tests/fast_paths.rs` read every real log both ways.

use super::ops::OpLine;
use crate::bytes::hex_digit;
use commlens_core::OpKind;

/// Fast path for the field order every NCCL from 2.7 to 2.28 prints:
/// `opCount sendbuff recvbuff count datatype op root comm [nranks=N] stream`.
/// Returns `None` on any deviation; the general parser then decides. Each
/// value is read in the same pass that checks its end, and accepts exactly
/// what the general parser's value parsers accept (see `Cursor`).
pub(super) fn parse_op_canonical(msg: &[u8], colon: usize) -> Option<OpLine> {
    let kind = OpKind::from_name(&msg[..colon])?;
    let mut c = Cursor { s: msg, p: colon + 1 };
    c.lit(b" opCount ")?;
    let op_count = c.hex()?;
    c.lit(b" sendbuff ")?;
    let sendbuff = c.pointer()?;
    c.lit(b" recvbuff ")?;
    let recvbuff = c.pointer()?;
    c.lit(b" count ")?;
    let count = c.dec()?;
    c.lit(b" datatype ")?;
    let datatype = c.signed()?;
    c.lit(b" op ")?;
    let redop = c.signed()?;
    c.lit(b" root ")?;
    let root = c.signed()?;
    c.lit(b" comm ")?;
    let comm = c.pointer()?;
    let mut nranks = None;
    if c.lit(b" [nranks=").is_some() {
        let n = c.digits()?;
        c.lit(b"]")?;
        nranks = Some(u32::try_from(n).ok()?);
    }
    c.lit(b" stream ")?;
    let stream = c.pointer()?;
    if c.p != msg.len() {
        return None;
    }
    Some(OpLine {
        kind: Some(kind),
        op_count: Some(op_count),
        sendbuff: Some(sendbuff),
        recvbuff: Some(recvbuff),
        count: Some(count),
        datatype: Some(datatype),
        redop: Some(redop),
        root: Some(root),
        comm: Some(comm),
        nranks,
        stream: Some(stream),
    })
}

/// Reads the fixed-order opCount line. Every value must end at a space or at
/// the end of the message, as a space-delimited token would, and is accepted
/// by the same rules as `hex_u64`, `pointer`, `dec_u64` and `dec_i64`.
struct Cursor<'a> {
    s: &'a [u8],
    p: usize,
}

impl Cursor<'_> {
    #[inline]
    fn lit(&mut self, l: &[u8]) -> Option<()> {
        if self.s.get(self.p..self.p + l.len())? == l {
            self.p += l.len();
            Some(())
        } else {
            None
        }
    }

    /// At a value's end: a space or the end of the message.
    #[inline]
    fn value_end(&self) -> Option<()> {
        match self.s.get(self.p) {
            None | Some(b' ') => Some(()),
            _ => None,
        }
    }

    /// 1 to 20 decimal digits without overflow (not checking the end).
    #[inline]
    fn digits(&mut self) -> Option<u64> {
        // A local slice keeps the loop in registers.
        let rest = &self.s[self.p..];
        let mut v: u64 = 0;
        let mut n = 0;
        for &b in rest {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            v = v.checked_mul(10)?.checked_add(d as u64)?;
            n += 1;
        }
        if n == 0 || n > 20 {
            return None;
        }
        self.p += n;
        Some(v)
    }

    #[inline]
    fn dec(&mut self) -> Option<u64> {
        let v = self.digits()?;
        self.value_end()?;
        Some(v)
    }

    #[inline]
    fn signed(&mut self) -> Option<i64> {
        let neg = match self.s.get(self.p) {
            Some(b'-') => true,
            Some(b'+') => false,
            _ => return i64::try_from(self.dec()?).ok(),
        };
        self.p += 1;
        let v = i64::try_from(self.dec()?).ok()?;
        Some(if neg { -v } else { v })
    }

    /// 1 to 16 hex digits after an optional `0x`/`0X`.
    #[inline]
    fn hex(&mut self) -> Option<u64> {
        if matches!(self.s.get(self.p..self.p + 2), Some(b"0x" | b"0X")) {
            self.p += 2;
        }
        // A local slice keeps the loop in registers. (Eight digits at a time
        // with word arithmetic measured slower: pointers have only 12 to 14.)
        let rest = &self.s[self.p..];
        let mut v: u64 = 0;
        let mut n = 0;
        for &b in rest {
            let d = hex_digit(b);
            if d > 15 {
                break;
            }
            v = (v << 4) | d as u64;
            n += 1;
        }
        if n == 0 || n > 16 {
            return None;
        }
        self.p += n;
        self.value_end()?;
        Some(v)
    }

    /// `(nil)`, or `0x`/`0X` and hex digits.
    #[inline]
    fn pointer(&mut self) -> Option<u64> {
        if self.lit(b"(nil)").is_some() {
            self.value_end()?;
            return Some(0);
        }
        if !matches!(self.s.get(self.p..self.p + 2), Some(b"0x" | b"0X")) {
            return None;
        }
        self.hex()
    }
}
