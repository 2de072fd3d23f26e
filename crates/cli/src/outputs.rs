//! What commlens writes never replaces what it reads, and is never left
//! half-written.
//!
//! [`check_outputs`] refuses (before anything is read) an output path that is
//! an input, or a folder that holds one: the paths given, and every file the
//! commands would read in the folders given (the folder walk of
//! `commlens_ingest`, and the Parquet tables `load` reads back). Paths are
//! compared canonicalized (links resolved; an output that does not exist yet
//! by its nearest existing ancestor), and an existing output file that is an
//! input under another name (hard link) is refused too.
//!
//! [`write_atomic`] writes a file under a hidden temporary name in the same
//! folder and renames it into place once complete; on error (or panic) the
//! temporary file is removed, so the destination holds either the old file
//! or the whole new one.

use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Refuses any output that is an input or contains one (see the module documentation).
pub fn check_outputs(inputs: &[PathBuf], outputs: &[&Path]) -> Result<(), String> {
    if outputs.is_empty() || inputs.is_empty() {
        return Ok(());
    }
    // (as the user will recognise it, canonical form, metadata)
    let mut ins: Vec<(PathBuf, PathBuf, Option<std::fs::Metadata>)> = Vec::new();
    let mut add = |p: &Path| {
        if let Ok(c) = std::fs::canonicalize(p) {
            ins.push((p.to_path_buf(), c, std::fs::metadata(p).ok()));
        }
    };
    for p in inputs {
        add(p);
        if p.is_dir() {
            for f in files_read(p) {
                add(&f);
            }
        }
    }
    for &out in outputs {
        let o = canonical_output(out);
        let out_meta = std::fs::metadata(out).ok();
        for (shown, c, meta) in &ins {
            let same_file = match (&out_meta, meta) {
                (Some(a), Some(b)) => a.is_file() && b.is_file() && same_inode(a, b),
                _ => false,
            };
            if *c == o || same_file {
                return Err(format!(
                    "refusing to write {}: it is the input {}; commlens never overwrites its inputs, choose another output path",
                    out.display(),
                    shown.display()
                ));
            }
            if c.starts_with(&o) {
                return Err(format!(
                    "refusing to write into {}: it holds the input {}; commlens never writes over its inputs, choose an output folder outside them",
                    out.display(),
                    shown.display()
                ));
            }
        }
    }
    Ok(())
}

/// The files read under a folder: the ingest walk, and the Parquet tables
/// when the folder holds no other input (as `load::split_inputs` decides).
fn files_read(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(s) = crate::load::split_inputs(std::slice::from_ref(&dir.to_path_buf())) {
        v.extend(s.parquet.into_iter().map(|(p, _)| p));
        if let Ok(files) = commlens_ingest::expand_inputs(&s.rest) {
            v.extend(files.into_iter().map(|(p, _)| p));
        }
    }
    v
}

#[cfg(unix)]
fn same_inode(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_inode(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    false
}

/// `path` canonicalized; when it does not exist, its nearest existing
/// ancestor canonicalized and the rest appended, `..` resolved lexically
/// (what does not exist holds no links).
fn canonical_output(path: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(path) {
        return c;
    }
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut rest: Vec<Component<'_>> = Vec::new();
    let mut base: &Path = &abs;
    let mut root = loop {
        if let Ok(c) = std::fs::canonicalize(base) {
            break c;
        }
        match (base.parent(), base.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                base = parent;
            }
            _ => break PathBuf::from("/"),
        }
    };
    for c in rest.into_iter().rev() {
        match c {
            Component::ParentDir => {
                root.pop();
            }
            Component::CurDir => {}
            c => root.push(c.as_os_str()),
        }
    }
    root
}

/// A file being written under a hidden temporary name next to its
/// destination; removed when dropped unless [`TempOut::commit`]ted.
pub struct TempOut {
    tmp: PathBuf,
    dest: PathBuf,
    done: bool,
}

impl TempOut {
    /// Picks the temporary name (nothing is created yet).
    pub fn new(dest: &Path) -> TempOut {
        static N: AtomicU64 = AtomicU64::new(0);
        let name = dest.file_name().map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
        let tmp_name = format!(".{name}.commlens-tmp-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let tmp = match dest.parent() {
            Some(dir) => dir.join(tmp_name),
            None => PathBuf::from(tmp_name),
        };
        TempOut { tmp, dest: dest.to_path_buf(), done: false }
    }

    /// Where to write.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Renames the complete file into place.
    pub fn commit(mut self) -> io::Result<()> {
        std::fs::rename(&self.tmp, &self.dest)?;
        self.done = true;
        Ok(())
    }
}

impl Drop for TempOut {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Calls `write` with a temporary path next to `dest`, then renames the file
/// into place; on any error nothing is left at the temporary path and
/// `dest` is untouched.
pub fn write_atomic<T, E: From<io::Error>>(dest: &Path, write: impl FnOnce(&Path) -> Result<T, E>) -> Result<T, E> {
    let t = TempOut::new(dest);
    let v = write(t.path())?;
    t.commit()?;
    Ok(v)
}

/// `write_atomic` with a buffered file, flushed before the rename.
pub fn write_file_atomic(
    dest: &Path,
    write: impl FnOnce(&mut io::BufWriter<std::fs::File>) -> io::Result<()>,
) -> Result<(), String> {
    write_atomic(dest, |tmp| {
        let mut w = io::BufWriter::new(std::fs::File::create(tmp)?);
        write(&mut w)?;
        io::Write::flush(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()
    })
    .map_err(|e: io::Error| format!("{}: {e}", dest.display()))
}

/// `trace.json` and `trace.pftrace`, each written atomically.
pub fn write_traces(
    t: &commlens_core::OpTable,
    enrich: &dyn commlens_export::timeline::Enrich,
    opts: &commlens_export::TraceOptions,
    json: &Path,
    pf: &Path,
) -> Result<commlens_export::timeline::TraceSummary, String> {
    use commlens_export::{chrome, perfetto};
    let s = write_atomic(json, |tmp| chrome::write_chrome_trace_file(t, enrich, opts, tmp))
        .map_err(|e| format!("{}: {e}", json.display()))?;
    write_atomic(pf, |tmp| perfetto::write_perfetto_trace_file(t, enrich, opts, tmp))
        .map_err(|e| format!("{}: {e}", pf.display()))?;
    Ok(s)
}

/// Prints one note when the folder walk of `inputs` passed over paths that
/// lead to files or folders already read (links, loops, a path named twice).
pub fn note_links(inputs: &[PathBuf]) {
    let Ok(e) = commlens_ingest::expand_inputs_noted(inputs) else { return };
    if e.skipped.is_empty() {
        return;
    }
    let n = e.skipped.len();
    let shown: Vec<String> =
        e.skipped.iter().take(3).map(|(p, first)| format!("{} (= {})", p.display(), first.display())).collect();
    eprintln!(
        "note: skipped {n} path{} already read through links or named twice: {}{}",
        if n == 1 { "" } else { "s" },
        shown.join(", "),
        if n > 3 { ", …" } else { "" }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_output_resolves_dots_lexically() {
        let d = std::env::temp_dir().join(format!("commlens-outputs-unit-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("in.log"), "x").unwrap();
        let o = canonical_output(&d.join("nope/sub/../../in.log"));
        assert_eq!(o, std::fs::canonicalize(d.join("in.log")).unwrap());
        let r = check_outputs(&[d.join("in.log")], &[&d.join("nope/../in.log")]);
        assert!(r.is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn failed_write_leaves_nothing() {
        let d = std::env::temp_dir().join(format!("commlens-outputs-unit2-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let dest = d.join("a.html");
        let r: io::Result<()> = write_atomic(&dest, |tmp| {
            std::fs::write(tmp, "half")?;
            Err(io::Error::other("boom"))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
        write_file_atomic(&dest, |w| io::Write::write_all(w, b"whole")).unwrap();
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "whole");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
