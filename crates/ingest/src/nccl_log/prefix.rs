//! The `[timestamp ]host:pid:tid [dev] [func, line ]NCCL LEVEL ` line prefix,
//! and the splitting of physical lines into per-process segments.
//!
//! Several processes writing to one file (torchrun's merged output, a shared
//! `NCCL_DEBUG_FILE`) cut each other's lines: a new prefix can start in the
//! middle of a line, and a cut-off host name can fuse with the next one
//! (`stonstone:2984738:…`). [`split_line`] finds every prefix in a line; the
//! text up to the next prefix is that segment's message, and a segment followed
//! by another prefix is marked `cut` (its tail is missing).

use super::prefix_cache::PrefixCache;
use crate::bytes::{dec_u64, float, is_host_byte};
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

/// Host names seen so far, by pid, used to undo fused host names; also the
/// memo of recent prefixes (it lives here because it relies on this state).
pub struct KnownHosts {
    by_pid: rustc_hash::FxHashMap<u32, Vec<Box<[u8]>>>,
    recent: PrefixCache,
    /// Whether [`split_line`] may take its shortcuts; off, every line goes
    /// through [`split_line_scan`] (the reference the shortcuts are tested on).
    fast: bool,
}

impl Default for KnownHosts {
    fn default() -> Self {
        KnownHosts { by_pid: Default::default(), recent: PrefixCache::default(), fast: true }
    }
}

impl KnownHosts {
    /// Known hosts with [`split_line`]'s shortcuts on or off.
    pub fn with_fast_paths(fast: bool) -> Self {
        KnownHosts { fast, ..KnownHosts::default() }
    }

    /// Returns how many leading bytes of `host` are debris of a cut line:
    /// `stonstone` with a known `stone` for this pid gives 4. Learns new hosts.
    fn resolve(&mut self, host: &[u8], pid: u32) -> usize {
        let hosts = self.by_pid.entry(pid).or_default();
        if hosts.iter().any(|h| &h[..] == host) {
            return 0;
        }
        if let Some(k) = hosts.iter().filter(|k| k.len() < host.len() && host.ends_with(k)).map(|k| k.len()).max()
        {
            return host.len() - k;
        }
        hosts.push(host.into());
        0
    }
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
pub fn split_line(line: &[u8], hosts: &mut KnownHosts, out: &mut Vec<Segment>) -> usize {
    out.clear();
    if !hosts.fast {
        return split_line_scan(line, hosts, out);
    }
    // Fast path, the common case: one prefix at the start of the line (after
    // an optional epoch timestamp) and no other `host:pid:tid ` candidate in
    // its message, so the colon scan below would find the same single segment.
    // A prefix seen on a recent line is recognised by its bytes alone.
    let seg = match hosts.recent.lookup(line) {
        Some(seg) => Some(seg),
        None => {
            let seg = single_prefix_at_start(line, hosts);
            if let Some(seg) = &seg {
                hosts.recent.insert(line, seg);
            }
            seg
        }
    };
    if let Some(seg) = seg {
        let msg = seg.msg.start;
        // A second segment needs `NCCL`: without an `N` no colon scan is needed.
        let second = memchr::memchr(b'N', &line[msg..]).is_some()
            && memchr::memchr_iter(b':', &line[msg..]).any(|i| candidate_at(line, msg + i).is_some());
        if !second {
            out.push(seg);
            return 0;
        }
    }
    split_line_scan(line, hosts, out)
}

/// The general path of [`split_line`]: every `:` is a possible prefix.
pub fn split_line_scan(line: &[u8], hosts: &mut KnownHosts, out: &mut Vec<Segment>) -> usize {
    out.clear();
    let mut cands: [Option<Candidate>; 32] = [None; 32];
    let mut n = 0;
    for i in memchr::memchr_iter(b':', line) {
        if n == cands.len() {
            break;
        }
        if let Some(c) = candidate_at(line, i) {
            // A candidate inside the previous one's digits cannot happen (hosts have no ':').
            cands[n] = Some(c);
            n += 1;
        }
    }
    let mut head_end = line.len();
    for k in 0..n {
        let c = cands[k].unwrap();
        let limit = if k + 1 < n { cands[k + 1].unwrap().host_start } else { line.len() };
        let Some((dev, level, msg_start)) = parse_after_tid(line, c.after, limit) else { continue };
        let debris = hosts.resolve(&line[c.host_start..c.host_end], c.pid);
        let host_start = c.host_start + debris;
        let (ts_ns, seg_start) = timestamp_before(line, host_start);
        if out.is_empty() {
            head_end = seg_start;
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
    if out.is_empty() {
        head_end = line.len();
    }
    head_end
}

/// The prefix at the very start of `line` (after an optional `%s.%6f `
/// timestamp), when the host is one already known for its pid or the line
/// starts cleanly.
#[inline]
fn single_prefix_at_start(line: &[u8], hosts: &mut KnownHosts) -> Option<Segment> {
    let mut start = 0;
    if line.first().is_some_and(u8::is_ascii_digit) {
        // Possibly `1766081276.802766 host:…`.
        let sp = line.iter().take(24).position(|&b| b == b' ')?;
        start = sp + 1;
    }
    let c = prefix_forward(line, start)?;
    let (dev, level, msg_start) = parse_after_tid(line, c.after, line.len())?;
    // The `NCCL` found must not belong to a second prefix (`a:1:1 b:2:2 NCCL CALL`).
    if memchr::memchr_iter(b':', &line[c.after..msg_start]).any(|i| candidate_at(line, c.after + i).is_some()) {
        return None;
    }
    if hosts.resolve(&line[c.host_start..c.host_end], c.pid) != 0 {
        return None;
    }
    let (ts_ns, seg_start) = timestamp_before(line, c.host_start);
    if seg_start != 0 {
        return None;
    }
    Some(Segment {
        host: c.host_start..c.host_end,
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
    if !line.get(start)?.is_ascii_alphanumeric() {
        return None;
    }
    let mut i = start + 1;
    while i < line.len() && is_host_byte(line[i]) {
        i += 1;
    }
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
    memchr::memchr_iter(b':', text).any(|i| candidate_at(text, i).is_some())
}

/// Checks for `host:pid:tid ` where `line[colon]` is the first colon.
#[inline]
fn candidate_at(line: &[u8], colon: usize) -> Option<Candidate> {
    let digits = |from: usize| {
        let mut j = from;
        while j < line.len() && line[j].is_ascii_digit() {
            j += 1;
        }
        j
    };
    let pid_end = digits(colon + 1);
    if pid_end == colon + 1 || pid_end >= line.len() || line[pid_end] != b':' {
        return None;
    }
    let tid_end = digits(pid_end + 1);
    if tid_end == pid_end + 1 || tid_end >= line.len() || line[tid_end] != b' ' {
        return None;
    }
    let mut hs = colon;
    while hs > 0 && is_host_byte(line[hs - 1]) {
        hs -= 1;
    }
    // Host names start with a letter or digit: `-1gdr114` is debris + host.
    while hs < colon && !line[hs].is_ascii_alphanumeric() {
        hs += 1;
    }
    if hs == colon {
        return None;
    }
    let pid = dec_u64(&line[colon + 1..pid_end]).and_then(|v| u32::try_from(v).ok())?;
    let tid = dec_u64(&line[pid_end + 1..tid_end]).and_then(|v| u32::try_from(v).ok())?;
    Some(Candidate { host_start: hs, host_end: colon, pid, tid, after: tid_end + 1 })
}

/// After `host:pid:tid `: optional `[dev] `, optional tokens (`func, line `,
/// an elapsed time), then `NCCL LEVEL`. The `NCCL ` must start before `limit`
/// (the next candidate) and within 160 bytes.
#[inline]
fn parse_after_tid(line: &[u8], after: usize, limit: usize) -> Option<(Option<u32>, Level, usize)> {
    let mut p = after;
    let mut dev = None;
    if line.get(p) == Some(&b'[') {
        let close = memchr::memchr(b']', &line[p..limit.min(p + 12)])? + p;
        dev = dec_u64(&line[p + 1..close]).and_then(|v| u32::try_from(v).ok());
        dev?;
        p = close + 1;
        if line.get(p) == Some(&b' ') {
            p += 1;
        }
    }
    let window_end = limit.min(p + 160);
    if p >= window_end {
        return None;
    }
    let at = if line[p..].starts_with(b"NCCL ") {
        p
    } else {
        p + NCCL_FINDER.find(&line[p..window_end])? + 1
    };
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

/// A `%s.%6f` epoch timestamp right before the host: returns (ns, its start).
fn timestamp_before(line: &[u8], host_start: usize) -> (Option<i64>, usize) {
    if host_start < 2 || line[host_start - 1] != b' ' {
        return (None, host_start);
    }
    let end = host_start - 1;
    let mut s = end;
    while s > 0 && (line[s - 1].is_ascii_digit() || line[s - 1] == b'.') {
        s -= 1;
    }
    // Epoch seconds have 10 digits (until 2286); more digits in front are
    // the tail of a line this one cut (`opCount 41766081201.557987`).
    if let Some(dot) = line[s..end].iter().position(|&b| b == b'.') {
        if dot > 10 {
            s += dot - 10;
        }
    }
    let tok = &line[s..end];
    if tok.len() < 10 || !tok.contains(&b'.') {
        return (None, host_start);
    }
    match float(tok) {
        Some(secs) if secs > 1e8 => {
            // Split at the dot to keep microsecond precision exact.
            let dot = tok.iter().position(|&b| b == b'.').unwrap_or(tok.len());
            let whole = dec_u64(&tok[..dot]).unwrap_or(0) as i64;
            let frac = &tok[(dot + 1).min(tok.len())..];
            let mut ns: i64 = 0;
            for i in 0..9 {
                ns = ns * 10 + frac.get(i).map_or(0, |d| (d - b'0') as i64);
            }
            (Some(whole * 1_000_000_000 + ns), s)
        }
        _ => (None, host_start),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str) -> (String, Vec<(String, u32, u32, Option<u32>, Level, String, bool)>) {
        let mut hosts = KnownHosts::default();
        split_with(&mut hosts, line)
    }

    fn split_with(
        hosts: &mut KnownHosts,
        line: &str,
    ) -> (String, Vec<(String, u32, u32, Option<u32>, Level, String, bool)>) {
        let b = line.as_bytes();
        let mut out = Vec::new();
        let head = split_line(b, hosts, &mut out);
        let segs = out
            .iter()
            .map(|s| {
                (
                    line[s.host.clone()].to_string(),
                    s.pid,
                    s.tid,
                    s.dev,
                    s.level,
                    line[s.msg.clone()].to_string(),
                    s.cut,
                )
            })
            .collect();
        (line[..head].to_string(), segs)
    }

    #[test]
    fn plain_info_line() {
        let (head, s) = split("mew0:64904:64904 [0] NCCL INFO NCCL version 2.27.7+cuda13.0");
        assert_eq!(head, "");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].0, "mew0");
        assert_eq!((s[0].1, s[0].2, s[0].3), (64904, 64904, Some(0)));
        assert_eq!(s[0].4, Level::Info);
        assert_eq!(s[0].5, "NCCL version 2.27.7+cuda13.0");
        assert!(!s[0].6);
    }

    #[test]
    fn call_line_without_dev() {
        let (_, s) = split("gdr116:67599:67599 NCCL CALL ncclGroupEnd()");
        assert_eq!(s[0].3, None);
        assert_eq!(s[0].4, Level::Call);
        assert_eq!(s[0].5, "ncclGroupEnd()");
    }

    #[test]
    fn function_line_and_plugin_prefixes() {
        let (_, s) = split("gdr114:842735:842735 [0] scheduleCollTasksToPlan, 704 NCCL INFO AllGather: 268435456 Bytes");
        assert_eq!(s[0].5, "AllGather: 268435456 Bytes");
        let (_, s) = split(
            "x3005c0s25b1n0:24013:24116 [1] 117.724290 nccl_net_ofi_init:1396 NCCL TRACE NET/OFI Provider cxi",
        );
        assert_eq!(s[0].0, "x3005c0s25b1n0");
        assert_eq!(s[0].4, Level::Trace);
        assert_eq!(s[0].5, "NET/OFI Provider cxi");
    }

    #[test]
    fn timestamp_prefix() {
        let line = "1766081276.802766 csg-rivulet02:1426907:1427588 [2] NCCL INFO AllReduce: opCount 0";
        let mut hosts = KnownHosts::default();
        let mut out = Vec::new();
        let head = split_line(line.as_bytes(), &mut hosts, &mut out);
        assert_eq!(head, 0);
        assert_eq!(out[0].ts_ns, Some(1_766_081_276_802_766_000));
        assert_eq!(&line[out[0].host.clone()], "csg-rivulet02");
    }

    #[test]
    fn interleaved_writers() {
        let line = "stone:2984737:2984737 [2] NCCL INFO Send: opCount 0 comm 0x55f7d902f5e0 [nranks=4] stream stone:2984736:2stone:2984737:2984737 NCCL CALL ncclSend(0,7f1fd2c00000)";
        let mut hosts = KnownHosts::default();
        let (_, s) = split_with(&mut hosts, line);
        assert_eq!(s.len(), 2);
        assert!(s[0].6, "first segment is cut");
        assert_eq!(s[0].5, "Send: opCount 0 comm 0x55f7d902f5e0 [nranks=4] stream stone:2984736:2");
        assert_eq!(s[1].0, "stone", "fused '2stone' resolved to the known host");
        assert_eq!(s[1].4, Level::Call);
        assert!(!s[1].6);
        // Fused host at line start: 'ston' + 'stone'.
        let (head, s) = split_with(&mut hosts, "stonstone:2984737:2984737 [3] NCCL INFO Recv: opCount 5d");
        assert_eq!(head, "ston");
        assert_eq!(s[0].0, "stone");
    }

    #[test]
    fn timestamp_glued_to_a_cut_line() {
        let line = "node00:1:1 [1] NCCL INFO AllReduce: opCount 41766081201.557987 node00:2:2 [3] NCCL INFO Broadcast: x";
        let mut hosts = KnownHosts::default();
        let mut out = Vec::new();
        split_line(line.as_bytes(), &mut hosts, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(&line[out[0].msg.clone()], "AllReduce: opCount 4");
        assert_eq!(out[1].ts_ns, Some(1_766_081_201_557_987_000));
        assert!(has_cut_prefix(b"node00:949993:949993 [2] N"));
        assert!(!has_cut_prefix(b"plain text: 12:30"));
    }

    #[test]
    fn launcher_prefixes_before_the_host() {
        // `srun -l` task labels and bracketed date timestamps stay in the head.
        for (line, head) in [
            ("0: nid001:4242:4242 [0] NCCL INFO AllReduce: opCount 0", "0: "),
            ("12: nid001:4242:4250 NCCL CALL ncclGroupEnd()", "12: "),
            ("[2025-01-15 12:34:56] h1:7:7 [3] NCCL WARN Cuda failure", "[2025-01-15 12:34:56] "),
        ] {
            let (h, s) = split(line);
            assert_eq!(h, head, "{line}");
            assert_eq!(s.len(), 1, "{line}");
            assert!(!s[0].6);
        }
    }

    #[test]
    fn program_output_before_prefix() {
        let (head, s) = split(
            "TimeTest(), common.cu:610,            0             0     float    none      -1gdr114:842735:842735 [0] ncclEnqueueCheck, 2306 NCCL INFO AllGather: opCount 5",
        );
        assert!(head.starts_with("TimeTest()"));
        assert_eq!(s[0].0, "1gdr114", "unknown debris stays on the host until a clean host is known");
        assert_eq!(s[0].5, "AllGather: opCount 5");
    }

    #[test]
    fn not_prefixes() {
        for line in [
            "",
            "# nThread 1 nGpus 2 minBytes 8388608",
            "Sun Nov 22 02:34:52 UTC 2026",
            "mew0:64904:64904 [0] nothing here",
            "host:1:2 [x] NCCL INFO y",
            "35:842735 [0] ncclEnqueueCheck, 2306 NCCL INFO AllGather: opCount 5",
            ":1:2 NCCL INFO",
            "a:1:2",
            "a:1:2 NCCL INFOx",
        ] {
            let (head, s) = split(line);
            assert!(s.is_empty(), "{line}");
            assert_eq!(head, line);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut hosts = KnownHosts::default();
        let mut out = Vec::new();
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let alphabet = b"ab1:: [0]NCCL INFO\x00\xff9.";
        for len in 0..300 {
            let line: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize]
                })
                .collect();
            let head = split_line(&line, &mut hosts, &mut out);
            assert!(head <= line.len());
            for s in &out {
                assert!(s.msg.start <= s.msg.end && s.msg.end <= line.len());
            }
        }
    }
}
