//! Kernel samples from GPU traces, for [`super::KernelTable::from_traces`].
//!
//! The readers are `commlens-ingest`'s (`kineto::read_kineto`, `nsys::load_nsys_with`), whose
//! `RankTrace::compute` already keeps every non-NCCL GPU activity with an interned, classified
//! name; this module only picks the compute kernels (`KernelClass::Computation`: no memcpy,
//! memset, sync or communication kernels), converts ns to µs, and opens the containers traces
//! come in: folders, gzip, and tar archives (the PARAM DLRM set ships one rank per member).
//! Tar is read here (ustar, GNU long names, pax `path`), since no tar crate is in the workspace
//! and the format is a sequence of 512-byte headers.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use commlens_ingest::kineto::{read_kineto, KernelClass, KernelTrace, TraceOptions};

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

fn is_tar_header(b: &[u8]) -> bool {
    b.len() >= 263 && &b[257..262] == b"ustar"
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
    let file = File::open(path).map_err(|e| format!("{name}: {e}"))?;
    if h.starts_with(&[0x1f, 0x8b]) {
        // gzip: a tar inside, or one gzipped JSON trace.
        let mut inner = [0u8; 512];
        let mut gz = flate2::read::MultiGzDecoder::new(File::open(path).map_err(|e| format!("{name}: {e}"))?);
        let got = read_up_to(&mut gz, &mut inner).map_err(|e| format!("{name}: {e}"))?;
        if is_tar_header(&inner[..got]) {
            let gz = flate2::read::MultiGzDecoder::new(BufReader::new(file));
            return read_tar(gz, &name, acc);
        }
    } else if is_tar_header(&h) {
        return read_tar(BufReader::new(file), &name, acc);
    } else if h.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        acc.notes.push(format!("{name}: passed over (not a trace)"));
        return Ok(());
    }
    match read_kineto(file, &name, &opts()) {
        Ok(t) => acc.take(&t),
        Err(e) => acc.notes.push(format!("{name}: passed over ({e})")),
    }
    Ok(())
}

fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

/// A tar header's octal (or GNU base-256) number field.
fn tar_number(f: &[u8]) -> u64 {
    if f.first().is_some_and(|&b| b & 0x80 != 0) {
        return f[1..].iter().fold(0u64, |a, &b| a.saturating_mul(256).saturating_add(b as u64));
    }
    f.iter()
        .skip_while(|b| **b == b' ')
        .take_while(|b| (b'0'..=b'7').contains(b))
        .fold(0u64, |a, &b| a.saturating_mul(8).saturating_add((b - b'0') as u64))
}

fn cstr(f: &[u8]) -> String {
    let end = f.iter().position(|&b| b == 0).unwrap_or(f.len());
    String::from_utf8_lossy(&f[..end]).into_owned()
}

/// Reads the members of a tar stream; each regular member whose name ends in `.json` or
/// `.json.gz` is read as a Kineto trace.
fn read_tar<R: Read>(mut r: R, label: &str, acc: &mut Acc) -> Result<(), String> {
    let mut hdr = [0u8; 512];
    let mut long_name: Option<String> = None;
    loop {
        let got = read_up_to(&mut r, &mut hdr).map_err(|e| format!("{label}: {e}"))?;
        if got < 512 || hdr.iter().all(|&b| b == 0) {
            return Ok(());
        }
        let size = tar_number(&hdr[124..136]);
        let kind = hdr[156];
        let mut data = Vec::new();
        (&mut r).take(size).read_to_end(&mut data).map_err(|e| format!("{label}: {e}"))?;
        if (data.len() as u64) < size {
            acc.notes.push(format!("{label}: archive cut short"));
            return Ok(());
        }
        let pad = (512 - size % 512) % 512;
        std::io::copy(&mut (&mut r).take(pad), &mut std::io::sink()).map_err(|e| format!("{label}: {e}"))?;
        let mut name = if is_tar_header(&hdr) && hdr[345] != 0 {
            format!("{}/{}", cstr(&hdr[345..500]), cstr(&hdr[..100]))
        } else {
            cstr(&hdr[..100])
        };
        match kind {
            b'L' => {
                long_name = Some(cstr(&data));
                continue;
            }
            b'x' => {
                // pax: "LEN path=VALUE\n" records.
                let text = String::from_utf8_lossy(&data);
                long_name = text.lines().find_map(|l| l.split_once(" path=").map(|(_, v)| v.to_string()));
                continue;
            }
            _ => {}
        }
        if let Some(n) = long_name.take() {
            name = n;
        }
        if !(kind == b'0' || kind == 0) {
            continue;
        }
        if name.ends_with(".json") || name.ends_with(".json.gz") {
            let member = format!("{label}:{name}");
            match read_kineto(&data[..], &member, &opts()) {
                Ok(t) => acc.take(&t),
                Err(e) => acc.notes.push(format!("{member}: passed over ({e})")),
            }
        }
    }
}
