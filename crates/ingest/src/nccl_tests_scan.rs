//! The nccl-tests reader as a line-at-a-time scan ([`TableScan`]), so that a
//! file that is both an NCCL log and nccl-tests output (the benchmark and
//! NCCL share stdout) is read once: the NCCL log reader hands each line to
//! the scan in the same pass ([`BenchTables`], set in
//! `ReadOptions::bench_tables`). Chunks read in parallel keep only the few
//! lines the scan may use ([`KeptLines`], after the per-line filtering, which
//! runs on all cores), and the join hands them over in file order.
//! [`super::read_nccl_tests`] is this scan over a file of its own: both give
//! the same [`BenchFile`]. A line with call-site marks that the scan passes
//! over is remembered ([`LastUnused`]): its repeats are passed over by one
//! compare.

use marks::MarkHorizon;
use super::{has_mark, header_columns, kind_in_text, may_matter, passed_over_unless, strip_call_sites, strip_decoration, BenchFile, State, Table, START_KEYWORDS};
use crate::error::IngestError;
use commlens_core::OpKind;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[path = "nccl_tests_marks.rs"]
mod marks;

/// The longest line (or piece) the scan reads in one; longer lines come cut,
/// as the log reader's default `max_line` cuts them.
pub const SCAN_MAX_LINE: usize = 1 << 20;

/// Every table of one nccl-tests output, fed line by line.
pub struct TableScan {
    path: PathBuf,
    file_kind: Option<OpKind>,
    st: State,
    out: BenchFile,
    marks: MarkHorizon,
    unused: LastUnused,
}

impl TableScan {
    pub fn new(path: &Path) -> Self {
        TableScan {
            path: path.to_path_buf(),
            file_kind: kind_in_text(&path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default()),
            st: State::default(),
            out: BenchFile { path: path.display().to_string(), runs: Vec::new(), malformed: Vec::new() },
            marks: MarkHorizon::default(),
            unused: LastUnused::default(),
        }
    }

    /// Where the next line starts and what the line source holds from there
    /// on (`LineSource::ahead`, asked only when needed), before it hands that
    /// line out.
    #[inline]
    pub fn ahead<'a>(&mut self, at: u64, rest: impl FnOnce() -> &'a [u8]) {
        self.marks.ahead(at, rest);
    }

    /// Line `line_no` (from 1) of the file, as the line source hands it out.
    #[inline(always)]
    pub fn line(&mut self, raw: &[u8], line_no: u64) {
        if let Some(l) = relevant(raw, self.marks.clear(raw.len()), &mut self.unused) {
            self.relevant_line(&l, line_no);
        }
    }

    /// A line [`relevant`] kept, as it gave it (rare: kept out of `line`,
    /// which is inlined into the reader's loop).
    #[inline(never)]
    fn relevant_line(&mut self, l: &[u8], line_no: u64) {
        let (st, out, file_kind) = (&mut self.st, &mut self.out, self.file_kind);
        if let Some(cols) = header_columns(l) {
            st.close(out, file_kind);
            st.table = Some(Table { middle: cols, header_line: line_no, rows: Vec::new(), avg: None, pending: None });
            return;
        }
        // `from_utf8` checks ASCII a word at a time; `from_utf8_lossy` a byte
        // at a time (~8 instructions a byte of every table row).
        let text = match std::str::from_utf8(l) {
            Ok(t) => Cow::Borrowed(t),
            Err(_) => String::from_utf8_lossy(l),
        };
        let t = text.trim_start_matches('#').trim();
        if let Some(name) = t.strip_prefix("Collective test starting:") {
            st.close(out, file_kind);
            st.reset_job();
            st.named = kind_in_text(name.trim());
        } else if t.starts_with("nThread ") {
            // A new invocation: its devices follow.
            st.close(out, file_kind);
            st.reset_job();
            let mut w = t.split_whitespace();
            while let Some(x) = w.next() {
                if x == "nGpus" {
                    st.gpus_per_thread = w.next().and_then(|v| v.parse().ok()).filter(|&g: &u32| g > 0);
                }
            }
        } else if let Some(rest) = t.strip_prefix("Rank ") {
            st.device(rest);
        } else if let Some(v) = t.strip_prefix("Avg bus bandwidth") {
            if let Some(tb) = &mut st.table {
                tb.avg = v
                    .trim_start_matches([' ', ':'])
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse::<f64>().ok())
                    .filter(|v| v.is_finite());
            }
            st.close(out, file_kind);
        } else if text.contains("_perf") && !t.starts_with("Collective test concluded") {
            if let Some(k) = kind_in_text(&text) {
                st.command = Some(k);
            }
        } else if let Some(tb) = &mut st.table {
            if t.as_bytes().first().is_some_and(u8::is_ascii_digit) {
                tb.feed(t, line_no, &mut out.malformed);
            }
        }
    }

    /// The end of the file: the runs read, or an error naming the file when
    /// it held none.
    pub fn finish(mut self) -> Result<BenchFile, IngestError> {
        self.st.close(&mut self.out, self.file_kind);
        let out = self.out;
        if out.runs.is_empty() {
            let mut what = "no nccl-tests result table (a `#  size  count  type …` header followed by rows)".to_string();
            if let Some((line, _)) = out.malformed.first() {
                what.push_str(&format!(
                    "; {} rows did not parse (from line {line}; `inf`/`nan` times or bandwidths are no measurement)",
                    out.malformed.len()
                ));
            }
            return Err(IngestError::Format { path: self.path, line: None, what });
        }
        Ok(out)
    }
}

/// The part of a raw line the scan reads (call-site marks and decoration
/// removed), or `None` for a line it does nothing with: nearly every line of
/// an NCCL log. Allocates only for a line with call-site marks. `clear`: the
/// line is known to hold no mark ([`MarkHorizon`]).
#[inline(always)]
fn relevant<'a>(raw: &'a [u8], clear: bool, unused: &mut LastUnused) -> Option<Cow<'a, [u8]>> {
    // Nearly every line of a log: free of marks and starting with a host
    // name, whose first two bytes start no keyword. Settled here, inlined
    // into the per-line call, as `passed_over_unless` settles it (a call for
    // it was ~45 instructions a line, 3 % of `stats`).
    if clear {
        if let Some(&b) = raw.first() {
            let t = FIRST_BYTE[b as usize];
            if t == 1 || (t > 1 && raw.get(1) != Some(&t)) {
                return None;
            }
        }
    }
    relevant_rest(raw, clear, unused)
}

/// Per first byte of a line: 0 for no ASCII letter, 1 for a letter that
/// starts no keyword of `START_KEYWORDS`, else the second byte of the
/// keyword it starts (one load instead of tests of the byte).
static FIRST_BYTE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        if (b as u8).is_ascii_alphabetic() {
            t[b] = 1;
        }
        b += 1;
    }
    let mut k = 0;
    while k < START_KEYWORDS.len() {
        t[START_KEYWORDS[k][0] as usize] = START_KEYWORDS[k][1];
        k += 1;
    }
    t
};

/// [`relevant`] but for its common case.
#[inline(never)]
fn relevant_rest<'a>(raw: &'a [u8], clear: bool, unused: &mut LastUnused) -> Option<Cow<'a, [u8]>> {
    // Lines with call-site marks (a few percent of some logs) are settled
    // without the copy `strip_call_sites` makes (nor the search for marks
    // that `passed_over_unless` makes), where their start decides. Such a
    // line often repeats byte for byte (`ncclIbAccept(), transport/net_ib.cc:N,
    // NCCL RDMA server accept`, 17 k times in the bench log): the repeat of
    // the last one passed over is found by one compare (~800 instructions
    // less a line).
    if unused.holds(raw) {
        return None;
    }
    if marked_but_unused(raw) {
        unused.set(raw);
        return None;
    }
    if passed_over_unless(raw, |l| !clear && has_mark(l)) {
        return None;
    }
    match strip_call_sites(raw) {
        Cow::Borrowed(b) => Some(strip_decoration(b)).filter(|l| may_matter(l)).map(Cow::Borrowed),
        Cow::Owned(v) => Some(strip_decoration(&v)).filter(|l| may_matter(l)).map(|l| Cow::Owned(l.to_vec())),
    }
}

/// `true` only where [`relevant`] gives `None` after `strip_call_sites`,
/// found without its copy or a search: the text that stripping leaves at the line's
/// start starts with an ASCII letter that starts no keyword of
/// `START_KEYWORDS` (so `strip_decoration` leaves it, and `may_matter` looks
/// for `_perf` only), and the line holds no `_perf`.
///
/// Why that is enough: stripping removes a mark from the start of its name,
/// and a name runs back over every name byte (`_`, `p`, `e`, `r` among them)
/// but its leading digits, so no removal joins two parts into a new `_perf`;
/// and what stripping leaves at the start is found by removing, as it does,
/// the marks whose name begins there (a later mark's name begins after the
/// byte at the start, which then stays first).
fn marked_but_unused(raw: &[u8]) -> bool {
    let name_byte = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b':' | b'~');
    let mut pos = 0;
    loop {
        // A mark whose name begins at `pos`: name bytes, then `(), ` (no
        // search of the rest: a later mark's name cannot reach back over
        // the byte that ends this run).
        let at = pos + raw[pos..].iter().take_while(|b| name_byte(b)).count();
        if at == pos || raw[pos].is_ascii_digit() || !raw[at..].starts_with(b"(), ") {
            break;
        }
        // `file.cu:123,` then an optional space, as `strip_call_sites` takes it.
        let after = at + 4;
        let Some(e) = raw[after..].iter().position(|&b| b == b',').map(|i| after + i) else { break };
        let f = &raw[after..e];
        if !f.iter().rposition(|&b| b == b':').is_some_and(|c| c + 1 < f.len() && f[c + 1..].iter().all(u8::is_ascii_digit)) {
            break;
        }
        pos = if raw.get(e + 1) == Some(&b' ') { e + 2 } else { e + 1 };
    }
    raw.get(pos).is_some_and(|&b| b.is_ascii_alphabetic() && !START_LETTERS.contains(&b))
        && !memchr::memchr_iter(b'_', raw).any(|i| raw[i..].starts_with(b"_perf"))
}

/// The last line [`marked_but_unused`] said `true` of (empty before the
/// first: it says `false` of an empty line). A function of the bytes alone,
/// so a line equal to it gets the same answer.
#[derive(Default)]
struct LastUnused(Vec<u8>);

impl LastUnused {
    #[inline(always)]
    fn holds(&self, raw: &[u8]) -> bool {
        !self.0.is_empty() && self.0 == raw
    }

    /// Reuses the buffer: no allocation once it holds the longest such line.
    fn set(&mut self, raw: &[u8]) {
        self.0.clear();
        self.0.extend_from_slice(raw);
    }
}

/// The first bytes of `START_KEYWORDS`.
const START_LETTERS: [u8; 5] = *b"sCnRA";

/// The lines of one chunk of a file that [`TableScan`] may use, with their
/// line numbers within the chunk; the join replays them in file order.
#[derive(Default)]
pub struct KeptLines {
    text: Vec<u8>,
    /// (line number in the chunk, end of its text).
    ends: Vec<(u64, usize)>,
    marks: MarkHorizon,
    unused: LastUnused,
}

impl KeptLines {
    /// As [`TableScan::ahead`].
    #[inline]
    pub fn ahead<'a>(&mut self, at: u64, rest: impl FnOnce() -> &'a [u8]) {
        self.marks.ahead(at, rest);
    }

    /// As [`TableScan::line`], inlined into the chunk reader's loop for the
    /// same reason (a call per line was 35 instructions, 2 % of `stats` on
    /// 2 threads on the bench log); a line kept is copied out of line.
    #[inline(always)]
    pub fn line(&mut self, raw: &[u8], line_no: u64) {
        if let Some(l) = relevant(raw, self.marks.clear(raw.len()), &mut self.unused) {
            self.keep(&l, line_no);
        }
    }

    #[inline(never)]
    fn keep(&mut self, l: &[u8], line_no: u64) {
        self.text.extend_from_slice(l);
        self.ends.push((line_no, self.text.len()));
    }

    /// Empties it for another chunk, as [`KeptLines::default`] but keeping
    /// the buffers' room: a chunk reader that reuses the lines of a chunk
    /// already joined writes into pages already touched, not fresh ones.
    pub fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
        self.marks = MarkHorizon::default();
        self.unused.0.clear();
    }

    /// Hands the lines to `scan`, numbered after the `offset` lines before the chunk.
    pub fn replay(&self, scan: &mut TableScan, offset: u64) {
        let mut from = 0;
        for &(no, end) in &self.ends {
            scan.relevant_line(&self.text[from..end], offset + no);
            from = end;
        }
    }
}

/// Files whose nccl-tests tables the NCCL log reader reads in its own pass
/// (`ReadOptions::bench_tables`), and what it found. A file the reader did
/// not read to its end (refused, dropped as a repeat, an error) has no
/// result: [`BenchTables::take`] says `None` and the caller reads its tables
/// with [`super::read_nccl_tests`], which gives what the scan would have.
#[derive(Default)]
pub struct BenchTables {
    files: HashSet<PathBuf>,
    read: Mutex<HashMap<PathBuf, Result<BenchFile, IngestError>>>,
}

impl BenchTables {
    pub fn new(files: impl IntoIterator<Item = PathBuf>) -> Self {
        BenchTables { files: files.into_iter().collect(), read: Mutex::default() }
    }

    /// Whether the reader scans `path`.
    pub fn scans(&self, path: &Path) -> bool {
        self.files.contains(path)
    }

    /// A scan for `path` when it is listed and lines come whole up to the
    /// length [`super::read_nccl_tests`] reads them in (same line numbers).
    pub(crate) fn scan_for(&self, path: &Path, max_line: usize) -> Option<TableScan> {
        (max_line == SCAN_MAX_LINE && self.scans(path)).then(|| TableScan::new(path))
    }

    /// The reader read `path` to its end.
    pub(crate) fn put(&self, path: &Path, scan: TableScan) {
        let res = scan.finish();
        self.read.lock().expect("bench tables").insert(path.to_path_buf(), res);
    }

    /// What the reader found in `path`, taken out; `None` when it did not read it to its end.
    pub fn take(&self, path: &Path) -> Option<Result<BenchFile, IngestError>> {
        self.read.lock().expect("bench tables").remove(path)
    }
}

#[cfg(test)]
mod tests {
    use super::{marked_but_unused, START_LETTERS};
    use crate::nccl_tests::{may_matter, strip_call_sites, strip_decoration};
    use super::START_KEYWORDS;

    /// The inlined common case of `relevant` against the rest of it, on
    /// lines starting with every pair of bytes, each line clear of marks.
    #[test]
    fn relevant_common_case_matches_the_rest() {
        let tails: [&[u8]; 6] = [b"", b"ize", b"ize  count", b"ank 0", b"llective test starting: x", b"tone:1:2 [0] NCCL INFO x"];
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                for t in tails {
                    let mut line = vec![a, b];
                    line.extend_from_slice(t);
                    let fast = super::relevant(&line, true, &mut Default::default()).map(|c| c.into_owned());
                    let rest = super::relevant_rest(&line, true, &mut Default::default()).map(|c| c.into_owned());
                    assert_eq!(fast, rest, "{:?}", String::from_utf8_lossy(&line));
                }
            }
            let one = [a];
            let fresh = || super::LastUnused::default();
            assert_eq!(super::relevant(&one, true, &mut fresh()), super::relevant_rest(&one, true, &mut fresh()));
        }
    }

    /// The shortcut for marked lines against stripping them: on every
    /// sequence of up to four pieces (marks that are and are not removed,
    /// names with digits, `_perf` and its parts, keywords, decoration), it
    /// never passes over a line the scan would use, and it does pass over
    /// the common `func(), file.cu:N, text` lines.
    #[test]
    fn marked_lines_passed_over_only_when_unused() {
        for (k, &b) in START_LETTERS.iter().enumerate() {
            assert_eq!(START_KEYWORDS[k][0], b);
        }
        let pieces: [&[u8]; 16] = [
            b"f(), a.cu:1, ", b"ncclX(), graph/topo.cc:1228,", b"12g(), b.cu:7, ", b"(), ", b"h(), c.cu:x, ", b"x_pe", b"rf",
            b"_perf", b"size ", b"NCCL GDR", b" ", b"#", b"7 ", b"a:b~c(), d:9,", b"> ", b"Rank ",
        ];
        let (mut lines, mut passed) = (0, 0);
        let mut idx = [0usize; 4];
        for n in 1..=4usize {
            let total = pieces.len().pow(n as u32);
            for code in 0..total {
                let mut c = code;
                for slot in idx.iter_mut().take(n) {
                    *slot = c % pieces.len();
                    c /= pieces.len();
                }
                let line: Vec<u8> = idx[..n].iter().flat_map(|&i| pieces[i].iter().copied()).collect();
                let used = may_matter(strip_decoration(&strip_call_sites(&line)));
                lines += 1;
                if marked_but_unused(&line) {
                    passed += 1;
                    assert!(!used, "{}", String::from_utf8_lossy(&line));
                }
            }
        }
        assert!(passed > lines / 10, "{passed} of {lines}");
        assert!(marked_but_unused(b"ncclTopoPopulateNics(), graph/topo.cc:1232, Nic mlx5_0 support dmabuf"));
        assert!(!marked_but_unused(b"TimeTest(), common.cu:610,   64  4  float"));
    }

    /// The memo of the last line passed over changes no answer: lines with
    /// and without marks, repeated and alternating, each asked with the memo
    /// kept across lines and with a fresh one.
    #[test]
    fn last_unused_memo_changes_nothing() {
        let lines: [&[u8]; 8] = [
            b"ncclIbAccept(), transport/net_ib.cc:1, NCCL RDMA server accept",
            b"ncclIbAccept(), transport/net_ib.cc:1, NCCL RDMA server accep",
            b"TimeTest(), common.cu:610,   64  4  float",
            b"f(), a.cu:1, x_perf",
            b"",
            b"f(), a.cu:1, size",
            b"host:1:2 [0] NCCL INFO x",
            b"  128 32 float",
        ];
        let mut kept = super::LastUnused::default();
        for i in 0..lines.len() * lines.len() * 3 {
            let l = lines[(i * 7 + i / 5) % lines.len()];
            for clear in [false, true] {
                let want = super::relevant_rest(l, clear, &mut super::LastUnused::default()).map(|c| c.into_owned());
                assert_eq!(super::relevant_rest(l, clear, &mut kept).map(|c| c.into_owned()), want, "{}", String::from_utf8_lossy(l));
            }
        }
    }

    /// A cleared `KeptLines` keeps what a fresh one keeps, line for line
    /// (the chunk reader reuses them), whatever the previous chunk left.
    #[test]
    fn cleared_kept_lines_keep_as_fresh_ones() {
        use super::KeptLines;
        let lines: [&[u8]; 6] = [
            b"#  nThread 1 nGpus 8 minBytes 8 maxBytes 128",
            b"#       size         count      type   redop    root",
            b"           8             2     float     sum      -1    12.3    0.00    0.00      0",
            b"host:1:2 [0] NCCL INFO x",
            b"# Avg bus bandwidth    : 1.23",
            b"",
        ];
        let feed = |k: &mut KeptLines, from: usize| {
            let mut at = 0u64;
            for (no, l) in lines.iter().cycle().skip(from).take(9).enumerate() {
                k.ahead(at, || *l);
                k.line(l, no as u64 + 1);
                at += l.len() as u64 + 1;
            }
        };
        let mut kept_any = false;
        for from in 0..lines.len() {
            let mut used = KeptLines::default();
            feed(&mut used, (from + 3) % lines.len());
            used.clear();
            let mut fresh = KeptLines::default();
            feed(&mut used, from);
            feed(&mut fresh, from);
            kept_any |= !fresh.ends.is_empty();
            assert_eq!((&used.text, &used.ends), (&fresh.text, &fresh.ends), "from {from}");
        }
        assert!(kept_any, "the lines exercise nothing");
    }
}
