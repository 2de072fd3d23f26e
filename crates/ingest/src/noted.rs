//! The lines of each log that describe the machines (network, NICs, CPU,
//! nccl-tests' rank lines), kept per file while the loader has the file in
//! hand ([`NotedLines`]), so that the cluster facts of `commlens report`
//! (`commlens_report::expected::run_cluster`) need not read every file again:
//! a 100,000-rank job's logs are read once. Each distinct line is stored once
//! (the ranks of a job print the same few hardware lines); a file holds the
//! indices of its lines, in order.

use crate::lines::LineSource;
use crate::lines_mapped::FileLines;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The part of a line that may say something about the hardware, `None`
/// when it says nothing: an `NCCL INFO` message (after the line's first
/// `NCCL INFO `) that starts `Using network `, `NET/` or `CPU/`, kept from
/// that `NCCL INFO ` on; or a line without `NCCL INFO ` that holds `Rank `
/// after a `#` (nccl-tests' device list), kept from its first `#` on.
/// `commlens_model::from_run::RunFacts::note_log_line` reads a line from its
/// first `NCCL INFO ` (else its first `#`) and takes something only from
/// such lines, so feeding it these parts gives the facts that feeding it
/// every whole line gives; without the line's prefix (time, host, pid) the
/// ranks of a job print the same parts.
pub fn noted_part(raw: &[u8]) -> Option<&[u8]> {
    static INFO: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"NCCL INFO "));
    match INFO.find(raw) {
        Some(at) => {
            let msg = &raw[at + b"NCCL INFO ".len()..];
            (msg.starts_with(b"Using network ") || msg.starts_with(b"NET/") || msg.starts_with(b"CPU/")).then(|| &raw[at..])
        }
        None => {
            let hash = memchr::memchr(b'#', raw)?;
            memchr::memmem::find(&raw[hash..], b"Rank ").map(|_| &raw[hash..])
        }
    }
}

/// The lines of `path` (plain or gzip, split as the log reader splits them)
/// that say something about the hardware ([`noted_part`]: those parts), in order; a read error ends the file (what was
/// read before counts). `None` for a file that cannot be opened or is a
/// Parquet table (no text log).
pub fn noted_lines(path: &Path) -> Option<Vec<Vec<u8>>> {
    if path.extension().is_some_and(|x| x.eq_ignore_ascii_case("parquet")) {
        return None;
    }
    if let Some(quick) = noted_lines_read(path) {
        return quick;
    }
    let mut lines = FileLines::open(path, MAX_LINE, true).ok()?;
    let mut out = Vec::new();
    let mut first = true;
    while let Ok(Some(raw)) = lines.next_line() {
        if std::mem::take(&mut first) && raw.starts_with(b"PAR1") {
            return None;
        }
        if let Some(part) = noted_part(raw) {
            out.push(part.to_vec());
        }
    }
    Some(out)
}

/// Lines longer than this are cut in pieces of this length, as the log reader cuts them.
const MAX_LINE: usize = 1 << 20;

/// Plain files up to this size are read whole by [`noted_lines_read`].
const READ_WHOLE: u64 = 16 << 20;

thread_local! {
    static FILE_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`noted_lines`] of a plain file of at most [`READ_WHOLE`] bytes, read
/// whole with `read()` into a buffer each thread reuses: a job's logs are
/// small, and mapping and unmapping each one (as [`FileLines`] does) costs
/// more than copying it (every unmap interrupts the other cores to flush
/// their TLBs). `None` (the caller reads it as before) for gzip, larger
/// files and any read error.
fn noted_lines_read(path: &Path) -> Option<Option<Vec<Vec<u8>>>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let size = f.metadata().ok().filter(|m| m.is_file())?.len();
    if size > READ_WHOLE {
        return None;
    }
    FILE_BUF.with(|b| {
        let mut buf = b.borrow_mut();
        buf.clear();
        // One byte more than the size, so a file that grew is noticed.
        (&mut f).take(size + 1).read_to_end(&mut buf).ok()?;
        if buf.len() as u64 != size || buf.starts_with(&[0x1f, 0x8b]) {
            return None;
        }
        if buf.starts_with(b"PAR1") {
            return Some(None);
        }
        let mut out = Vec::new();
        split_lines(&buf, MAX_LINE, |raw| {
            if let Some(part) = noted_part(raw) {
                out.push(part.to_vec());
            }
        });
        Some(Some(out))
    })
}

/// The lines of `data` as [`FileLines`] gives them: split at `\n`, a
/// trailing `\r` dropped, a line longer than `max_line` cut into pieces of
/// `max_line` bytes (kept whole, `\r` and all) before its last piece, and a
/// last line without `\n` kept.
fn split_lines(data: &[u8], max_line: usize, mut f: impl FnMut(&[u8])) {
    let strip_cr = |s: &[u8]| -> usize { if s.ends_with(b"\r") { s.len() - 1 } else { s.len() } };
    let mut pos = 0;
    while pos < data.len() {
        let end = memchr::memchr(b'\n', &data[pos..]).map(|k| pos + k);
        let stop = end.unwrap_or(data.len());
        while stop - pos > max_line {
            f(&data[pos..pos + max_line]);
            pos += max_line;
        }
        let line = &data[pos..stop];
        f(&line[..strip_cr(line)]);
        pos = end.map_or(data.len(), |e| e + 1);
    }
}

/// [`noted_lines`] of the files a loader read, by path.
#[derive(Debug, Default, Clone)]
pub struct NotedLines {
    lines: Vec<Arc<[u8]>>,
    ids: HashMap<Arc<[u8]>, u32>,
    /// Per file, its range of `order`.
    files: HashMap<PathBuf, (u32, u32)>,
    /// The line indices of every file, one file after the other.
    order: Vec<u32>,
}

impl NotedLines {
    /// Records the lines of one file (a file recorded twice keeps the first).
    pub fn add(&mut self, path: &Path, lines: Vec<Vec<u8>>) {
        if self.files.contains_key(path) {
            return;
        }
        let start = self.order.len() as u32;
        for l in lines {
            let l: Arc<[u8]> = l.into();
            let id = *self.ids.entry(l.clone()).or_insert_with(|| {
                self.lines.push(l);
                self.lines.len() as u32 - 1
            });
            self.order.push(id);
        }
        self.files.insert(path.to_path_buf(), (start, self.order.len() as u32));
    }

    /// The noted lines of `path`, in order; `None` when the file was not recorded.
    pub fn of(&self, path: &Path) -> Option<impl Iterator<Item = &[u8]> + '_> {
        let &(a, b) = self.files.get(path)?;
        Some(self.order[a as usize..b as usize].iter().map(|&i| &*self.lines[i as usize]))
    }

    /// Files recorded.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole-file split gives the lines the mapped reader gives, around
    /// `\r\n`, empty lines, a missing last newline and overlong lines.
    #[test]
    fn split_lines_matches_the_file_reader() {
        let dir = std::env::temp_dir().join(format!("commlens-split-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let long = "y".repeat(MAX_LINE * 2 + 3);
        let exact = "z".repeat(MAX_LINE);
        let bodies = [
            String::new(),
            "a\r\n\nb\n".into(),
            "a\nlast without newline\r".into(),
            format!("x\n{long}\r\nafter\n{exact}\n{exact}\r\n{long}"),
            "\r\n\r".into(),
        ];
        for (i, body) in bodies.iter().enumerate() {
            let p = dir.join(format!("{i}.log"));
            std::fs::write(&p, body).unwrap();
            let mut want = Vec::new();
            let mut lines = FileLines::open(&p, MAX_LINE, true).unwrap();
            while let Some(l) = lines.next_line().unwrap() {
                want.push(l.to_vec());
            }
            let mut got = Vec::new();
            split_lines(body.as_bytes(), MAX_LINE, |l| got.push(l.to_vec()));
            assert!(got == want, "body {i}: {} lines, want {}", got.len(), want.len());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn keeps_the_hardware_lines_once_each() {
        let dir = std::env::temp_dir().join(format!("commlens-noted-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.11<0>\r\n\
                   h:1:1 [0] NCCL INFO Using network IB\n\
                   h:1:1 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x5 [nranks=2] stream 0x6\n\
                   h:1:1 [0] NCCL INFO CPU/0-0 (1/1/2)\n\
                   #  Rank  0 Group  0 Pid 1 on h device  0 [0x07] NVIDIA A100\n\
                   plain text\n\
                   h:1:1 [0] NCCL INFO Using network IB";
        let (a, b) = (dir.join("a.log"), dir.join("b.log"));
        std::fs::write(&a, log).unwrap();
        std::fs::write(&b, log).unwrap();
        let lines = noted_lines(&a).unwrap();
        let text: Vec<String> = lines.iter().map(|l| String::from_utf8_lossy(l).into_owned()).collect();
        assert_eq!(text.len(), 5, "{text:?}");
        assert_eq!(text[0], "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.11<0>", "the \\r is dropped as the reader drops it");
        assert_eq!(text[3], "#  Rank  0 Group  0 Pid 1 on h device  0 [0x07] NVIDIA A100");
        assert_eq!(text[4], "NCCL INFO Using network IB");
        let mut n = NotedLines::default();
        n.add(&a, lines.clone());
        n.add(&b, noted_lines(&b).unwrap());
        assert_eq!(n.lines.len(), 4, "distinct parts stored once");
        assert_eq!(n.of(&b).unwrap().map(<[u8]>::to_vec).collect::<Vec<_>>(), lines);
        assert!(n.of(&dir.join("c.log")).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
