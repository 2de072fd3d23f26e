//! Streaming line reader over any `Read`, with gzip detection, and the
//! [`LineSource`] trait that it shares with the memory-mapped reader
//! ([`crate::lines_mapped::MappedLines`]).
//!
//! Reads fixed-size chunks into one reusable buffer and hands out borrowed
//! lines, so memory stays bounded by the chunk size plus the longest line,
//! whatever the file size. Lines longer than `max_line` are cut into pieces of
//! `max_line` bytes (and counted), which keeps a file without newlines from
//! growing the buffer without bound.
//!
//! What a line is (both sources hand out exactly these): the bytes up to a
//! `\n`, without it and without one trailing `\r`; when no `\n` follows within
//! `max_line` bytes, a piece of `max_line` bytes (not `\r`-stripped, counted in
//! `overlong_lines`); at the end, what is left without a `\n`, `\r`-stripped,
//! when it is not empty.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

/// Buffer growth step and the least room a `read()` gets (a read fills all
/// free room, up to about 2 MiB). Measured for this reader alone on a 400 MB
/// log in the page cache: 48 ms as is; with reads capped at 1 MiB 51 ms, at
/// 256 KiB 59 ms, at 128 KiB 60 ms (`wc -l`: 47 ms). Fewer, larger reads win
/// over a copy that stays in L2. Plain files are mapped instead
/// ([`crate::lines_mapped`]); this path serves gzip and pipes.
const CHUNK: usize = 1 << 20;

/// A source of lines with the semantics described in the module doc; the log
/// reader's loop is generic over it.
pub trait LineSource {
    /// The next line, borrowed until the next call; `None` at the end.
    fn next_line(&mut self) -> io::Result<Option<&[u8]>>;
    /// Number of the line last returned (1-based; 0 before the first).
    fn line_no(&self) -> u64;
    /// Bytes of the source read (or consumed) so far; the whole size at the end.
    fn bytes_read(&self) -> u64;
    /// Lines cut because they exceeded `max_line`.
    fn overlong_lines(&self) -> u64;
    /// Where a compressed stream broke off, when it did (the lines before it
    /// were returned; the incomplete last line was not).
    fn cut(&self) -> Option<&StreamCut> {
        None
    }
    /// The offset in the source where the next line starts, and the bytes
    /// buffered from there on (the next lines; the last one may be cut short
    /// by the end of the buffer, or be an overlong line's first piece). Lets
    /// a caller search many lines in one go (the nccl-tests filter). A
    /// source may give fewer bytes than it holds, none at all included.
    fn ahead(&self) -> (u64, &[u8]) {
        (self.bytes_read(), &[])
    }
    /// The offset of [`LineSource::ahead`] alone (cheaper: no slice).
    fn next_offset(&self) -> u64 {
        self.ahead().0
    }
}

/// A source that broke off mid-stream: a `.gz` cut short or corrupt after
/// some good data. The complete lines before the break are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamCut {
    /// Bytes delivered (decompressed) before the break, dropped tail included.
    pub bytes: u64,
    /// Bytes of the incomplete last line, dropped.
    pub dropped_bytes: u64,
    /// The decoder's error.
    pub error: String,
}

/// Errors a decoder gives for a stream cut short or damaged (flate2:
/// `UnexpectedEof` "incomplete deflate stream", `InvalidInput`/`InvalidData`
/// for corrupt data), as opposed to the device failing.
fn is_stream_cut(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData)
}

pub struct LineReader<R> {
    src: R,
    buf: Vec<u8>,
    /// Start of the unread part of `buf`.
    pos: usize,
    /// End of valid data in `buf`.
    end: usize,
    eof: bool,
    max_line: usize,
    newline: crate::bytes::ByteFinder,
    /// Number of the line last returned (1-based).
    pub line_no: u64,
    /// Bytes consumed from the source so far.
    pub bytes_read: u64,
    /// Lines cut because they exceeded `max_line`.
    pub overlong_lines: u64,
    /// Set when the source broke off mid-stream ([`StreamCut`]).
    pub cut: Option<StreamCut>,
}

impl<R: Read> LineReader<R> {
    pub fn new(src: R, max_line: usize) -> Self {
        let max_line = max_line.max(64);
        LineReader {
            src,
            buf: vec![0; CHUNK.max(max_line) + CHUNK],
            pos: 0,
            end: 0,
            eof: false,
            max_line,
            newline: crate::bytes::ByteFinder::new(b'\n'),
            line_no: 0,
            bytes_read: 0,
            overlong_lines: 0,
            cut: None,
        }
    }

    /// Returns the next line without its `\n` (and without a trailing `\r`).
    #[inline]
    pub fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        // The common case, inlined into the caller's loop: a whole line of
        // normal length is in the buffer.
        if let Some(i) = self.newline.find(&self.buf[self.pos..self.end]) {
            if i <= self.max_line {
                let start = self.pos;
                self.pos += i + 1;
                self.line_no += 1;
                return Ok(Some(strip_cr(&self.buf[start..start + i])));
            }
        }
        self.next_line_slow()
    }

    /// [`LineReader::next_line`] when the buffer holds no whole line of
    /// normal length: cuts an overlong line, refills, or ends.
    #[inline(never)]
    fn next_line_slow(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            let avail = &self.buf[self.pos..self.end];
            if let Some(i) = memchr::memchr(b'\n', avail) {
                let start = self.pos;
                if i > self.max_line {
                    return Ok(Some(self.cut_overlong()));
                }
                self.pos += i + 1;
                self.line_no += 1;
                return Ok(Some(strip_cr(&self.buf[start..start + i])));
            }
            if avail.len() > self.max_line {
                return Ok(Some(self.cut_overlong()));
            }
            if self.eof {
                if avail.is_empty() {
                    return Ok(None);
                }
                let start = self.pos;
                self.pos = self.end;
                self.line_no += 1;
                return Ok(Some(strip_cr(&self.buf[start..self.end])));
            }
            self.refill()?;
        }
    }

    fn cut_overlong(&mut self) -> &[u8] {
        let start = self.pos;
        self.pos += self.max_line;
        self.line_no += 1;
        self.overlong_lines += 1;
        &self.buf[start..start + self.max_line]
    }

    fn refill(&mut self) -> io::Result<()> {
        // Move the partial line to the front, then read after it.
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() + CHUNK, 0);
        }
        loop {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    self.bytes_read += n as u64;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_stream_cut(&e) => {
                    // Keep what came before; drop the incomplete last line.
                    let dropped = (self.end - self.pos) as u64;
                    self.cut = Some(StreamCut { bytes: self.bytes_read, dropped_bytes: dropped, error: e.to_string() });
                    self.end = self.pos;
                    self.eof = true;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl<R: Read> LineSource for LineReader<R> {
    #[inline]
    fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        LineReader::next_line(self)
    }
    fn line_no(&self) -> u64 {
        self.line_no
    }
    fn bytes_read(&self) -> u64 {
        self.bytes_read
    }
    fn overlong_lines(&self) -> u64 {
        self.overlong_lines
    }
    fn cut(&self) -> Option<&StreamCut> {
        self.cut.as_ref()
    }
    #[inline]
    fn ahead(&self) -> (u64, &[u8]) {
        // `bytes_read` counts what the source gave, `buf[pos..end]` of it unread.
        (self.next_offset(), &self.buf[self.pos..self.end])
    }
    #[inline]
    fn next_offset(&self) -> u64 {
        self.bytes_read - (self.end - self.pos) as u64
    }
}

#[inline]
pub(crate) fn strip_cr(s: &[u8]) -> &[u8] {
    s.strip_suffix(b"\r").unwrap_or(s)
}

/// Opens a file for reading, transparently decompressing gzip (by magic bytes).
pub fn open_maybe_gz(path: &Path) -> io::Result<Box<dyn Read + Send>> {
    let mut f = File::open(path)?;
    let mut magic = [0u8; 2];
    let n = read_up_to(&mut f, &mut magic)?;
    let head = io::Cursor::new(magic[..n].to_vec());
    let chained = head.chain(f);
    if n == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(CHUNK, chained))))
    } else {
        Ok(Box::new(chained))
    }
}

fn read_up_to(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    fill_up_to(buf, |rest, _| f.read(rest))
}

/// Reads `buf.len()` bytes of `file` at offset `off` (positioned reads:
/// the file's own position is left alone), fewer where the file ends first;
/// how many it read.
pub(crate) fn read_up_to_at(file: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    fill_up_to(buf, |rest, got| file.read_at(rest, off + got as u64))
}

/// Fills `buf` by calls of `read(rest of buf, bytes so far)` until it is
/// full or a call reads nothing; an interrupted call is tried again.
fn fill_up_to(buf: &mut [u8], mut read: impl FnMut(&mut [u8], usize) -> io::Result<usize>) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match read(&mut buf[n..], n) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(input: &[u8], max: usize) -> Vec<Vec<u8>> {
        let mut r = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            out.push(l.to_vec());
        }
        out
    }

    #[test]
    fn splits_lines_and_strips_cr() {
        let got = collect(b"a\r\nbb\n\nccc", 1024);
        assert_eq!(got, vec![b"a".to_vec(), b"bb".to_vec(), b"".to_vec(), b"ccc".to_vec()]);
        assert!(collect(b"", 1024).is_empty());
        assert_eq!(collect(b"\n", 1024), vec![b"".to_vec()]);
    }

    #[test]
    fn lines_spanning_chunks() {
        let mut input = Vec::new();
        for i in 0..300_000 {
            input.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        let got = collect(&input, 4096);
        assert_eq!(got.len(), 300_000);
        assert_eq!(got[299_999], b"line 299999");
    }

    #[test]
    fn overlong_lines_are_cut() {
        let input = vec![b'x'; 10_000];
        let mut r = LineReader::new(&input[..], 100);
        let mut n = 0;
        while let Some(l) = r.next_line().unwrap() {
            assert!(l.len() <= 100);
            n += 1;
        }
        assert_eq!(n, 100);
        assert_eq!(r.overlong_lines, 99);
    }

    /// A gzip stream cut in the middle: the complete lines before the cut are
    /// returned, the incomplete one is dropped, and the cut is recorded; a
    /// complete stream records none.
    #[test]
    fn gzip_cut_mid_stream_keeps_complete_lines() {
        use std::io::Write;
        let text: String = (0..2000).map(|i| format!("line {i} of a log that goes on for a while\n")).collect();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(text.as_bytes()).unwrap();
        let gz = enc.finish().unwrap();
        let read = |bytes: &[u8]| {
            let mut r = LineReader::new(flate2::read::MultiGzDecoder::new(bytes), 1024);
            let mut lines = Vec::new();
            while let Some(l) = r.next_line().unwrap() {
                lines.push(String::from_utf8(l.to_vec()).unwrap());
            }
            (lines, r.cut.clone())
        };
        let (all, cut) = read(&gz);
        assert_eq!(all.len(), 2000);
        assert_eq!(cut, None);
        let (some, cut) = read(&gz[..gz.len() / 2]);
        let cut = cut.expect("cut recorded");
        assert!(!some.is_empty() && some.len() < 2000, "{}", some.len());
        for (i, l) in some.iter().enumerate() {
            assert_eq!(l, &format!("line {i} of a log that goes on for a while"));
        }
        assert_eq!(cut.bytes - cut.dropped_bytes, some.iter().map(|l| l.len() as u64 + 1).sum::<u64>());
        // A device error still fails.
        struct Failing;
        impl Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("EIO"))
            }
        }
        assert!(LineReader::new(Failing, 1024).next_line().is_err());
    }
}
