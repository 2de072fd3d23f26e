//! Archives given as inputs (`.tar`, `.tar.gz`/`.tgz`, `.zip`: the form PyTorch and PARAM
//! publish their traces in) are read as if unpacked: [`unpack`] writes each regular member
//! to a file under a folder of the caller's, streamed in bounded pieces (a multi-GB member
//! never sits in memory), and the folder is then read like any other.
//!
//! What is an archive is told by the bytes, not the name: the zip local-header magic, a tar
//! header (`ustar` at byte 257, or a valid header checksum) at the start of the file or of
//! its gunzipped stream. A gzip of one file (`nccl.log.gz`, `trace.json.gz`) is no archive:
//! the readers gunzip it themselves.
//!
//! Member names are made safe: only their plain components are kept (no root, no `..`, no
//! drive), hidden members and macOS `__MACOSX` resource forks are passed over, links and
//! devices are not written. Every member passed over is listed with the reason.

use crate::tar::{for_each_tar_entry, is_gzip, is_tar_header, open_maybe_gzip, TarError};
use std::fs::File;
use std::io::{BufWriter, Read};
use std::path::{Component, Path, PathBuf};

/// Which container a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveKind {
    Tar,
    TarGz,
    Zip,
}

impl ArchiveKind {
    pub fn name(self) -> &'static str {
        match self {
            ArchiveKind::Tar => "tar archive",
            ArchiveKind::TarGz => "gzipped tar archive",
            ArchiveKind::Zip => "zip archive",
        }
    }
}

/// Whether a tar header block checks out (ustar magic, or an old-style header whose stored
/// checksum matches).
fn tar_block(block: &[u8]) -> bool {
    if block.len() < 512 || block[..100].iter().all(|&b| b == 0) {
        return false;
    }
    if is_tar_header(block) {
        return true;
    }
    let field: Vec<u8> = block[148..156].iter().copied().take_while(|&b| b != 0).collect();
    let Some(stored) = std::str::from_utf8(&field).ok().and_then(|s| u64::from_str_radix(s.trim(), 8).ok()) else {
        return false;
    };
    let sum: u64 = block[..512].iter().enumerate().map(|(i, &b)| if (148..156).contains(&i) { 32 } else { b as u64 }).sum();
    stored == sum
}

/// The kind of archive `path` is, from its first bytes; `None` for anything else
/// (a gzip of a single file included).
pub fn archive_kind(path: &Path) -> std::io::Result<Option<ArchiveKind>> {
    let mut head = Vec::with_capacity(512);
    File::open(path)?.take(512).read_to_end(&mut head)?;
    if is_gzip(&head) && !is_zip(&head) {
        let mut inner = Vec::with_capacity(512);
        // A damaged stream is no archive here; its reader says what is wrong.
        let _ = open_maybe_gzip(path)?.take(512).read_to_end(&mut inner);
        return Ok(tar_block(&inner).then_some(ArchiveKind::TarGz));
    }
    Ok(plain_archive_kind(&head))
}

/// [`archive_kind`] of a file that is not gzip, from its first bytes (512
/// are enough): for callers that hold them already.
pub fn plain_archive_kind(head: &[u8]) -> Option<ArchiveKind> {
    if is_zip(head) {
        return Some(ArchiveKind::Zip);
    }
    tar_block(&head[..head.len().min(512)]).then_some(ArchiveKind::Tar)
}

fn is_zip(head: &[u8]) -> bool {
    head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06")
}

/// What [`unpack`] wrote and passed over.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Unpacked {
    /// The files written, in archive order.
    pub files: Vec<PathBuf>,
    /// Members not written: (name in the archive, why).
    pub skipped: Vec<(String, String)>,
    /// Bytes written.
    pub bytes: u64,
}

/// The safe relative path of a member name; `None` when nothing of it is left or it is
/// hidden / a resource fork (the reason is given).
fn member_path(name: &str) -> Result<PathBuf, &'static str> {
    let mut out = PathBuf::new();
    for c in Path::new(name).components() {
        match c {
            Component::Normal(part) => {
                let s = part.to_string_lossy();
                if s.starts_with('.') || s == "__MACOSX" {
                    return Err("hidden member or resource fork");
                }
                out.push(part);
            }
            Component::ParentDir => return Err("its name leads out of the archive (`..`)"),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    if out.as_os_str().is_empty() {
        return Err("no file name");
    }
    Ok(out)
}

/// Streams `data` into the new file `dest` (its folders created).
fn write_member(dest: &Path, data: &mut dyn Read) -> std::io::Result<u64> {
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut w = BufWriter::with_capacity(1 << 20, File::create(dest)?);
    let n = std::io::copy(data, &mut w)?;
    w.into_inner().map_err(|e| e.into_error())?;
    Ok(n)
}

/// Unpacks the archive `path` into the folder `into` (created), member by member. Errors
/// name the archive and the member; what was written before an error stays written.
pub fn unpack(path: &Path, into: &Path) -> Result<Unpacked, TarError> {
    let label = path.display().to_string();
    let io = |at: &str, e: std::io::Error| TarError::Format { file: label.clone(), at: at.into(), expected: format!("a readable archive ({e})") };
    let kind = archive_kind(path).map_err(|e| io("byte 0", e))?;
    std::fs::create_dir_all(into).map_err(|e| TarError::Format {
        file: into.display().to_string(),
        at: "folder".into(),
        expected: format!("a folder to unpack {label} into ({e})"),
    })?;
    let mut out = Unpacked::default();
    match kind {
        None => Err(TarError::Format { file: label, at: "byte 0".into(), expected: "a tar, tar.gz or zip archive".into() }),
        Some(ArchiveKind::Tar | ArchiveKind::TarGz) => {
            let r = open_maybe_gzip(path).map_err(|e| io("byte 0", e))?;
            for_each_tar_entry(r, &label, &mut |name: &str, _size: u64, data: &mut dyn Read| {
                store(&label, into, name, data, &mut out)
            })?;
            Ok(out)
        }
        Some(ArchiveKind::Zip) => unzip(path, &label, into, out),
    }
}

/// Writes one member (or records why it was passed over).
fn store(label: &str, into: &Path, name: &str, data: &mut dyn Read, out: &mut Unpacked) -> Result<(), TarError> {
    match member_path(name) {
        Err(why) => out.skipped.push((name.to_string(), why.to_string())),
        Ok(rel) => {
            let dest = into.join(rel);
            let n = write_member(&dest, data).map_err(|e| TarError::Format {
                file: format!("{label}!{name}"),
                at: "data".into(),
                expected: format!("a member that can be read and written to {} ({e})", dest.display()),
            })?;
            out.bytes += n;
            out.files.push(dest);
        }
    }
    Ok(())
}

#[cfg(feature = "zip")]
fn unzip(path: &Path, label: &str, into: &Path, mut out: Unpacked) -> Result<Unpacked, TarError> {
    let bad = |at: String, e: &dyn std::fmt::Display| TarError::Format {
        file: label.to_string(),
        at,
        expected: format!("a readable zip archive ({e})"),
    };
    let file = File::open(path).map_err(|e| bad("byte 0".into(), &e))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| bad("central directory".into(), &e))?;
    for i in 0..zip.len() {
        let mut m = zip.by_index(i).map_err(|e| bad(format!("member {i}"), &e))?;
        let name = m.name().to_string();
        if m.is_dir() {
            continue;
        }
        if m.is_symlink() {
            out.skipped.push((name, "a link".into()));
            continue;
        }
        store(label, into, &name, &mut m, &mut out)?;
    }
    Ok(out)
}

#[cfg(not(feature = "zip"))]
fn unzip(_: &Path, label: &str, _: &Path, _: Unpacked) -> Result<Unpacked, TarError> {
    Err(TarError::Format {
        file: label.to_string(),
        at: "byte 0".into(),
        expected: "no zip archive (this build reads zip archives only with the `zip` feature)".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, size: usize) -> [u8; 512] {
        crate::tar::ustar_header(name, size, b'0')
    }

    #[test]
    fn unpacks_a_tar_gz_safely_and_streams_big_members() {
        let dir = std::env::temp_dir().join(format!("commlens-unpack-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let big = vec![b'x'; 3 << 20];
        let mut tar = Vec::new();
        for (name, data) in [("run/a.log", &b"hello"[..]), ("../evil", b"no"), ("run/.hidden", b"h"), ("run/big.bin", &big)] {
            tar.extend_from_slice(&header(name, data.len()));
            tar.extend_from_slice(data);
            tar.resize(tar.len().div_ceil(512) * 512, 0);
        }
        tar.extend_from_slice(&[0u8; 1024]);
        let gz = dir.join("t.tgz");
        let mut enc = flate2::write::GzEncoder::new(File::create(&gz).unwrap(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, &tar).unwrap();
        enc.finish().unwrap();
        assert_eq!(archive_kind(&gz).unwrap(), Some(ArchiveKind::TarGz));
        let into = dir.join("out");
        let u = unpack(&gz, &into).unwrap();
        assert_eq!(u.files, [into.join("run/a.log"), into.join("run/big.bin")]);
        assert_eq!(std::fs::read(into.join("run/a.log")).unwrap(), b"hello");
        assert_eq!(std::fs::metadata(into.join("run/big.bin")).unwrap().len(), 3 << 20);
        assert_eq!(u.skipped.len(), 2, "{:?}", u.skipped);
        assert!(!dir.join("evil").exists());
        // A gzip of one file is no archive.
        let one = dir.join("x.log.gz");
        let mut enc = flate2::write::GzEncoder::new(File::create(&one).unwrap(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, b"plain text\n").unwrap();
        enc.finish().unwrap();
        assert_eq!(archive_kind(&one).unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
