//! nccl-tests results as baselines: what the same machines reach in a
//! benchmark, per collective and message size. `report --baseline` draws
//! them beside the run's operations and compares each operation with the
//! curve of its kind at its size; `stats` prints them when given only
//! benchmark outputs.

use commlens_core::OpKind;
use commlens_export::report::{BaselineCurve, BwPoint};
use commlens_export::{human_bytes, Table};
use commlens_ingest::nccl_tests::{read_nccl_tests, BenchFile};
use std::path::{Path, PathBuf};

/// One benchmark curve: best bus bandwidth per size, sizes ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    pub label: String,
    pub kind: OpKind,
    /// Ranks of the benchmark job (0 when the output does not list them).
    pub ranks: u32,
    /// (bytes, busbw GB/s), strictly ascending in bytes, busbw > 0.
    pub curve: Vec<(f64, f64)>,
}

impl Baseline {
    /// Bus bandwidth at `bytes`, linear in log2(size) between the measured
    /// sizes; `None` outside the measured range.
    pub fn at(&self, bytes: u64) -> Option<f64> {
        let x = bytes as f64;
        let (first, last) = (self.curve.first()?, self.curve.last()?);
        if x < first.0 || x > last.0 {
            return None;
        }
        let i = self.curve.partition_point(|p| p.0 < x);
        let hi = self.curve[i];
        if hi.0 == x || i == 0 {
            return Some(hi.1);
        }
        let lo = self.curve[i - 1];
        let t = (x.log2() - lo.0.log2()) / (hi.0.log2() - lo.0.log2());
        Some(lo.1 + t * (hi.1 - lo.1))
    }

    /// Whether this curve measures operations of `kind` (sendrecv_perf
    /// stands for Send and Recv too).
    fn covers(&self, kind: OpKind) -> bool {
        self.kind == kind
            || (self.kind == OpKind::SendRecv && matches!(kind, OpKind::Send | OpKind::Recv | OpKind::SendRecv))
    }

    pub fn to_curve(&self) -> BaselineCurve {
        BaselineCurve {
            label: self.label.clone(),
            kind: if self.kind == OpKind::SendRecv { "Send".into() } else { self.kind.name().into() },
            points: self
                .curve
                .iter()
                .map(|&(b, bw)| BwPoint { bytes: b as u64, busbw_gb_s: bw, efficiency: None, vs_baseline: None })
                .collect(),
        }
    }
}

/// The baseline for an operation of `kind` in a communicator of `nranks`:
/// among the curves of that kind, the one whose job size is closest.
pub fn pick(bs: &[Baseline], kind: OpKind, nranks: Option<u32>) -> Option<&Baseline> {
    let n = nranks.unwrap_or(0) as i64;
    bs.iter().filter(|b| b.covers(kind)).min_by_key(|b| if b.ranks == 0 { i64::MAX } else { (b.ranks as i64 - n).abs() })
}

/// Reads nccl-tests outputs into baselines; runs whose collective is not
/// known or whose bandwidths are all zero (one rank) are left out with a
/// warning on stderr.
pub fn load(paths: &[PathBuf]) -> Result<(Vec<Baseline>, Vec<BenchFile>), Box<dyn std::error::Error>> {
    let files = paths.iter().map(|p| read_nccl_tests(p)).collect::<Result<Vec<_>, _>>()?;
    let out = from_files(&files);
    if out.is_empty() {
        return Err("--baseline: no usable nccl-tests run in the given files".into());
    }
    Ok((out, files))
}

/// Warnings for benchmark outputs that ran on other machines than the run
/// `t` (their host lists and the run's hosts do not meet): their curves may
/// not be what this run's hardware reaches. Nothing when either side names
/// no hosts.
pub fn other_hardware(files: &[BenchFile], t: &commlens_core::OpTable) -> Vec<String> {
    let run_hosts: std::collections::BTreeSet<&str> =
        t.processes.iter().map(|p| p.host.as_str()).filter(|h| !h.is_empty() && *h != "?").collect();
    if run_hosts.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for f in files {
        let hosts: std::collections::BTreeSet<&str> = f.runs.iter().flat_map(|r| r.hosts.iter().map(String::as_str)).collect();
        if hosts.is_empty() || !hosts.is_disjoint(&run_hosts) {
            continue;
        }
        let gpus: std::collections::BTreeSet<&str> = f.runs.iter().flat_map(|r| r.gpu_models.iter().map(String::as_str)).collect();
        let list = |s: &std::collections::BTreeSet<&str>| {
            let v: Vec<&str> = s.iter().take(3).copied().collect();
            format!("{}{}", v.join(", "), if s.len() > 3 { ", …" } else { "" })
        };
        out.push(format!(
            "baseline {} ran on {}{}, the run on {}: its curves may not be what this run's machines reach",
            f.path,
            list(&hosts),
            if gpus.is_empty() { String::new() } else { format!(" ({})", list(&gpus)) },
            list(&run_hosts)
        ));
    }
    out
}

/// Baselines from nccl-tests outputs already read (see [`load`]); runs of
/// unknown collective or without bandwidth are left out with a warning.
pub fn from_files(files: &[BenchFile]) -> Vec<Baseline> {
    let mut out = Vec::new();
    for f in files {
        warn_malformed(f);
        let p = Path::new(&f.path);
        let name = p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned());
        for (i, r) in f.runs.iter().enumerate() {
            let Some(kind) = r.kind else {
                eprintln!("warning: {name}: run {} (line {}): collective unknown, not used as a baseline", i + 1, r.header_line);
                continue;
            };
            let mut curve: Vec<(f64, f64)> = Vec::new();
            for row in &r.rows {
                let bw = row.out_of_place.busbw_gb_s.max(row.in_place.busbw_gb_s);
                if row.bytes == 0 || bw <= 0.0 || !bw.is_finite() {
                    continue;
                }
                match curve.last_mut() {
                    Some(last) if last.0 == row.bytes as f64 => last.1 = last.1.max(bw),
                    _ => curve.push((row.bytes as f64, bw)),
                }
            }
            curve.sort_by(|a, b| a.0.total_cmp(&b.0));
            curve.dedup_by(|a, b| a.0 == b.0);
            if curve.is_empty() {
                eprintln!("warning: {name}: run {} ({}): no non-zero bus bandwidth, not used as a baseline", i + 1, kind.name());
                continue;
            }
            let ranks = if r.ranks > 0 { format!(", {} ranks", r.ranks) } else { String::new() };
            out.push(Baseline { label: format!("nccl-tests {}{ranks}", kind.name()), kind, ranks: r.ranks, curve });
        }
    }
    out
}

fn warn_malformed(f: &BenchFile) {
    for (line, text) in f.malformed.iter().take(3) {
        eprintln!("warning: {}:{line}: not a result row: {text}", f.path);
    }
    if f.malformed.len() > 3 {
        eprintln!("warning: {}: {} more malformed rows", f.path, f.malformed.len() - 3);
    }
}

/// The tables `stats` prints for benchmark outputs: one summary row per
/// run, then each run's sizes.
pub fn tables(files: &[BenchFile]) -> Vec<Table> {
    let mut sum = Table::new(
        "nccl-tests results",
        &["file", "run", "collective", "named by", "ranks", "hosts", "GPU", "sizes", "peak busbw", "at size", "avg busbw"],
    );
    sum.csv_columns(&[
        "file",
        "run",
        "collective",
        "named_by",
        "ranks",
        "hosts",
        "gpu",
        "sizes",
        "min_size_bytes",
        "max_size_bytes",
        "peak_busbw_gb_s",
        "peak_at_bytes",
        "avg_busbw_gb_s",
    ]);
    let num = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    let mut per_run = Vec::new();
    for f in files {
        let name = Path::new(&f.path).file_name().map_or(f.path.clone(), |n| n.to_string_lossy().into_owned());
        for (i, r) in f.runs.iter().enumerate() {
            let kind = r.kind.map_or("?", |k| k.name());
            let peak = r.rows.iter().max_by(|a, b| {
                a.out_of_place.busbw_gb_s.max(a.in_place.busbw_gb_s).total_cmp(&b.out_of_place.busbw_gb_s.max(b.in_place.busbw_gb_s))
            });
            let sizes = match (r.rows.first(), r.rows.last()) {
                (Some(a), Some(b)) => format!("{}–{} ({})", human_bytes(a.bytes), human_bytes(b.bytes), r.rows.len()),
                _ => "–".into(),
            };
            let csv = vec![
                name.clone(),
                (i + 1).to_string(),
                r.kind.map_or(String::new(), |k| k.name().to_string()),
                r.kind_from.unwrap_or("").into(),
                if r.ranks > 0 { r.ranks.to_string() } else { String::new() },
                r.hosts.len().to_string(),
                r.gpu_models.join(", "),
                r.rows.len().to_string(),
                r.rows.first().map_or(String::new(), |a| a.bytes.to_string()),
                r.rows.last().map_or(String::new(), |b| b.bytes.to_string()),
                num(peak.map(|_| r.peak_busbw_gb_s())),
                peak.map_or(String::new(), |p| p.bytes.to_string()),
                num(r.avg_busbw_gb_s),
            ];
            sum.row_with_csv(
                vec![
                    name.clone(),
                    (i + 1).to_string(),
                    kind.into(),
                    r.kind_from.unwrap_or("–").into(),
                    if r.ranks > 0 { r.ranks.to_string() } else { "?".into() },
                    r.hosts.len().to_string(),
                    r.gpu_models.join(", "),
                    sizes,
                    format!("{:.2} GB/s", r.peak_busbw_gb_s()),
                    peak.map_or("–".into(), |p| human_bytes(p.bytes)),
                    r.avg_busbw_gb_s.map_or("–".into(), |v| format!("{v:.2} GB/s")),
                ],
                csv,
            );
            let mut t = Table::new(
                &format!("{name} run {} — {kind}", i + 1),
                &["size", "count", "type", "redop", "oop time us", "oop busbw", "ip time us", "ip busbw", "errors"],
            );
            t.csv_columns(&[
                "size_bytes",
                "count",
                "type",
                "redop",
                "oop_time_us",
                "oop_busbw_gb_s",
                "ip_time_us",
                "ip_busbw_gb_s",
                "errors",
            ]);
            for row in &r.rows {
                let errs = [row.out_of_place.errors, row.in_place.errors];
                let err_sum = (!errs.iter().all(Option::is_none)).then(|| errs.iter().flatten().sum::<f64>());
                let csv = vec![
                    row.bytes.to_string(),
                    row.count.to_string(),
                    row.dtype.clone(),
                    row.redop.clone().unwrap_or_default(),
                    row.out_of_place.time_us.to_string(),
                    row.out_of_place.busbw_gb_s.to_string(),
                    row.in_place.time_us.to_string(),
                    row.in_place.busbw_gb_s.to_string(),
                    num(err_sum),
                ];
                t.row_with_csv(vec![
                    human_bytes(row.bytes),
                    row.count.to_string(),
                    row.dtype.clone(),
                    row.redop.clone().unwrap_or_else(|| "–".into()),
                    format!("{:.2}", row.out_of_place.time_us),
                    format!("{:.2}", row.out_of_place.busbw_gb_s),
                    format!("{:.2}", row.in_place.time_us),
                    format!("{:.2}", row.in_place.busbw_gb_s),
                    err_sum.map_or_else(|| "N/A".into(), |e| e.to_string()),
                ], csv);
            }
            per_run.push(t);
        }
        for (line, text) in &f.malformed {
            sum.note(format!("{}:{line}: not a result row: {text}", f.path));
        }
    }
    std::iter::once(sum).chain(per_run).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(kind: OpKind, ranks: u32) -> Baseline {
        Baseline { label: String::new(), kind, ranks, curve: vec![(1024.0, 1.0), (4096.0, 3.0), (1048576.0, 100.0)] }
    }

    #[test]
    fn interpolation_is_linear_in_log_size_and_bounded() {
        let x = b(OpKind::AllReduce, 8);
        assert_eq!(x.at(1024), Some(1.0));
        assert_eq!(x.at(2048), Some(2.0)); // halfway in log2 between 1 KiB and 4 KiB
        assert_eq!(x.at(4096), Some(3.0));
        assert_eq!(x.at(1048576), Some(100.0));
        assert_eq!(x.at(512), None);
        assert_eq!(x.at(2 << 20), None);
    }

    #[test]
    fn the_closest_job_size_of_the_same_kind_is_picked() {
        let bs = [b(OpKind::AllReduce, 8), b(OpKind::AllReduce, 64), b(OpKind::SendRecv, 16), b(OpKind::AllGather, 0)];
        assert_eq!(pick(&bs, OpKind::AllReduce, Some(16)).unwrap().ranks, 8);
        assert_eq!(pick(&bs, OpKind::AllReduce, Some(48)).unwrap().ranks, 64);
        assert_eq!(pick(&bs, OpKind::Recv, Some(2)).unwrap().kind, OpKind::SendRecv);
        assert_eq!(pick(&bs, OpKind::AllGather, Some(4)).unwrap().ranks, 0);
        assert!(pick(&bs, OpKind::Broadcast, Some(4)).is_none());
    }
}
