//! The model file of `report --model` and `commlens model`: a Megatron-style
//! `key = value` configuration (`commlens_analyze::volume::ModelConfig`), its
//! theoretical per-rank volumes and, beside a run, the observed volumes per
//! parallelism (the thesis's Table 5.1), with the run's communicators
//! classified by the file's parallel sizes.

use commlens_analyze::classify::{self, Classification, ParallelSizes};
use commlens_analyze::volume::{compare, theoretical_volumes, ModelConfig, VolumeComparison, VolumeRow};
use commlens_core::OpTable;
use std::path::Path;

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
