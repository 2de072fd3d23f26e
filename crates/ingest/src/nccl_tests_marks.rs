//! The search ahead of the nccl-tests scan ([`MarkHorizon`]): where the next
//! line that may hold a `_perf` or a call-site mark `(), ` starts, found in
//! one pass over what the line source holds ahead, for both marks at once
//! ([`find_mark`], AVX2 where the CPU has it, with its scalar reference).

use super::super::find_call_site;

/// Where the next `_perf` or `(), ` may start, found by searching what the
/// line source holds ahead ([`crate::lines::LineSource::ahead`]) once for
/// many lines instead of each line on its own: such marks are rare in an
/// NCCL log (a search per line was ~230 instructions a line, 10 % of
/// `stats`). Offsets are the source's, which only grow.
///
/// Invariant: no `_perf` and no `(), ` starts in `at..clear_to`, where `at`
/// is where the next line starts (given to [`MarkHorizon::ahead`]), and
/// `room = clear_to - at`: a line of at most `room` bytes there holds
/// neither. The bytes are searched again only once a line starts at or past
/// `clear_to` (the mark found, or the end of what was buffered): each byte
/// about once in all. Per line that is one compare in [`MarkHorizon::ahead`]
/// and one in [`MarkHorizon::clear`] (no start of the range kept: offsets
/// only grow, and a fresh horizon searches at its first line).
#[derive(Default)]
pub(super) struct MarkHorizon {
    clear_to: u64,
    room: u64,
}

/// The most one search covers: less than `lines_mapped`'s
/// `PREFETCH_AHEAD`, so that it runs over bytes the newline scan has asked
/// the caches for (why, with figures: there). A horizon ends here as at the
/// end of what the source holds.
const SEARCH_SPAN: usize = 16 << 10;

impl MarkHorizon {
    #[inline(always)]
    pub(super) fn ahead<'a>(&mut self, at: u64, rest: impl FnOnce() -> &'a [u8]) {
        if at >= self.clear_to {
            self.search(at, rest());
        }
        self.room = self.clear_to - at;
    }

    #[inline(never)]
    fn search(&mut self, at: u64, rest: &[u8]) {
        let rest = &rest[..rest.len().min(SEARCH_SPAN)];
        self.clear_to = at + find_mark(rest).unwrap_or(rest.len()) as u64;
    }

    /// Whether the line of `len` bytes at the offset last given to
    /// [`MarkHorizon::ahead`] holds no mark for sure.
    #[inline(always)]
    pub(super) fn clear(&self, len: usize) -> bool {
        len as u64 <= self.room
    }
}

/// Where the first `_perf` or `(), ` in `s` starts.
pub(super) fn find_mark(s: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (tested just above).
        return unsafe { find_mark_avx2(s) };
    }
    find_mark_two_passes(s)
}

/// [`find_mark`] as two searches (one per mark; `_` is rare in NCCL logs,
/// one `memchr` pass for it is fast).
fn find_mark_two_passes(s: &[u8]) -> Option<usize> {
    let perf = memchr::memchr_iter(b'_', s).find(|&i| s[i..].starts_with(b"_perf"));
    // A call-site mark after the `_perf` found does not matter.
    let site = find_call_site(&s[..perf.map_or(s.len(), |p| p + 4)]);
    match (perf, site) {
        (Some(p), Some(c)) => Some(p.min(c)),
        (p, c) => p.or(c),
    }
}

/// Whether a mark starts at `s[i]`.
#[inline(always)]
fn mark_at(s: &[u8], i: usize) -> bool {
    s[i..].starts_with(b"_perf") || s[i..].starts_with(b"(), ")
}

/// [`find_mark`] a position at a time: the reference of the tests.
#[cfg(test)]
fn find_mark_scalar(s: &[u8]) -> Option<usize> {
    (0..s.len()).find(|&i| mark_at(s, i))
}

/// [`find_mark`] 256 (then 128, then 32) positions at a time: candidates are the bytes
/// `_`, and `(` followed by `)` (both rare in NCCL logs, where `(` alone is
/// not), each checked in full. One pass instead of a `memchr` for `_` and a
/// pair search for `()`, which were 4 % of `stats` on the 30 MB sample.
///
/// The pair is found with 16-bit compares, a lane per two bytes: on the
/// vector at `at` they find the pairs at even distances from `at`, on the
/// vector at `at + 1` those at odd ones, each lane setting both its bits;
/// OR'ed at the same bit positions, a pair at `at + j` always sets bit `j`
/// (and one more, a neighbour, checked in full and rejected). One operation
/// less a vector than a byte compare of each half and their AND, and one test
/// per 256 positions (128 in the tail; the common case: no candidate). With the leaner
/// horizon above, `stats` on the 30 MB sample went from 240.0 M to 238.1 M
/// instructions (the search was ~10 M of it, ~0.31 instructions a byte).
/// Steps of 256 instead of 128 (one test and one loop step per 256): 233.45 M
/// -> 232.79 M. Fusing this search into the reader's newline pass
/// (candidates found per 64-byte block there) was tried and lost: 236.72 M,
/// the compares being the cost, and the newline loop entered about once a
/// line (its setup paid per line) where this one runs over kilobytes.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn find_mark_avx2(s: &[u8]) -> Option<usize> {
    use std::arch::x86_64::*;
    let n = s.len();
    let under = _mm256_set1_epi8(b'_' as i8);
    let pair = _mm256_set1_epi16(i16::from_le_bytes(*b"()"));
    // Candidates at positions at..at + 32 (reads s[at..at + 33]).
    let candidates = |at: usize| {
        // SAFETY: the callers keep at + 33 <= n, so both loads are in bounds.
        let (a, b) = unsafe {
            (_mm256_loadu_si256(s.as_ptr().add(at).cast::<__m256i>()), _mm256_loadu_si256(s.as_ptr().add(at + 1).cast::<__m256i>()))
        };
        let pairs = _mm256_or_si256(_mm256_cmpeq_epi16(a, pair), _mm256_cmpeq_epi16(b, pair));
        _mm256_or_si256(_mm256_cmpeq_epi8(a, under), pairs)
    };
    // The first mark among the candidate bits of positions at..at + 64.
    let first = |at: usize, mut bits: u64| {
        while bits != 0 {
            let j = at + bits.trailing_zeros() as usize;
            if mark_at(s, j) {
                return Some(j);
            }
            bits &= bits - 1;
        }
        None
    };
    let mask = |v: __m256i| _mm256_movemask_epi8(v) as u32 as u64;
    let mut i = 0;
    // 256 positions a step while the data lasts (the search runs over a
    // whole window, ~4.5 KB between two marks on the 30 MB sample): one test
    // and one loop step per 256, with the bound compared as is (`i <= last`,
    // not `i + 257 <= n`, which took two more instructions a step).
    if let Some(last) = n.checked_sub(257) {
        while i <= last {
            let c = [candidates(i), candidates(i + 32), candidates(i + 64), candidates(i + 96), candidates(i + 128), candidates(i + 160), candidates(i + 192), candidates(i + 224)];
            let lo = _mm256_or_si256(_mm256_or_si256(c[0], c[1]), _mm256_or_si256(c[2], c[3]));
            let hi = _mm256_or_si256(_mm256_or_si256(c[4], c[5]), _mm256_or_si256(c[6], c[7]));
            let any = _mm256_or_si256(lo, hi);
            if _mm256_testz_si256(any, any) == 0 {
                for k in 0..4 {
                    if let Some(j) = first(i + 64 * k, mask(c[2 * k]) | mask(c[2 * k + 1]) << 32) {
                        return Some(j);
                    }
                }
            }
            i += 256;
        }
    }
    while i + 129 <= n {
        let (c0, c1, c2, c3) = (candidates(i), candidates(i + 32), candidates(i + 64), candidates(i + 96));
        let any = _mm256_or_si256(_mm256_or_si256(c0, c1), _mm256_or_si256(c2, c3));
        if _mm256_testz_si256(any, any) == 0 {
            if let Some(j) = first(i, mask(c0) | mask(c1) << 32) {
                return Some(j);
            }
            if let Some(j) = first(i + 64, mask(c2) | mask(c3) << 32) {
                return Some(j);
            }
        }
        i += 128;
    }
    while i + 33 <= n {
        if let Some(j) = first(i, mask(candidates(i))) {
            return Some(j);
        }
        i += 32;
    }
    (i..n).find(|&j| mark_at(s, j))
}

#[cfg(test)]
mod tests {
    use super::{find_mark, find_mark_scalar, find_mark_two_passes, MarkHorizon};
    use crate::nccl_tests::has_mark;

    /// Every search against the position-at-a-time reference: on every
    /// length up to 300 (a step of 256, two of 128, steps of 32 and the
    /// tail) and lengths up to 600 (two steps of 256 and the tails), with
    /// each mark, each near miss (`)(` and `()` at both parities of the
    /// 16-bit lanes), and each mark cut
    /// at the end, placed at every position of a background with and
    /// without lone `(`, `)` and `_`.
    #[test]
    fn find_mark_matches_reference() {
        let pieces: [&[u8]; 11] = [b"_perf", b"(), ", b"()", b"(),", b"_per", b"_", b"(", b")", b"__perf", b")(), ", b"(()), "];
        for bg in [b'x', b'(', b')', b' '] {
            for n in (0..=300usize).chain([383, 384, 385, 511, 512, 513, 514, 520, 545, 600]) {
                let base: Vec<u8> = (0..n).map(|i| if i % 7 == 3 { bg } else { b'a' + (i % 26) as u8 }).collect();
                let check = |s: &[u8]| {
                    let want = find_mark_scalar(s);
                    assert_eq!(find_mark(s), want, "{:?}", String::from_utf8_lossy(s));
                    assert_eq!(find_mark_two_passes(s), want, "{:?}", String::from_utf8_lossy(s));
                };
                check(&base);
                for p in pieces {
                    for at in 0..=n {
                        let mut s = base.clone();
                        s.splice(at..at.min(n), p.iter().copied());
                        check(&s);
                        s.truncate(n);
                        check(&s);
                        // A second mark later on.
                        let mut t = s.clone();
                        t.extend_from_slice(b"xy(), z");
                        check(&t);
                    }
                }
            }
        }
    }

    #[test]
    fn the_search_ahead_never_clears_a_line_with_a_mark() {
        // Lines with marks at every place, cut by buffers of every size; a
        // line it calls clear holds no mark, and most plain lines are clear.
        let mut text = Vec::new();
        for i in 0..200 {
            let plain = format!("host:{i}:{i} [0] NCCL INFO ncclSend(0,7f,2) (nil) x_y ()");
            match i % 7 {
                0 => text.extend_from_slice(format!("f(), a.cu:{i}, {plain}").as_bytes()),
                3 => text.extend_from_slice(format!("{plain} all_reduce_perf").as_bytes()),
                5 => text.extend_from_slice(format!("{}_perf{}", &plain[..i % plain.len()], &plain[i % plain.len()..]).as_bytes()),
                _ => text.extend_from_slice(plain.as_bytes()),
            }
            text.push(b'\n');
        }
        for window in [0, 1, 4, 5, 37, 64, 300, 5000, usize::MAX] {
            let mut h = MarkHorizon::default();
            let (mut at, mut cleared) = (0, 0);
            for line in text.split(|&b| b == b'\n') {
                let rest = &text[at.min(text.len())..at.saturating_add(window).min(text.len())];
                h.ahead(at as u64, || rest);
                if h.clear(line.len()) {
                    assert!(!has_mark(line), "window {window}: {}", String::from_utf8_lossy(line));
                    cleared += 1;
                }
                at += line.len() + 1;
            }
            if window >= 300 {
                assert!(cleared > 100, "window {window}: {cleared} cleared");
            }
        }
    }

    /// A mark several search spans ahead: the capped searches cover the
    /// plain lines before it span by span (nearly all cleared), never the
    /// line that holds it, and go on after it.
    #[test]
    fn the_capped_search_reaches_a_mark_spans_ahead() {
        let plain = b"host:1:1 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x7f recvbuff 0x7f count 8";
        let mut text = Vec::new();
        let mut marked = Vec::new();
        for k in 0..3 {
            while text.len() < (k + 1) * (super::SEARCH_SPAN * 5 / 2) {
                text.extend_from_slice(plain);
                text.push(b'\n');
            }
            marked.push(text.len());
            text.extend_from_slice(b"# all_reduce_perf -b 8\n");
        }
        let mut h = MarkHorizon::default();
        let (mut at, mut cleared, mut lines) = (0, 0, 0);
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            h.ahead(at as u64, || &text[at..]);
            let clear = h.clear(line.len());
            assert!(!(clear && has_mark(line)), "line at {at} cleared");
            assert_eq!(has_mark(line), marked.contains(&at));
            cleared += clear as usize;
            lines += 1;
            at += line.len() + 1;
        }
        // One line a span may straddle its end and be searched again.
        assert!(cleared + 3 + text.len() / super::SEARCH_SPAN >= lines, "{cleared} of {lines}");
    }
}
