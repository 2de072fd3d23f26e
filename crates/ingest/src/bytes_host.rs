//! Runs of host-name bytes (see [`super::is_host_byte`]) found 16 bytes at
//! a time: the start of the run that ends at a colon (a `host:pid:tid `
//! candidate's host, read backwards from its colon) and the end of the run
//! that starts at a position (the prefix at a line's start, read forwards).
//!
//! A cut line glues debris in front of a host (`recvbuff
//! 0x7f4d52c0e800stone:…`), so the runs the reader walks are often 20
//! bytes and more: a table lookup and a bounds check per byte made the walk
//! back a third of a candidate's cost. Each function has the byte-at-a-time
//! reference it is tested against (every length, position and byte value).

use super::is_host_byte;

/// Bit k set when `s[at + k]` is a host byte, for the 16 bytes from `at`
/// (`at + 16 <= s.len()`). SSE2 is part of x86_64: no run-time detection.
#[inline(always)]
fn host_mask16(s: &[u8], at: usize) -> u32 {
    assert!(at + 16 <= s.len());
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86_64; the load reads s[at..at + 16], in bounds (asserted).
        unsafe {
            let v = _mm_loadu_si128(s.as_ptr().add(at).cast::<__m128i>());
            // `lo..=hi` (both ASCII) as one signed compare: adding 0x80 - lo
            // maps the range to -128..=-128 + hi - lo and every other ASCII
            // byte above it; bytes from 0x80 on are host bytes anyway.
            let in_range = |x: __m128i, lo: u8, hi: u8| {
                let t = _mm_add_epi8(x, _mm_set1_epi8(0x80u8.wrapping_sub(lo) as i8));
                _mm_cmplt_epi8(t, _mm_set1_epi8((hi - lo) as i8 - 127))
            };
            let digit = in_range(v, b'0', b'9');
            // Letters of either case, lowered (no other byte below 0x80 lands in a..=z).
            let alpha = in_range(_mm_or_si128(v, _mm_set1_epi8(0x20)), b'a', b'z');
            let eq = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
            let punct = _mm_or_si128(_mm_or_si128(eq(b'-'), eq(b'_')), eq(b'.'));
            let ascii = _mm_or_si128(_mm_or_si128(digit, alpha), punct);
            // The high bit of `v` itself marks the bytes from 0x80 on.
            (_mm_movemask_epi8(ascii) | _mm_movemask_epi8(v)) as u32
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        host_mask_scalar(&s[at..at + 16])
    }
}

/// [`host_mask16`] a byte at a time, for the first (at most 32) bytes of `s`.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn host_mask_scalar(s: &[u8]) -> u32 {
    s.iter().take(32).enumerate().fold(0, |m, (k, &b)| m | (is_host_byte(b) as u32) << k)
}

/// The start of the run of host bytes that ends at `end`: the least
/// `s <= end` with every byte of `line[s..end]` a host byte. Same answer
/// as [`host_run_start_scalar`]. Always inlined: its one hot caller, the
/// prefix candidate check, paid a call for it when left to the compiler.
#[inline(always)]
pub fn host_run_start(line: &[u8], end: usize) -> usize {
    let mut e = end;
    while e >= 16 {
        let non = !host_mask16(line, e - 16) & 0xffff;
        if non != 0 {
            // Just after the last byte that is no host byte.
            return e - 16 + (32 - non.leading_zeros()) as usize;
        }
        e -= 16;
    }
    if e == 0 {
        return 0;
    }
    if line.len() >= 16 {
        // The first 16 bytes, less those from `e` on (seen above).
        let non = !host_mask16(line, 0) & ((1u32 << e) - 1);
        return if non == 0 { 0 } else { (32 - non.leading_zeros()) as usize };
    }
    host_run_start_scalar(line, e)
}

/// [`host_run_start`] a byte at a time (its reference).
pub fn host_run_start_scalar(line: &[u8], end: usize) -> usize {
    let mut s = end;
    while s > 0 && is_host_byte(line[s - 1]) {
        s -= 1;
    }
    s
}

/// The end of the run of host bytes that starts at `start`: the least
/// `e >= start` where `line[e]` is no host byte, or the line's length.
/// Same answer as [`host_run_end_scalar`].
#[inline]
pub fn host_run_end(line: &[u8], start: usize) -> usize {
    let n = line.len();
    let mut i = start;
    while i + 16 <= n {
        let non = !host_mask16(line, i) & 0xffff;
        if non != 0 {
            return i + non.trailing_zeros() as usize;
        }
        i += 16;
    }
    if i >= n {
        return n;
    }
    if n >= 16 {
        // A load that ends at the end, less the bytes before `i` (seen above).
        let last = n - 16;
        let non = (!host_mask16(line, last) & 0xffff) >> (i - last);
        return if non == 0 { n } else { i + non.trailing_zeros() as usize };
    }
    host_run_end_scalar(line, i)
}

/// [`host_run_end`] a byte at a time (its reference).
pub fn host_run_end_scalar(line: &[u8], start: usize) -> usize {
    let mut i = start;
    while i < line.len() && is_host_byte(line[i]) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte value in every lane, against the table.
    #[test]
    fn host_mask_matches_the_table() {
        for b in 0..=255u8 {
            for lane in 0..16 {
                let mut s = [b'a'; 20];
                s[lane + 2] = b;
                let want = (0..16).fold(0u32, |m, k| m | (is_host_byte(s[k + 2]) as u32) << k);
                assert_eq!(host_mask16(&s, 2), want, "{b:#x} at {lane}");
                assert_eq!(host_mask_scalar(&s[2..18]), want, "{b:#x} at {lane}");
            }
        }
    }

    /// Lines of every length up to 52 made of host bytes, with every byte
    /// value at every position (and with two non-host bytes at every pair of
    /// a shorter line): both runs from every position, against the scalar reads.
    #[test]
    fn host_runs_match_the_scalar_reads() {
        let check = |line: &[u8]| {
            for at in 0..=line.len() {
                assert_eq!(host_run_start(line, at), host_run_start_scalar(line, at), "{line:?} end {at}");
                assert_eq!(host_run_end(line, at), host_run_end_scalar(line, at), "{line:?} start {at}");
            }
        };
        for n in 0..=52usize {
            let base: Vec<u8> = (0..n).map(|i| b"ab0-_.Z9\xc3x"[i % 10]).collect();
            check(&base);
            for p in 0..n {
                for b in 0..=255u8 {
                    let mut line = base.clone();
                    line[p] = b;
                    check(&line);
                }
            }
        }
        for n in 0..=36usize {
            for p in 0..n {
                for q in p + 1..n {
                    let mut line = vec![b'h'; n];
                    line[p] = b' ';
                    line[q] = b':';
                    check(&line);
                }
            }
        }
    }
}
