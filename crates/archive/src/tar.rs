//! Tar and gzip reading (moved here from `commlens-workload`, which re-exports it), shared by
//! the Chakra / Kineto front ends (`commlens_workload::chakra`), the simulator's kernel tables
//! (`commlens-sim`) and the unpacking of trace archives given as inputs ([`crate::unpack`]).
//!
//! Tar is read here rather than through a crate (none is in the workspace; the format is a
//! sequence of 512-byte headers): ustar names with their prefix, GNU long names (`L`),
//! pax `path` records (`x`), octal or GNU base-256 sizes. Every header's checksum is checked,
//! a member over the caller's size limit is refused before it is read, and each failure
//! names the archive and the member. Members are handed over one at a time, as a stream
//! ([`for_each_tar_entry`]: memory stays bounded whatever their size) or buffered
//! ([`for_each_tar_member`], under a size limit), so a caller keeps what came before a damaged part.

use flate2::read::MultiGzDecoder;
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

/// Whether `bytes` start with the gzip magic.
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// Whether a (first) 512-byte block is a ustar / GNU tar header (`ustar` at byte 257).
pub fn is_tar_header(block: &[u8]) -> bool {
    block.len() >= 262 && &block[257..262] == b"ustar"
}

/// Opens `path` as a buffered byte stream, gunzipped (all members) when the file starts with
/// the gzip magic.
pub fn open_maybe_gzip(path: &Path) -> std::io::Result<Box<dyn Read>> {
    let mut head = Vec::with_capacity(2);
    File::open(path)?.take(2).read_to_end(&mut head)?;
    let file = BufReader::new(File::open(path)?);
    Ok(if is_gzip(&head) {
        Box::new(MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    })
}

/// A tar stream that breaks the format, or a member over the size limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TarError {
    /// `file` (the archive, or `archive!member`) at `at` (`byte 0`, `member 3`, `data`, ...)
    /// is not what was expected.
    Format { file: String, at: String, expected: String },
    /// `file` (`archive!member`) is larger than `limit` bytes.
    TooLarge { file: String, limit: u64 },
}

impl TarError {
    fn format(file: impl Into<String>, at: impl Into<String>, expected: impl Into<String>) -> Self {
        TarError::Format { file: file.into(), at: at.into(), expected: expected.into() }
    }
}

impl fmt::Display for TarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TarError::Format { file, at, expected } => write!(f, "{file}: {at}: expected {expected}"),
            TarError::TooLarge { file, limit } => write!(f, "{file}: larger than the {limit}-byte limit"),
        }
    }
}

impl std::error::Error for TarError {}

impl From<TarError> for String {
    fn from(e: TarError) -> String {
        e.to_string()
    }
}

/// A header number field: octal (space / NUL padded), or GNU base-256 when the first byte's
/// high bit is set. `None` when it is neither or overflows.
fn number(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|b| b & 0x80 != 0) {
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

/// A NUL-terminated header string.
fn cstr(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// The `path` of pax extended-header records (`LEN path=VALUE\n`).
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

/// Reads `n` bytes (at most `limit`, else [`TarError::TooLarge`]) plus the padding to 512.
fn read_data(r: &mut dyn Read, n: u64, what: &str, limit: u64) -> Result<Vec<u8>, TarError> {
    if n > limit {
        return Err(TarError::TooLarge { file: what.to_string(), limit });
    }
    let mut buf = Vec::new();
    r.take(n)
        .read_to_end(&mut buf)
        .map_err(|e| TarError::format(what, "data", format!("readable bytes: {e}")))?;
    if (buf.len() as u64) < n {
        return Err(TarError::format(
            what,
            "data",
            format!("{n} bytes of member data, archive ends after {}", buf.len()),
        ));
    }
    let pad = (512 - (n % 512)) % 512;
    std::io::copy(&mut r.take(pad), &mut std::io::sink())
        .map_err(|e| TarError::format(what, "padding", format!("readable bytes: {e}")))?;
    Ok(buf)
}

/// What [`for_each_tar_entry`] calls per member: `(name, size, data)`.
pub type EntryFn<'a, E> = dyn FnMut(&str, u64, &mut dyn Read) -> Result<(), E> + 'a;

/// Calls `f(name, size, data)` with every regular member (type `0`, NUL or `7`; not a name
/// ending in `/`) of the tar stream `r`, in archive order, `data` reading the member's bytes
/// as a stream (what `f` leaves unread is skipped). `name` is the member's path inside the
/// archive (long / pax names applied); `label` names the archive in errors, which read
/// `label: member N: expected ...` or `label!name: ...`.
///
/// The stream ends at two zero blocks or at its end after at least one header; an empty
/// stream, a cut header or member, or a header with a wrong checksum is an error. An error
/// of `f` stops the reading and is returned as is.
pub fn for_each_tar_entry<E: From<TarError>>(
    mut r: impl Read,
    label: &str,
    f: &mut EntryFn<'_, E>,
) -> Result<(), E> {
    let r: &mut dyn Read = &mut r;
    let mut index = 0usize;
    let mut long_name: Option<String> = None;
    let mut zero_blocks = 0;
    loop {
        let mut hdr = [0u8; 512];
        let mut got = 0;
        while got < 512 {
            let n = r
                .read(&mut hdr[got..])
                .map_err(|e| TarError::format(label, format!("member {index}"), format!("a tar header ({e})")))?;
            if n == 0 {
                break;
            }
            got += n;
        }
        if got == 0 {
            if index == 0 {
                return Err(TarError::format(label, "byte 0", "a tar archive, found no member").into());
            }
            return Ok(()); // end without the two zero blocks: accepted
        }
        if got < 512 {
            return Err(TarError::format(
                label,
                format!("member {index}"),
                "a 512-byte tar header (archive truncated)",
            )
            .into());
        }
        if hdr.iter().all(|&b| b == 0) {
            zero_blocks += 1;
            if zero_blocks == 2 {
                return Ok(());
            }
            continue;
        }
        zero_blocks = 0;
        let stored = number(&hdr[148..156]);
        let sum: u64 = hdr
            .iter()
            .enumerate()
            .map(|(i, &b)| if (148..156).contains(&i) { 32 } else { b as u64 })
            .sum();
        if stored != Some(sum) {
            return Err(TarError::format(
                label,
                format!("member {index}"),
                "a tar header with a valid checksum (not a tar archive, or damaged)",
            )
            .into());
        }
        let size = number(&hdr[124..136]).ok_or_else(|| {
            TarError::format(label, format!("member {index}"), "an octal member size in the tar header")
        })?;
        let mut name = cstr(&hdr[0..100]);
        if is_tar_header(&hdr) {
            let prefix = cstr(&hdr[345..500]);
            if !prefix.is_empty() {
                name = format!("{prefix}/{name}");
            }
        }
        if let Some(l) = long_name.take() {
            name = l;
        }
        let what = format!("{label}!{name}");
        match hdr[156] {
            b'0' | 0 | b'7' if !name.ends_with('/') => {
                let mut data = (&mut *r).take(size);
                f(&name, size, &mut data)?;
                finish_member(data, size, &what)?; // what `f` left unread
                skip_padding(r, size, &what)?;
            }
            b'L' | b'x' => {
                if size > 1 << 20 {
                    return Err(TarError::format(&what, "header", "a long-name or pax record under 1 MiB").into());
                }
                let data = read_data(r, size, &what, u64::MAX)?;
                long_name = if hdr[156] == b'L' { Some(cstr(&data)) } else { pax_path(&data) };
            }
            _ => {
                finish_member((&mut *r).take(size), size, &what)?;
                skip_padding(r, size, &what)?;
            }
        }
        index += 1;
    }
}

/// Reads what is left of a member's data; an archive that ends inside it is an error.
fn finish_member<R: Read>(mut data: std::io::Take<R>, size: u64, what: &str) -> Result<(), TarError> {
    std::io::copy(&mut data, &mut std::io::sink())
        .map_err(|e| TarError::format(what, "data", format!("readable bytes: {e}")))?;
    if data.limit() > 0 {
        return Err(TarError::format(
            what,
            "data",
            format!("{size} bytes of member data, archive ends after {}", size - data.limit()),
        ));
    }
    Ok(())
}

/// Skips the padding that follows `n` bytes of member data.
fn skip_padding(r: &mut dyn Read, n: u64, what: &str) -> Result<(), TarError> {
    let pad = (512 - (n % 512)) % 512;
    std::io::copy(&mut r.take(pad), &mut std::io::sink())
        .map_err(|e| TarError::format(what, "padding", format!("readable bytes: {e}")))?;
    Ok(())
}

/// Calls `f(name, bytes)` with every regular member of the tar stream `r`, in archive order,
/// buffered ([`for_each_tar_entry`] says which members and how errors read). A member larger
/// than `per_member_limit` is refused before it is read (pass `u64::MAX` for no limit).
pub fn for_each_tar_member<E: From<TarError>>(
    r: impl Read,
    label: &str,
    per_member_limit: u64,
    f: &mut dyn FnMut(String, Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    for_each_tar_entry(r, label, &mut |name: &str, size: u64, data: &mut dyn Read| {
        let what = format!("{label}!{name}");
        if size > per_member_limit {
            return Err(TarError::TooLarge { file: what, limit: per_member_limit }.into());
        }
        let mut buf = Vec::new();
        data.read_to_end(&mut buf)
            .map_err(|e| TarError::format(&what, "data", format!("readable bytes: {e}")))?;
        if (buf.len() as u64) < size {
            return Err(TarError::format(
                &what,
                "data",
                format!("{size} bytes of member data, archive ends after {}", buf.len()),
            )
            .into());
        }
        f(name.to_string(), buf)
    })
}

/// A ustar header block for a member `name` (at most 100 bytes) of `size` bytes and type
/// `kind` (`b'0'` a regular file, `b'5'` a folder, `b'2'` a link): what tests and tools
/// that write small archives need (the member's data follows, padded to 512 bytes).
pub fn ustar_header(name: &str, size: usize, kind: u8) -> [u8; 512] {
    let mut h = [0u8; 512];
    let n = name.len().min(100);
    h[..n].copy_from_slice(&name.as_bytes()[..n]);
    h[100..107].copy_from_slice(b"0000644");
    h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
    h[156] = kind;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, size: usize, kind: u8) -> [u8; 512] {
        ustar_header(name, size, kind)
    }

    fn push(tar: &mut Vec<u8>, name: &str, data: &[u8], kind: u8) {
        tar.extend_from_slice(&header(name, data.len(), kind));
        tar.extend_from_slice(data);
        tar.resize(tar.len().div_ceil(512) * 512, 0);
    }

    fn members(tar: &[u8], limit: u64) -> Result<Vec<(String, Vec<u8>)>, TarError> {
        let mut out = Vec::new();
        for_each_tar_member(tar, "t.tar", limit, &mut |n, b| {
            out.push((n, b));
            Ok::<(), TarError>(())
        })?;
        Ok(out)
    }

    #[test]
    fn reads_members_long_and_pax_names() {
        let mut tar = Vec::new();
        push(&mut tar, "dir/", b"", b'5');
        push(&mut tar, "dir/a.json", b"{}", b'0');
        let long = format!("{}/b.json", "x".repeat(150));
        push(&mut tar, "././@LongLink", format!("{long}\0").as_bytes(), b'L');
        push(&mut tar, "trunc", b"[1]", b'0');
        push(&mut tar, "PaxHeaders/c", b"19 path=pax/c.json\n", b'x');
        push(&mut tar, "c", &[7u8; 600], b'0');
        tar.extend_from_slice(&[0u8; 1024]);
        let m = members(&tar, 1 << 20).unwrap();
        let names: Vec<&str> = m.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["dir/a.json", long.as_str(), "pax/c.json"]);
        assert_eq!(m[1].1, b"[1]");
        assert_eq!(m[2].1.len(), 600);
        assert!(is_tar_header(&tar[..512]));
    }

    #[test]
    fn refuses_damage_and_big_members() {
        let mut tar = Vec::new();
        push(&mut tar, "a", &[1u8; 1000], b'0');
        let e = members(&tar, 999).unwrap_err();
        assert_eq!(e.to_string(), "t.tar!a: larger than the 999-byte limit");
        let e = members(&tar[..700], u64::MAX).unwrap_err().to_string();
        assert!(e.contains("archive ends after 188"), "{e}");
        let mut bad = tar.clone();
        bad[0] = b'b';
        let e = members(&bad, u64::MAX).unwrap_err().to_string();
        assert!(e.contains("t.tar: member 0: expected a tar header with a valid checksum"), "{e}");
        assert!(members(&[], u64::MAX).unwrap_err().to_string().contains("found no member"));
        // no end blocks: accepted
        assert_eq!(members(&tar, u64::MAX).unwrap().len(), 1);
    }
}
