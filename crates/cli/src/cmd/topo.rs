//! `commlens topo`: the topology NCCL printed (first dump per host), its link
//! table, GPU-pair bandwidths, and each communicator's bottleneck link.

use super::CmdResult;
use crate::render;
use crate::Format;
use commlens_analyze::bottleneck::all_bottlenecks;
use commlens_ingest::inputs::load_inputs_with;
use commlens_ingest::nccl_log::ReadOptions;
use std::path::PathBuf;

pub fn run(inputs: &[PathBuf], format: Format, verbose: bool) -> CmdResult {
    let (progress, bar) = crate::progress::for_inputs(inputs);
    let opts = ReadOptions { progress, ..ReadOptions::default() };
    let (loaded, _) = load_inputs_with(inputs, &opts, false, || (), |_: &mut (), _| {})?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    eprint!("{}", render::read_summary(&loaded.reports, &loaded.skipped_files, verbose));
    let t = &loaded.table;
    if t.topologies.is_empty() {
        return Err("no topology dump (`=== System : maxBw …`) in the inputs: NCCL prints it at init with \
                    NCCL_DEBUG=INFO when NCCL_DEBUG_SUBSYS includes INIT or GRAPH"
            .into());
    }
    let bottlenecks = all_bottlenecks(t);
    match format {
        Format::Table | Format::Csv => {
            let mut tables = Vec::new();
            for topo in &t.topologies {
                tables.extend(render::topology_tables(topo));
            }
            if !bottlenecks.is_empty() {
                tables.push(render::bottleneck_table(t, &bottlenecks));
            }
            for tab in tables {
                if format == Format::Csv {
                    println!("# {}\n{}", tab.title, tab.to_csv());
                } else {
                    println!("{}", tab.to_text());
                }
            }
        }
        Format::Json => {
            let b: Vec<_> = bottlenecks
                .iter()
                .map(|(l, b)| serde_json::json!({ "communicator": t.logical[l.ix()].name, "bottleneck": b }))
                .collect();
            let v = serde_json::json!({ "topologies": t.topologies, "bottlenecks": b });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    Ok(())
}
