//! `commlens topo`: the topology NCCL printed (first dump per host) or wrote as
//! XML (`NCCL_TOPO_DUMP_FILE`), its link table, GPU-pair bandwidths, and each
//! communicator's bottleneck link.
//!
//! Inputs that start with `<system` (after blanks, `<?xml …?>` and comments) are
//! read as topology XML, the rest as logs. An XML topology is shown unless the logs
//! printed a dump for its host: the host is the single log host whose GPUs are all
//! among the XML's GPUs (bus id and rank for a host with a dump, the bus ids of its
//! devices for one without). Matched to a host
//! without a dump, the XML topology takes that host's name (so the communicators'
//! bottlenecks use it); unmatched, it keeps its own (file stem and host hash).

use super::CmdResult;
use crate::render;
use crate::Format;
use commlens_analyze::bottleneck::all_bottlenecks;
use commlens_core::topo::NodeKind;
use commlens_core::{OpTable, Topology};
use commlens_ingest::inputs::{expand_inputs, load_inputs_with};
use commlens_ingest::nccl_log::ReadOptions;
use commlens_ingest::topo_xml::{is_topo_xml, read_topo_xml};
use commlens_ingest::IngestError;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

pub fn run(inputs: &[PathBuf], format: Format, verbose: bool) -> CmdResult {
    let files = expand_inputs(inputs)?;
    let mut xml_files = Vec::new();
    for (p, _) in &files {
        if is_topo_xml(p)? {
            xml_files.push(p.clone());
        }
    }
    let xml_topos: Vec<(PathBuf, Topology)> = xml_files
        .iter()
        .map(|p| read_topo_xml(p).map(|t| (p.clone(), t)))
        .collect::<Result<_, _>>()?;

    // Logs: the named inputs except the XML files (folders are read whole; the XML
    // files found in them are skipped by the log reader and taken out of its notes).
    let log_inputs: Vec<PathBuf> = inputs
        .iter()
        .filter(|p| !xml_files.contains(p))
        .cloned()
        .collect();
    let mut table = OpTable::default();
    if files.len() > xml_files.len() {
        let (progress, bar) = crate::progress::for_inputs(&log_inputs);
        let opts = ReadOptions {
            progress,
            ..ReadOptions::default()
        };
        let res = load_inputs_with(&log_inputs, &opts, false, || (), |_: &mut (), _| {});
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        match res {
            Ok((mut loaded, _)) => {
                loaded.skipped_files.retain(|(p, _)| !xml_files.contains(p));
                eprint!(
                    "{}",
                    render::read_summary(&loaded.reports, &loaded.skipped_files, verbose)
                );
                loaded.notes.iter().for_each(|n| eprintln!("{n}"));
                table = loaded.table;
            }
            Err(IngestError::NoInputs { .. }) if !xml_topos.is_empty() => {}
            Err(e) => return Err(e.into()),
        }
    }
    for (path, topo) in xml_topos {
        add_xml_topology(&mut table, path, topo);
    }

    let t = &table;
    if t.topologies.is_empty() {
        return Err("no topology dump (`=== System : maxBw …`) in the inputs: NCCL prints it at init with \
                    NCCL_DEBUG=INFO when NCCL_DEBUG_SUBSYS includes INIT or GRAPH, and writes it as XML \
                    to NCCL_TOPO_DUMP_FILE=path (which `commlens topo` also reads)"
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

/// (bus id, rank) of the GPUs of a topology.
fn gpu_keys(t: &Topology) -> BTreeSet<(u64, Option<u32>)> {
    t.nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Gpu)
        .filter_map(|n| n.bus_id.map(|b| (b, n.rank)))
        .collect()
}

/// Adds an XML topology to the table unless the logs printed one for its host (see
/// the module doc), with a note on stderr saying what was done. A log host with a
/// dump is the XML's when every GPU of the dump, as (bus id, rank), is a GPU of the
/// XML (both give the rank in the communicator that wrote them); a host without
/// dump when the bus ids of its devices are (their global ranks depend on which logs
/// were read together). Only a single such host counts.
fn add_xml_topology(table: &mut OpTable, path: PathBuf, mut topo: Topology) {
    let mine = gpu_keys(&topo);
    let my_buses: BTreeSet<u64> = mine.iter().map(|k| k.0).collect();
    let mut device_buses: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for d in &table.devices {
        let host = table.processes[d.proc.ix()].host.as_str();
        device_buses.entry(host).or_default().extend(d.bus_id);
    }
    let mut matches: Vec<&str> = table
        .topologies
        .iter()
        .filter(|t| !gpu_keys(t).is_empty() && gpu_keys(t).is_subset(&mine))
        .map(|t| t.host.as_str())
        .collect();
    matches.extend(
        device_buses
            .iter()
            .filter(|(h, b)| {
                table.topology_of_host(h).is_none() && !b.is_empty() && b.is_subset(&my_buses)
            })
            .map(|(h, _)| *h),
    );
    let counts = format!(
        "{} GPUs, {} CPUs, {} NICs",
        mine.len(),
        topo.nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Cpu)
            .count(),
        topo.nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Nic)
            .count()
    );
    match matches.as_slice() {
        [host] if table.topology_of_host(host).is_some() => eprintln!(
            "{}: NCCL topology XML of {} ({counts}): same GPUs as host {host}, whose logged dump is shown instead",
            path.display(),
            topo.host
        ),
        [host] => {
            eprintln!("{}: NCCL topology XML of {} ({counts}), used for host {host} (same GPU bus ids)", path.display(), topo.host);
            topo.host = host.to_string();
            table.topologies.push(topo);
        }
        _ => {
            eprintln!("{}: NCCL topology XML of {} ({counts})", path.display(), topo.host);
            table.topologies.push(topo);
        }
    }
}
