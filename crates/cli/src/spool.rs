//! Inputs that are streams rather than files: `-` (standard input), pipes
//! and process substitutions (`commlens stats <(ssh node cat nccl.log)`).
//! Devices (`/dev/zero`) and sockets are refused.
//!
//! The readers work on paths and open an input more than once (a first look
//! tells its kind — NCCL log, nccl-tests output, Kineto, nsys, Parquet … —
//! then it is read), and a stream gives its bytes only once: the first look
//! would swallow what the reader needs. So each stream input is copied once,
//! in bounded pieces, to a file in the temporary folder, and that file is read
//! instead; the copies are removed when the command ends ([`Spooled`]'s drop).
//!
//! Archives named as inputs (`.tar`, `.tar.gz`/`.tgz`, `.zip`, told by their
//! bytes: the form PyTorch and PARAM publish traces in) are unpacked the same
//! way, member by member (`commlens_ingest::unpack_archives`), into a folder
//! that is read in their place. Other files and folders are passed through
//! untouched.

use std::error::Error;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The copies made for one command; removed when dropped.
#[derive(Default)]
pub struct Spooled {
    dir: Option<PathBuf>,
}

impl Spooled {
    /// The folder of this call's copies, made on first use.
    fn dir(&mut self) -> Result<PathBuf, Box<dyn Error>> {
        if let Some(d) = &self.dir {
            return Ok(d.clone());
        }
        // One folder per call: two calls of one process never share it.
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("commlens-streams-{}-{call}", std::process::id()));
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        self.dir = Some(d.clone());
        Ok(d)
    }
}

impl Drop for Spooled {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Whether `p` names a stream: `-`, or a FIFO (a pipe, `/dev/stdin` on a
/// pipe, a process substitution). Devices and sockets are refused: a
/// character device such as `/dev/zero` or `/dev/urandom` never ends, and
/// copying it would fill the disk.
fn is_stream(p: &Path) -> Result<bool, String> {
    if p.as_os_str() == "-" {
        // Standard input redirected from a device (`- < /dev/zero`); a terminal is read as typed.
        use std::io::IsTerminal;
        if !io::stdin().is_terminal() {
            if let Ok(m) = std::fs::metadata("/dev/stdin") {
                if let Some(kind) = device_kind(&m) {
                    return Err(format!("-: standard input is {kind}, not a file or a pipe; give a log file, a folder or a pipe"));
                }
            }
        }
        return Ok(true);
    }
    match std::fs::metadata(p) {
        Ok(m) if m.is_file() || m.is_dir() => Ok(false),
        Ok(m) => match device_kind(&m) {
            Some(kind) => Err(format!(
                "{}: is {kind}, not a file, a folder or a pipe; commlens reads files, folders, pipes and `-` (standard input)",
                p.display()
            )),
            None => Ok(true),
        },
        // Missing paths are reported by the reader, with its own message.
        Err(_) => Ok(false),
    }
}

/// Refuses devices and sockets among `paths` (also those no stream copy is
/// made for, such as `model`'s config file), with the message [`spool`] gives.
pub fn refuse_devices(paths: &[PathBuf]) -> Result<(), String> {
    for p in paths.iter().filter(|p| p.as_os_str() != "-") {
        is_stream(p)?;
    }
    Ok(())
}

/// "a character device", "a block device" or "a socket"; `None` for files,
/// folders and FIFOs.
fn device_kind(m: &std::fs::Metadata) -> Option<&'static str> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        if t.is_char_device() {
            return Some("a character device");
        }
        if t.is_block_device() {
            return Some("a block device");
        }
        if t.is_socket() {
            return Some("a socket");
        }
    }
    #[cfg(not(unix))]
    let _ = m;
    None
}

/// `inputs` with every stream replaced by a file holding its bytes, and the
/// guard that removes those files. Without streams nothing is written.
pub fn spool(inputs: &[PathBuf]) -> Result<(Vec<PathBuf>, Spooled), Box<dyn Error>> {
    let mut guard = Spooled::default();
    let mut out = Vec::with_capacity(inputs.len());
    for (k, p) in inputs.iter().enumerate() {
        if !is_stream(p)? {
            let archive = p.is_file() && commlens_ingest::kind::archive_kind(p).ok().flatten().is_some();
            if archive {
                let (paths, notes) = commlens_ingest::unpack_archives(std::slice::from_ref(p), &guard.dir()?.join(k.to_string()))?;
                notes.iter().for_each(|n| eprintln!("{n}"));
                out.extend(paths);
            } else {
                out.push(p.clone());
            }
            continue;
        }
        let dir = guard.dir()?;
        // Keep the stream's name readable in messages: `stdin`, `fd-63`, `fifo`.
        let name = if p.as_os_str() == "-" {
            "stdin".to_string()
        } else {
            p.file_name().map_or("stream".into(), |n| n.to_string_lossy().replace('/', "_"))
        };
        let name = if name.chars().all(|c| c.is_ascii_digit()) { format!("fd-{name}") } else { name };
        let copy = dir.join(format!("{k}-{name}"));
        let bytes = copy_stream(p, &copy).map_err(|e| format!("{}: {e}", p.display()))?;
        eprintln!("note: {} is a stream; its {bytes} bytes were copied to {} to be read", p.display(), copy.display());
        out.push(copy);
    }
    Ok((out, guard))
}

/// Copies the stream `from` (`-` = standard input) to the new file `to`.
fn copy_stream(from: &Path, to: &Path) -> io::Result<u64> {
    let mut w = BufWriter::with_capacity(1 << 20, File::create(to)?);
    let n = if from.as_os_str() == "-" {
        io::copy(&mut io::stdin().lock(), &mut w)?
    } else {
        io::copy(&mut File::open(from)?, &mut w)?
    };
    w.into_inner().map_err(|e| e.into_error())?.sync_all().ok();
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_folders_pass_through_and_nothing_is_written() {
        let dir = std::env::temp_dir();
        let file = dir.join(format!("commlens-spool-test-{}", std::process::id()));
        std::fs::write(&file, b"x").unwrap();
        let missing = dir.join("commlens-spool-test-missing");
        let inputs = vec![file.clone(), dir.clone(), missing.clone()];
        let (out, guard) = spool(&inputs).unwrap();
        assert_eq!(out, inputs);
        assert!(guard.dir.is_none());
        std::fs::remove_file(file).unwrap();
    }

    #[test]
    fn a_character_device_is_refused_and_nothing_is_written() {
        // /dev/zero never ends: copying it would fill the disk.
        let dev = PathBuf::from("/dev/zero");
        if !dev.exists() {
            return;
        }
        let err = spool(std::slice::from_ref(&dev)).err().expect("refused").to_string();
        assert!(err.contains("/dev/zero") && err.contains("character device"), "{err}");
    }
}
