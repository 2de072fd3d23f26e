//! The nccl-tests reader as a line-at-a-time scan ([`TableScan`]), so that a
//! file that is both an NCCL log and nccl-tests output (the benchmark and
//! NCCL share stdout) is read once: the NCCL log reader hands each line to
//! the scan in the same pass ([`BenchTables`], set in
//! `ReadOptions::bench_tables`). Chunks read in parallel keep only the few
//! lines the scan may use ([`KeptLines`], after the per-line filtering, which
//! runs on all cores), and the join hands them over in file order.
//! [`super::read_nccl_tests`] is this scan over a file of its own: both give
//! the same [`BenchFile`].

use super::{find_call_site, has_mark, header_columns, kind_in_text, may_matter, passed_over_unless, strip_call_sites, strip_decoration, BenchFile, State, Table};
use crate::error::IngestError;
use commlens_core::OpKind;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
}

impl TableScan {
    pub fn new(path: &Path) -> Self {
        TableScan {
            path: path.to_path_buf(),
            file_kind: kind_in_text(&path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default()),
            st: State::default(),
            out: BenchFile { path: path.display().to_string(), runs: Vec::new(), malformed: Vec::new() },
            marks: MarkHorizon::default(),
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
    #[inline]
    pub fn line(&mut self, raw: &[u8], line_no: u64) {
        if let Some(l) = relevant(raw, self.marks.clear(raw.len())) {
            self.relevant_line(&l, line_no);
        }
    }

    /// A line [`relevant`] kept, as it gave it.
    fn relevant_line(&mut self, l: &[u8], line_no: u64) {
        let (st, out, file_kind) = (&mut self.st, &mut self.out, self.file_kind);
        if let Some(cols) = header_columns(l) {
            st.close(out, file_kind);
            st.table = Some(Table { middle: cols, header_line: line_no, rows: Vec::new(), avg: None, pending: None });
            return;
        }
        let text = String::from_utf8_lossy(l);
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
#[inline]
fn relevant(raw: &[u8], clear: bool) -> Option<Cow<'_, [u8]>> {
    if passed_over_unless(raw, |l| !clear && has_mark(l)) {
        return None;
    }
    // Lines with call-site marks (a few percent of some logs) are settled
    // without the copy `strip_call_sites` makes, where their start decides.
    if marked_but_unused(raw) {
        return None;
    }
    match strip_call_sites(raw) {
        Cow::Borrowed(b) => Some(strip_decoration(b)).filter(|l| may_matter(l)).map(Cow::Borrowed),
        Cow::Owned(v) => Some(strip_decoration(&v)).filter(|l| may_matter(l)).map(|l| Cow::Owned(l.to_vec())),
    }
}

/// `true` only where [`relevant`] gives `None` after `strip_call_sites`,
/// found without its copy: the text that stripping leaves at the line's
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
    if memchr::memchr_iter(b'_', raw).any(|i| raw[i..].starts_with(b"_perf")) {
        return false;
    }
    let name_byte = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b':' | b'~');
    let mut pos = 0;
    while let Some(i) = find_call_site(&raw[pos..]) {
        let at = pos + i;
        let name = &raw[pos..at];
        // A name of name bytes from `pos` on, not starting with a digit.
        if name.is_empty() || !name.iter().all(name_byte) || name[0].is_ascii_digit() {
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
}

impl KeptLines {
    /// As [`TableScan::ahead`].
    #[inline]
    pub fn ahead<'a>(&mut self, at: u64, rest: impl FnOnce() -> &'a [u8]) {
        self.marks.ahead(at, rest);
    }

    #[inline]
    pub fn line(&mut self, raw: &[u8], line_no: u64) {
        if let Some(l) = relevant(raw, self.marks.clear(raw.len())) {
            self.text.extend_from_slice(&l);
            self.ends.push((line_no, self.text.len()));
        }
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

/// Where the next `_perf` or `(), ` may start, found by searching what the
/// line source holds ahead ([`crate::lines::LineSource::ahead`]) once for
/// many lines instead of each line on its own: such marks are rare in an
/// NCCL log (a search per line was ~230 instructions a line, 10 % of
/// `stats`). Offsets are the source's, which only grow.
///
/// Invariant: no `_perf` starts in `perf.0..perf.1`, no `(), ` in
/// `site.0..site.1`, and (after [`MarkHorizon::ahead`]) both ranges hold
/// `at`, so a line `at..at + len` that ends by `clear_to` (the nearer end)
/// holds neither. A needle is searched again only once a line starts at or
/// past its end (the mark found, or the end of what was buffered): the bytes
/// are searched about once in all.
#[derive(Default)]
struct MarkHorizon {
    perf: (u64, u64),
    site: (u64, u64),
    /// Where the next line starts.
    at: u64,
    /// The later start and the nearer end of the two ranges.
    from: u64,
    clear_to: u64,
}

impl MarkHorizon {
    #[inline(always)]
    fn ahead<'a>(&mut self, at: u64, rest: impl FnOnce() -> &'a [u8]) {
        self.at = at;
        if at >= self.clear_to || at < self.from {
            self.search(at, rest());
        }
    }

    #[inline(never)]
    fn search(&mut self, at: u64, rest: &[u8]) {
        if at >= self.perf.1 || at < self.perf.0 {
            // `_` is rare in NCCL logs (one byte in 4,000): one `memchr` pass
            // took half the instructions of `memmem` on the bench log.
            let found = memchr::memchr_iter(b'_', rest).find(|&i| rest[i..].starts_with(b"_perf"));
            self.perf = (at, at + found.unwrap_or(rest.len()) as u64);
        }
        if at >= self.site.1 || at < self.site.0 {
            self.site = (at, at + find_call_site(rest).unwrap_or(rest.len()) as u64);
        }
        self.from = self.perf.0.max(self.site.0);
        self.clear_to = self.perf.1.min(self.site.1);
    }

    /// Whether the line of `len` bytes at `at` holds no mark for sure.
    #[inline(always)]
    fn clear(&self, len: usize) -> bool {
        self.at + len as u64 <= self.clear_to
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
    use super::{has_mark, marked_but_unused, MarkHorizon, START_LETTERS};
    use crate::nccl_tests::{may_matter, strip_call_sites, strip_decoration, START_KEYWORDS};

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

    #[test]
    fn the_search_ahead_never_clears_a_line_with_a_mark() {
        // Lines with marks at every place, cut by buffers of every size; a
        // line it calls clear holds no mark, and most plain lines are clear.
        let mut text = Vec::new();
        for i in 0..200 {
            let plain = format!("host:{i}:{i} [0] NCCL INFO ncclSend(0,7f,2) (nil) x_y ()");
            match i % 7 {
                0 => text.extend_from_slice(format!("f(), a.cu:{i}, {plain}").as_bytes()),
                3 => text.extend_from_slice(format!("{plain} all_reduce_perf").as_bytes()),
                5 => text.extend_from_slice(format!("{}_perf{}", &plain[..i % plain.len()], &plain[i % plain.len()..]).as_bytes()),
                _ => text.extend_from_slice(plain.as_bytes()),
            }
            text.push(b'\n');
        }
        for window in [0, 1, 4, 5, 37, 64, 300, 5000, usize::MAX] {
            let mut h = MarkHorizon::default();
            let (mut at, mut cleared) = (0, 0);
            for line in text.split(|&b| b == b'\n') {
                let rest = &text[at.min(text.len())..at.saturating_add(window).min(text.len())];
                h.ahead(at as u64, || rest);
                if h.clear(line.len()) {
                    assert!(!has_mark(line), "window {window}: {}", String::from_utf8_lossy(line));
                    cleared += 1;
                }
                at += line.len() + 1;
            }
            if window >= 300 {
                assert!(cleared > 100, "window {window}: {cleared} cleared");
            }
        }
    }
}
