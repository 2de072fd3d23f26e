//! The tuning line NCCL prints after an operation's opCount line when
//! `NCCL_DEBUG_SUBSYS` includes TUNING: `<Op>: <n> Bytes -> Algo <A> proto <P>
//! channel{Lo..Hi}={a..b}` (and the older numeric `Algo 1 proto 2 time …`),
//! read token by token; its canonical form has a shortcut in `ops_fast`.
//! Also the algorithm and protocol spellings both forms use.

use super::ops::colon_in_24;
use crate::bytes::dec_u64;
use commlens_core::{Algorithm, OpKind, Protocol};

/// `AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}`,
/// and the older numeric form `… Bytes -> Algo 1 proto 2 time 33.36`.
#[derive(Debug, Clone, PartialEq)]
pub struct TuningLine {
    pub kind: OpKind,
    pub bytes: u64,
    pub algo: Option<Algorithm>,
    pub proto: Option<Protocol>,
    pub channels: Option<(u16, u16)>,
}

/// Cheap shape test: `<Name>: <spaces><digit>… Bytes -> …`.
#[inline]
pub fn looks_like_tuning_line(msg: &[u8]) -> bool {
    colon_in_24(msg).is_some_and(|colon| looks_like_tuning_at(msg, colon))
}

/// [`looks_like_tuning_line`] given the first colon among the first 24
/// bytes (the reader has it from its opCount test: one search per line).
#[inline]
pub(super) fn looks_like_tuning_at(msg: &[u8], colon: usize) -> bool {
    let rest = &msg[colon + 1..];
    let digits = rest.iter().position(|&b| b != b' ').unwrap_or(rest.len());
    if !rest.get(digits).is_some_and(u8::is_ascii_digit) {
        return false;
    }
    let window = &rest[digits..rest.len().min(digits + 40)];
    // Usually right after the number; otherwise search the whole window,
    // when it holds a `>` at all (`channel.cc:42 …` lines do not: a byte
    // search is a fraction of what setting up the substring search costs).
    let number = window.iter().take_while(|b| b.is_ascii_digit()).count();
    window[number..].starts_with(b" Bytes -> ")
        || (memchr::memchr(b'>', window).is_some() && memchr::memmem::find(window, b" Bytes -> ").is_some())
}

pub fn parse_tuning_line(msg: &[u8]) -> Option<TuningLine> {
    parse_tuning_at(msg, colon_in_24(msg)?)
}

/// [`parse_tuning_line`] given the first colon among the first 24 bytes.
pub(super) fn parse_tuning_at(msg: &[u8], colon: usize) -> Option<TuningLine> {
    let kind = OpKind::from_name(&msg[..colon])?;
    let mut toks = crate::bytes::tokens(&msg[colon + 1..]);
    let bytes = dec_u64(toks.next()?)?;
    if toks.next()? != b"Bytes" || toks.next()? != b"->" || toks.next()? != b"Algo" {
        return None;
    }
    let algo = decode_algo(toks.next()?);
    if toks.next()? != b"proto" {
        return None;
    }
    let proto = decode_proto(toks.next()?);
    let mut channels = None;
    for t in toks {
        if let Some(r) = t.strip_prefix(b"channel{Lo..Hi}={") {
            let r = r.strip_suffix(b"}").unwrap_or(r);
            if let Some(dots) = r.windows(2).position(|w| w == b"..") {
                let lo = dec_u64(&r[..dots]).and_then(|v| u16::try_from(v).ok());
                let hi = dec_u64(&r[dots + 2..]).and_then(|v| u16::try_from(v).ok());
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    channels = Some((lo, hi));
                }
            }
        }
    }
    Some(TuningLine { kind, bytes, algo, proto, channels })
}

/// Words, or the integers older NCCL printed (`NCCL_ALGO_*` order).
pub(super) fn decode_algo(t: &[u8]) -> Option<Algorithm> {
    // The spellings recent NCCL prints on every tuning line first (the
    // number test and the case-folding decode were ~100 instructions).
    match t {
        b"RING" => return Some(Algorithm::Ring),
        b"TREE" => return Some(Algorithm::Tree),
        _ => {}
    }
    match dec_u64(t) {
        Some(0) => Some(Algorithm::Tree),
        Some(1) => Some(Algorithm::Ring),
        Some(2) => Some(Algorithm::CollNetDirect),
        Some(3) => Some(Algorithm::CollNetChain),
        Some(4) => Some(Algorithm::Nvls),
        Some(5) => Some(Algorithm::NvlsTree),
        Some(6) => Some(Algorithm::Pat),
        Some(_) => None,
        None => Algorithm::from_name(t),
    }
}

pub(super) fn decode_proto(t: &[u8]) -> Option<Protocol> {
    match t {
        b"SIMPLE" => return Some(Protocol::Simple),
        b"LL" => return Some(Protocol::Ll),
        b"LL128" => return Some(Protocol::Ll128),
        _ => {}
    }
    match dec_u64(t) {
        Some(0) => Some(Protocol::Ll),
        Some(1) => Some(Protocol::Ll128),
        Some(2) => Some(Protocol::Simple),
        Some(_) => None,
        None => Protocol::from_name(t),
    }
}
