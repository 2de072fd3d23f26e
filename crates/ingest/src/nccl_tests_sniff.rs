//! Deciding whether a file holds nccl-tests results without reading it all:
//! [`looks_like_nccl_tests`] on a head already in memory, [`BenchSniffer`] fed
//! line by line (the loader feeds it the head it read once, see
//! `same_content`), and [`sniff_file`] for a path.

use super::{header_columns, strip_call_sites, strip_decoration};
use memchr::memmem;
use std::path::Path;
use std::sync::LazyLock;

/// Whether `head` (the first few KiB of a file) holds an nccl-tests table header
/// (also behind `srun -l` labels, Markdown quotes and call-site marks).
pub fn looks_like_nccl_tests(head: &[u8]) -> bool {
    head.split(|&b| b == b'\n').any(|l| header_columns(strip_decoration(&strip_call_sites(l))).is_some())
}

/// What [`sniff_file`] saw of a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BenchSniff {
    /// An nccl-tests table header was found.
    pub tables: bool,
    /// NCCL debug lines (` NCCL INFO `) came before it (or in the part read):
    /// the file is also an NCCL log (nccl-tests run with `NCCL_DEBUG=INFO`).
    pub nccl_lines: bool,
}

/// The first `read()` of [`BenchSniffer::read_rest`]; each next one may be
/// twice as large.
const FIRST_READ: usize = 64 << 10;

/// A source whose `read()`s take at most `next` bytes, doubling each time:
/// a reader that stops early has not read (and copied) much more than it used.
struct GrowingReads<R> {
    inner: R,
    next: usize,
}

impl<R: std::io::Read> std::io::Read for GrowingReads<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.next);
        let got = self.inner.read(&mut buf[..n])?;
        self.next = self.next.saturating_mul(2);
        Ok(got)
    }
}

/// Bytes read before giving up on a file that shows no sign of nccl-tests.
const SNIFF_HEAD: u64 = 64 << 10;
/// Bytes read at most once the file has shown nccl-tests' preamble
/// (`# nThread …`, `# Using devices`, `# Rank …`): the preamble grows with the
/// job (one `Rank` line per rank, NCCL's init lines between), so the table
/// header of a 2,048-rank job lies far beyond the first 64 KiB.
const SNIFF_PREAMBLE: u64 = 256 << 20;

/// Whether `path` (plain or gzip) holds nccl-tests results, reading lines until
/// the first table header: at most 64 KiB unless the nccl-tests preamble was
/// seen there, then as far as the preamble goes (see [`SNIFF_PREAMBLE`]).
pub fn sniff_file(path: &Path) -> std::io::Result<BenchSniff> {
    let mut s = BenchSniffer::default();
    s.read_rest(crate::lines::open_maybe_gz(path)?)?;
    Ok(s.out)
}

/// [`sniff_file`] line by line, so that a caller holding the first bytes of a
/// file feeds their whole lines ([`BenchSniffer::line`]) and reads the rest
/// of the file only when they do not decide ([`BenchSniffer::read_rest`]).
#[derive(Debug, Default)]
pub struct BenchSniffer {
    /// What was seen so far (final once [`BenchSniffer::line`] says done).
    pub out: BenchSniff,
    preamble: bool,
    seen: u64,
}

impl BenchSniffer {
    /// Takes the next line (without `\n` and trailing `\r`, as the line
    /// readers give it); true once the verdict is final.
    pub fn line(&mut self, raw: &[u8]) -> bool {
        self.seen += raw.len() as u64 + 1;
        static NCCL: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b" NCCL INFO "));
        self.out.nccl_lines |= NCCL.find(raw).is_some();
        let unmarked = strip_call_sites(raw);
        let l = strip_decoration(&unmarked);
        // Headers start with `#`, or with `size` where Markdown ate the `#`.
        if matches!(l.first(), Some(b'#' | b's')) && header_columns(l).is_some() {
            self.out.tables = true;
            return true;
        }
        if l.first() == Some(&b'#') {
            let n = l.iter().take_while(|&&b| b == b'#' || b.is_ascii_whitespace()).count();
            const PREAMBLE: [&[u8]; 4] = [b"nThread ", b"Using devices", b"Rank ", b"Collective test starting"];
            self.preamble |= PREAMBLE.iter().any(|k| l[n..].starts_with(k));
        }
        self.seen > if self.preamble { SNIFF_PREAMBLE } else { SNIFF_HEAD }
    }

    /// Feeds the lines of `src` (the file from a line boundary on) until the
    /// verdict is final or the input ends.
    pub fn read_rest(&mut self, src: impl std::io::Read) -> std::io::Result<()> {
        // Small reads first: the verdict mostly comes within the first
        // 64 KiB, and the line reader's first `read()` would otherwise fill
        // its whole 2 MiB buffer (4 ms of copying into fresh pages on the
        // 400 MB bench log, whose header is at 44 KB, before any parsing).
        let src = GrowingReads { inner: src, next: FIRST_READ };
        let mut lines = crate::lines::LineReader::new(src, 1 << 20);
        while let Some(raw) = lines.next_line()? {
            if self.line(raw) {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A source that counts the bytes handed out.
    struct Counting<'a> {
        data: &'a [u8],
        pos: usize,
    }

    impl Read for Counting<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.data.len() - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    fn log_with_header_at(lines_before: usize) -> Vec<u8> {
        let mut s = String::from("# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20\n");
        for i in 0..lines_before {
            s.push_str(&format!("host:1:1 [0] NCCL INFO Channel {i:02}/32 : 0 1\n"));
        }
        s.push_str("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
        s.push_str(&"host:1:1 [0] NCCL INFO padding line after the header\n".repeat(80_000));
        s.into_bytes()
    }

    #[test]
    fn read_rest_stops_reading_soon_after_the_header() {
        // Header near the start of a 4 MB file: the first read (64 KiB)
        // holds it, so no more than that is taken from the source.
        let data = log_with_header_at(100);
        assert!(data.len() > 4 << 20);
        let mut s = BenchSniffer::default();
        let mut src = Counting { data: &data, pos: 0 };
        s.read_rest(&mut src).unwrap();
        assert!(s.out.tables && s.out.nccl_lines);
        assert_eq!(src.pos, FIRST_READ);
        // Header past the first reads: found all the same, and the reads
        // stayed within twice what the verdict needed.
        let data = log_with_header_at(20_000);
        let at = data.windows(7).position(|w| w == b"#      ").unwrap();
        let mut s = BenchSniffer::default();
        let mut src = Counting { data: &data, pos: 0 };
        s.read_rest(&mut src).unwrap();
        assert!(s.out.tables);
        assert!(src.pos > at && src.pos <= 2 * at.max(FIRST_READ), "read {} for a header at {at}", src.pos);
    }
}
