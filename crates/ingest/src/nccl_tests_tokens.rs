//! The tokens of an nccl-tests table row (or a piece of one), as
//! [`super::Table::feed`] reads them: whitespace-separated, cut where an NCCL
//! debug line was glued on; split at bytes for ASCII text; kept in a
//! fixed array ([`Tokens`], no allocation per row piece). Also the number
//! forms of a row's cells ([`plain_f64`]: the usual `digits.digits` without
//! the general float parser).

/// How many tokens [`Tokens`] keeps: a row has at most 13 (size, count,
/// type, redop, root and two times four values); one more tells a longer
/// line from a row.
pub(super) const KEPT: usize = 14;

/// The tokens of a row (piece): the first [`KEPT`] of them, and how many
/// there were in all.
#[derive(Clone, Copy)]
pub(super) struct Tokens<'a> {
    kept: [&'a str; KEPT],
    len: usize,
}

impl<'a> Tokens<'a> {
    pub(super) fn new() -> Self {
        Tokens { kept: [""; KEPT], len: 0 }
    }

    /// How many tokens (also those past [`KEPT`]).
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The tokens kept (all of them when `len() <= KEPT`).
    #[inline]
    pub(super) fn kept(&self) -> &[&'a str] {
        &self.kept[..self.len.min(KEPT)]
    }

    #[inline]
    pub(super) fn push(&mut self, w: &'a str) {
        if self.len < KEPT {
            self.kept[self.len] = w;
        }
        self.len += 1;
    }
}

/// The whitespace tokens of a row (piece), cut where an NCCL debug line was
/// glued on (`-1mew0:64904:64904` keeps `-1`); `None` for a line that is an
/// NCCL debug line itself (its host may start with a digit).
pub(super) fn row_tokens(t: &str) -> Option<Tokens<'_>> {
    let mut out = Tokens::new();
    // Split at bytes while the text read is ASCII (the usual case;
    // `split_whitespace` decodes chars), at Unicode whitespace otherwise:
    // the same tokens.
    let whole = match ascii_row_tokens(t, &mut out) {
        Some(whole) => whole,
        None => {
            out = Tokens::new();
            cut_tokens(t.split_whitespace(), &mut out)
        }
    };
    whole.then_some(out)
}

/// [`cut_tokens`] of the words split at ASCII whitespace (tab, line feed,
/// vertical tab, form feed, carriage return and space: the ASCII characters
/// that are Unicode whitespace; `u8::is_ascii_whitespace` leaves out the
/// vertical tab), in one pass over the bytes, stopping
/// at the end of the word that is cut (the NCCL line glued on after it is
/// not read): `None` when a non-ASCII byte comes first, as the Unicode
/// split may then cut words elsewhere. Up to the cut word's end the text is
/// ASCII, and ASCII whitespace is the Unicode whitespace there, so both
/// splits give the same tokens.
#[inline]
fn ascii_row_tokens<'a>(t: &'a str, out: &mut Tokens<'a>) -> Option<bool> {
    let b = t.as_bytes();
    let ws = |c: u8| matches!(c, b'\t'..=b'\r' | b' ');
    let mut i = 0;
    loop {
        while i < b.len() && ws(b[i]) {
            i += 1;
        }
        if i == b.len() {
            return Some(true);
        }
        let start = i;
        let mut colon = false;
        while i < b.len() && !ws(b[i]) {
            if b[i] >= 0x80 {
                return None;
            }
            colon |= b[i] == b':';
            i += 1;
        }
        let w = &t[start..i];
        if colon {
            if out.is_empty() {
                return Some(false);
            }
            let keep = w.bytes().take_while(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+')).count();
            if keep > 0 {
                out.push(&w[..keep]);
            }
            return Some(true);
        }
        out.push(w);
    }
}

/// The tokens of [`row_tokens`] from `words`, into `out`; `false` for an
/// NCCL debug line.
#[inline(always)]
fn cut_tokens<'a>(words: impl Iterator<Item = &'a str>, out: &mut Tokens<'a>) -> bool {
    for w in words {
        if w.as_bytes().contains(&b':') {
            if out.is_empty() {
                return false;
            }
            let keep = w.bytes().take_while(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+')).count();
            if keep > 0 {
                out.push(&w[..keep]);
            }
            break;
        }
        out.push(w);
    }
    true
}

/// `x.parse::<f64>()` for the plain forms of a row's cells: digits with at
/// most one `.` (`0.67`, `477.8`, `12.`, `.5`) and at most 15 digits. The
/// digits then form an integer below 2^53 and the fraction's divisor a power
/// of ten up to 10^15, both exact as `f64`, so their quotient is the
/// correctly rounded value the general parser returns. `None` for any other
/// form (signs, exponents, `inf`, more digits): the caller parses those.
#[inline]
pub(super) fn plain_f64(x: &str) -> Option<f64> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let b = x.as_bytes();
    if b.is_empty() || b.len() > 16 {
        return None;
    }
    let (mut mantissa, mut digits, mut dot) = (0u64, 0usize, None);
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(c - b'0');
                digits += 1;
            }
            b'.' if dot.is_none() => dot = Some(i),
            _ => return None,
        }
    }
    if digits == 0 || digits > 15 {
        return None;
    }
    let decimals = dot.map_or(0, |d| b.len() - d - 1);
    Some(mantissa as f64 / POW10[decimals])
}

/// A cell's number: [`plain_f64`], else the general parser.
#[inline]
pub(super) fn cell_f64(x: &str) -> Option<f64> {
    plain_f64(x).or_else(|| x.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::{plain_f64, row_tokens};

    /// `plain_f64` against `str::parse::<f64>`: every string of up to 7
    /// bytes over digits, `.` and a few other bytes, and long digit runs
    /// around the 15-digit limit with the dot at every position.
    #[test]
    fn plain_f64_matches_parse() {
        let alphabet = [b'0', b'1', b'5', b'9', b'.', b'-', b'e', b'x'];
        let mut count = 0;
        for len in 0..=7u32 {
            for code in 0..alphabet.len().pow(len) {
                let mut c = code;
                let mut t = String::new();
                for _ in 0..len {
                    t.push(alphabet[c % alphabet.len()] as char);
                    c /= alphabet.len();
                }
                let parsed = t.parse::<f64>().ok();
                match plain_f64(&t) {
                    Some(v) => assert_eq!(Some(v.to_bits()), parsed.map(f64::to_bits), "{t:?}"),
                    None => assert!(t.bytes().any(|b| !b.is_ascii_digit() && b != b'.') || parsed.is_none() || t.len() > 15, "{t:?}"),
                }
                count += 1;
            }
        }
        assert!(count > 2_000_000);
        let digits = "98765432109876543217";
        for n in 1..=digits.len() {
            for dot in 0..=n {
                let t = format!("{}.{}", &digits[..dot], &digits[dot..n]);
                if let Some(v) = plain_f64(&t) {
                    assert_eq!(v.to_bits(), t.parse::<f64>().unwrap().to_bits(), "{t:?}");
                }
                assert_eq!(plain_f64(&t).is_some(), n <= 15, "{t:?}");
            }
        }
        for t in ["0.67", "477.8", "12.", ".5", "5000.000000", "0.000001", "123456789012345", "1234567.89012345"] {
            assert_eq!(plain_f64(t).map(f64::to_bits), t.parse::<f64>().ok().map(f64::to_bits), "{t:?}");
        }
    }

    /// What `row_tokens` gave before the byte split: the reference.
    fn reference(t: &str) -> Option<Vec<&str>> {
        let mut out = Vec::new();
        for w in t.split_whitespace() {
            if w.contains(':') {
                if out.is_empty() {
                    return None;
                }
                let keep = w.bytes().take_while(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+')).count();
                if keep > 0 {
                    out.push(&w[..keep]);
                }
                break;
            }
            out.push(w);
        }
        Some(out)
    }

    /// What `row_tokens` gave: the count and the tokens kept.
    fn seen(t: &str) -> Option<(usize, Vec<&str>)> {
        row_tokens(t).map(|w| (w.len(), w.kept().to_vec()))
    }

    /// The reference's tokens as [`seen`] shows them (the first `KEPT`).
    fn expected(t: &str) -> Option<(usize, Vec<&str>)> {
        reference(t).map(|w| (w.len(), w[..w.len().min(super::KEPT)].to_vec()))
    }

    /// Every string of up to five pieces over every ASCII whitespace byte
    /// (and its neighbours), digits, `:`, `.`, `-` and letters, and some
    /// with Unicode whitespace and other non-ASCII text, against the
    /// reference.
    #[test]
    fn row_tokens_match_split_whitespace() {
        let mut pieces: Vec<String> = (0u8..=0x21).map(|b| (b as char).to_string()).collect();
        pieces.extend(["7", "1.5", "-1mew0:1:2", ":", "ab", "N/A", "\u{a0}", "\u{2003}", "é", "\u{85}"].map(String::from));
        let n = pieces.len();
        let mut count = 0;
        for len in 0..=4u32 {
            for code in 0..n.pow(len) {
                let mut c = code;
                let mut t = String::new();
                for _ in 0..len {
                    t.push_str(&pieces[c % n]);
                    c /= n;
                }
                assert_eq!(seen(&t), expected(&t), "{t:?}");
                count += 1;
            }
        }
        assert!(count > 1_000_000);
        for t in ["1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17", "1 2 3 4 5 6 7 8 9 10 11 12 13 14", "   8388608   2097152  float  sum  -1", "  12.5  0.67  0.67  0", "  1  2  float none  -1gdr114:1:2 [0] NCCL", "x\u{3000}y 1"] {
            assert_eq!(seen(t), expected(t), "{t:?}");
        }
    }
}
