//! `commlens export -o OUT INPUTS…`: the canonical table of any inputs as one
//! Parquet file (schema: `crates/parquet/SCHEMA.md`), for pandas, DuckDB or
//! Spark; with `--partition host|rank`, as shards of a Hive-partitioned
//! dataset in the folder OUT (`OUT/host=<name>/part-<run>.parquet`), so
//! that one export per node (a Slurm array) fills one dataset that every
//! table command, DuckDB and Spark read whole.

use super::CmdResult;
use commlens_report::enrich::Enrichment;
use commlens_ingest::nccl_log::ReadOptions;
use commlens_parquet::dataset::{may_hold_dataset, PartitionKey};
use std::path::{Path, PathBuf};

pub fn run(inputs: &[PathBuf], out: &Path, partition: Option<&str>) -> CmdResult {
    let key = match partition {
        None => {
            if out.is_dir() {
                return Err(format!(
                    "{} is a folder: give a file name to write one Parquet file, or --partition host|rank \
                     to write a partitioned dataset into the folder",
                    out.display()
                )
                .into());
            }
            None
        }
        Some(k) => Some(dataset_target(k, out)?),
    };
    let (progress, bar) = crate::progress::for_inputs(inputs);
    let mut loaded = crate::load::load(inputs, &ReadOptions { progress, samples: false, ..ReadOptions::default() })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    crate::load::drop_read_state(&mut loaded);
    if loaded.table.n_ops() == 0 {
        return Err("no NCCL operations in the inputs: nothing to export".into());
    }
    let enrich = Enrichment::new(&loaded.table);
    let Some(key) = key else {
        let s = crate::parquet_out::write(&loaded.table, &enrich, false, out)?;
        println!(
            "wrote {}: {} rows in {} row groups, {} columns, {}",
            out.display(),
            s.rows,
            s.row_groups,
            s.columns,
            commlens_export::human_bytes(s.bytes_written)
        );
        return Ok(());
    };
    let shards = crate::parquet_out::write_dataset(&loaded.table, &enrich, key, out)?;
    let rows: u64 = shards.iter().map(|s| s.summary.rows).sum();
    let bytes: u64 = shards.iter().map(|s| s.summary.bytes_written).sum();
    for s in shards.iter().take(8) {
        println!("wrote {}: {} rows", s.path.display(), s.summary.rows);
    }
    if shards.len() > 8 {
        println!("… and {} more shards", shards.len() - 8);
    }
    println!(
        "dataset {} ({}=…): {} shard{}, {rows} rows, {}",
        out.display(),
        key.name(),
        shards.len(),
        if shards.len() == 1 { "" } else { "s" },
        commlens_export::human_bytes(bytes)
    );
    Ok(())
}

/// The partition key, once `out` is known to be a folder a dataset can go
/// in: new, empty, or already a dataset (other nodes' runs may be writing
/// into it right now).
fn dataset_target(key: &str, out: &Path) -> Result<PartitionKey, Box<dyn std::error::Error>> {
    let names: Vec<&str> = PartitionKey::ALL.iter().map(|k| k.name()).collect();
    let key = PartitionKey::parse(key)
        .ok_or_else(|| format!("unknown partition key `{key}`: --partition takes {}", names.join(" or ")))?;
    let looks_like_file = out.extension().is_some_and(|x| x.eq_ignore_ascii_case("parquet"));
    if out.exists() && !out.is_dir() || looks_like_file && !out.is_dir() {
        return Err(format!(
            "--partition writes a dataset folder, but {} {}: name a folder (`-o DIR`), or leave out --partition \
             to write one file",
            out.display(),
            if out.exists() { "is a file" } else { "names a .parquet file" }
        )
        .into());
    }
    if out.is_dir() {
        let ok = may_hold_dataset(out).map_err(|e| format!("{}: {e}", out.display()))?;
        if !ok {
            return Err(format!(
                "{} holds other files and no partitioned dataset: name a new or empty folder, or the folder of \
                 an existing dataset to add shards to it",
                out.display()
            )
            .into());
        }
    }
    Ok(key)
}
