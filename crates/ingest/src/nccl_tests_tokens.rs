//! The tokens of an nccl-tests table row (or a piece of one), as
//! [`super::Table::feed`] reads them: whitespace-separated, cut where an NCCL
//! debug line was glued on; split at bytes for ASCII text.

/// The whitespace tokens of a row (piece), cut where an NCCL debug line was
/// glued on (`-1mew0:64904:64904` keeps `-1`); `None` for a line that is an
/// NCCL debug line itself (its host may start with a digit).
pub(super) fn row_tokens(t: &str) -> Option<Vec<&str>> {
    let mut out = Vec::with_capacity(16);
    // Split at bytes for ASCII text (the usual case; `split_whitespace`
    // decodes chars), at Unicode whitespace otherwise: the same tokens.
    let whole = if t.is_ascii() { cut_tokens(ascii_words(t), &mut out) } else { cut_tokens(t.split_whitespace(), &mut out) };
    whole.then_some(out)
}

/// The tokens of [`row_tokens`] from `words`, into `out`; `false` for an
/// NCCL debug line.
#[inline(always)]
fn cut_tokens<'a>(words: impl Iterator<Item = &'a str>, out: &mut Vec<&'a str>) -> bool {
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

/// `str::split_whitespace` for ASCII text: the ASCII characters that are
/// Unicode whitespace are tab, line feed, vertical tab, form feed, carriage
/// return and space (`u8::is_ascii_whitespace` leaves out the vertical tab).
fn ascii_words(t: &str) -> impl Iterator<Item = &str> {
    let b = t.as_bytes();
    let ws = |c: u8| matches!(c, b'\t'..=b'\r' | b' ');
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() && ws(b[i]) {
            i += 1;
        }
        if i == b.len() {
            return None;
        }
        let start = i;
        while i < b.len() && !ws(b[i]) {
            i += 1;
        }
        Some(&t[start..i])
    })
}

#[cfg(test)]
mod tests {
    use super::row_tokens;

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
                assert_eq!(row_tokens(&t), reference(&t), "{t:?}");
                count += 1;
            }
        }
        assert!(count > 1_000_000);
        for t in ["   8388608   2097152  float  sum  -1", "  12.5  0.67  0.67  0", "  1  2  float none  -1gdr114:1:2 [0] NCCL", "x\u{3000}y 1"] {
            assert_eq!(row_tokens(t), reference(t), "{t:?}");
        }
    }
}
