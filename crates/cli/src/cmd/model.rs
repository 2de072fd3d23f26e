//! `commlens model CONFIG [INPUTS…]`: the theoretical per-rank volumes of a
//! model and parallel configuration (thesis eqs. 5.2–5.6), and, with inputs,
//! the observed volumes beside them with the ratio (the thesis's Table 5.1).

use super::CmdResult;
use crate::Format;
use commlens_export::table::Table;
use commlens_ingest::nccl_log::ReadOptions;
use std::path::{Path, PathBuf};

// The model file and its volumes are report assembly (`commlens_report::volumes`);
// `report --model` uses them too.
pub use commlens_report::volumes::{read_config, volumes, world_mismatch};

pub fn run(config: &Path, inputs: &[PathBuf], format: Format) -> CmdResult {
    let c = read_config(config)?;
    let loaded = if inputs.is_empty() { None } else { Some(crate::load::load(inputs, &ReadOptions::default())?) };
    let t = loaded.as_ref().map(|l| &l.table);
    if let Some(w) = t.map(|t| world_mismatch(config, t)).transpose()?.flatten() {
        eprintln!("warning: {w}");
    }
    let (theory, cmp) = volumes(&c, t);
    if theory.is_empty() {
        return Err(format!("{}: every parallel size is 1: no communication to model", config.display()).into());
    }
    let gb = |b: f64| format!("{:.3} GB", b / 1e9);
    let mut tab = Table::new(
        &format!("Communication volume per rank over {} iterations (theory{})", c.iterations, if t.is_some() { " vs observed" } else { "" }),
        &["parallelism", "rank role", "theory", "per iteration", "observed (moved)", "ratio", "observed (logged)", "logged ratio", "formula"],
    );
    tab.csv_columns(&[
        "parallelism",
        "rank_role",
        "theory_bytes",
        "per_iteration_bytes",
        "observed_moved_bytes",
        "ratio",
        "observed_logged_bytes",
        "logged_ratio",
        "formula",
    ]);
    let num = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    for row in &theory {
        let obs = cmp.iter().find(|x| x.parallelism == row.parallelism && x.role == row.role && !x.ranks.is_empty());
        let csv = vec![
            row.parallelism.label().to_string(),
            format!("{:?}", row.role),
            row.total_bytes.to_string(),
            row.per_iteration_bytes.to_string(),
            num(obs.map(|o| o.observed_moved_mean)),
            num(obs.and_then(|o| o.ratio)),
            num(obs.map(|o| o.observed_logged_mean)),
            num(obs.and_then(|o| o.logged_ratio)),
            row.formula.clone(),
        ];
        tab.row_with_csv(vec![
            row.parallelism.label().to_string(),
            format!("{:?}", row.role),
            gb(row.total_bytes),
            gb(row.per_iteration_bytes),
            obs.map_or("—".into(), |o| gb(o.observed_moved_mean)),
            obs.and_then(|o| o.ratio).map_or("—".into(), |r| format!("{r:.3}")),
            obs.map_or("—".into(), |o| gb(o.observed_logged_mean)),
            obs.and_then(|o| o.logged_ratio).map_or("—".into(), |r| format!("{r:.3}")),
            row.formula.clone(),
        ], csv);
    }
    tab.note("moved = bytes each rank's links carry (ring factors); logged = count × datatype size as NCCL prints it (the thesis's \"observed\")");
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&serde_json::json!({"theory": theory, "observed": cmp}))?),
        Format::Csv => print!("{}", tab.to_csv()),
        Format::Table => print!("{}", tab.to_text()),
    }
    Ok(())
}
