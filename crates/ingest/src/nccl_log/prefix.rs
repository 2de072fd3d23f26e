//! The `[timestamp ]host:pid:tid [dev] [func, line ]NCCL LEVEL ` line prefix,
//! and the splitting of physical lines into per-process segments.
//!
//! Several processes writing to one file (torchrun's merged output, a shared
//! `NCCL_DEBUG_FILE`) cut each other's lines: a new prefix can start in the
//! middle of a line, and a cut-off host name can fuse with the next one
//! (`stonstone:2984738:…`). [`split_line`] finds every prefix in a line; the
//! text up to the next prefix is that segment's message, and a segment followed
//! by another prefix is marked `cut` (its tail is missing).
//!
//! This module owns the splitting (the memo shortcut, the single-prefix
//! path, the answer for a repeat of the last line without a segment, the
//! colon scan); the host fix-up ([`KnownHosts`]) is
//! `prefix_hosts`, the byte-level pieces (a `host:pid:tid ` candidate at a
//! colon, digit runs, timestamps) are `prefix_lex`, the memo of recent
//! prefixes `prefix_cache`.

use crate::bytes::{dec_u64, Positions};
pub use hosts::KnownHosts;
use lex::{candidate_at, glued_timestamp, timestamp_before};
use memchr::memmem;
use std::sync::LazyLock;

static NCCL_FINDER: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b" NCCL "));
use std::ops::Range;

/// NCCL's debug levels as printed after `NCCL `.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    Info,
    Warn,
    Trace,
    /// `NCCL CALL` lines of the CALL subsystem (no `[dev]` field).
    Call,
    Abort,
}

/// One prefixed piece of a physical line, as byte ranges into that line.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub host: Range<usize>,
    pub pid: u32,
    pub tid: u32,
    pub dev: Option<u32>,
    pub level: Level,
    /// Epoch nanoseconds from a `%s.%6f` timestamp before the host.
    pub ts_ns: Option<i64>,
    pub msg: Range<usize>,
    /// Another prefix follows in the same line: the message lost its tail.
    pub cut: bool,
}

/// Candidate `host:pid:tid ` occurrence: host start, pid, tid, index after the space.
#[derive(Clone, Copy)]
struct Candidate {
    host_start: usize,
    host_end: usize,
    pid: u32,
    tid: u32,
    after: usize,
}

/// Finds all prefixes in `line`, appending segments to `out` (cleared first).
/// Returns the end of the text before the first segment (`line[..head_end]`).
#[inline]
pub fn split_line(line: &[u8], hosts: &mut KnownHosts, out: &mut Vec<Segment>) -> usize {
    match split_first(line, hosts, out) {
        Split::One(seg) => {
            out.clear();
            out.push(seg);
            0
        }
        Split::Many(head_end) => head_end,
    }
}

/// What [`split_first`] made of a line.
pub enum Split {
    /// The line is this one segment, from byte 0 (`out` was left as it was).
    One(Segment),
    /// The segments are in `out`; the text before the first one ends here
    /// (as [`split_line`] returns).
    Many(usize),
}

/// [`split_line`] that hands the common line, one segment from byte 0,
/// back by value instead of through `out` (the reader's per-line path: no
/// push into the vector, no copy out of it).
#[inline(always)]
pub fn split_first(line: &[u8], hosts: &mut KnownHosts, out: &mut Vec<Segment>) -> Split {
    // The common case, kept lean (the rest is out of line): a prefix seen on
    // a recent line, recognised by its bytes alone, and no `NCCL ` in the
    // message (see `split_line_rest` for why that settles the line).
    if hosts.fast {
        if let Some(seg) = hosts.recent.lookup(line) {
            let msg = seg.msg.start;
            if !hosts.nccl.has_nccl(&line[msg..]) {
                return Split::One(seg);
            }
            out.clear();
            out.push(seg);
            return Split::Many(second_prefixes(line, msg, hosts, out));
        }
    }
    out.clear();
    Split::Many(split_line_rest(line, hosts, out))
}

/// [`split_line`] when the prefix memo does not know the line's start.
#[inline(never)]
fn split_line_rest(line: &[u8], hosts: &mut KnownHosts, out: &mut Vec<Segment>) -> usize {
    if !hosts.fast {
        return scan_line(line, hosts, out);
    }
    // Fast path, the common case: one prefix at the start of the line (after
    // an optional epoch timestamp) and no second prefix in its message, so
    // the colon scan below would find the same single segment. A prefix
    // read here is remembered ([`PrefixCache`]).
    let msg = match single_prefix_at_start(line, hosts) {
        Some(seg) => {
            hosts.recent.insert(line, &seg);
            let msg = seg.msg.start;
            out.push(seg);
            msg
        }
        None => {
            // A line that does not start with a prefix, answered from the
            // last such line that held no segment when it is the same bytes:
            // tool output repeats between NCCL lines (`ncclIbAccept(),
            // transport/net_ib.cc:1537, NCCL RDMA server accept`: 5.3k of the
            // 30 MB sample's 6.7k lines without a segment repeat the one
            // before). Such a line's answer (no segment; whether it held a
            // candidate) is a function of its bytes alone: the host fix-up,
            // the only state the scan reads or changes, is asked only about
            // a candidate that becomes a segment. (Not a function of its
            // own: with one more function the compiler's code units split
            // differently and it inlined less elsewhere in the reader.)
            if let Some(cut) = hosts.recent.bare(line) {
                hosts.cut_prefix = cut;
                return line.len();
            }
            let head_end = scan_line(line, hosts, out);
            if out.is_empty() {
                hosts.recent.set_bare(line, hosts.cut_prefix);
            }
            return head_end;
        }
    };
    // A second segment needs `NCCL ` in the message, after its own
    // `host:pid:tid ` (see `parse_after_tid`); without one, the scan finds
    // candidates in the message at most, none of which becomes a segment or
    // changes the first one (its `NCCL LEVEL` lies before the message).
    if hosts.nccl.has_nccl(&line[msg..]) {
        return second_prefixes(line, msg, hosts, out);
    }
    0
}

/// [`scan_from`] over the whole line, noting for a line with no segment
/// whether it held a candidate ([`KnownHosts::cut_prefix`]).
fn scan_line(line: &[u8], hosts: &mut KnownHosts, out: &mut Vec<Segment>) -> usize {
    let mut candidates = 0;
    let head_end = scan_from(line, 0, MAX_CANDIDATES, hosts, out, &mut candidates);
    // No candidate seen means none anywhere: with none found, the scan
    // tried every colon (it stops early only after `MAX_CANDIDATES`).
    hosts.cut_prefix = candidates > 0;
    head_end
}

/// The rest of a line whose first segment (from byte 0, message from `msg`)
/// is in `out` and whose message holds `NCCL `. The scan of the whole line
/// would find this prefix's candidate first (no colon before its host, none
/// after its tid but in the message, as checked when it was first read), give
/// it this same segment (its host is known, so no debris) and go on with the
/// message's colons: do just that part.
#[inline(never)]
fn second_prefixes(line: &[u8], msg: usize, hosts: &mut KnownHosts, out: &mut Vec<Segment>) -> usize {
    scan_from(line, msg, MAX_CANDIDATES - 1, hosts, out, &mut 0);
    0
}

/// The general path of [`split_line`]: every `:` is a possible prefix.
pub fn split_line_scan(line: &[u8], hosts: &mut KnownHosts, out: &mut Vec<Segment>) -> usize {
    out.clear();
    scan_from(line, 0, MAX_CANDIDATES, hosts, out, &mut 0)
}

/// At most this many `host:pid:tid ` candidates are considered per line.
const MAX_CANDIDATES: usize = 32;

/// The scan of [`split_line_scan`] over the colons from `from` on, considering
/// at most `max` candidates, appending to `out`: a segment found cuts the
/// last one in `out`. Returns the head end when `out` was empty, and adds
/// the number of `host:pid:tid ` candidates seen to `candidates`.
///
/// Each candidate is taken up when the next one is found (its `NCCL LEVEL`
/// must start before the next candidate's host), so no list of candidates
/// is kept. The colons inside a candidate's `host:pid:tid ` are not tried:
/// the only one, between pid and tid, is followed by digits and a space,
/// never by digits and a colon, so it cannot start a candidate.
fn scan_from(
    line: &[u8],
    from: usize,
    max: usize,
    hosts: &mut KnownHosts,
    out: &mut Vec<Segment>,
    candidates: &mut usize,
) -> usize {
    let mut head_end = line.len();
    let mut pending: Option<Candidate> = None;
    let mut n = 0;
    let mut skip_to = from;
    // 64 bytes a round: the walk over a cut line's long message, colons
    // few (the scan 0.4 M instructions less than with 32 on the 30 MB sample).
    for colon in crate::bytes::Positions64::new(line, from, b':') {
        if colon < skip_to {
            continue;
        }
        if n == max {
            break;
        }
        if let Some(c) = candidate_at(line, colon) {
            if let Some(p) = pending.replace(c) {
                take_candidate(line, p, c.host_start, hosts, out, &mut head_end);
            }
            skip_to = c.after;
            n += 1;
        }
    }
    if let Some(p) = pending {
        take_candidate(line, p, line.len(), hosts, out, &mut head_end);
    }
    *candidates += n;
    if out.is_empty() {
        head_end = line.len();
    }
    head_end
}

/// The segment of candidate `c` when its `NCCL LEVEL` starts before
/// `limit`: appended to `out`, cutting the last one there (or, the first,
/// setting `head_end` to its start).
#[inline(always)]
fn take_candidate(
    line: &[u8],
    c: Candidate,
    limit: usize,
    hosts: &mut KnownHosts,
    out: &mut Vec<Segment>,
    head_end: &mut usize,
) {
    let Some((dev, level, msg_start)) = parse_after_tid(line, c.after, limit) else { return };
    let (ts_ns, seg_start, host_start) = match glued_timestamp(line, c.host_start, c.host_end) {
        Some((ns, ts_start, host)) => (Some(ns), ts_start, host),
        None => {
            let host_start = c.host_start + hosts.resolve(&line[c.host_start..c.host_end], c.pid);
            let (ts_ns, seg_start) = timestamp_before(line, host_start);
            (ts_ns, seg_start, host_start)
        }
    };
    if out.is_empty() {
        *head_end = seg_start;
    } else if let Some(prev) = out.last_mut() {
        prev.msg.end = seg_start.max(prev.msg.start);
        prev.cut = true;
    }
    out.push(Segment {
        host: host_start..c.host_end,
        pid: c.pid,
        tid: c.tid,
        dev,
        level,
        ts_ns,
        msg: msg_start..line.len(),
        cut: false,
    });
}

/// The prefix at the very start of `line` (after an optional `%s.%6f `
/// timestamp), when the host is one already known for its pid or the line
/// starts cleanly.
#[inline]
fn single_prefix_at_start(line: &[u8], hosts: &mut KnownHosts) -> Option<Segment> {
    let mut start = 0;
    if line.first().is_some_and(u8::is_ascii_digit) {
        // Possibly `1766081276.802766 host:…`; without a space, a timestamp
        // glued to the host (`1795693065.217944vm:…`) or a host that starts
        // with a digit.
        if let Some(sp) = line.iter().take(24).position(|&b| b == b' ') {
            start = sp + 1;
        }
    }
    let c = prefix_forward(line, start)?;
    let (dev, level, msg_start) = parse_after_tid(line, c.after, line.len())?;
    // The `NCCL` found must not belong to a second prefix (`a:1:1 b:2:2 NCCL CALL`).
    if memchr::memchr_iter(b':', &line[c.after..msg_start]).any(|i| candidate_at(line, c.after + i).is_some()) {
        return None;
    }
    // The host, past a timestamp glued to it; else a timestamp before it.
    let (host_start, ts_ns, seg_start) = match glued_timestamp(line, c.host_start, c.host_end).filter(|_| start == 0) {
        Some((ns, ts_start, host)) => (host, Some(ns), ts_start),
        None => {
            let (ts_ns, seg_start) = timestamp_before(line, c.host_start);
            (c.host_start, ts_ns, seg_start)
        }
    };
    if hosts.resolve(&line[host_start..c.host_end], c.pid) != 0 || seg_start != 0 {
        return None;
    }
    Some(Segment {
        host: host_start..c.host_end,
        pid: c.pid,
        tid: c.tid,
        dev,
        level,
        ts_ns,
        msg: msg_start..line.len(),
        cut: false,
    })
}

/// `host:pid:tid ` read forwards from `start` (one pass, no walk-back).
#[inline]
fn prefix_forward(line: &[u8], start: usize) -> Option<Candidate> {
    if !crate::bytes::is_host_start(*line.get(start)?) {
        return None;
    }
    let mut i = crate::bytes::host_run_end(line, start + 1);
    if line.get(i) != Some(&b':') || i - start > 255 {
        return None;
    }
    let host_end = i;
    let num = |i: &mut usize, end: u8| -> Option<u32> {
        let first = *i;
        let mut v: u64 = 0;
        while *i < line.len() && line[*i].is_ascii_digit() {
            v = v * 10 + (line[*i] - b'0') as u64;
            *i += 1;
            if *i - first > 10 {
                return None;
            }
        }
        if *i == first || line.get(*i) != Some(&end) {
            return None;
        }
        *i += 1;
        u32::try_from(v).ok()
    };
    i += 1;
    let pid = num(&mut i, b':')?;
    let tid = num(&mut i, b' ')?;
    Some(Candidate { host_start: start, host_end, pid, tid, after: i })
}

/// Whether `text` holds a `host:pid:tid ` prefix that was cut before its
/// `NCCL LEVEL` (the start of a line another writer overwrote).
pub fn has_cut_prefix(text: &[u8]) -> bool {
    Positions::new(text, 0, b':').any(|i| candidate_at(text, i).is_some())
}

/// After `host:pid:tid `: optional `[dev] `, optional tokens (`func, line `,
/// an elapsed time), then `NCCL LEVEL`. The `NCCL ` must start before `limit`
/// (the next candidate) and within 160 bytes.
#[inline]
fn parse_after_tid(line: &[u8], after: usize, limit: usize) -> Option<(Option<u32>, Level, usize)> {
    let mut p = after;
    let mut dev = None;
    if line.get(p) == Some(&b'[') {
        // Mostly one digit (`[3]`): read as such, the same answer as the
        // search (`dev_field`: its first `]` is that one).
        let close = if p + 2 < limit && line[p + 1].is_ascii_digit() && line[p + 2] == b']' {
            dev = Some((line[p + 1] - b'0') as u32);
            p + 2
        } else {
            let (d, close) = dev_field(line, p, limit)?;
            dev = Some(d);
            close
        };
        p = close + 1;
        if line.get(p) == Some(&b' ') {
            p += 1;
        }
    }
    let window_end = limit.min(p + 160);
    if p >= window_end {
        return None;
    }
    let at = if line[p..].starts_with(b"NCCL ") { p } else { nccl_after_tokens(line, p, window_end)? };
    let lv = at + 5;
    let (level, len) = match line.get(lv..) {
        Some(r) if r.starts_with(b"INFO") => (Level::Info, 4),
        Some(r) if r.starts_with(b"WARN") => (Level::Warn, 4),
        Some(r) if r.starts_with(b"TRACE") => (Level::Trace, 5),
        Some(r) if r.starts_with(b"CALL") => (Level::Call, 4),
        Some(r) if r.starts_with(b"ABORT") => (Level::Abort, 5),
        _ => return None,
    };
    let end = lv + len;
    match line.get(end) {
        None => Some((dev, level, end)),
        Some(b' ') => Some((dev, level, end + 1)),
        Some(_) => None,
    }
}

/// The `[dev]` field of [`parse_after_tid`] other than one digit: the
/// device and the `]`'s index. Out of line, as [`nccl_after_tokens`].
#[inline(never)]
fn dev_field(line: &[u8], p: usize, limit: usize) -> Option<(u32, usize)> {
    // At most 12 bytes: a loop, not a call into `memchr`.
    let close = line[p..limit.min(p + 12)].iter().position(|&b| b == b']')? + p;
    let dev = dec_u64(&line[p + 1..close]).and_then(|v| u32::try_from(v).ok())?;
    Some((dev, close))
}

/// Where `NCCL ` starts after tokens (`func, line `, an elapsed time) in
/// `line[p..window_end]`: the first ` NCCL ` there, past its space. Out of
/// line: most prefixes have `NCCL` right after the tid or `[dev]`, and the
/// search inlined made [`parse_after_tid`] save and restore six registers
/// on every call.
#[inline(never)]
fn nccl_after_tokens(line: &[u8], p: usize, window_end: usize) -> Option<usize> {
    Some(p + NCCL_FINDER.find(&line[p..window_end])? + 1)
}

#[path = "prefix_lex.rs"]
mod lex;

#[path = "prefix_hosts.rs"]
mod hosts;

#[cfg(test)]
#[path = "prefix_tests.rs"]
mod tests;
