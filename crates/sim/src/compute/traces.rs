//! Kernel samples from GPU traces, for [`super::KernelTable::from_traces`].
//!
//! The readers are `commlens-ingest`'s (`kineto::read_kineto`, `nsys::load_nsys_with`), whose
//! `RankTrace::compute` already keeps every non-NCCL GPU activity with an interned, classified
//! name; this module only picks the compute kernels (`KernelClass::Computation`: no memcpy,
//! memset, sync or communication kernels), converts ns to µs, and opens the containers traces
//! come in: folders, gzip, and tar archives (the PARAM DLRM set ships one rank per member).
//! Tar and gzip are read by `commlens_workload::archive`, the project's one tar reader.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use commlens_ingest::kineto::{read_kineto, KernelClass, KernelTrace, TraceOptions};
use commlens_workload::archive::{for_each_tar_member, is_gzip, is_tar_header, open_maybe_gzip, TarError};

/// What the traces gave.
pub(super) struct Samples {
    pub samples: Vec<(String, f64)>,
    pub gpu: Option<String>,
    pub notes: Vec<String>,
}

#[derive(Default)]
struct Acc {
    samples: Vec<(String, f64)>,
    gpus: Vec<String>,
    notes: Vec<String>,
    traces: usize,
}

impl Acc {
    fn take(&mut self, t: &KernelTrace) {
        self.traces += 1;
        for r in &t.ranks {
            if let Some(g) = &r.gpu_name {
                self.gpus.push(g.clone());
            }
            for k in &r.compute {
                let Some(n) = r.compute_names.get(k.name as usize) else { continue };
                if n.class == KernelClass::Computation {
                    self.samples.push((n.name.clone(), k.dur_ns as f64 / 1000.0));
                }
            }
        }
    }
}

fn opts() -> TraceOptions {
    // A compute-only trace (no NCCL kernel) is a fine source of kernel times.
    TraceOptions { allow_no_kernels: true, ..TraceOptions::default() }
}

pub(super) fn read_samples(paths: &[PathBuf]) -> Result<Samples, String> {
    let mut files = Vec::new();
    for p in paths {
        walk(p, &mut files).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    let mut acc = Acc::default();
    for f in &files {
        read_file(f, &mut acc)?;
    }
    if acc.traces == 0 {
        return Err(format!("no Kineto or nsys trace among {} file(s)", files.len()));
    }
    // The GPU the samples come from: the name most ranks gave.
    acc.gpus.sort();
    let mut gpu: Option<(usize, String)> = None;
    for g in acc.gpus.chunk_by(|a, b| a == b) {
        if gpu.as_ref().is_none_or(|(n, _)| g.len() > *n) {
            gpu = Some((g.len(), g[0].clone()));
        }
    }
    Ok(Samples { samples: acc.samples, gpu: gpu.map(|g| g.1), notes: acc.notes })
}

fn walk(p: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if p.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for e in entries {
            let hidden = e.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
            if !hidden {
                walk(&e, out)?;
            }
        }
    } else {
        out.push(p.to_path_buf());
    }
    Ok(())
}

fn head(path: &Path, n: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(n);
    File::open(path)?.take(n as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

fn read_file(path: &Path, acc: &mut Acc) -> Result<(), String> {
    let name = path.display().to_string();
    let h = head(path, 512).map_err(|e| format!("{name}: {e}"))?;
    if h.starts_with(b"SQLite format 3\0") {
        match commlens_ingest::nsys::load_nsys_with(path, &opts()) {
            Ok(t) => acc.take(&t),
            Err(e) => acc.notes.push(format!("{name}: passed over ({e})")),
        }
        return Ok(());
    }
    if is_gzip(&h) {
        // gzip: a tar inside, or one gzipped JSON trace.
        let mut gz = open_maybe_gzip(path).map_err(|e| format!("{name}: {e}"))?;
        let mut inner = Vec::with_capacity(512);
        (&mut gz).take(512).read_to_end(&mut inner).map_err(|e| format!("{name}: {e}"))?;
        if is_tar_header(&inner) {
            read_tar(std::io::Cursor::new(inner).chain(gz), &name, acc);
            return Ok(());
        }
    } else if is_tar_header(&h) {
        read_tar(BufReader::new(File::open(path).map_err(|e| format!("{name}: {e}"))?), &name, acc);
        return Ok(());
    } else if h.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        acc.notes.push(format!("{name}: passed over (not a trace)"));
        return Ok(());
    }
    let file = File::open(path).map_err(|e| format!("{name}: {e}"))?;
    match read_kineto(file, &name, &opts()) {
        Ok(t) => acc.take(&t),
        Err(e) => acc.notes.push(format!("{name}: passed over ({e})")),
    }
    Ok(())
}

/// Reads the members of a tar stream (`commlens_workload::archive`); each regular member whose
/// name ends in `.json` or `.json.gz` is read as a Kineto trace. A damaged archive keeps the
/// traces before the damage and notes where the reading stopped.
fn read_tar(r: impl Read, label: &str, acc: &mut Acc) {
    let read = for_each_tar_member(r, label, u64::MAX, &mut |name, data| {
        if name.ends_with(".json") || name.ends_with(".json.gz") {
            let member = format!("{label}:{name}");
            match read_kineto(&data[..], &member, &opts()) {
                Ok(t) => acc.take(&t),
                Err(e) => acc.notes.push(format!("{member}: passed over ({e})")),
            }
        }
        Ok::<(), TarError>(())
    });
    if let Err(e) = read {
        acc.notes.push(format!("{e} (the rest of the archive passed over)"));
    }
}
