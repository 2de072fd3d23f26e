//! Reader of nccl-tests results (`all_reduce_perf`, `alltoall_perf`, …): the
//! performance tables those benchmarks print, the measured ceiling a
//! training run's collectives are compared with.
//!
//! Handles both table layouts (2.8-era `size count type redop time algbw
//! busbw error ×2`, and the current one with `root` and `#wrong`), columns
//! left empty (alltoall's redop in the old layout), `srun -l` rank prefixes
//! (` 0: `), results pasted into Markdown (`> ` quotes, fences, lost `#`),
//! several runs in one file, rows that NCCL's own debug lines cut into
//! pieces (the benchmark and NCCL share stdout), and the `Rank … on HOST
//! device …` lines that name the job's GPUs. Rows are read right-anchored: the last eight values
//! are the out-of-place and in-place (time, algbw, busbw, errors), the first
//! three size, count and type; what sits between is redop and/or root as the
//! header says.
//!
//! Which collective a table measures is taken from, in order: a
//! `# Collective test starting: X_perf` line, a command line naming `X_perf`,
//! the file name, and last the ratio busbw/algbw with the job's rank count
//! (nccl-tests' bus factors), which cannot tell AllGather from AllToAll.
//! [`BenchRun::kind_from`] says which one decided.
//!
//! Streams the file line by line ([`TableScan`], which the NCCL log reader
//! also feeds in its own pass over a log that holds tables); rows that start
//! like a result but do not parse are counted and reported with their line numbers.
//! A row's tokens are cut in `nccl_tests_tokens.rs`.

use crate::error::IngestError;
use crate::lines::LineSource;
use crate::lines_mapped::FileLines;
use commlens_core::OpKind;
use memchr::memmem;
use serde::Serialize;
use std::path::Path;
use std::sync::LazyLock;

/// One direction of a result row (nccl-tests times in µs, bandwidths in GB/s).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BenchTiming {
    pub time_us: f64,
    pub algbw_gb_s: f64,
    pub busbw_gb_s: f64,
    /// `#wrong` (or the old `error` value, as a count of 0/1 when printed as
    /// a float); `None` when the test printed `N/A` (validation off).
    pub errors: Option<f64>,
}

/// One message size of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchRow {
    pub line: u64,
    pub bytes: u64,
    pub count: u64,
    pub dtype: String,
    pub redop: Option<String>,
    pub root: Option<i64>,
    pub out_of_place: BenchTiming,
    pub in_place: BenchTiming,
}

/// One table: a benchmark run over a range of sizes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchRun {
    pub kind: Option<OpKind>,
    /// What named the collective: `header`, `command`, `file name`, `bus factor`.
    pub kind_from: Option<&'static str>,
    /// Ranks of the job: one more than the highest `Rank N` of the
    /// `Using devices` block; 0 when the file lists none.
    pub ranks: u32,
    pub hosts: Vec<String>,
    /// Ranks listed on each of `hosts` (same order).
    pub gpus_per_host: Vec<u32>,
    pub gpu_models: Vec<String>,
    /// GPUs each benchmark thread drives (`nGpus` of the `# nThread N nGpus G` line; 1 when
    /// the file does not say): one thread launches every call on all of them in turn.
    pub gpus_per_thread: u32,
    pub rows: Vec<BenchRow>,
    /// `# Avg bus bandwidth : X` (GB/s).
    pub avg_busbw_gb_s: Option<f64>,
    /// Line of the table header.
    pub header_line: u64,
}

impl BenchRun {
    /// The best bus bandwidth of the run (either direction).
    pub fn peak_busbw_gb_s(&self) -> f64 {
        self.rows.iter().map(|r| r.out_of_place.busbw_gb_s.max(r.in_place.busbw_gb_s)).fold(0.0, f64::max)
    }
}

/// What one file gave.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchFile {
    pub path: String,
    pub runs: Vec<BenchRun>,
    /// Lines that started like a result row but did not parse: (line, text).
    pub malformed: Vec<(u64, String)>,
}

#[path = "nccl_tests_sniff.rs"]
mod sniff;
pub use sniff::{looks_like_nccl_tests, sniff_file, BenchSniff, BenchSniffer};

#[path = "nccl_tests_tokens.rs"]
mod tokens;
use tokens::{cell_f64, plain_f64, row_tokens, Tokens};

#[path = "nccl_tests_scan.rs"]
mod scan;
pub use scan::{BenchTables, KeptLines, TableScan, SCAN_MAX_LINE};

/// Reads every table of an nccl-tests output (plain or gzip).
pub fn read_nccl_tests(path: &Path) -> Result<BenchFile, IngestError> {
    let io = |e| IngestError::Io { path: path.to_path_buf(), source: e };
    let mut reader = FileLines::open(path, SCAN_MAX_LINE, true).map_err(io)?;
    let mut scan = TableScan::new(path);
    loop {
        let line_no = reader.line_no() + 1;
        let Some(raw) = reader.next_line().map_err(io)? else { break };
        scan.line(raw, line_no);
    }
    scan.finish()
}

/// Columns between `type` and `time` in the header.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Middle {
    redop: bool,
    root: bool,
}

struct Table {
    middle: Middle,
    header_line: u64,
    rows: Vec<BenchRow>,
    avg: Option<f64>,
    /// A row printed in pieces, see [`Pending`].
    pending: Option<Pending>,
}

/// A row printed in pieces: its tokens so far joined by single spaces (what
/// a malformed-row report prints; one string, not one per token: the
/// allocations were a third of [`Table::feed`]), how many tokens that is,
/// how many the size/count/type/redop/root head had, and the line it
/// started on. Tokens hold no whitespace, so splitting the text at spaces
/// gives them back.
struct Pending {
    text: String,
    count: usize,
    head_len: usize,
    at: u64,
}

impl Table {
    /// One line that starts with a digit: a whole row, or a piece of one.
    /// nccl-tests prints a row in three writes (head, out-of-place, in-place)
    /// and NCCL's debug lines, sharing stdout, can land between them and
    /// glue onto their ends (`… sum  -1mew0:64904:64904 [1] NCCL INFO …`).
    fn feed(&mut self, t: &str, line: u64, malformed: &mut Vec<(u64, String)>) {
        let Some(all) = row_tokens(t) else { return };
        // Rows have at most 13 tokens: a longer line is only counted (see `Tokens`).
        let (n, tokens) = (all.len(), all.kept());
        let bad = |m: &mut Vec<(u64, String)>, at: u64, text: &str| m.push((at, text.chars().take(160).collect()));
        // `parse::<u64>().is_ok()`; up to 19 digits always fit.
        let is_int = |x: &str| (!x.is_empty() && x.len() <= 19 && x.bytes().all(|b| b.is_ascii_digit())) || x.parse::<u64>().is_ok();
        let is_value = |x: &str| x == "N/A" || plain_f64(x).is_some() || x.parse::<f64>().is_ok();
        // size, count, then a type name (`float`, `bfloat16`, `f8e4m3`, …).
        let type_name = |x: &str| {
            x.starts_with(|c: char| c.is_ascii_alphabetic()) && x.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') && x != "N"
        };
        let head = n >= 3 && is_int(tokens[0]) && is_int(tokens[1]) && type_name(tokens[2]);
        if head && n >= 11 {
            if let Some(p) = self.pending.take() {
                bad(malformed, p.at, &p.text);
            }
            match parse_row(&all, self.middle, line) {
                Some(r) => self.rows.push(r),
                None => bad(malformed, line, t),
            }
        } else if head && n <= 5 {
            if let Some(p) = self.pending.take() {
                bad(malformed, p.at, &p.text);
            }
            // Room for the whole row: the values' pieces are appended without growing it.
            let mut text = String::with_capacity(160);
            for (i, x) in tokens.iter().enumerate() {
                if i > 0 {
                    text.push(' ');
                }
                text.push_str(x);
            }
            self.pending = Some(Pending { text, count: n, head_len: n, at: line });
        } else if !head && matches!(n, 4 | 8) && tokens.iter().all(|x| is_value(x)) {
            let Some(p) = &mut self.pending else { return bad(malformed, line, t) };
            for x in tokens {
                p.text.push(' ');
                p.text.push_str(x);
            }
            p.count += n;
            if p.count >= p.head_len + 8 {
                let p = self.pending.take().expect("pending row");
                // The tokens back, at the spaces (a byte scan; `split(' ')` searched per token).
                let mut refs = Tokens::new();
                let mut from = 0;
                for (i, &c) in p.text.as_bytes().iter().enumerate() {
                    if c == b' ' {
                        refs.push(&p.text[from..i]);
                        from = i + 1;
                    }
                }
                refs.push(&p.text[from..]);
                match parse_row(&refs, self.middle, p.at) {
                    Some(r) => self.rows.push(r),
                    None => bad(malformed, p.at, &p.text),
                }
            }
        }
        // Anything else (debris of NCCL lines that other writers cut) is no row.
    }
}

#[derive(Default)]
struct State {
    table: Option<Table>,
    /// From `Collective test starting`.
    named: Option<OpKind>,
    /// From a command line naming `X_perf`.
    command: Option<OpKind>,
    ranks: u32,
    hosts: Vec<String>,
    gpus_per_host: Vec<u32>,
    /// (rank, host index) pairs seen: a rank listed twice counts once.
    rank_hosts: std::collections::HashSet<(u32, usize)>,
    gpu_models: Vec<String>,
    /// `nGpus` of the invocation's `nThread` line.
    gpus_per_thread: Option<u32>,
}

impl State {
    fn reset_job(&mut self) {
        self.gpus_per_thread = None;
        self.ranks = 0;
        self.hosts.clear();
        self.gpus_per_host.clear();
        self.rank_hosts.clear();
        self.gpu_models.clear();
    }

    /// `  0 Group  0 Pid 51455 on  nid005896 device  0 [0x01] NVIDIA GH200 120GB`
    fn device(&mut self, rest: &str) {
        let words: Vec<&str> = rest.split_whitespace().collect();
        let Some(rank) = words.first().and_then(|w| w.parse::<u32>().ok()) else { return };
        // Ranks are numbered 0..n; concurrent single-rank runs all print `Rank 0`.
        self.ranks = self.ranks.max(rank + 1);
        if let Some(i) = words.iter().position(|w| *w == "on") {
            if let Some(h) = words.get(i + 1) {
                let at = self.hosts.iter().position(|x| x == h).unwrap_or_else(|| {
                    self.hosts.push(h.to_string());
                    self.gpus_per_host.push(0);
                    self.hosts.len() - 1
                });
                if self.rank_hosts.insert((rank, at)) {
                    self.gpus_per_host[at] += 1;
                }
            }
        }
        if let Some(close) = rest.find(']') {
            let model = rest[close + 1..].trim();
            if !model.is_empty() && !self.gpu_models.iter().any(|m| m == model) {
                self.gpu_models.push(model.to_string());
            }
        }
    }

    fn close(&mut self, out: &mut BenchFile, file_kind: Option<OpKind>) {
        let Some(tb) = self.table.take() else { return };
        if let Some(p) = &tb.pending {
            out.malformed.push((p.at, format!("row never completed: {}", p.text)));
        }
        if tb.rows.is_empty() {
            return;
        }
        let (kind, from) = match (self.named, self.command, file_kind) {
            (Some(k), _, _) => (Some(k), Some("header")),
            (None, Some(k), _) => (Some(k), Some("command")),
            (None, None, Some(k)) => (Some(k), Some("file name")),
            _ => match kind_from_bus_factor(&tb.rows, self.ranks, tb.middle) {
                Some(k) => (Some(k), Some("bus factor")),
                None => (None, None),
            },
        };
        out.runs.push(BenchRun {
            kind,
            kind_from: from,
            ranks: self.ranks,
            hosts: self.hosts.clone(),
            gpus_per_host: self.gpus_per_host.clone(),
            gpu_models: self.gpu_models.clone(),
            gpus_per_thread: self.gpus_per_thread.unwrap_or(1),
            rows: tb.rows,
            avg_busbw_gb_s: tb.avg,
            header_line: tb.header_line,
        });
        // The command line belongs to the invocation, not to one table.
        self.named = None;
    }
}

/// Substring searchers built once: building one per line cost more than the
/// search (`memmem::find` builds one per call).
static CALL_SITE: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b"(), "));
static PERF: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b"_perf"));

/// Removes the `func(), file.cu:123, ` marks that instrumented builds print
/// before every write, also in the middle of a line
/// (`TimeTest(), common.cu:610,   64  4  float …  -1BenchTime(), common.cu:561,  477.8 …`).
fn strip_call_sites(l: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let Some(mut at) = CALL_SITE.find(l) else { return l.into() };
    let mut out = l.to_vec();
    loop {
        let word = out[..at].iter().rev().take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b':' | b'~')).count();
        // A name does not start with a digit: `-1BenchTime()` keeps its `-1`.
        let ident = word - out[at - word..at].iter().take_while(|b| b.is_ascii_digit()).count();
        let after = at + 4;
        // `file.cu:123,` then an optional space.
        let end = out[after..].iter().position(|&b| b == b',').map(|i| after + i);
        let site = end.filter(|&e| {
            let f = &out[after..e];
            f.iter().rposition(|&b| b == b':').is_some_and(|c| c + 1 < f.len() && f[c + 1..].iter().all(u8::is_ascii_digit))
        });
        let from = at - ident;
        match site {
            Some(e) if ident > 0 => {
                let to = if out.get(e + 1) == Some(&b' ') { e + 2 } else { e + 1 };
                out.drain(from..to);
                // Keep values apart where the mark sat between two of them.
                if from > 0 && out.get(from).is_some_and(|b| !b.is_ascii_whitespace()) && !out[from - 1].is_ascii_whitespace() {
                    out.insert(from, b' ');
                }
                at = from;
            }
            _ => at += 4,
        }
        match CALL_SITE.find(&out[at..]) {
            Some(i) => at += i,
            None => return out.into(),
        }
    }
}

/// Drops an `srun -l` label (` 0: `), a Markdown quote and leading spaces.
fn strip_decoration(l: &[u8]) -> &[u8] {
    let mut s = l.trim_ascii();
    if let Some(p) = s.iter().position(|&b| b == b':') {
        if p > 0 && p <= 6 && s[..p].iter().all(u8::is_ascii_digit) {
            s = s[p + 1..].trim_ascii_start();
        }
    }
    while let Some(rest) = s.strip_prefix(b">") {
        s = rest.trim_ascii_start();
    }
    s
}

/// Whether the loop of [`read_nccl_tests`] can do anything with `l` (a line
/// after `strip_decoration`): a cheap byte test, no allocation, so that the
/// NCCL debug lines that make up most of a log sharing stdout with nccl-tests
/// are passed over (they took 75 % of `commlens stats` on a 400 MB log).
/// `false` only where that loop does nothing: the first byte after the
/// leading `#`s and spaces is ASCII but no digit (no table row, no header,
/// none of the keyword lines) and the line holds no `_perf`.
fn may_matter(l: &[u8]) -> bool {
    let mut s = l;
    while let [b'#', rest @ ..] = s {
        s = rest;
    }
    let s = s.trim_ascii_start();
    match s.first() {
        None => false,
        // Rows (or pieces of rows), and non-ASCII text the loop decodes.
        Some(b) if b.is_ascii_digit() || !b.is_ascii() => true,
        Some(_) => {
            START_KEYWORDS.iter().any(|k| s.starts_with(k)) || PERF.find(l).is_some()
        }
    }
}

/// `true` only where [`may_matter`] says `false` after `strip_call_sites` and
/// `strip_decoration`, without either (they copy, and scan twice). A line
/// without `(), ` or `_perf` is left as it is by `strip_call_sites`: its start
/// decides. This runs on every line of a log that holds tables (the log
/// reader calls it in its own pass), so its common case is short: a line
/// that starts with a letter (a host name) has nothing to strip at its start.
#[cfg(test)]
fn passed_over(raw: &[u8]) -> bool {
    passed_over_unless(raw, has_mark)
}

/// [`passed_over`] with the test for marks given: `|_| false` for a line
/// the reader's search ahead found free of them (`scan::MarkHorizon`).
#[inline(always)]
fn passed_over_unless(raw: &[u8], marked: impl Fn(&[u8]) -> bool) -> bool {
    let kept = match raw.first() {
        // `strip_decoration` would only trim its end (a keyword may end in a space).
        // The one keyword of START_KEYWORDS that starts with its first letter.
        Some(&b) if b.is_ascii_alphabetic() => {
            let k: &[u8] = match b {
                b's' => START_KEYWORDS[0],
                b'C' => START_KEYWORDS[1],
                b'n' => START_KEYWORDS[2],
                b'R' => START_KEYWORDS[3],
                b'A' => START_KEYWORDS[4],
                _ => return !marked(raw),
            };
            // Second bytes first: a host name seldom shares them (no `memcmp` call).
            raw.get(1) == k.get(1) && raw.trim_ascii_end().starts_with(k)
        }
        _ => {
            let mut s = strip_decoration(raw);
            while let [b'#', rest @ ..] = s {
                s = rest;
            }
            let s = s.trim_ascii_start();
            s.first().is_some_and(|b| b.is_ascii_digit() || !b.is_ascii()) || START_KEYWORDS.iter().any(|k| s.starts_with(k))
        }
    };
    !kept && !marked(raw)
}

/// Whether `l` holds `(), ` (a call-site mark) or `_perf`. NCCL lines hold
/// `(` often (`(nil)`, `ncclSend(…)`: one `memchr2` on `(`/`_` stopped at
/// each) but `_` and the pair `()` seldom: one `memchr` for `_`, and a
/// packed-pair search for `()` (SIMD where the CPU has AVX2).
fn has_mark(l: &[u8]) -> bool {
    memchr::memchr_iter(b'_', l).any(|i| l[i..].starts_with(b"_perf")) || has_call_site(l)
}

fn has_call_site(l: &[u8]) -> bool {
    find_call_site(l).is_some()
}

/// Where the first `(), ` in `l` starts.
fn find_call_site(l: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if let Some(f) = PAIR.as_ref() {
        let min = f.min_haystack_len();
        let mut at = 0;
        while l.len() - at >= min {
            match f.find_prefilter(&l[at..]) {
                None => return None,
                Some(i) if l[at + i..].starts_with(b"(), ") => return Some(at + i),
                Some(i) => at += i + 1,
            }
        }
        // The last few bytes (fewer than the vector search takes).
        return CALL_SITE.find(&l[at..]).map(|i| at + i);
    }
    CALL_SITE.find(l)
}

/// Candidates for `(), `: where `(` is followed by `)`.
#[cfg(target_arch = "x86_64")]
static PAIR: LazyLock<Option<memchr::arch::x86_64::avx2::packedpair::Finder>> = LazyLock::new(|| {
    use memchr::arch::{all::packedpair::Pair, x86_64::avx2::packedpair::Finder};
    Pair::with_indices(b"(), ", 0, 1).and_then(|p| Finder::with_pair(b"(), ", p))
});

/// The keywords a line of interest may start with (after `#`s and spaces).
const START_KEYWORDS: [&[u8]; 5] = [b"size", b"Collective test starting:", b"nThread ", b"Rank ", b"Avg bus bandwidth"];

/// `#  size  count  type  redop  [root]  time  algbw  busbw  error|#wrong …`:
/// which of redop and root the layout has.
fn header_columns(l: &[u8]) -> Option<Middle> {
    let s = std::str::from_utf8(l).ok()?.trim_start_matches('#');
    // Most lines given are table rows: no `size` first, no word list (an allocation).
    if !s.trim_start().starts_with("size") {
        return None;
    }
    let w: Vec<&str> = s.split_whitespace().collect();
    if w.len() < 10 || w[..3] != ["size", "count", "type"] {
        return None;
    }
    let time = w.iter().position(|x| *x == "time")?;
    let middle = &w[3..time];
    if !w[time..].starts_with(&["time", "algbw", "busbw"]) {
        return None;
    }
    Some(Middle { redop: middle.contains(&"redop"), root: middle.contains(&"root") })
}

fn parse_row(all: &Tokens<'_>, m: Middle, line: u64) -> Option<BenchRow> {
    if all.len() < 11 || all.len() > 13 {
        return None;
    }
    let w = all.kept();
    let tail = &w[w.len() - 8..];
    // `inf`/`nan` (a zero time) are no measurement: the row is flagged as
    // malformed rather than reaching averages, comparisons or the output.
    let finite = |x: &str| cell_f64(x).filter(|v| v.is_finite());
    let timing = |x: &[&str]| -> Option<BenchTiming> {
        Some(BenchTiming {
            time_us: finite(x[0])?,
            algbw_gb_s: finite(x[1])?,
            busbw_gb_s: finite(x[2])?,
            errors: if x[3] == "N/A" { None } else { Some(cell_f64(x[3])?) },
        })
    };
    let mid = &w[3..w.len() - 8];
    let (mut redop, mut root) = (None, None);
    match (mid, m.redop, m.root) {
        ([op, r], _, _) => {
            redop = Some(op.to_string());
            root = Some(r.parse().ok()?);
        }
        ([x], true, true) => match x.parse::<i64>() {
            Ok(r) => root = Some(r),
            Err(_) => redop = Some(x.to_string()),
        },
        ([x], true, false) => redop = Some(x.to_string()),
        ([x], false, true) => root = Some(x.parse().ok()?),
        ([], _, _) => {}
        _ => return None,
    }
    Some(BenchRow {
        line,
        bytes: w[0].parse().ok()?,
        count: w[1].parse().ok()?,
        dtype: w[2].to_string(),
        redop: redop.filter(|r| r != "none"),
        root,
        out_of_place: timing(&tail[..4])?,
        in_place: timing(&tail[4..])?,
    })
}

/// The collective a benchmark name or file name speaks of
/// (`all_reduce_perf`, `nccl_alltoall.log`, `reduce_scatter`, …).
fn kind_in_text(s: &str) -> Option<OpKind> {
    let s = s.to_ascii_lowercase().replace(['-', '.'], "_");
    // Longest names first: `reduce` is inside `all_reduce` and `reduce_scatter`.
    const NAMES: [(&str, OpKind); 14] = [
        ("reduce_scatter", OpKind::ReduceScatter),
        ("reducescatter", OpKind::ReduceScatter),
        ("all_reduce", OpKind::AllReduce),
        ("allreduce", OpKind::AllReduce),
        ("all_gather", OpKind::AllGather),
        ("allgather", OpKind::AllGather),
        ("alltoall", OpKind::AllToAll),
        ("all_to_all", OpKind::AllToAll),
        ("sendrecv", OpKind::SendRecv),
        ("broadcast", OpKind::Broadcast),
        ("scatter", OpKind::Scatter),
        ("gather", OpKind::Gather),
        ("hypercube", OpKind::SendRecv),
        ("reduce", OpKind::Reduce),
    ];
    NAMES.iter().find(|(n, _)| s.contains(n)).map(|&(_, k)| k)
}

/// nccl-tests' bus factors: busbw/algbw is 2(n−1)/n for AllReduce, (n−1)/n
/// for ReduceScatter, AllGather and AllToAll, 1 for rooted and p2p tests.
/// A root column that is not −1 means a rooted collective; a reduction op
/// separates ReduceScatter from AllGather/AllToAll, which stay ambiguous
/// (`None`), as does a run of one rank.
fn kind_from_bus_factor(rows: &[BenchRow], ranks: u32, m: Middle) -> Option<OpKind> {
    if ranks < 2 {
        return None;
    }
    let n = ranks as f64;
    let mut ratios: Vec<f64> = rows
        .iter()
        .filter(|r| r.out_of_place.algbw_gb_s >= 1.0)
        .map(|r| r.out_of_place.busbw_gb_s / r.out_of_place.algbw_gb_s)
        .collect();
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let f = ratios[ratios.len() / 2];
    let near = |x: f64| (f - x).abs() < 0.02 * x.max(1.0);
    let reduces = rows.iter().any(|r| r.redop.is_some());
    let rooted = m.root && rows.iter().any(|r| r.root.is_some_and(|x| x >= 0));
    if near(2.0 * (n - 1.0) / n) && reduces {
        Some(OpKind::AllReduce)
    } else if near((n - 1.0) / n) && reduces {
        Some(OpKind::ReduceScatter)
    } else if near(1.0) && rooted {
        Some(if reduces { OpKind::Reduce } else { OpKind::Broadcast })
    } else {
        None
    }
}

#[cfg(test)]
#[path = "nccl_tests_tests.rs"]
mod tests;
