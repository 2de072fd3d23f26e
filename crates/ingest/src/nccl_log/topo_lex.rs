//! Byte-level pieces of the topology-dump grammar: node references (`TYPE/id`),
//! `(…)` suffixes, edges (`+ LINK[bw] - …`), `X :` path entries, the header, the
//! strict CPU root line, numbers and blanks. Every function takes a slice and
//! returns sub-slices; none indexes past what it checked.

use commlens_core::topo::{LinkKind, NodeKind};

/// A `TYPE/id` node reference and what follows it.
#[derive(Clone, Copy)]
pub(super) struct NodeRef<'a> {
    pub(super) kind: NodeKind,
    /// Hex digits and at most one `-`: ASCII.
    pub(super) id: &'a [u8],
    pub(super) rest: &'a [u8],
}

/// `GPU/0-17000`, `PCI/C000`, `NET/0`: an upper-case type name, `/`, and an id of the
/// form `hex` or `hex-hex`. A second `-` is not taken (it starts a `--LINK->` step).
pub(super) fn node_ref(s: &[u8]) -> Option<NodeRef<'_>> {
    // The name is `upper_word` with letters only: 1 to 8 upper-case letters
    // right before the `/` (a digit or a ninth letter there fails either
    // way, as `/` is neither).
    let n = s.iter().take(9).take_while(|b| b.is_ascii_uppercase()).count();
    if n == 0 || n > 8 || s.get(n) != Some(&b'/') {
        return None;
    }
    let (name, rest) = (&s[..n], &s[n + 1..]);
    let mut n = hex_len(rest);
    if n == 0 {
        return None;
    }
    if rest.get(n) == Some(&b'-') {
        let tail = hex_len(&rest[n + 1..]);
        if tail > 0 {
            n += 1 + tail;
        }
    }
    Some(NodeRef {
        kind: NodeKind::from_name(name),
        id: &rest[..n],
        rest: &rest[n..],
    })
}

fn hex_len(s: &[u8]) -> usize {
    s.iter().take_while(|b| b.is_ascii_hexdigit()).count()
}

/// 1 to 8 upper-case letters or digits starting with a letter (`PCI`, `NVL`, `C2C`).
pub(super) fn upper_word(s: &[u8]) -> Option<(&[u8], &[u8])> {
    if !s.first()?.is_ascii_uppercase() {
        return None;
    }
    let n = s
        .iter()
        .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        .count();
    if n > 8 {
        return None;
    }
    Some(s.split_at(n))
}

pub(super) enum Suffix<'a> {
    /// Nothing after the id.
    None,
    /// ` (content)` and nothing after it.
    Paren(&'a [u8]),
    /// Anything else.
    Bad,
}

pub(super) fn parse_suffix(rest: &[u8]) -> Suffix<'_> {
    if rest.is_empty() {
        return Suffix::None;
    }
    let s = skip_ws(rest);
    if s.len() == rest.len() {
        return Suffix::Bad; // the id runs into something
    }
    let Some(s) = s.strip_prefix(b"(") else {
        return Suffix::Bad;
    };
    let n = s
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/' || b == b'-')
        .count();
    if n == 0 || &s[n..] != b")" {
        return Suffix::Bad;
    }
    Suffix::Paren(&s[..n])
}

/// `+ PCI[24.0] - GPU/0-17000 (0)` → (link kind, GB/s, node reference).
pub(super) fn parse_edge(body: &[u8]) -> Option<(LinkKind, f64, NodeRef<'_>)> {
    let s = skip_ws(body.strip_prefix(b"+")?);
    let (name, s) = upper_word(s)?;
    let s = skip_ws(s.strip_prefix(b"[")?);
    let (bw, s) = parse_bw(s)?;
    let s = skip_ws(s.strip_prefix(b"]")?);
    let s = skip_ws(s.strip_prefix(b"-")?);
    let r = node_ref(s)?;
    Some((LinkKind::from_name(name), bw, r))
}

/// `GPU/0-65000 (1/240.0/NVL)` → (target, hops, GB/s, type, rest of the line).
pub(super) fn parse_path_entry(s: &[u8]) -> Option<(NodeRef<'_>, u32, f64, LinkKind, &[u8])> {
    let r = node_ref(s)?;
    let (hops, bw, kind, t) = parse_path_suffix(r.rest)?;
    Some((r, hops, bw, kind, t))
}

/// What follows a path entry's target: ` (1/240.0/NVL)` → (hops, GB/s, type,
/// rest of the line).
pub(super) fn parse_path_suffix(rest: &[u8]) -> Option<(u32, f64, LinkKind, &[u8])> {
    let t = skip_ws(rest);
    if t.len() == rest.len() {
        return None;
    }
    let t = t.strip_prefix(b"(")?;
    let (hops, t) = parse_int(t)?;
    let hops = u32::try_from(hops).ok()?;
    let t = t.strip_prefix(b"/")?;
    let (bw, t) = parse_bw(t)?;
    let t = t.strip_prefix(b"/")?;
    let (name, t) = upper_word(t)?;
    let t = t.strip_prefix(b")")?;
    if !matches!(t.first(), None | Some(b' ' | b'\t')) {
        return None;
    }
    Some((hops, bw, LinkKind::from_name(name), t))
}

/// `=== System : maxBw 240.0 totalBw 240.0 ===` → (maxBw, totalBw, well-formed). The
/// values that could be read are returned even when the line is damaged.
pub(super) fn parse_header(body: &[u8]) -> (f64, f64, bool) {
    let mut max_bw = 0.0;
    let mut total_bw = 0.0;
    let ok = (|| {
        let s = skip_ws(body.strip_prefix(b"=== System")?);
        let s = skip_ws(s.strip_prefix(b":")?);
        let s = skip_ws(s.strip_prefix(b"maxBw")?);
        let (m, s) = parse_bw(s)?;
        max_bw = m;
        let s = skip_ws(skip_ws(s).strip_prefix(b"totalBw")?);
        let (t, s) = parse_bw(s)?;
        total_bw = t;
        let s = skip_ws(s).strip_prefix(b"===")?;
        s.iter().all(|&b| b == b'=').then_some(())
    })()
    .is_some();
    (max_bw, total_bw, ok)
}

/// `CPU/0-0 (1/1/2)`, `CPU/1 (1/2/-1)`: a root line strict enough to open a block
/// whose header was lost.
pub(super) fn is_cpu_root(body: &[u8]) -> bool {
    let Some(r) = node_ref(body) else {
        return false;
    };
    if r.kind != NodeKind::Cpu {
        return false;
    }
    let Suffix::Paren(c) = parse_suffix(r.rest) else {
        return false;
    };
    let mut s = c;
    for i in 0..3 {
        let Some((_, rest)) = parse_int(s) else {
            return false;
        };
        s = rest;
        if i < 2 {
            let Some(rest) = s.strip_prefix(b"/") else {
                return false;
            };
            s = rest;
        }
    }
    s.is_empty()
}

/// A decimal bandwidth (`24.0`, `5000.000000`): finite and not negative.
pub(super) fn parse_bw(s: &[u8]) -> Option<(f64, &[u8])> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    // One pass finds the number's bytes and, for the usual `digits.digits`
    // with at most 15 digits (`24.0`, `5000.000000`), its value: the digits
    // form an integer below 2^53 and the fraction a power of ten up to 10^15,
    // both exact as `f64`, so their quotient is the correctly rounded value
    // that `str::parse::<f64>` returns. Other forms go to that parser.
    let (mut n, mut mantissa, mut digits, mut dot, mut plain) = (0, 0u64, 0, None, true);
    while let Some(&b) = s.get(n) {
        match b {
            b'0'..=b'9' => {
                if digits < 15 {
                    mantissa = mantissa * 10 + u64::from(b - b'0');
                }
                digits += 1;
            }
            b'.' => {
                plain &= dot.is_none();
                dot = Some(n);
            }
            b'e' | b'E' | b'+' | b'-' => plain = false,
            _ => break,
        }
        n += 1;
    }
    if n == 0 || n > 40 || !s[0].is_ascii_digit() {
        return None;
    }
    let v = match dot {
        _ if !plain || digits > 15 => std::str::from_utf8(&s[..n]).ok()?.parse().ok()?,
        Some(d) if d + 1 == n => std::str::from_utf8(&s[..n]).ok()?.parse().ok()?,
        Some(d) => mantissa as f64 / POW10[n - d - 1],
        None => mantissa as f64,
    };
    (v.is_finite() && v >= 0.0).then_some((v, &s[n..]))
}

/// An optionally negative decimal integer of at most 18 digits.
pub(super) fn parse_int(s: &[u8]) -> Option<(i64, &[u8])> {
    let (neg, t) = match s.strip_prefix(b"-") {
        Some(t) => (true, t),
        None => (false, s),
    };
    let n = t.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 || n > 18 {
        return None;
    }
    let mut v: i64 = 0;
    for &d in &t[..n] {
        v = v * 10 + i64::from(d - b'0');
    }
    Some((if neg { -v } else { v }, &t[n..]))
}

pub(super) fn skip_ws(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    &s[n..]
}

pub(super) fn trim_end(s: &[u8]) -> &[u8] {
    let n = s
        .iter()
        .rev()
        .take_while(|&&b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .count();
    &s[..s.len() - n]
}
