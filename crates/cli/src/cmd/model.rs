//! `commlens model CONFIG [INPUTS…]`: the theoretical per-rank volumes of a
//! model and parallel configuration (thesis eqs. 5.2–5.6), and, with inputs,
//! the observed volumes beside them with the ratio (the thesis's Table 5.1).

use super::CmdResult;
use crate::Format;
use commlens_analyze::classify::{self, Classification, ParallelSizes};
use commlens_analyze::volume::{compare, theoretical_volumes, ModelConfig, VolumeComparison, VolumeRow};
use commlens_core::OpTable;
use commlens_export::table::Table;
use commlens_ingest::nccl_log::ReadOptions;
use std::path::{Path, PathBuf};

pub fn read_config(path: &Path) -> Result<ModelConfig, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(ModelConfig::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?)
}

/// A warning when the model file describes another job size than the run
/// `t` holds (a 4-GPU file on an 8-rank run): the volume comparison would
/// pair ranks of different layouts.
pub fn world_mismatch(path: &Path, t: &OpTable) -> Result<Option<String>, Box<dyn std::error::Error>> {
    let c = read_config(path)?;
    let world = c.world();
    let ranks = t.devices.len() as u64;
    Ok((ranks > 0 && world != ranks).then(|| {
        format!(
            "{} describes {world} GPUs but the run has {ranks} ranks: it is another layout or another job, \
             so the theory-versus-observed volumes compare different things",
            path.display()
        )
    }))
}

/// Classification of the table's communicators from the configuration's
/// sizes (falls back to inference when they do not fit the table).
pub fn classification(t: &OpTable, c: &ModelConfig) -> Classification {
    let sizes = ParallelSizes::megatron(c.tp as u32, c.pp as u32, c.dp as u32);
    classify::classify_with_sizes(t, &sizes).unwrap_or_else(|_| classify::infer(t))
}

/// Theory and, when a table is given, the comparison.
pub fn volumes(c: &ModelConfig, t: Option<&OpTable>) -> (Vec<VolumeRow>, Vec<VolumeComparison>) {
    let theory = theoretical_volumes(c);
    let cmp = t.map(|t| compare(&theory, t, &classification(t, c))).unwrap_or_default();
    (theory, cmp)
}

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
