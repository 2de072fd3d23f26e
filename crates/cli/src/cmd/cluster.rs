//! `commlens cluster`: the cluster descriptions of the collective model.
//!
//! * `cluster list`: the presets with their descriptions;
//! * `cluster show X`: one cluster, where X is a preset name, a TOML file
//!   (`examples/cluster.toml`), or any input commlens reads (NCCL logs or a
//!   folder of them, topology XML, nccl-tests output): then the cluster the
//!   run ran on, its facts taken from the topology dumps and XML, the init
//!   and network lines and the nccl-tests headers, the rest from the preset
//!   of its GPU. `--nic`, `--nodes` and `--gpus-per-node` override.

use super::CmdResult;
use commlens_ingest::lines::LineSource;
use commlens_ingest::lines_mapped::FileLines;
use commlens_ingest::nccl_log::ReadOptions;
use commlens_ingest::nccl_tests::{read_nccl_tests, BenchRun};
use commlens_ingest::topo_xml::{is_topo_xml, read_topo_xml};
use commlens_ingest::{expand_inputs, IngestError};
use commlens_model::cluster_toml::cluster_from_toml;
use commlens_model::from_run::{cluster_from_facts, facts_from_table, RunFacts};
use commlens_model::presets::{preset, PRESETS};
use commlens_model::show::render_cluster;
use commlens_model::Cluster;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ClusterFormat {
    #[default]
    Text,
    Json,
}

#[derive(clap::Subcommand)]
pub enum ClusterCmd {
    /// Shows one cluster: a preset (`dgx-h100`), a TOML file, or the cluster
    /// a run ran on (NCCL logs or a folder, topology XML, nccl-tests output).
    Show {
        /// Preset name, `.toml` file, or inputs of a run.
        what: PathBuf,
        /// NICs per node and line rate, `COUNTxSPEED`: `8x400g`, `4x200`.
        #[arg(long)]
        nic: Option<String>,
        /// Number of nodes.
        #[arg(long)]
        nodes: Option<u32>,
        /// GPUs per node.
        #[arg(long)]
        gpus_per_node: Option<u32>,
        #[arg(long, value_enum, default_value_t = ClusterFormat::Text)]
        format: ClusterFormat,
    },
    /// Lists the presets.
    List,
}

pub fn run(cmd: ClusterCmd) -> CmdResult {
    match cmd {
        ClusterCmd::List => {
            let width = PRESETS.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
            for (name, desc) in PRESETS {
                println!("{name:<width$}  {desc}");
            }
            Ok(())
        }
        ClusterCmd::Show { what, nic, nodes, gpus_per_node, format } => {
            let mut c = resolve(&what)?;
            if let Some(spec) = nic {
                c.set_nics(&spec)?;
            }
            if let Some(n) = nodes {
                if n == 0 {
                    return Err("--nodes: expected at least 1".into());
                }
                c.nodes = n;
                c.provenance.push(format!("{n} nodes from --nodes"));
            }
            if let Some(g) = gpus_per_node {
                if g == 0 {
                    return Err("--gpus-per-node: expected at least 1".into());
                }
                if c.intra.nvlink_domain == c.gpus_per_node && c.intra.nvlink_domain > 1 {
                    c.intra.nvlink_domain = g;
                }
                c.gpus_per_node = g;
                c.provenance.push(format!("{g} GPUs per node from --gpus-per-node"));
            }
            match format {
                ClusterFormat::Text => print!("{}", render_cluster(&c)),
                ClusterFormat::Json => println!("{}", serde_json::to_string_pretty(&c)?),
            }
            Ok(())
        }
    }
}

fn preset_list() -> String {
    PRESETS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// A preset, a TOML file or a run.
pub(crate) fn resolve(what: &Path) -> Result<Cluster, Box<dyn std::error::Error>> {
    let text = what.to_string_lossy();
    if !what.exists() {
        if let Some(c) = preset(&text) {
            return Ok(c);
        }
        return Err(format!(
            "'{text}' is neither a cluster preset nor a file or folder; presets: {} (`commlens cluster list` describes them)",
            preset_list()
        )
        .into());
    }
    let is_toml = what.is_file() && what.extension().is_some_and(|x| x.eq_ignore_ascii_case("toml"));
    if is_toml {
        let body = std::fs::read_to_string(what).map_err(|e| format!("{}: {e}", what.display()))?;
        return Ok(cluster_from_toml(&body, &what.display().to_string())?);
    }
    from_run(what)
}

/// What an nccl-tests table's header says: ranks, hosts, GPU names.
pub fn facts_from_bench(run: &BenchRun) -> RunFacts {
    RunFacts { ranks: run.ranks, hosts: run.hosts.clone(), gpu_names: run.gpu_models.clone(), ..RunFacts::default() }
}

/// The cluster a run ran on (see the module documentation).
pub(crate) fn from_run(input: &Path) -> Result<Cluster, Box<dyn std::error::Error>> {
    let files = expand_inputs(&[input.to_path_buf()])?;
    let mut facts = RunFacts::default();
    let mut xml = Vec::new();
    let mut others = Vec::new();
    for (p, _) in &files {
        if is_topo_xml(p)? {
            xml.push(p.clone());
        } else {
            others.push(p.clone());
        }
    }
    let label = |p: &Path| p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned());
    for p in &xml {
        let topo = read_topo_xml(p)?;
        let body = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        facts.note_topo_xml(&body, &label(p));
        facts.topologies.push(topo);
    }
    // Lines first: they say the most specific transport (RoCE over `NET/IB`).
    for p in &others {
        scan_lines(p, &label(p), &mut facts)?;
        if let Ok(bench) = read_nccl_tests(p) {
            for r in &bench.runs {
                facts.merge(facts_from_bench(r));
            }
        }
    }
    if !others.is_empty() {
        // The log reader walks the input again (it skips the XML files found in a folder).
        match crate::load::load(&[input.to_path_buf()], &ReadOptions::default()) {
            Ok(loaded) => facts.merge(facts_from_table(&loaded.table)),
            Err(e) => {
                let known = !facts.topologies.is_empty() || !facts.gpu_names.is_empty() || facts.ranks > 0;
                if !known {
                    return Err(e);
                }
                // Not a log (nccl-tests output alone, an XML): expected, say nothing.
                let expected = e.downcast_ref::<IngestError>().is_some_and(|e| {
                    matches!(e, IngestError::NotNcclLog { .. } | IngestError::NoInputs { .. })
                });
                if !expected {
                    eprintln!("note: {}: no NCCL log read ({e}); the cluster comes from the other facts", input.display());
                }
            }
        }
    }
    if facts.topologies.is_empty() && facts.gpu_names.is_empty() && facts.ranks == 0 && facts.hosts.is_empty() {
        return Err(format!(
            "{}: no topology, GPU name, rank or host in the inputs: nothing to build a cluster from \
             (name a preset instead: {})",
            input.display(),
            preset_list()
        )
        .into());
    }
    let mut c = cluster_from_facts(&facts, None)?;
    c.name = format!("from {}", label(input));
    Ok(c)
}

/// Feeds every line of a file (plain or gzip) to [`RunFacts::note_log_line`].
fn scan_lines(path: &Path, label: &str, facts: &mut RunFacts) -> Result<(), Box<dyn std::error::Error>> {
    let mut lines = FileLines::open(path, 1 << 20, true).map_err(|e| format!("{}: {e}", path.display()))?;
    while let Some(raw) = lines.next_line().map_err(|e| format!("{}: {e}", path.display()))? {
        match std::str::from_utf8(raw) {
            Ok(s) => facts.note_log_line(s, label),
            Err(_) => facts.note_log_line(&String::from_utf8_lossy(raw), label),
        }
    }
    Ok(())
}
