//! Files whose bytes repeat an earlier file's ([`drop_same_content`]), and
//! the one read of each file's first bytes that both this and the file's
//! kind are judged by ([`probe`]): a folder of 100,000 logs is opened and
//! read once per file here, not once per question (kind, archive, topology
//! XML, nccl-tests preamble, fingerprint), into a buffer each thread reuses.

use crate::error::IngestError;
use crate::kind::FileKind;
use rayon::prelude::*;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::hash::Hasher;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Bytes at each end of a file that its fingerprint covers. Files that share
/// a size and a fingerprint are compared in full, so the window only decides
/// how many comparisons run, never what is dropped; logs differ in their first
/// lines (host, pid, time), so a few KiB tell them apart.
const WINDOW: u64 = 16 << 10;

/// Bytes of a file read at first: [`crate::kind`]'s 64 KiB and, in nearly
/// every log, the line that crosses them (what the nccl-tests sniffer reads).
const HEAD: usize = 68 << 10;

/// What one read of a file's first bytes said.
pub(crate) struct Probe {
    /// Size of a regular file (`None`: not one, or no metadata).
    size: Option<u64>,
    /// Fingerprint of its bytes (`None`: could not be read).
    print: Option<u64>,
    pub kind: Result<FileKind, IngestError>,
}

thread_local! {
    static HEAD_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The kind ([`crate::kind::classify`]) and fingerprint of `path` from one
/// read of its first bytes. Gzip files and files whose first bytes cannot be
/// read take the path-by-path functions, which say the same.
pub(crate) fn probe(path: &Path) -> Probe {
    let size = regular_size(path);
    let quick = HEAD_BUF.with(|b| {
        let mut buf = b.borrow_mut();
        if buf.len() < HEAD {
            buf.resize(HEAD, 0);
        }
        probe_plain(path, size, &mut buf)
    });
    quick.unwrap_or_else(|| Probe {
        size,
        print: size.and_then(|s| fingerprint(path, s).ok()),
        kind: crate::kind::classify(path),
    })
}

fn probe_plain(path: &Path, size: Option<u64>, buf: &mut [u8]) -> Option<Probe> {
    let mut f = std::fs::File::open(path).ok()?;
    let n = read_full(&mut f, buf).ok()?;
    let head = &buf[..n];
    if head.starts_with(&[0x1f, 0x8b]) {
        return None;
    }
    let kind = crate::kind::classify_plain(path, head, n < buf.len(), &mut f);
    let print = size.and_then(|s| print_of(&mut f, head, s).ok());
    Some(Probe { size, print, kind })
}

fn regular_size(p: &Path) -> Option<u64> {
    std::fs::metadata(p).ok().filter(|m| m.is_file()).map(|m| m.len())
}

/// Drops files whose bytes repeat an earlier file's (a log copied under
/// another name): candidates share a size and a fingerprint of their first
/// and last bytes, then are compared in full. Returns the files kept, in
/// order, and one note per file dropped naming both. Files that cannot be
/// read here are kept (their reader reports the problem); empty files are
/// never compared.
pub fn drop_same_content(files: Vec<(PathBuf, bool)>) -> (Vec<(PathBuf, bool)>, Vec<String>) {
    let sizes: Vec<Option<u64>> = files.par_iter().map(|(p, _)| regular_size(p)).collect();
    let shared = shared_sizes(&sizes);
    let prints: Vec<Option<u64>> = files
        .par_iter()
        .zip(&sizes)
        .map(|((p, _), s)| s.filter(|s| shared.contains(s)).and_then(|s| fingerprint(p, s).ok()))
        .collect();
    let drop = drop_as(&files, &sizes, &prints, &shared);
    let (kept, notes, _) = split(files, drop, Vec::<()>::new());
    (kept, notes)
}

/// [`drop_same_content`] on files already probed: the files kept with their
/// kinds, and the notes.
#[allow(clippy::type_complexity)]
pub(crate) fn drop_probed(
    files: Vec<(PathBuf, bool)>,
    probes: Vec<Probe>,
) -> (Vec<(PathBuf, bool)>, Vec<Result<FileKind, IngestError>>, Vec<String>) {
    let sizes: Vec<Option<u64>> = probes.iter().map(|p| p.size).collect();
    let prints: Vec<Option<u64>> = probes.iter().map(|p| p.print).collect();
    let shared = shared_sizes(&sizes);
    let drop = drop_as(&files, &sizes, &prints, &shared);
    let (kept, notes, kinds) = split(files, drop, probes.into_iter().map(|p| p.kind).collect());
    (kept, kinds, notes)
}

/// Sizes (above 0) that more than one file has: only those files can repeat another.
fn shared_sizes(sizes: &[Option<u64>]) -> HashSet<u64> {
    let mut by_size: HashMap<u64, usize> = HashMap::new();
    for s in sizes.iter().flatten().filter(|&&s| s > 0) {
        *by_size.entry(*s).or_default() += 1;
    }
    by_size.into_iter().filter(|&(_, n)| n > 1).map(|(s, _)| s).collect()
}

/// Per file, the earlier file it repeats.
fn drop_as(files: &[(PathBuf, bool)], sizes: &[Option<u64>], prints: &[Option<u64>], shared: &HashSet<u64>) -> Vec<Option<usize>> {
    let mut drop_as: Vec<Option<usize>> = vec![None; files.len()];
    if shared.is_empty() {
        return drop_as;
    }
    // (size, fingerprint) → indices of the kept files with it.
    let mut kept_by_print: HashMap<(u64, u64), Vec<usize>> = HashMap::new();
    for (i, (p, _)) in files.iter().enumerate() {
        let Some(size) = sizes[i].filter(|s| shared.contains(s)) else { continue };
        let Some(print) = prints[i] else { continue };
        let same = kept_by_print.entry((size, print)).or_default();
        match same.iter().find(|&&j| same_bytes(&files[j].0, p).unwrap_or(false)) {
            Some(&j) => drop_as[i] = Some(j),
            None => same.push(i),
        }
    }
    drop_as
}

/// The files kept (and their `extra`, when given one per file) and one note per file dropped.
fn split<T>(files: Vec<(PathBuf, bool)>, drop_as: Vec<Option<usize>>, extra: Vec<T>) -> (Vec<(PathBuf, bool)>, Vec<String>, Vec<T>) {
    let mut notes = Vec::new();
    for (i, j) in drop_as.iter().enumerate() {
        if let Some(j) = j {
            notes.push(format!(
                "note: {} has the same content as {}; read once",
                files[i].0.display(),
                files[*j].0.display()
            ));
        }
    }
    let keep: Vec<bool> = drop_as.iter().map(Option::is_none).collect();
    let extra = extra.into_iter().zip(&keep).filter(|(_, &k)| k).map(|(x, _)| x).collect();
    let kept = files.into_iter().zip(&keep).filter(|(_, &k)| k).map(|(f, _)| f).collect();
    (kept, notes, extra)
}

/// Hash of the size, the first [`WINDOW`] bytes and the last [`WINDOW`] bytes of a file.
fn fingerprint(path: &Path, size: u64) -> std::io::Result<u64> {
    let mut f = std::fs::File::open(path)?;
    let mut head = vec![0u8; WINDOW.min(size) as usize];
    f.read_exact(&mut head)?;
    print_of(&mut f, &head, size)
}

/// [`fingerprint`] of an open file of `size` bytes whose first bytes `head` holds
/// (at least [`WINDOW`] of them, or the whole file); reads the last ones when
/// `head` does not reach them.
fn print_of(f: &mut std::fs::File, head: &[u8], size: u64) -> std::io::Result<u64> {
    let first = WINDOW.min(size) as usize;
    if head.len() < first {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let mut h = rustc_hash::FxHasher::default();
    h.write_u64(size);
    h.write(&head[..first]);
    if size > WINDOW {
        let tail = WINDOW.min(size - WINDOW);
        let start = size - tail;
        if start + tail <= head.len() as u64 {
            h.write(&head[start as usize..(start + tail) as usize]);
        } else {
            let mut buf = vec![0u8; tail as usize];
            f.seek(SeekFrom::Start(start))?;
            f.read_exact(&mut buf)?;
            h.write(&buf);
        }
    }
    Ok(h.finish())
}

/// Whether two files hold the same bytes, read side by side in 1 MiB blocks.
fn same_bytes(a: &Path, b: &Path) -> std::io::Result<bool> {
    let (mut fa, mut fb) = (std::fs::File::open(a)?, std::fs::File::open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let na = read_full(&mut fa, &mut ba)?;
        let nb = read_full(&mut fb, &mut bb)?;
        if na != nb || ba[..na] != bb[..nb] {
            return Ok(false);
        }
        if na == 0 {
            return Ok(true);
        }
    }
}

/// Reads until `buf` is full or the file ends; the bytes read.
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe says what the path-by-path functions say, for files of every
    /// kind and for logs around the sizes where it reads further.
    #[test]
    fn probe_agrees_with_classify_and_fingerprint() {
        let dir = std::env::temp_dir().join(format!("commlens-probe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let line = "host:1:1 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x5 [nranks=2] stream 0x6\n";
        let mut files: Vec<(String, Vec<u8>)> = vec![
            ("empty".into(), Vec::new()),
            ("short.log".into(), line.as_bytes().to_vec()),
            ("kineto.json".into(), br#"{"schemaVersion": 1, "traceEvents": []}"#.to_vec()),
            ("topo.xml".into(), b"<system version=\"1\"><cpu numaid=\"0\"></cpu></system>\n".to_vec()),
            ("plugin.clp".into(), b"commlens-plugin v1 host=a pid=1\n".to_vec()),
            (
                "bench.out".into(),
                b"# nThread 1 nGpus 1\n# Using devices\n#  Rank  0 Group  0 Pid 1 on host device  0 [0x07] A100\n#\n#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
                    .to_vec(),
            ),
        ];
        for len in [60 << 10, 64 << 10, 68 << 10, 70 << 10, 200 << 10] {
            let mut body = Vec::new();
            while body.len() < len {
                body.extend_from_slice(line.as_bytes());
            }
            files.push((format!("log-{len}"), body.clone()));
            // One long line across the end of the first read.
            let mut long = body[..60 << 10].to_vec();
            long.extend(std::iter::repeat_n(b'x', 20 << 10));
            long.extend_from_slice(b"\n# nThread 1\n");
            long.extend_from_slice(&body);
            files.push((format!("long-{len}"), long));
            // nccl-tests preamble, its table header far beyond the first read.
            let mut pre = b"# nThread 1 nGpus 1\n# Using devices\n".to_vec();
            pre.extend_from_slice(&body);
            pre.extend_from_slice(b"#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
            files.push((format!("pre-{len}"), pre));
        }
        for (name, body) in &files {
            let p = dir.join(name);
            std::fs::write(&p, body).unwrap();
            let got = probe(&p);
            let want = crate::kind::classify(&p);
            assert_eq!(format!("{:?}", got.kind), format!("{want:?}"), "{name}");
            assert_eq!(got.size, Some(body.len() as u64), "{name}");
            assert_eq!(got.print, fingerprint(&p, body.len() as u64).ok(), "{name}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn copies_are_dropped_whatever_reads_them() {
        let dir = std::env::temp_dir().join(format!("commlens-same-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut other = big.clone();
        other[50_000] ^= 1; // same size, same ends, other middle
        for (n, b) in [("a", &big), ("b", &other), ("c", &big), ("d", &other)] {
            std::fs::write(dir.join(n), b).unwrap();
        }
        let files: Vec<(PathBuf, bool)> = ["a", "b", "c", "d"].iter().map(|n| (dir.join(n), false)).collect();
        let (kept, notes) = drop_same_content(files.clone());
        assert_eq!(kept, files[..2].to_vec());
        assert_eq!(notes.len(), 2);
        let probes = files.iter().map(|f| probe(&f.0)).collect();
        let (kept2, kinds, notes2) = drop_probed(files.clone(), probes);
        assert_eq!((kept2, notes2), (kept, notes));
        assert_eq!(kinds.len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
