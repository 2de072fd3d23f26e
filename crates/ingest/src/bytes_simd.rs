//! The SSE2 scans of [`crate::bytes`], each with the scalar code it must
//! agree with (used off x86_64, and by the exhaustive tests below), and the
//! AVX2 scan for `NCCL ` of [`crate::bytes::NcclFinder`] (run-time
//! detected; tested against the SSE2 one and a plain search in `bytes`).
//! `Positions64` is `Positions` 64 bytes a round (tested against it), for
//! the walks over whole messages.
//!
//! SSE2 is part of the x86_64 baseline, so these need no run-time detection
//! and inline into their callers: the slices they see (a line prefix, a line
//! of ~150 bytes) are too short for a call into a wider, dispatched routine
//! to pay off.

/// `a == b` for two slices of the same length, 16 or more: 16 bytes at a
/// time, the last load overlapping the one before when the length is no
/// multiple of 16, one test at the end (the callers' slices are usually
/// equal, so an early exit would only add branches).
#[inline(always)]
pub(super) fn eq_16plus(a: &[u8], b: &[u8]) -> bool {
    assert!(a.len() == b.len() && a.len() >= 16);
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        let n = a.len();
        // SAFETY: SSE2 is part of x86_64; every load reads s[i..i + 16] with
        // i + 16 <= n for both slices (n >= 16 asserted above).
        unsafe {
            let ld = |s: &[u8], i: usize| _mm_loadu_si128(s.as_ptr().add(i).cast::<__m128i>());
            let eq = |i: usize| _mm_cmpeq_epi8(ld(a, i), ld(b, i));
            // The first and the last 16 bytes cover up to 32; with the 16
            // after the first, up to 48, and with the next 16, up to 64
            // (line prefixes, the usual callers, are 30 to 60 bytes):
            // straight-line code, the loop only past that (set up for a
            // round or two, it cost more than the compares).
            let mut acc = _mm_and_si128(eq(0), eq(n - 16));
            if n > 32 {
                acc = _mm_and_si128(acc, eq(16));
                if n > 48 {
                    acc = _mm_and_si128(acc, eq(32));
                    let mut i = 48;
                    while i + 16 < n {
                        acc = _mm_and_si128(acc, eq(i));
                        i += 16;
                    }
                }
            }
            _mm_movemask_epi8(acc) == 0xffff
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        a == b
    }
}

/// Whether `text` (32 bytes or more) contains `NCCL `. Nine messages in
/// ten hold no `N` at all: every byte is compared with `N` 32 at a time and
/// the compares OR'd, one test at the end, no branch per load; only a
/// message with an `N` goes on to [`has_nccl_avx2_at_n`], which finds where
/// (the test per load cost twice the instructions on the common message).
/// Kept small so that it inlines into code compiled for AVX2 (the reader's
/// AVX2 loop calls it on every line's message). The scalar reference is
/// `bytes::has_nccl` (and a plain search in its tests).
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn has_nccl_avx2(text: &[u8]) -> bool {
    use std::arch::x86_64::*;
    let n = text.len();
    assert!(n >= 32);
    let p = text.as_ptr();
    let nn = _mm256_set1_epi8(b'N' as i8);
    // SAFETY (all loads below): each reads text[at..at + 32] with at + 32 <= n.
    let eq = |at: usize| _mm256_cmpeq_epi8(unsafe { _mm256_loadu_si256(p.add(at).cast::<__m256i>()) }, nn);
    // The loads from 0 in steps of 32 while more than 32 bytes are left,
    // and the one that ends at the end: every byte is in one of them.
    let mut acc = eq(n - 32);
    let mut at = 0;
    while at + 64 < n {
        acc = _mm256_or_si256(acc, _mm256_or_si256(eq(at), eq(at + 32)));
        at += 64;
    }
    if at + 32 < n {
        acc = _mm256_or_si256(acc, eq(at));
    }
    _mm256_movemask_epi8(acc) != 0 && unsafe { has_nccl_avx2_at_n(text) }
}

/// [`has_nccl_avx2`] for a message that holds an `N`: the positions of `N`
/// 32 bytes a compare, each one checked for the rest.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn has_nccl_avx2_at_n(text: &[u8]) -> bool {
    use std::arch::x86_64::*;
    let n = text.len();
    assert!(n >= 32);
    let p = text.as_ptr();
    let nn = _mm256_set1_epi8(b'N' as i8);
    // SAFETY (all loads below): each reads text[at..at + 32] with at + 32 <= n.
    let ns = |at: usize| _mm256_movemask_epi8(_mm256_cmpeq_epi8(unsafe { _mm256_loadu_si256(p.add(at).cast::<__m256i>()) }, nn)) as u32;
    let mut at = 0;
    while at + 32 < n {
        let m = ns(at);
        if m != 0 && crate::bytes::nccl_at_bits(text, at, m) {
            return true;
        }
        at += 32;
    }
    // The last 32 bytes, in a load that ends at the end, less the bytes
    // before `at` (seen above): `n - 32 <= at < n`.
    let m = ns(n - 32) & (!0u32 << (at - (n - 32)));
    m != 0 && crate::bytes::nccl_at_bits(text, n - 32, m)
}

/// Bit k set when `s[at + k] == needle`, for the 16 bytes from `at`
/// (`at + 16 <= s.len()`).
#[inline(always)]
fn mask16(s: &[u8], at: usize, needle: u8) -> u32 {
    assert!(at + 16 <= s.len());
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86_64; the load reads s[at..at + 16], in bounds (asserted).
        unsafe {
            let v = _mm_loadu_si128(s.as_ptr().add(at).cast::<__m128i>());
            _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(needle as i8))) as u32
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        mask_scalar(&s[at..at + 16], needle)
    }
}

/// Bit k set when `s[at + k] == needle`, for the 32 bytes from `at`
/// (`at + 32 <= s.len()`): two 16-byte compares, no loop.
#[inline(always)]
pub fn mask32(s: &[u8], at: usize, needle: u8) -> u32 {
    assert!(at + 32 <= s.len());
    mask16(s, at, needle) | mask16(s, at + 16, needle) << 16
}

/// Bit k set when `s[k] == needle`, for the first (at most 32) bytes of `s`.
#[inline(always)]
fn mask_scalar(s: &[u8], needle: u8) -> u32 {
    s.iter().take(32).enumerate().fold(0, |m, (k, &b)| m | ((b == needle) as u32) << k)
}

/// [`mask_scalar`] for [`Positions`] over a slice under 16 bytes (rare: a
/// line that short), out of line: inlined, its vectorized loop kept eight
/// vector constants live in the callers' loops (the colon scan of
/// `nccl_log::prefix` loaded them on entry and again after every call).
#[cold]
#[inline(never)]
fn mask_short(s: &[u8], needle: u8) -> u32 {
    mask_scalar(s, needle)
}

/// The positions of one byte in a slice, in order, found 32 bytes at a time
/// (what `memchr_iter` gives, without a call per hit: the colons of a line
/// are a handful, close together).
pub struct Positions<'a> {
    s: &'a [u8],
    needle: u8,
    /// Start of the bytes not yet loaded.
    next: usize,
    /// Hits not yet returned, bit k for `s[base + k]`.
    mask: u32,
    base: usize,
}

impl<'a> Positions<'a> {
    /// The positions of `needle` in `s` at or after `from`.
    #[inline(always)]
    pub fn new(s: &'a [u8], from: usize, needle: u8) -> Self {
        Positions { s, needle, next: from, mask: 0, base: 0 }
    }
}

impl Iterator for Positions<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            let (n, at) = (self.s.len(), self.next);
            if at >= n {
                return None;
            }
            self.base = at;
            (self.mask, self.next) = mask_upto32(self.s, at, self.needle);
        }
        let i = self.base + self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(i)
    }
}

/// The hits of `needle` in the next up to 32 bytes of `s` from `at` (which
/// is below `s.len()`), bit k for `s[at + k]`, and where the next round
/// starts: 32 bytes a round (half the rounds over a line's message), 16, or
/// the tail — a load that ends at the end, less the bytes before `at`
/// (already seen); a slice under 16 bytes byte by byte.
#[inline(always)]
fn mask_upto32(s: &[u8], at: usize, needle: u8) -> (u32, usize) {
    let n = s.len();
    if at + 32 <= n {
        (mask32(s, at, needle), at + 32)
    } else if at + 16 <= n {
        (mask16(s, at, needle), at + 16)
    } else {
        let m = match n.checked_sub(16) {
            Some(last) => mask16(s, last, needle) >> (at - last),
            None => mask_short(&s[at..], needle),
        };
        (m, n)
    }
}

/// [`Positions`] loading 64 bytes a round (four 16-byte compares into one
/// 64-bit mask): half the rounds, and half the loop's tests, over a long
/// message whose colons are few (the prefix scan of a cut line walks the
/// whole message). The same positions as [`Positions`] (tested).
pub struct Positions64<'a> {
    s: &'a [u8],
    needle: u8,
    /// Start of the bytes not yet loaded.
    next: usize,
    /// Hits not yet returned, bit k for `s[base + k]`.
    mask: u64,
    base: usize,
}

impl<'a> Positions64<'a> {
    /// The positions of `needle` in `s` at or after `from`.
    #[inline(always)]
    pub fn new(s: &'a [u8], from: usize, needle: u8) -> Self {
        Positions64 { s, needle, next: from, mask: 0, base: 0 }
    }
}

impl Iterator for Positions64<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            let (n, at) = (self.s.len(), self.next);
            if at >= n {
                return None;
            }
            self.base = at;
            if at + 64 <= n {
                self.mask = mask32(self.s, at, self.needle) as u64 | (mask32(self.s, at + 32, self.needle) as u64) << 32;
                self.next = at + 64;
            } else {
                let (m, next) = mask_upto32(self.s, at, self.needle);
                (self.mask, self.next) = (u64::from(m), next);
            }
        }
        let i = self.base + self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Positions64` against `Positions` (itself tested against a plain
    /// scan): every length up to 150 and every start, the needle at every
    /// position alone and everywhere, at every pair of positions up to 80
    /// bytes, and random slices.
    #[test]
    fn positions64_is_positions() {
        let check = |s: &[u8]| {
            for from in 0..=s.len() + 1 {
                let want: Vec<usize> = Positions::new(s, from, b':').collect();
                let got: Vec<usize> = Positions64::new(s, from, b':').collect();
                assert_eq!(got, want, "{:?} from {from}", String::from_utf8_lossy(s));
            }
        };
        for n in 0..=150 {
            check(&vec![b'a'; n]);
            check(&vec![b':'; n]);
            for i in 0..n {
                let mut s = vec![b'a'; n];
                s[i] = b':';
                check(&s);
                if n <= 80 {
                    for j in i + 1..n {
                        let mut t = s.clone();
                        t[j] = b':';
                        check(&t);
                    }
                }
            }
        }
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..3000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = (x % 300) as usize;
            let s: Vec<u8> = (0..n).map(|i| if (x >> (i % 61)) & 7 == 0 { b':' } else { b'a' }).collect();
            check(&s);
        }
    }

    /// Every length up to 80, equal and with one byte changed at each
    /// position (each full load and the overlapping last one).
    #[test]
    fn eq_16plus_is_equality() {
        let a: Vec<u8> = (0..80u8).map(|i| i.wrapping_mul(37).wrapping_add(1)).collect();
        for n in 16..=a.len() {
            let b = a[..n].to_vec();
            assert!(eq_16plus(&a[..n], &b), "{n}");
            for at in 0..n {
                for flip in [0x01, 0x80] {
                    let mut c = b.clone();
                    c[at] ^= flip;
                    assert!(!eq_16plus(&a[..n], &c), "{n} {at}");
                }
            }
        }
    }

    /// Against a plain scan: the needle alone and in pairs at every
    /// position of 32 bytes, at every offset in a longer slice.
    #[test]
    fn mask32_matches_a_plain_scan() {
        let plain = |s: &[u8], at: usize| mask_scalar(&s[at..at + 32], b' ');
        for at in 0..8 {
            for i in 0..32 {
                for j in i..32 {
                    let mut s = vec![b'a'; 48];
                    s[at + i] = b' ';
                    s[at + j] = b' ';
                    assert_eq!(mask32(&s, at, b' '), plain(&s, at), "{at} {i} {j}");
                }
            }
        }
        assert_eq!(mask32(&[b' '; 32], 0, b' '), u32::MAX);
        assert_eq!(mask32(&[b'a'; 32], 0, b' '), 0);
    }

    /// Against a plain scan: every length up to 70, every start, the needle
    /// at every position alone, in pairs, and everywhere.
    #[test]
    fn positions_match_a_plain_scan() {
        let plain = |s: &[u8], from: usize| (from..s.len()).filter(|&i| s[i] == b':').collect::<Vec<_>>();
        for n in 0..=70 {
            let mut cases = vec![vec![b'a'; n], vec![b':'; n]];
            for i in 0..n {
                let mut s = vec![b'a'; n];
                s[i] = b':';
                cases.push(s.clone());
                for j in i + 1..n {
                    let mut t = s.clone();
                    t[j] = b':';
                    cases.push(t);
                }
            }
            for s in &cases {
                for from in 0..=n + 1 {
                    let got: Vec<usize> = Positions::new(s, from, b':').collect();
                    assert_eq!(got, plain(s, from), "{:?} from {from}", String::from_utf8_lossy(s));
                }
            }
        }
    }
}
