//! The nccl-tests reader as a line-at-a-time scan ([`TableScan`]), so that a
//! file that is both an NCCL log and nccl-tests output (the benchmark and
//! NCCL share stdout) is read once: the NCCL log reader hands each line to
//! the scan in the same pass ([`BenchTables`], set in
//! `ReadOptions::bench_tables`). Chunks read in parallel keep only the few
//! lines the scan may use ([`KeptLines`], after the per-line filtering, which
//! runs on all cores), and the join hands them over in file order.
//! [`super::read_nccl_tests`] is this scan over a file of its own: both give
//! the same [`BenchFile`].

use super::{header_columns, kind_in_text, may_matter, passed_over, strip_call_sites, strip_decoration, BenchFile, State, Table};
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
}

impl TableScan {
    pub fn new(path: &Path) -> Self {
        TableScan {
            path: path.to_path_buf(),
            file_kind: kind_in_text(&path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default()),
            st: State::default(),
            out: BenchFile { path: path.display().to_string(), runs: Vec::new(), malformed: Vec::new() },
        }
    }

    /// Line `line_no` (from 1) of the file, as the line source hands it out.
    #[inline]
    pub fn line(&mut self, raw: &[u8], line_no: u64) {
        if let Some(l) = relevant(raw) {
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
/// an NCCL log. Allocates only for a line with call-site marks.
#[inline]
fn relevant(raw: &[u8]) -> Option<Cow<'_, [u8]>> {
    if passed_over(raw) {
        return None;
    }
    match strip_call_sites(raw) {
        Cow::Borrowed(b) => Some(strip_decoration(b)).filter(|l| may_matter(l)).map(Cow::Borrowed),
        Cow::Owned(v) => Some(strip_decoration(&v)).filter(|l| may_matter(l)).map(|l| Cow::Owned(l.to_vec())),
    }
}

/// The lines of one chunk of a file that [`TableScan`] may use, with their
/// line numbers within the chunk; the join replays them in file order.
#[derive(Default)]
pub struct KeptLines {
    text: Vec<u8>,
    /// (line number in the chunk, end of its text).
    ends: Vec<(u64, usize)>,
}

impl KeptLines {
    #[inline]
    pub fn line(&mut self, raw: &[u8], line_no: u64) {
        if let Some(l) = relevant(raw) {
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
