//! The fast paths' memo of recent line tails: [`Recent`] keeps the last few
//! byte strings a parse accepted with the value it read from them, most
//! recently used first, so that a tail seen before is compared, not parsed
//! again (opCount lines in `ops_fast`, API call lines in `ops_call`). What a
//! tail gives must be a function of its bytes alone; the callers make sure
//! of that. The compare ([`eq_wide`]) reads 16 bytes at a time, in SSE2 on
//! x86-64, and is tested here against `==` on every length and position.

use crate::bytes::eq_words;

/// How many tails of each kind are kept: a thread alternates between a few
/// communicators and sizes.
const TAILS: usize = 8;
/// Longer tails are not kept (they are 50 to 100 bytes).
const MAX_TAIL: usize = 128;

/// Byte strings with their value, most recently used first; boxed, so that
/// reordering moves pointers, and reused, so that a miss allocates nothing
/// once the memo is full.
pub(in crate::nccl_log) struct Recent<T> {
    entries: Vec<Box<(usize, [u8; MAX_TAIL], T)>>,
}

impl<T> Default for Recent<T> {
    fn default() -> Self {
        Recent { entries: Vec::new() }
    }
}

impl<T: Copy + Default> Recent<T> {
    // Inlined: called as a function it cost 40 % more (measured).
    #[inline(always)]
    pub(in crate::nccl_log) fn lookup(&mut self, key: &[u8]) -> Option<&T> {
        // A loop, not `position`, which was left a call of its own.
        let mut i = 0;
        loop {
            let e = self.entries.get(i)?;
            if e.0 == key.len() && eq_wide(&e.1[..e.0], key) {
                break;
            }
            i += 1;
        }
        if i > 0 {
            self.entries.swap(0, i);
        }
        Some(&self.entries[0].2)
    }

    pub(in crate::nccl_log) fn insert(&mut self, key: &[u8], value: T) {
        if key.len() > MAX_TAIL {
            return;
        }
        let mut e = if self.entries.len() == TAILS {
            self.entries.pop().expect("full")
        } else {
            Box::new((0, [0; MAX_TAIL], T::default()))
        };
        e.0 = key.len();
        e.1[..key.len()].copy_from_slice(key);
        e.2 = value;
        self.entries.insert(0, e);
    }
}

/// `a == b`, sixteen bytes at a time for the line tails of [`Recent`] (50 to
/// 128 bytes; word by word this compare was a fifth of the canonical parse).
/// Both ends first: tails of different threads share their start (`
/// count N datatype …`) and differ in the comm and stream pointers at the
/// end; tails of one thread share the end and differ in the count at the
/// start (on the bench sample, two in five probes of a wrong entry got past
/// an end-only test). Either way a wrong entry stops there; the middle of an
/// entry that passes is nearly always equal, and is compared without a
/// branch per 16 bytes.
#[inline(always)]
fn eq_wide(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 16 {
        return eq_words(a, b);
    }
    #[cfg(target_arch = "x86_64")]
    {
        eq_wide_sse2(a, b)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        eq_wide_u128(a, b)
    }
}

/// [`eq_wide`] for equal lengths of at least 16, in SSE2 (every x86-64 has
/// it): the middle's 16-byte compares are combined and tested once (the
/// middle loop of [`eq_wide_u128`] was 11 instructions per 16 bytes, a
/// fifth of the canonical parse on the bench sample).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn eq_wide_sse2(a: &[u8], b: &[u8]) -> bool {
    use std::arch::x86_64::*;
    let n = a.len();
    assert!(n >= 16 && b.len() == n);
    // SAFETY: SSE2 is part of x86-64; every load reads 16 bytes at `i` with
    // i + 16 <= n, inside both slices (asserted above).
    unsafe {
        let eq = |i: usize| {
            _mm_cmpeq_epi8(_mm_loadu_si128(a.as_ptr().add(i).cast()), _mm_loadu_si128(b.as_ptr().add(i).cast()))
        };
        if _mm_movemask_epi8(_mm_and_si128(eq(n - 16), eq(0))) != 0xffff {
            return false;
        }
        // [16, n - 16) in 32-byte steps, then one 16-byte step that may
        // overlap the end (after the loop i + 32 > n, so i + 16 covers n - 16).
        let mut acc = _mm_set1_epi8(-1);
        let mut i = 16;
        while i + 32 <= n {
            acc = _mm_and_si128(acc, _mm_and_si128(eq(i), eq(i + 16)));
            i += 32;
        }
        if i + 16 < n {
            acc = _mm_and_si128(acc, eq(i));
        }
        _mm_movemask_epi8(acc) == 0xffff
    }
}

/// [`eq_wide`] for equal lengths of at least 16 with plain integer compares
/// (other targets): the last 16 bytes and the first 16 first, then 16-byte
/// steps from 16 on (the last step overlaps the end).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn eq_wide_u128(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    let w = |s: &[u8], i: usize| u128::from_le_bytes(s[i..i + 16].try_into().expect("16 bytes"));
    if w(a, n - 16) != w(b, n - 16) || w(a, 0) != w(b, 0) {
        return false;
    }
    let mut i = 16;
    while i + 16 < n {
        if w(a, i) != w(b, i) {
            return false;
        }
        i += 16;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::{eq_wide, eq_wide_u128};
    #[cfg(target_arch = "x86_64")]
    use super::eq_wide_sse2;

    /// The wide compare (and both its forms: SSE2 and plain integers) against
    /// `==`, on every length up to 130 with equal inputs and with one byte
    /// changed at every position.
    #[test]
    fn eq_wide_matches_eq() {
        for n in 0..=130usize {
            let a: Vec<u8> = (0..n).map(|i| (i * 31 + 7) as u8).collect();
            let forms = |x: &[u8], y: &[u8]| {
                let r = eq_wide(x, y);
                if n >= 16 && x.len() == y.len() {
                    assert_eq!(eq_wide_u128(x, y), r, "{n}");
                    #[cfg(target_arch = "x86_64")]
                    assert_eq!(eq_wide_sse2(x, y), r, "{n}");
                }
                r
            };
            assert!(forms(&a, &a.clone()), "{n}");
            for p in 0..n {
                let mut b = a.clone();
                b[p] ^= 0x20;
                assert!(!forms(&a, &b), "{n} {p}");
                // Two bytes changed: at p and at every other position.
                for q in 0..n {
                    let mut c = b.clone();
                    c[q] ^= 0x01;
                    assert_eq!(forms(&a, &c), a == c, "{n} {p} {q}");
                }
            }
            let mut longer = a.clone();
            longer.push(0);
            assert!(!eq_wide(&a, &longer));
        }
    }
}
