//! The arguments of an API call line, `ncclX(sendbuff,recvbuff,count,datatype,op,root,comm,stream)`:
//! [`parse_call_args`] reads them where they stand, each in one pass, and
//! [`parse_call_args_memo`] gives the same, remembering the line tails from
//! the third argument on, which repeat on most call lines of a thread (nine
//! in ten on the bench sample), as `ops_fast` does for opCount lines.

use super::ops::{take_sign, SignedDec};
use super::ops_fast::Recent;
use commlens_core::OpKind;

/// Arguments of an operation's API call line, which NCCL's CALL subsystem (and
/// TRACE builds) print uniformly as
/// `ncclX(sendbuff,recvbuff,count,datatype,op,root,comm,stream)`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallArgs {
    pub kind: OpKind,
    pub sendbuff: u64,
    pub recvbuff: u64,
    pub count: u64,
    pub datatype: i64,
    pub redop: i64,
    pub root: i64,
    pub comm: u64,
    pub stream: u64,
}

pub fn parse_call_args(msg: &[u8]) -> Option<CallArgs> {
    // What `parse_call` checks, in one pass: a name of word characters
    // starting with `nccl`, `(`, exactly eight comma-separated arguments up
    // to the first `)`. Each argument is read where it stands and must end
    // at its separator, which accepts exactly the arguments that splitting
    // at the separators and parsing the pieces accepts (no piece that parses
    // holds a `,` or `)`).
    let (kind, sendbuff, recvbuff, mut a) = call_head(msg)?;
    let t = a.tail()?;
    Some(t.with_head(kind, sendbuff, recvbuff))
}

/// The call's name, `(`, and its first two arguments (the buffers, which
/// differ from call to call); the reader stands at the `,` after them.
#[inline(always)]
fn call_head(msg: &[u8]) -> Option<(OpKind, u64, u64, CallArgReader<'_>)> {
    let open = memchr::memchr(b'(', msg)?;
    let name = &msg[..open];
    if !name.starts_with(b"nccl") {
        return None;
    }
    // A name of word characters, as the grammar asks: every name
    // `from_name` knows is one, so its answer settles that too (a byte loop
    // over the name was a sixth of a call line's own instructions).
    let kind = OpKind::from_name(&name[4..])?;
    let mut a = CallArgReader { s: msg, p: open + 1 };
    let sendbuff = a.hex()?;
    a.sep(b',')?;
    let recvbuff = a.hex()?;
    Some((kind, sendbuff, recvbuff, a))
}

/// Reads the arguments of an API call line in place.
struct CallArgReader<'a> {
    s: &'a [u8],
    p: usize,
}

impl CallArgReader<'_> {
    /// The arguments from the `,` before the third up to the closing `)`.
    /// Each read called directly: passed as function values to one `arg`
    /// helper they were left calls of their own.
    #[inline(always)]
    fn tail(&mut self) -> Option<CallTail> {
        self.sep(b',')?;
        let count = self.dec()?;
        self.sep(b',')?;
        let datatype = self.signed()?;
        self.sep(b',')?;
        let redop = self.signed()?;
        self.sep(b',')?;
        let root = self.signed()?;
        self.sep(b',')?;
        let comm = self.hex()?;
        self.sep(b',')?;
        let stream = self.hex()?;
        self.sep(b')')?;
        Some(CallTail { count, datatype, redop, root, comm, stream })
    }

    /// The separator `end` after an argument.
    #[inline(always)]
    fn sep(&mut self, end: u8) -> Option<()> {
        if self.s.get(self.p) != Some(&end) {
            return None;
        }
        self.p += 1;
        Some(())
    }

    /// As `hex_u64` (which also reads the `0` NCCL prints for NULL): an
    /// optional `0x`, then 1 to 16 hex digits.
    #[inline(always)]
    fn hex(&mut self) -> Option<u64> {
        if self.s.get(self.p) == Some(&b'0') && matches!(self.s.get(self.p + 1), Some(b'x' | b'X')) {
            self.p += 2;
        }
        // Sixteen bytes at once where the line has them (pointers are 12
        // digits). A 17th digit after a full run is no separator, so `arg`
        // refuses it as the digit loop below would.
        if let Some(w) = self.s.get(self.p..self.p + 16) {
            let (k, v) = super::ops_fast::hex_run16(w);
            self.p += k;
            return (k > 0).then_some(v);
        }
        let start = self.p;
        let mut v: u64 = 0;
        while let Some(&b) = self.s.get(self.p) {
            let d = crate::bytes::hex_digit(b);
            if d > 15 {
                break;
            }
            v = (v << 4) | u64::from(d);
            self.p += 1;
        }
        (1..=16).contains(&(self.p - start)).then_some(v)
    }

    /// As `dec_u64` of the run of digits here (1 to 20 digits, no
    /// overflow), read in the pass that finds its end.
    #[inline(always)]
    fn dec(&mut self) -> Option<u64> {
        let start = self.p;
        let mut v: u64 = 0;
        let mut fits = true;
        while let Some(&b) = self.s.get(self.p) {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            match v.checked_mul(10).and_then(|v| v.checked_add(u64::from(d))) {
                Some(n) => v = n,
                None => fits = false,
            }
            self.p += 1;
        }
        (fits && (1..=20).contains(&(self.p - start))).then_some(v)
    }

}

impl SignedDec for CallArgReader<'_> {
    #[inline(always)]
    fn sign(&mut self) -> Option<bool> {
        take_sign(self.s, &mut self.p)
    }
    #[inline(always)]
    fn unsigned(&mut self) -> Option<u64> {
        self.dec()
    }
}

/// What a call line's tail from the `,` before its third argument gives.
#[derive(Clone, Copy, Default, Debug)]
pub(super) struct CallTail {
    count: u64,
    datatype: i64,
    redop: i64,
    root: i64,
    comm: u64,
    stream: u64,
}

impl CallTail {
    #[inline(always)]
    fn with_head(&self, kind: OpKind, sendbuff: u64, recvbuff: u64) -> CallArgs {
        let CallTail { count, datatype, redop, root, comm, stream } = *self;
        CallArgs { kind, sendbuff, recvbuff, count, datatype, redop, root, comm, stream }
    }
}

/// The tails of recent call lines that [`parse_call_args`] accepted.
pub(super) type CallMemo = Recent<CallTail>;

/// [`parse_call_args`], its tail from the third argument on taken from `memo`
/// when it was read before. The parse reads nothing past the first `)`, so
/// what the tail gives is a function of the tail's bytes alone.
pub(super) fn parse_call_args_memo(msg: &[u8], memo: &mut CallMemo) -> Option<CallArgs> {
    let (kind, sendbuff, recvbuff, mut a) = call_head(msg)?;
    let tail = &msg[a.p..];
    if let Some(t) = memo.lookup(tail) {
        return Some(t.with_head(kind, sendbuff, recvbuff));
    }
    let t = a.tail()?;
    memo.insert(tail, t);
    Some(t.with_head(kind, sendbuff, recvbuff))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memo against the plain parse on call lines that share tails,
    /// differ from a remembered tail in one byte at every position (by every
    /// byte that matters to the grammar), or are cut, in an order that makes
    /// the memo hit, miss and evict.
    #[test]
    fn memo_gives_what_the_parse_gives() {
        let base = b"ncclAllReduce(7f4d52c06000,7f4d53006000,1048576,7,0,0,0x558e72d8e6a0,0x558e7224b640)".to_vec();
        let mut lines = vec![base.clone(), b"ncclSend(0,7f,512,2,0,-1,0x55,0x56) trailing".to_vec()];
        for p in 0..base.len() {
            for b in [b'0', b'9', b'a', b'x', b',', b')', b'(', b'-', b' '] {
                let mut l = base.clone();
                l[p] = b;
                lines.push(l);
                lines.push(base.clone());
            }
            lines.push(base[..p].to_vec());
            let mut longer = base.clone();
            longer.insert(p, b'1');
            lines.push(longer);
        }
        // Many distinct tails in a row, more than the memo keeps, then back.
        for i in 0..20 {
            lines.push(format!("ncclAllGather(1,2,{i},7,0,0,0x3,0x4)").into_bytes());
        }
        lines.extend(lines.clone());
        let mut memo = CallMemo::default();
        for l in &lines {
            assert_eq!(parse_call_args_memo(l, &mut memo), parse_call_args(l), "{}", String::from_utf8_lossy(l));
        }
    }
}
