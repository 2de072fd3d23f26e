//! Input gathering: a path (file, folder, gzip file, tar / tar.gz archive) turned into named
//! in-memory members, one at a time. Owns the bounded readers: a member or decompressed
//! stream over [`MAX_MEMBER_BYTES`] is refused, tar headers are checked (checksum, octal or
//! base-256 sizes, GNU long names, pax `path`), and every failure names the file and member.

use super::{ChakraError, MAX_MEMBER_BYTES};
use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{BufReader, Read};
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
    if bytes.starts_with(&[0x1f, 0x8b]) {
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
        let file = File::open(path).map_err(|e| io_err(path, e))?;
        let mut head = [0u8; 2];
        let mut br = BufReader::new(file);
        let n = br.read(&mut head).map_err(|e| io_err(path, e))?;
        let file = File::open(path).map_err(|e| io_err(path, e))?;
        let reader: Box<dyn Read> = if n == 2 && head == [0x1f, 0x8b] {
            Box::new(MultiGzDecoder::new(BufReader::new(file)))
        } else {
            Box::new(BufReader::new(file))
        };
        return read_tar(&name, reader, f);
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

fn octal(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        // base-256: big-endian, first byte's high bit is the marker
        let mut v: u64 = (field[0] & 0x7f) as u64;
        for &b in &field[1..] {
            v = v.checked_mul(256)?.checked_add(b as u64)?;
        }
        return Some(v);
    }
    let s: Vec<u8> = field.iter().copied().take_while(|&b| b != 0).collect();
    let s = std::str::from_utf8(&s).ok()?.trim();
    if s.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(s, 8).ok()
}

fn cstr(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// Reads `n` bytes (bounded) plus the padding to 512.
fn read_data(r: &mut dyn Read, n: u64, what: &str) -> Result<Vec<u8>, ChakraError> {
    if n > MAX_MEMBER_BYTES {
        return Err(ChakraError::TooLarge {
            file: what.to_string(),
            limit: MAX_MEMBER_BYTES,
        });
    }
    let mut buf = Vec::new();
    r.take(n)
        .read_to_end(&mut buf)
        .map_err(|e| ChakraError::format(what, "data", format!("readable bytes: {e}")))?;
    if (buf.len() as u64) < n {
        return Err(ChakraError::format(
            what,
            "data",
            format!("{n} bytes of member data, archive ends after {}", buf.len()),
        ));
    }
    let pad = (512 - (n % 512)) % 512;
    let mut sink = Vec::new();
    r.take(pad)
        .read_to_end(&mut sink)
        .map_err(|e| ChakraError::format(what, "padding", format!("readable bytes: {e}")))?;
    Ok(buf)
}

fn pax_path(data: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(data);
    for rec in text.split('\n') {
        let Some((_, kv)) = rec.split_once(' ') else {
            continue;
        };
        if let Some(v) = kv.strip_prefix("path=") {
            return Some(v.to_string());
        }
    }
    None
}

fn read_tar(
    archive: &str,
    mut r: Box<dyn Read>,
    f: &mut dyn FnMut(Member) -> Result<(), ChakraError>,
) -> Result<(), ChakraError> {
    let mut index = 0usize;
    let mut long_name: Option<String> = None;
    let mut zero_blocks = 0;
    loop {
        let mut hdr = [0u8; 512];
        let mut got = 0;
        while got < 512 {
            let n = r.read(&mut hdr[got..]).map_err(|e| {
                ChakraError::format(
                    archive,
                    format!("member {index}"),
                    format!("a tar header ({e})"),
                )
            })?;
            if n == 0 {
                break;
            }
            got += n;
        }
        if got == 0 {
            if index == 0 {
                return Err(ChakraError::format(
                    archive,
                    "byte 0",
                    "a tar archive, found no member",
                ));
            }
            return Ok(()); // end without the two zero blocks: accepted
        }
        if got < 512 {
            return Err(ChakraError::format(
                archive,
                format!("member {index}"),
                "a 512-byte tar header (archive truncated)",
            ));
        }
        if hdr.iter().all(|&b| b == 0) {
            zero_blocks += 1;
            if zero_blocks == 2 {
                return Ok(());
            }
            continue;
        }
        zero_blocks = 0;
        let stored = octal(&hdr[148..156]);
        let sum: u64 = hdr
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    b as u64
                }
            })
            .sum();
        if stored != Some(sum) {
            return Err(ChakraError::format(
                archive,
                format!("member {index}"),
                "a tar header with a valid checksum (not a tar archive, or damaged)",
            ));
        }
        let size = octal(&hdr[124..136]).ok_or_else(|| {
            ChakraError::format(
                archive,
                format!("member {index}"),
                "an octal member size in the tar header",
            )
        })?;
        let mut name = cstr(&hdr[0..100]);
        if &hdr[257..262] == b"ustar" {
            let prefix = cstr(&hdr[345..500]);
            if !prefix.is_empty() {
                name = format!("{prefix}/{name}");
            }
        }
        if let Some(l) = long_name.take() {
            name = l;
        }
        let what = format!("{archive}!{name}");
        match hdr[156] {
            b'0' | 0 | b'7' => {
                let bytes = read_data(&mut *r, size, &what)?;
                let base = name.rsplit('/').next().unwrap_or(&name);
                if !base.is_empty() && !base.starts_with("._") && !name.ends_with('/') {
                    let bytes = gunzip_if(&what, bytes)?;
                    f(Member { name: what, bytes })?;
                }
            }
            b'L' | b'x' => {
                if size > 1 << 20 {
                    return Err(ChakraError::format(
                        &what,
                        "header",
                        "a long-name or pax record under 1 MiB",
                    ));
                }
                let data = read_data(&mut *r, size, &what)?;
                long_name = if hdr[156] == b'L' {
                    Some(cstr(&data))
                } else {
                    pax_path(&data)
                };
            }
            _ => {
                read_data(&mut *r, size, &what)?;
            }
        }
        index += 1;
    }
}
