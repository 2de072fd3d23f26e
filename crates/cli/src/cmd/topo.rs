//! `commlens topo`: the topology NCCL printed (first dump per host) or wrote as
//! XML (`NCCL_TOPO_DUMP_FILE`), its link table, GPU-pair bandwidths, and each
//! communicator's bottleneck link.
//!
//! nccl-tests outputs without a topology give what their `# Rank … on HOST
//! device N [bus] MODEL` lines say: the job's nodes, GPUs per node and models.
//! Files of other kinds (traces, notes) are skipped with a note.
//!
//! Inputs that start with `<system` (after blanks, `<?xml …?>` and comments) are
//! read as topology XML, the rest as logs. An XML topology is shown unless the logs
//! printed a dump for its host: the host is the single log host whose GPUs are all
//! among the XML's GPUs (bus id and rank for a host with a dump, the bus ids of its
//! devices for one without). Matched to a host
//! without a dump, the XML topology takes that host's name (so the communicators'
//! bottlenecks use it); unmatched, it keeps its own (file stem and host hash).

use super::CmdResult;
use commlens_report::render;
use crate::Format;
use commlens_analyze::bottleneck::all_bottlenecks;
use commlens_core::topo::NodeKind;
use commlens_core::{OpTable, Topology};
use commlens_ingest::inputs::{expand_inputs, load_listed_with, InputFormat};
use commlens_ingest::kind::{classify, FileKind};
use commlens_ingest::nccl_tests::{read_nccl_tests, BenchFile};
use commlens_ingest::nccl_log::ReadOptions;
use commlens_ingest::topo_xml::read_topo_xml;
use commlens_ingest::IngestError;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

pub fn run(inputs: &[PathBuf], format: Format, verbose: bool) -> CmdResult {
    // Each file by its kind: topology XML, nccl-tests outputs (their `Rank`
    // lines name the job's GPUs and hosts), logs; the rest holds no topology.
    let mut xml_files = Vec::new();
    let mut logs: Vec<(PathBuf, bool)> = Vec::new();
    let mut bench_files = Vec::new();
    for (p, explicit) in expand_inputs(inputs)? {
        match classify(&p)? {
            FileKind::TopoXml => xml_files.push(p),
            FileKind::Benchmark { nccl_lines } => {
                if nccl_lines {
                    logs.push((p.clone(), false));
                }
                bench_files.push(p);
            }
            FileKind::Ops(InputFormat::NcclLog) => logs.push((p, explicit)),
            k => eprintln!("note: skipped {}: a {}, which holds no topology", p.display(), k.name()),
        }
    }
    let xml_topos: Vec<(PathBuf, Topology)> = xml_files
        .iter()
        .map(|p| read_topo_xml(p).map(|t| (p.clone(), t)))
        .collect::<Result<_, _>>()?;
    let benchmarks: Vec<BenchFile> = bench_files.iter().map(|p| read_nccl_tests(p)).collect::<Result<_, _>>()?;

    let mut table = OpTable::default();
    if !logs.is_empty() {
        let log_paths: Vec<PathBuf> = logs.iter().map(|l| l.0.clone()).collect();
        let (progress, bar) = crate::progress::for_inputs(&log_paths);
        let opts = ReadOptions { progress, ..ReadOptions::default() };
        let res = load_listed_with(&logs, &opts, false, || (), |_: &mut (), _| {});
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        match res {
            Ok((loaded, _)) => {
                eprint!("{}", render::read_summary(&loaded.reports, &loaded.skipped_files, verbose));
                crate::load::eprint_lines(&loaded.notes);
                table = loaded.table;
            }
            Err(IngestError::NoInputs { .. }) if !xml_topos.is_empty() || !benchmarks.is_empty() => {}
            Err(e) => return Err(e.into()),
        }
    }
    for (path, topo) in xml_topos {
        add_xml_topology(&mut table, path, topo);
    }

    let t = &table;
    let mut job = super::stats::Job::of_table(t);
    let bench_job = super::stats::Job::of_benchmarks(&benchmarks);
    if job.nodes == 0 {
        (job.nodes, job.hosts) = (bench_job.nodes, bench_job.hosts.clone());
    }
    if t.topologies.is_empty() && !benchmarks.is_empty() {
        return print_benchmark_gpus(&benchmarks, &job, format);
    }
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
            if format == Format::Csv {
                println!("{}", job.csv());
            } else {
                println!("{}\n", job.line());
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
            let v = serde_json::json!({ "job": job, "topologies": t.topologies, "bottlenecks": b });
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

/// What nccl-tests outputs say of the hardware when no topology was given:
/// per run its hosts, GPUs per host and GPU models.
fn print_benchmark_gpus(files: &[BenchFile], job: &super::stats::Job, format: Format) -> CmdResult {
    eprintln!(
        "note: no topology dump in the inputs; the nccl-tests `Rank` lines name the job's GPUs and hosts \
         (NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,GRAPH prints the topology, NCCL_TOPO_DUMP_FILE writes it)"
    );
    let mut tab = commlens_export::table::Table::new("nccl-tests jobs: GPUs per host", &["file", "run", "host", "GPUs", "GPU model"]);
    for f in files {
        let name = std::path::Path::new(&f.path).file_name().map_or(f.path.clone(), |n| n.to_string_lossy().into_owned());
        for (i, r) in f.runs.iter().enumerate() {
            for (h, n) in r.hosts.iter().zip(&r.gpus_per_host) {
                tab.row(vec![name.clone(), (i + 1).to_string(), h.clone(), n.to_string(), r.gpu_models.join(", ")]);
            }
        }
    }
    match format {
        Format::Json => {
            let runs: Vec<_> = files
                .iter()
                .flat_map(|f| f.runs.iter().map(move |r| (f, r)))
                .map(|(f, r)| {
                    serde_json::json!({ "file": f.path, "ranks": r.ranks, "hosts": r.hosts, "gpus_per_host": r.gpus_per_host, "gpu_models": r.gpu_models })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "job": job, "topologies": [], "nccl_tests_jobs": runs }))?);
        }
        Format::Csv => println!("{}\n# {}\n{}", job.csv(), tab.title, tab.to_csv()),
        Format::Table => println!("{}\n\n{}", job.line(), tab.to_text()),
    }
    Ok(())
}
