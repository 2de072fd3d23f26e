//! The canonical table as Parquet (`commlens-parquet`), with the analyses'
//! per-operation figures as extra columns: bus/algorithm bandwidth,
//! efficiency, parallelism class and, for fused tables, the match confidence;
//! as one file or as the shards of a Hive-partitioned dataset.

use commlens_report::enrich::Enrichment;
use commlens_core::OpTable;
use commlens_parquet::dataset::{unique_run_id, PartitionKey, ShardWritten};
use commlens_parquet::{write_table, ExtraColumn, ExtraValues, WriteOptions, WriteSummary};
use std::path::Path;

pub fn write(
    t: &OpTable,
    enrich: &Enrichment<'_>,
    with_confidence: bool,
    path: &Path,
) -> Result<WriteSummary, Box<dyn std::error::Error>> {
    write_with(t, enrich, with_confidence, None, None, path)
}

/// As [`write`], with every row's `source_kind` (the simulator's rows are `Simulated`) and,
/// for a table of representative ranks, how many ranks its rows stand for.
pub fn write_with(
    t: &OpTable,
    enrich: &Enrichment<'_>,
    with_confidence: bool,
    source_kind: Option<commlens_core::SourceKind>,
    ranks_represented: Option<u64>,
    path: &Path,
) -> Result<WriteSummary, Box<dyn std::error::Error>> {
    let extra = extras(t, enrich, with_confidence);
    let opts = WriteOptions { extra, source_kind, ranks_represented, ..WriteOptions::default() };
    // A missing folder is created, as `report` does for its file.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    // Through a temporary file renamed into place: `path` holds the old file or the whole new one.
    let written = crate::outputs::write_atomic(path, |tmp| {
        write_table(t, tmp, &opts).map_err(Box::<dyn std::error::Error>::from)
    })
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(written)
}

/// The table as shards of a Hive-partitioned dataset under `dir` (see
/// `commlens_parquet::dataset`), with the same extra columns as [`write`];
/// file names carry this run's unique id, so runs on other nodes can write
/// into the same `dir` at the same time.
pub fn write_dataset(
    t: &OpTable,
    enrich: &Enrichment<'_>,
    key: PartitionKey,
    dir: &Path,
) -> Result<Vec<ShardWritten>, Box<dyn std::error::Error>> {
    let opts = WriteOptions { extra: extras(t, enrich, false), ..WriteOptions::default() };
    Ok(commlens_parquet::dataset::write_dataset(t, dir, key, &opts, &unique_run_id())
        .map_err(|e| format!("{}: {e}", dir.display()))?)
}

/// The analyses' per-operation figures, in `OpTable::ops()` order.
fn extras(t: &OpTable, enrich: &Enrichment<'_>, with_confidence: bool) -> Vec<ExtraColumn> {
    let n = t.n_ops();
    let (mut algbw, mut busbw, mut eff, mut class, mut conf) =
        (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    // Same order as `OpTable::ops()`: device by device, in `per_rank` order.
    for (d, ops) in t.per_rank.iter().enumerate() {
        for i in 0..ops.len() {
            let f = enrich.op_figures(d, i);
            algbw.push(f.algbw_gb_s);
            busbw.push(f.busbw_gb_s);
            eff.push(f.efficiency);
            class.push(f.parallelism);
            conf.push(f.confidence.map(f64::from));
        }
    }
    let mut extra = vec![
        ExtraColumn { name: "algbw_gb_s".into(), values: ExtraValues::F64(algbw) },
        ExtraColumn { name: "busbw_gb_s".into(), values: ExtraValues::F64(busbw) },
        ExtraColumn { name: "efficiency".into(), values: ExtraValues::F64(eff) },
        ExtraColumn { name: "parallelism".into(), values: ExtraValues::Str(class) },
    ];
    if with_confidence {
        extra.push(ExtraColumn { name: "fusion_confidence".into(), values: ExtraValues::F64(conf) });
    }
    extra
}
