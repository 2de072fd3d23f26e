//! Byte-level scanning helpers shared by the text readers: integer and hex
//! parsing without allocation, token splitting, whitespace trimming, a
//! one-byte search bound once to its fastest implementation, and the search
//! for `NCCL ` ([`has_nccl`], SSE2; [`NcclFinder`], AVX2 where the CPU has it).
//!
//! All functions take `&[u8]` and never panic on arbitrary input. The SSE2
//! scans (equality of 16 bytes or more, the positions of a byte) are in
//! `bytes_simd`, the runs of host-name bytes in `bytes_host`, each with
//! its scalar reference.

#[path = "bytes_simd.rs"]
mod simd;
pub use simd::{mask32, Positions, Positions64};
#[path = "bytes_host.rs"]
mod host;
pub use host::{host_run_end, host_run_start};

/// Parses an unsigned decimal integer that spans all of `s`.
#[inline]
pub fn dec_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// Parses a signed decimal integer (`-1`, `42`).
#[inline]
pub fn dec_i64(s: &[u8]) -> Option<i64> {
    match s.first() {
        Some(b'-') => dec_u64(&s[1..]).and_then(|v| i64::try_from(v).ok()).map(|v| -v),
        Some(b'+') => dec_u64(&s[1..]).and_then(|v| i64::try_from(v).ok()),
        _ => dec_u64(s).and_then(|v| i64::try_from(v).ok()),
    }
}

/// Parses hexadecimal digits, with or without a `0x` prefix.
#[inline]
pub fn hex_u64(s: &[u8]) -> Option<u64> {
    let s = s.strip_prefix(b"0x").or_else(|| s.strip_prefix(b"0X")).unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = HEX_DIGIT[b as usize];
        if d > 15 {
            return None;
        }
        v = (v << 4) | d as u64;
    }
    Some(v)
}

/// `a == b`, a word at a time (16 bytes at a time from 16 on): for the few dozen bytes of a line prefix or
/// tail the parser compares, a call into `memcmp` costs more than this.
#[inline]
pub fn eq_words(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        // Two overlapping 4-byte words from 4 bytes on (a slice `==` is a
        // call into `memcmp`); bytes below that.
        if n >= 4 {
            let w4 = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().expect("4 bytes"));
            return w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4);
        }
        return (0..n).all(|i| a[i] == b[i]);
    }
    if n >= 16 {
        return simd::eq_16plus(a, b);
    }
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let mut i = 0;
    while i + 8 < n {
        if word(a, i) != word(b, i) {
            return false;
        }
        i += 8;
    }
    // The last word, overlapping the previous one when `n` is no multiple of 8.
    word(a, n - 8) == word(b, n - 8)
}

/// Value of a hex digit, or a value above 15 for any other byte.
#[inline]
pub fn hex_digit(b: u8) -> u8 {
    HEX_DIGIT[b as usize]
}

/// Value of a hex digit, or 0xff.
static HEX_DIGIT: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// Parses a pointer as NCCL prints it: `0x7f1fd2c00000`, or `(nil)` for NULL.
/// Requires the `0x` prefix so that a number cut by interleaving (`9`) is rejected.
#[inline]
pub fn pointer(s: &[u8]) -> Option<u64> {
    if s == b"(nil)" {
        return Some(0);
    }
    if !(s.starts_with(b"0x") || s.starts_with(b"0X")) {
        return None;
    }
    hex_u64(s)
}

/// A search for one byte bound once to the best implementation: on x86_64
/// with AVX2, `memchr`'s AVX2 searcher itself, which spares each search the
/// run-time dispatch of [`memchr::memchr`] (it matters for lines of a few
/// hundred bytes); elsewhere `memchr::memchr`. Same answers either way.
#[derive(Clone, Copy, Debug)]
pub struct ByteFinder {
    needle: u8,
    #[cfg(target_arch = "x86_64")]
    avx2: Option<memchr::arch::x86_64::avx2::memchr::One>,
}

impl ByteFinder {
    pub fn new(needle: u8) -> ByteFinder {
        ByteFinder {
            needle,
            #[cfg(target_arch = "x86_64")]
            avx2: memchr::arch::x86_64::avx2::memchr::One::new(needle),
        }
    }

    /// The position of the first `needle` in `haystack`.
    #[inline]
    pub fn find(&self, haystack: &[u8]) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        if let Some(one) = &self.avx2 {
            return one.find(haystack);
        }
        memchr::memchr(self.needle, haystack)
    }
}

/// Whether `text` contains `NCCL ` (cheaper than a substring search: most
/// messages hold no `N` at all).
#[inline]
pub fn has_nccl(text: &[u8], find_n: &ByteFinder) -> bool {
    #[cfg(target_arch = "x86_64")]
    if text.len() >= 16 {
        return has_nccl_sse2(text);
    }
    let mut from = 0;
    while let Some(i) = find_n.find(&text[from..]) {
        let at = from + i;
        if text[at..].starts_with(b"NCCL ") {
            return true;
        }
        from = at + 1;
    }
    false
}

/// [`has_nccl`] bound once to the best implementation: with AVX2 (detected
/// at run time), 32 bytes a compare, half the instructions of the SSE2 scan
/// on a message of ~100 bytes; otherwise [`has_nccl`] itself. Same answers
/// either way (tested against a plain search with AVX2 on and off).
#[derive(Clone, Copy, Debug)]
pub struct NcclFinder {
    find_n: ByteFinder,
    avx2: bool,
}

impl Default for NcclFinder {
    fn default() -> Self {
        NcclFinder::with_avx2(true)
    }
}

impl NcclFinder {
    /// With `avx2` false, never the AVX2 scan (the reference in tests);
    /// true uses it where the CPU has it.
    pub fn with_avx2(avx2: bool) -> Self {
        #[cfg(target_arch = "x86_64")]
        let avx2 = avx2 && std::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let avx2 = avx2 && false;
        NcclFinder { find_n: ByteFinder::new(b'N'), avx2 }
    }

    /// Whether `text` contains `NCCL `.
    #[inline(always)]
    pub fn has_nccl(&self, text: &[u8]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 && text.len() >= 32 {
            // SAFETY: `avx2` is only true where the CPU has AVX2 (see `with_avx2`).
            return unsafe { simd::has_nccl_avx2(text) };
        }
        has_nccl(text, &self.find_n)
    }
}

/// Whether an `N` flagged in `mask` (bit k: `text[at + k]`) starts `NCCL `:
/// the check after a vector compare, shared by the SSE2 and AVX2 searches.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn nccl_at_bits(text: &[u8], at: usize, mask: u32) -> bool {
    let mut m = mask;
    while m != 0 {
        if text[at + m.trailing_zeros() as usize..].starts_with(b"NCCL ") {
            return true;
        }
        m &= m - 1;
    }
    false
}

/// [`has_nccl`] for 16 bytes or more, 16 at a time and inline: messages are
/// short, and the call into `memchr` cost more than the scan.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn has_nccl_sse2(text: &[u8]) -> bool {
    use std::arch::x86_64::*;
    let n = text.len();
    let hit = |at: usize, mask: u32| nccl_at_bits(text, at, mask);
    // SAFETY: SSE2 is part of x86-64; each load reads text[at..at + 16] with at + 16 <= n.
    let ns = |at: usize| unsafe {
        let v = _mm_loadu_si128(text.as_ptr().add(at) as *const __m128i);
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'N' as i8))) as u32
    };
    // Whether the 64 bytes from `at` hold an `N` (one test for four
    // compares: most messages hold none).
    // SAFETY: SSE2 is part of x86-64; the loads read text[at..at + 64], at + 64 <= n.
    let any64 = |at: usize| unsafe {
        let p = text.as_ptr().add(at) as *const __m128i;
        let nn = _mm_set1_epi8(b'N' as i8);
        let eq = |k: usize| _mm_cmpeq_epi8(_mm_loadu_si128(p.add(k)), nn);
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(eq(0), eq(1)), _mm_or_si128(eq(2), eq(3)))) != 0
    };
    let mut at = 0;
    while at + 64 <= n {
        if any64(at) && (hit(at, ns(at) | ns(at + 16) << 16) || hit(at + 32, ns(at + 32) | ns(at + 48) << 16)) {
            return true;
        }
        at += 64;
    }
    // Then 32 bytes, 16, and the rest.
    if at + 32 <= n {
        let (lo, hi) = (ns(at), ns(at + 16));
        if (lo | hi) != 0 && hit(at, lo | hi << 16) {
            return true;
        }
        at += 32;
    }
    if at + 16 <= n {
        if hit(at, ns(at)) {
            return true;
        }
        at += 16;
    }
    // The last bytes, in a load that ends at the end (its first bytes were seen).
    at < n && hit(n - 16, ns(n - 16) & (!0u32 << (at - (n - 16))))
}

/// Parses a decimal float such as `240.0`, `5000.000000` or `1766081276.802766`.
pub fn float(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s.len() > 32 {
        return None;
    }
    if !s.iter().all(|&b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E')) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

#[inline]
pub fn trim_ascii(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &s[start..end]
}

/// Splits off the next space-delimited token, skipping leading spaces.
/// Returns (token, rest after the token).
#[inline]
pub fn next_token(s: &[u8]) -> (&[u8], &[u8]) {
    // Tokens are short: a plain loop beats a SIMD search here.
    let mut start = 0;
    while start < s.len() && s[start] == b' ' {
        start += 1;
    }
    let mut end = start;
    while end < s.len() && s[end] != b' ' {
        end += 1;
    }
    if end < s.len() {
        (&s[start..end], &s[end + 1..])
    } else {
        (&s[start..end], &[])
    }
}

/// Iterator over space-delimited tokens (runs of spaces are one separator).
pub fn tokens(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    s.split(|&b| b == b' ').filter(|t| !t.is_empty())
}

/// Whether `b` may appear in a host name as NCCL prints it.
#[inline]
pub fn is_host_byte(b: u8) -> bool {
    HOST_BYTE[b as usize]
}

/// Whether a host name may start with `b`: a letter or digit, or a
/// non-ASCII byte (UTF-8 or not).
#[inline]
pub fn is_host_start(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b >= 0x80
}

/// A host name's bytes as a `String` that keeps them apart: valid UTF-8 as
/// is, every byte of an invalid sequence as `\xNN`. Host bytes hold no `\`,
/// so two different byte strings never give the same name (unlike
/// `from_utf8_lossy`, where `gpu\xe9` and `gpu\xff` both give `gpu�`).
pub fn host_string(b: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        s.push_str(chunk.valid());
        for x in chunk.invalid() {
            let _ = write!(s, "\\x{x:02x}");
        }
    }
    s
}

/// Lookup table for [`is_host_byte`]: letters, digits, `-`, `_`, `.`, and
/// non-ASCII bytes (hosts named in UTF-8 or another encoding stay whole).
static HOST_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.' || b >= 0x80;
        i += 1;
    }
    t
};

/// Shortens bytes for a human-readable sample (lossy UTF-8, at most `max`
/// chars; a longer one ends with `…` and its total length in bytes). Only
/// the first bytes are decoded, so a huge line costs no more than a short one.
pub fn sample(s: &[u8], max: usize) -> String {
    let head = &s[..s.len().min(max.saturating_mul(4).saturating_add(4))];
    let text = String::from_utf8_lossy(head);
    if head.len() == s.len() && text.chars().count() <= max {
        return text.into_owned();
    }
    let mut out: String = text.chars().take(max).collect();
    if out.len() == s.len() {
        return out;
    }
    out.push_str(&format!("… ({} bytes in all)", s.len()));
    out
}

/// Longest excerpt of input quoted in a message ([`cap_excerpts`]).
pub const EXCERPT_CHARS: usize = 120;

/// `s` itself when at most `max` chars, else its first `max` chars, `…` and
/// its total length in bytes.
pub fn excerpt(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(s),
        Some((cut, _)) => std::borrow::Cow::Owned(format!("{}… ({} bytes in all)", &s[..cut], s.len())),
    }
}

/// A message with every quoted piece of input (between `"` or `` ` ``)
/// longer than [`EXCERPT_CHARS`] shortened by [`excerpt`]; a message that is
/// still long is cut as a whole. Short messages are returned as they are: a value of
/// 200 MB in a bad input must not be echoed whole by the error that names it.
pub fn cap_excerpts(msg: &str) -> std::borrow::Cow<'_, str> {
    const WHOLE: usize = 4 * EXCERPT_CHARS;
    if msg.len() <= WHOLE {
        return std::borrow::Cow::Borrowed(msg);
    }
    let mut out = String::with_capacity(WHOLE * 2);
    let mut rest = msg;
    while let Some(open) = rest.find(['"', '`']) {
        let q = rest.as_bytes()[open] as char;
        // The closing quote: the next one not escaped by a backslash.
        let body = &rest[open + 1..];
        let mut close = None;
        let mut esc = false;
        for (i, c) in body.char_indices() {
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == q {
                close = Some(i);
                break;
            }
        }
        let end = close.unwrap_or(body.len());
        out.push_str(&rest[..=open]);
        out.push_str(&excerpt(&body[..end], EXCERPT_CHARS));
        match close {
            Some(c) => {
                out.push(q);
                rest = &body[c + 1..];
            }
            None => rest = "",
        }
    }
    out.push_str(rest);
    if out.len() > 4 * WHOLE {
        out = excerpt(&out, 4 * WHOLE).into_owned();
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SSE2 scan for `NCCL ` (and the AVX2 one of [`NcclFinder`]) against a plain search: `NCCL `, a cut
    /// `NCCL` and a lone `N` at every position of messages of up to 140 bytes
    /// (every path: 64-byte rounds, then 32, 16 and the overlapping tail).
    #[test]
    fn has_nccl_finds_what_a_plain_search_finds() {
        let finder = ByteFinder::new(b'N');
        let plain = |t: &[u8]| t.windows(5).any(|w| w == b"NCCL ");
        // The bound finder, with and without AVX2 (on a CPU that has it,
        // both scans are checked).
        let fast = [NcclFinder::with_avx2(true), NcclFinder::with_avx2(false)];
        for n in 0..=140 {
            for needle in [&b"NCCL "[..], b"NCCL", b"N", b"NCCLx"] {
                for at in 0..n {
                    let mut t = vec![b'a'; n];
                    let k = needle.len().min(n - at);
                    t[at..at + k].copy_from_slice(&needle[..k]);
                    assert_eq!(has_nccl(&t, &finder), plain(&t), "{:?}", String::from_utf8_lossy(&t));
                    for f in &fast {
                        assert_eq!(f.has_nccl(&t), plain(&t), "{:?} {f:?}", String::from_utf8_lossy(&t));
                    }
                    // A lone `N` first, in the same block or an earlier one.
                    for first in 0..at {
                        let mut u = t.clone();
                        u[first] = b'N';
                        for f in &fast {
                            assert_eq!(f.has_nccl(&u), plain(&u), "{:?} {f:?}", String::from_utf8_lossy(&u));
                        }
                    }
                }
            }
        }
    }

    /// `eq_words` against `==`: every length up to 80, equal, and with one
    /// byte changed at every position (each word and vector path, and the
    /// overlapping last load).
    #[test]
    fn eq_words_is_equality() {
        let a: Vec<u8> = (0..80u8).map(|i| i.wrapping_mul(37)).collect();
        for n in 0..=a.len() {
            let b = a[..n].to_vec();
            assert!(eq_words(&a[..n], &b), "{n}");
            for at in 0..n {
                let mut c = b.clone();
                c[at] ^= 0x80;
                assert!(!eq_words(&a[..n], &c), "{n} {at}");
            }
            if n > 0 {
                assert!(!eq_words(&a[..n], &a[..n - 1]));
            }
        }
    }

    #[test]
    fn samples_and_excerpts_are_short_and_say_how_long_the_value_was() {
        let big = "x".repeat(1_000_000);
        let s = sample(big.as_bytes(), 120);
        assert!(s.starts_with(&"x".repeat(120)) && s.ends_with("… (1000000 bytes in all)"), "{s}");
        assert_eq!(sample(b"short", 120), "short");
        let msg = format!("invalid type: string \"{big}\", expected u64 at line 1");
        let c = cap_excerpts(&msg);
        assert!(c.len() < 300 && c.ends_with("(1000000 bytes in all)\", expected u64 at line 1"), "{c}");
        let unquoted = format!("bad value {big}");
        assert!(cap_excerpts(&unquoted).len() < 2000);
        assert_eq!(cap_excerpts("short: `x`"), "short: `x`");
    }

    #[test]
    fn integers() {
        assert_eq!(dec_u64(b"0"), Some(0));
        assert_eq!(dec_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(dec_u64(b"18446744073709551616"), None);
        assert_eq!(dec_u64(b""), None);
        assert_eq!(dec_u64(b"12a"), None);
        assert_eq!(dec_i64(b"-1"), Some(-1));
        assert_eq!(dec_i64(b"-"), None);
        assert_eq!(hex_u64(b"1f"), Some(31));
        assert_eq!(hex_u64(b"0x55b6aa64a990"), Some(0x55b6aa64a990));
        assert_eq!(hex_u64(b"0x"), None);
        assert_eq!(hex_u64(b"12345678901234567"), None);
        assert_eq!(hex_u64(b"g"), None);
    }

    #[test]
    fn pointers() {
        assert_eq!(pointer(b"(nil)"), Some(0));
        assert_eq!(pointer(b"0x7f1fd2c00000"), Some(0x7f1fd2c00000));
        assert_eq!(pointer(b"9"), None);
        assert_eq!(pointer(b"0x55d3a3db4stone"), None);
    }

    #[test]
    fn byte_finder_finds_what_memchr_finds() {
        let f = ByteFinder::new(b'N');
        let long: Vec<u8> = (0..1000u32).map(|i| if i % 377 == 376 { b'N' } else { b'a' + (i % 13) as u8 }).collect();
        for s in [&b""[..], b"N", b"abc", b"abcN", &long, &long[377..], &long[..376]] {
            assert_eq!(f.find(s), memchr::memchr(b'N', s));
        }
    }

    #[test]
    fn floats_and_tokens() {
        assert_eq!(float(b"240.0"), Some(240.0));
        assert_eq!(float(b"1766081276.802766"), Some(1766081276.802766));
        assert_eq!(float(b"abc"), None);
        assert_eq!(trim_ascii(b"  x y \r"), b"x y");
        assert_eq!(trim_ascii(b"   "), b"");
        assert_eq!(next_token(b"  ab cd"), (&b"ab"[..], &b"cd"[..]));
        assert_eq!(next_token(b""), (&b""[..], &b""[..]));
        assert_eq!(tokens(b"a  b c").count(), 3);
        assert_eq!(sample("héllo".as_bytes(), 3), "hél… (6 bytes in all)");
    }
}
