//! `commlens export --parquet OUT INPUTS…`: the canonical table of any inputs
//! as one Parquet file (schema: `crates/parquet/SCHEMA.md`), for pandas,
//! DuckDB or Spark.

use super::CmdResult;
use crate::enrich::Enrichment;
use commlens_ingest::nccl_log::ReadOptions;
use std::path::{Path, PathBuf};

pub fn run(inputs: &[PathBuf], parquet: &Path) -> CmdResult {
    let (progress, bar) = crate::progress::for_inputs(inputs);
    let loaded = crate::load::load(inputs, &ReadOptions { progress, ..ReadOptions::default() })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if loaded.table.n_ops() == 0 {
        return Err("no NCCL operations in the inputs: nothing to export".into());
    }
    let enrich = Enrichment::new(&loaded.table);
    let s = crate::parquet_out::write(&loaded.table, &enrich, false, parquet)?;
    println!(
        "wrote {}: {} rows in {} row groups, {} columns, {}",
        parquet.display(),
        s.rows,
        s.row_groups,
        s.columns,
        commlens_export::human_bytes(s.bytes_written)
    );
    Ok(())
}
