//! Input gathering: a path (file, folder, gzip file, tar / tar.gz archive) turned into named
//! in-memory members, one at a time. Owns the bounded readers: a member or decompressed
//! stream over [`MAX_MEMBER_BYTES`] is refused, and every failure names the file and member.
//! Tar itself is read by the crate's shared reader ([`crate::archive`]).

use super::{ChakraError, MAX_MEMBER_BYTES};
use crate::archive::{for_each_tar_member, is_gzip, open_maybe_gzip, TarError};
use flate2::read::MultiGzDecoder;
use std::io::Read;
use std::path::{Path, PathBuf};

/// One input file's bytes, named `archive!member` when it came from an archive.
pub(crate) struct Member {
    pub name: String,
    pub bytes: Vec<u8>,
}

fn io_err(path: &Path, e: std::io::Error) -> ChakraError {
    ChakraError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

impl From<TarError> for ChakraError {
    fn from(e: TarError) -> Self {
        match e {
            TarError::Format { file, at, expected } => ChakraError::Format { file, at, expected },
            TarError::TooLarge { file, limit } => ChakraError::TooLarge { file, limit },
        }
    }
}

/// Whether a name is an archive we unpack.
pub(crate) fn is_archive(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.ends_with(".tar.gz") || l.ends_with(".tgz") || l.ends_with(".tar")
}

/// Reads at most `limit` bytes from `r`; more is an error naming `what`.
fn read_bounded(mut r: impl Read, what: &str, limit: u64) -> Result<Vec<u8>, ChakraError> {
    let mut buf = Vec::new();
    (&mut r)
        .take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(|e| ChakraError::format(what, "read", format!("a readable (gzip) stream: {e}")))?;
    if buf.len() as u64 > limit {
        return Err(ChakraError::TooLarge {
            file: what.to_string(),
            limit,
        });
    }
    Ok(buf)
}

/// Undoes gzip when the bytes start with its magic.
pub(crate) fn gunzip_if(name: &str, bytes: Vec<u8>) -> Result<Vec<u8>, ChakraError> {
    if is_gzip(&bytes) {
        read_bounded(MultiGzDecoder::new(&bytes[..]), name, MAX_MEMBER_BYTES)
    } else {
        Ok(bytes)
    }
}

/// Files of a folder, recursively (at most 4 levels), sorted; hidden files and AppleDouble
/// `._*` files are passed over.
pub(crate) fn list_dir(dir: &Path) -> Result<Vec<PathBuf>, ChakraError> {
    fn walk(d: &Path, depth: u32, out: &mut Vec<PathBuf>) -> Result<(), ChakraError> {
        let rd = std::fs::read_dir(d).map_err(|e| io_err(d, e))?;
        for e in rd {
            let e = e.map_err(|e| io_err(d, e))?;
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let ft = e.file_type().map_err(|e| io_err(&p, e))?;
            if ft.is_dir() {
                if depth < 4 {
                    walk(&p, depth + 1, out)?;
                }
            } else if p.is_file() {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, 0, &mut out)?;
    out.sort();
    Ok(out)
}

/// Calls `f` with every member of `path`: the file itself (gunzipped when it is gzip), each
/// regular member of a tar archive, or each file of a folder (archives inside are unpacked).
pub(crate) fn for_each_member(
    path: &Path,
    f: &mut dyn FnMut(Member) -> Result<(), ChakraError>,
) -> Result<(), ChakraError> {
    let meta = std::fs::metadata(path).map_err(|e| io_err(path, e))?;
    if meta.is_dir() {
        for p in list_dir(path)? {
            for_each_member(&p, f)?;
        }
        return Ok(());
    }
    let name = path.display().to_string();
    if is_archive(&name) {
        let reader = open_maybe_gzip(path).map_err(|e| io_err(path, e))?;
        return for_each_tar_member(reader, &name, MAX_MEMBER_BYTES, &mut |member, bytes| {
            let base = member.rsplit('/').next().unwrap_or(&member);
            if base.is_empty() || base.starts_with("._") {
                return Ok(()); // AppleDouble metadata
            }
            let what = format!("{name}!{member}");
            let bytes = gunzip_if(&what, bytes)?;
            f(Member { name: what, bytes })
        });
    }
    if meta.len() > MAX_MEMBER_BYTES {
        return Err(ChakraError::TooLarge {
            file: name,
            limit: MAX_MEMBER_BYTES,
        });
    }
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    let bytes = gunzip_if(&name, bytes)?;
    f(Member { name, bytes })
}
