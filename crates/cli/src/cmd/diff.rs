//! `commlens diff A B`: compares two runs (any input kind each) and exits 1
//! when a figure regressed beyond `--threshold` percent, so CI can gate on it.

use crate::Format;
use commlens_analyze::diff::{diff, DiffOptions, DiffReport, RunProfile, Verdict};
use commlens_export::table::Table;
use commlens_ingest::nccl_log::ReadOptions;
use std::path::Path;

/// Returns whether a regression was found.
pub fn run(a: &Path, b: &Path, threshold_pct: f64, format: Format, all: bool) -> Result<bool, Box<dyn std::error::Error>> {
    if !(threshold_pct.is_finite() && threshold_pct >= 0.0) {
        return Err(format!("--threshold must be a non-negative percentage, got {threshold_pct}").into());
    }
    let pa = profile(a)?;
    let pb = profile(b)?;
    let d = diff(&pa, &pb, &DiffOptions { threshold: threshold_pct / 100.0 });
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&d)?),
        Format::Csv => print!("{}", table(&d, true).to_csv()),
        Format::Table => print!("{}", table(&d, all).to_text()),
    }
    let n = d.regressions().count();
    if n > 0 {
        eprintln!("commlens diff: {n} regression(s) beyond {threshold_pct}% ({} → {})", d.a, d.b);
    } else {
        eprintln!("commlens diff: no regression beyond {threshold_pct}%");
    }
    Ok(n > 0)
}

/// Loads one run and computes its comparable figures.
pub fn profile(p: &Path) -> Result<RunProfile, Box<dyn std::error::Error>> {
    let loaded = crate::load::load(std::slice::from_ref(&p.to_path_buf()), &ReadOptions::default())?;
    if loaded.table.n_ops() == 0 {
        return Err(format!("{}: no NCCL operations", p.display()).into());
    }
    let mut prof = RunProfile::of_table(&p.display().to_string(), &loaded.table);
    crate::enrich::add_timing_figures(&mut prof, &loaded.table, &loaded.traces);
    Ok(prof)
}

fn fmt(v: Option<f64>, unit: &str) -> String {
    match v {
        None => "—".into(),
        Some(x) if unit == "B" => commlens_export::human_bytes(x.round() as u64),
        Some(x) if unit == "ns" => format!("{:.3} ms", x / 1e6),
        Some(x) => format!("{x:.2} {unit}"),
    }
}

/// The comparison table; without `all`, unchanged rows are left out (and counted).
pub fn table(d: &DiffReport, all: bool) -> Table {
    let mut t = Table::new(&format!("Diff: {} → {}", d.a, d.b), &["figure", "A", "B", "change", "verdict"]);
    let mut same = 0;
    for r in &d.rows {
        if !all && r.verdict == Verdict::Same {
            same += 1;
            continue;
        }
        t.row(vec![
            r.name.clone(),
            fmt(r.a, r.unit),
            fmt(r.b, r.unit),
            r.change.map_or("—".into(), |c| format!("{:+.1}%", c * 100.0)),
            match r.verdict {
                Verdict::Same => "same",
                Verdict::Improved => "better",
                Verdict::Regressed => "REGRESSED",
                Verdict::Changed => "changed",
                Verdict::Missing => "only in one run",
            }
            .to_string(),
        ]);
    }
    if same > 0 {
        t.note(format!("{same} figures within ±{:.1}% left out (--all shows them)", d.threshold * 100.0));
    }
    t
}
