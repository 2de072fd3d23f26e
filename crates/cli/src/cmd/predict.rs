//! `commlens predict`: what NCCL should reach on a cluster, as an nccl-tests
//! style table (time, algbw, busbw, with NCCL's algorithm, protocol and
//! channels per row), or measured against predicted for an nccl-tests output
//! (`--against FILE`), the cluster built from the file unless `--cluster` says.

use std::path::{Path, PathBuf};

use commlens_core::OpKind;
use commlens_ingest::nccl_tests::{read_nccl_tests, BenchRun};
use commlens_model::alt::{alt_time_us, AltAlgo};
use commlens_model::from_run::cluster_from_facts;
use commlens_model::predict::{Prediction, DEFAULT_VERSION};
use commlens_model::presets::{preset, PRESETS};
use commlens_model::tuner::NcclEnv;
use commlens_model::{Cluster, Predictor};
use serde::Serialize;

use super::CmdResult;
use crate::Format;

/// Arguments of `commlens predict`.
pub struct PredictArgs<'a> {
    pub collective: Option<&'a str>,
    pub cluster: Option<&'a str>,
    pub nic: Option<&'a str>,
    pub nodes: u32,
    pub gpus_per_node: Option<u32>,
    pub min_bytes: &'a str,
    pub max_bytes: &'a str,
    pub factor: u64,
    pub against: Option<&'a Path>,
    pub nccl_version: Option<&'a str>,
    /// An NCCL algorithm (`ring`, `tree`, `nvls`, … as `NCCL_ALGO`) or one of
    /// the seeds' alternatives (`pccl`, `ncclx-bruck`, … see `commlens_model::alt`).
    pub algo: Option<&'a str>,
    pub format: Format,
}

/// Parses `8`, `8K`, `64M`, `8G`, `1T` (powers of 1024, as nccl-tests reads `-b`/`-e`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let v: u64 = num.parse().map_err(|_| format!("size '{s}': expected a number with an optional K/M/G/T suffix"))?;
    v.checked_mul(mult).ok_or_else(|| format!("size '{s}' is too large"))
}

fn kind_of(name: &str) -> Result<OpKind, String> {
    let key: String = name.chars().filter(|c| *c != '_' && *c != '-').collect::<String>().to_ascii_lowercase();
    let key = key.trim_end_matches("perf");
    Ok(match key {
        "allreduce" => OpKind::AllReduce,
        "allgather" => OpKind::AllGather,
        "reducescatter" => OpKind::ReduceScatter,
        "broadcast" => OpKind::Broadcast,
        "reduce" => OpKind::Reduce,
        "alltoall" => OpKind::AllToAll,
        "sendrecv" => OpKind::SendRecv,
        _ => {
            return Err(format!(
                "unknown collective '{name}': expected all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall or sendrecv"
            ))
        }
    })
}

fn named_cluster(name: &str) -> Result<Cluster, String> {
    preset(name).ok_or_else(|| {
        let names: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
        format!("unknown cluster '{name}': presets are {}", names.join(", "))
    })
}

fn version(v: Option<&str>) -> Result<commlens_core::NcclVersion, String> {
    match v {
        None => Ok(DEFAULT_VERSION),
        Some(s) => commlens_core::NcclVersion::parse(s.as_bytes())
            .ok_or_else(|| format!("--nccl-version {s}: expected MAJOR.MINOR.PATCH such as 2.27.7")),
    }
}

/// `--algo`: NCCL's own algorithms go through `NCCL_ALGO`; anything else
/// must be one of the alternatives.
enum AlgoChoice {
    Nccl(String),
    Alt(AltAlgo),
}

fn algo_choice(name: &str) -> Result<AlgoChoice, String> {
    let nccl = name.split(',').all(|n| {
        let n = n.trim().trim_start_matches('^');
        commlens_core::Algorithm::from_name(n.as_bytes()).is_some()
    });
    if nccl {
        return Ok(AlgoChoice::Nccl(name.to_string()));
    }
    AltAlgo::from_name(name).map(AlgoChoice::Alt).ok_or_else(|| {
        let alts: Vec<&str> = AltAlgo::ALL.iter().map(|a| a.name()).collect();
        format!("--algo {name}: expected an NCCL algorithm (ring, tree, nvls, nvls_tree, collnet_direct, collnet_chain, pat) or one of {}", alts.join(", "))
    })
}

pub fn run(a: &PredictArgs<'_>) -> CmdResult {
    let mut env = NcclEnv::from_lookup(|k| std::env::var(k).ok());
    let alt = match a.algo.map(algo_choice).transpose()? {
        Some(AlgoChoice::Nccl(list)) => {
            env.algo = Some(list);
            None
        }
        Some(AlgoChoice::Alt(x)) => Some(x),
        None => None,
    };
    let v = version(a.nccl_version)?;
    if let Some(file) = a.against {
        return against(file, a, v, env);
    }
    let coll = a.collective.ok_or("predict: name a collective (all_reduce, …) or pass --against FILE")?;
    let kind = kind_of(coll)?;
    let mut cluster = named_cluster(a.cluster.unwrap_or("dgx-h100"))?;
    if let Some(nic) = a.nic {
        cluster.set_nics(nic)?;
    }
    if let Some(g) = a.gpus_per_node {
        cluster.gpus_per_node = g.max(1);
    }
    let nodes = a.nodes.max(1);
    cluster.nodes = nodes;
    let ranks = nodes.saturating_mul(cluster.gpus_per_node);
    if ranks > commlens_model::predict::MAX_RANKS {
        return Err(format!("{ranks} ranks: the model times communicators of up to {} ranks", commlens_model::predict::MAX_RANKS).into());
    }
    let (min, max) = (parse_size(a.min_bytes)?, parse_size(a.max_bytes)?);
    if min == 0 || max < min {
        return Err(format!("sizes: expected 0 < -b {min} ≤ -e {max}").into());
    }
    let p = Predictor::new(&cluster, ranks, nodes, v, env);
    let rows = p.sweep(kind, min, max, a.factor.max(2));
    if let Some(alt) = alt {
        return print_alt(alt, kind, &rows, ranks, nodes, &cluster, a.format);
    }
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
        _ => {
            println!(
                "# {} on {} x {} ({} ranks, {} nodes), NCCL {}.{}.{} model",
                kind.name(),
                cluster.name,
                cluster.gpus_per_node,
                ranks,
                nodes,
                v.major,
                v.minor,
                v.patch
            );
            println!("{:>14} {:>12} {:>10} {:>8} {:>8}  {:<9} {:<7} {:>3}  bottleneck", "size(B)", "time(us)", "algbw", "busbw", "nccl(us)", "algo", "proto", "ch");
            for r in &rows {
                print_row(r);
            }
        }
    }
    Ok(())
}

/// One row of an alternative algorithm against NCCL's prediction.
#[derive(Debug, Serialize)]
struct AltRow {
    size_bytes: u64,
    algo: &'static str,
    formula: &'static str,
    time_us: f64,
    algbw_gb_s: f64,
    busbw_gb_s: f64,
    nccl_algo: Option<&'static str>,
    nccl_time_us: f64,
    /// NCCL's predicted time over the alternative's (> 1: the alternative is faster).
    speedup: f64,
}

fn print_alt(
    alt: AltAlgo,
    kind: OpKind,
    nccl: &[Prediction],
    ranks: u32,
    nodes: u32,
    cluster: &Cluster,
    format: Format,
) -> CmdResult {
    if !alt.serves(kind) {
        return Err(format!("--algo {}: does not implement {}", alt.name(), kind.name()).into());
    }
    let rows: Vec<AltRow> = nccl
        .iter()
        .filter_map(|n| {
            let x = alt_time_us(alt, kind, n.size_bytes, ranks, nodes, cluster)?;
            Some(AltRow {
                size_bytes: n.size_bytes,
                algo: alt.name(),
                formula: x.formula,
                time_us: x.time_us,
                algbw_gb_s: x.algbw_gb_s,
                busbw_gb_s: x.busbw_gb_s,
                nccl_algo: n.algo.map(|a| a.name()),
                nccl_time_us: n.time_us,
                speedup: if x.time_us > 0.0 { n.time_us / x.time_us } else { 0.0 },
            })
        })
        .collect();
    if rows.is_empty() {
        return Err(format!("--algo {}: not defined for {ranks} ranks on {nodes} nodes", alt.name()).into());
    }
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
        _ => {
            println!("# {} with {} ({}) on {} x {} ({ranks} ranks, {nodes} nodes), against NCCL's choice", kind.name(), alt.name(), rows[0].formula, cluster.name, cluster.gpus_per_node);
            println!("{:>14} {:>12} {:>10} {:>8}  {:>12} {:<9} {:>8}", "size(B)", "time(us)", "algbw", "busbw", "nccl(us)", "nccl algo", "speedup");
            for r in &rows {
                println!(
                    "{:>14} {:>12.2} {:>10.2} {:>8.2}  {:>12.2} {:<9} {:>7.2}x",
                    r.size_bytes, r.time_us, r.algbw_gb_s, r.busbw_gb_s, r.nccl_time_us, r.nccl_algo.unwrap_or("p2p"), r.speedup
                );
            }
        }
    }
    Ok(())
}

fn print_row(r: &Prediction) {
    println!(
        "{:>14} {:>12.2} {:>10.2} {:>8.2} {:>8}  {:<9} {:<7} {:>3}  {}",
        r.size_bytes,
        r.time_us,
        r.algbw_gb_s,
        r.busbw_gb_s,
        r.nccl_time_us.map_or("-".into(), |t| format!("{t:.1}")),
        r.algo.map_or("p2p", |x| x.name()),
        r.proto.map_or("-", |x| x.name()),
        r.n_channels,
        r.bottleneck.name()
    )
}

/// One row of `--against`.
#[derive(Debug, Serialize)]
pub struct AgainstRow {
    pub file: String,
    pub collective: &'static str,
    pub ranks: u32,
    pub nodes: u32,
    pub size: u64,
    pub measured_busbw: f64,
    pub predicted_busbw: f64,
    /// (predicted − measured) / measured; none for single-rank runs.
    pub error: Option<f64>,
    pub algorithm: Option<&'static str>,
    pub protocol: Option<&'static str>,
    pub channels: u32,
}

fn against(file: &Path, a: &PredictArgs<'_>, v: commlens_core::NcclVersion, env: NcclEnv) -> CmdResult {
    let bench = read_nccl_tests(file)?;
    if bench.runs.iter().all(|r| r.rows.is_empty()) {
        return Err(format!("{}: no nccl-tests result table found", file.display()).into());
    }
    let file_cluster = if a.cluster.is_none() { super::cluster::from_run(file).ok() } else { None };
    let logged = commlens_ingest::inputs::load_any(&[PathBuf::from(file)], &Default::default()).ok();
    let mut out = Vec::new();
    for run in &bench.runs {
        let Some(kind) = run.kind else { continue };
        let cluster = cluster_for(&file_cluster, run, a)?;
        let nodes = run.hosts.len().max(1) as u32;
        // One thread driving several GPUs launches each call on all of them in turn.
        let p = predictor_for(logged.as_ref().map(|l| &l.table), &cluster, run, v, &env).with_gpus_per_thread(run.gpus_per_thread);
        for r in &run.rows {
            let pred = p.predict(kind, r.bytes);
            let measured = r.out_of_place.busbw_gb_s;
            let error = (run.ranks > 1 && measured > 0.0).then(|| (pred.busbw_gb_s - measured) / measured);
            out.push(AgainstRow {
                file: file.display().to_string(),
                collective: kind.name(),
                ranks: run.ranks,
                nodes,
                size: r.bytes,
                measured_busbw: measured,
                predicted_busbw: pred.busbw_gb_s,
                error,
                algorithm: pred.algo.map(|x| x.name()),
                protocol: pred.proto.map(|x| x.name()),
                channels: pred.n_channels,
            });
        }
    }
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out)?),
        _ => {
            println!("{:<13} {:>5} {:>5} {:>14} {:>10} {:>10} {:>8}  {:<9} {:<7}", "collective", "ranks", "nodes", "size(B)", "measured", "predicted", "error", "algo", "proto");
            for r in &out {
                println!(
                    "{:<13} {:>5} {:>5} {:>14} {:>10.2} {:>10.2} {:>8}  {:<9} {:<7}",
                    r.collective,
                    r.ranks,
                    r.nodes,
                    r.size,
                    r.measured_busbw,
                    r.predicted_busbw,
                    r.error.map_or("-".into(), |e| format!("{:+.1}%", e * 100.0)),
                    r.algorithm.unwrap_or("p2p"),
                    r.protocol.unwrap_or("-")
                );
            }
            let mut errs: Vec<f64> = out.iter().filter_map(|r| r.error.map(f64::abs)).collect();
            errs.sort_by(|x, y| x.total_cmp(y));
            if !errs.is_empty() {
                eprintln!("{} rows; median |error| {:.1} %", errs.len(), errs[errs.len() / 2] * 100.0);
            }
        }
    }
    Ok(())
}

/// The cluster a benchmark ran on: `--cluster` when given, else from the
/// file (GPU names, hosts and ranks of its tables; the topology, network and
/// plugin lines of an NCCL log sharing the file), built once per file.
fn cluster_for(file_cluster: &Option<Cluster>, run: &BenchRun, a: &PredictArgs<'_>) -> Result<Cluster, String> {
    let mut c = match (a.cluster, file_cluster) {
        (Some(name), _) => named_cluster(name)?,
        (None, Some(c)) => c.clone(),
        (None, None) => {
            let facts = super::cluster::facts_from_bench(run);
            cluster_from_facts(&facts, None)?
        }
    };
    if let Some(nic) = a.nic {
        c.set_nics(nic)?;
    }
    let hosts = run.hosts.len().max(1) as u32;
    c.nodes = hosts;
    if run.ranks > 0 {
        c.gpus_per_node = run.ranks.div_ceil(hosts).max(1);
    }
    if let Some(g) = a.gpus_per_node {
        c.gpus_per_node = g;
    }
    Ok(c)
}

/// A predictor from NCCL's own search graphs when the file is a log whose
/// benchmark communicator logged them (same rank count), else from the cluster.
fn predictor_for(
    logged: Option<&commlens_core::OpTable>,
    cluster: &Cluster,
    run: &BenchRun,
    v: commlens_core::NcclVersion,
    env: &NcclEnv,
) -> Predictor {
    if let Some(t) = logged {
        let comm = t.comms.iter().enumerate().find(|(i, c)| {
            c.nranks == Some(run.ranks)
                && commlens_model::tuner::logged::logged_graphs(t, commlens_core::CommIdx(*i as u32)).is_some()
        });
        if let Some((i, c)) = comm {
            let version = t.processes[c.proc.ix()].nccl_version.unwrap_or(v);
            if let Some(p) = Predictor::for_comm(cluster, t, commlens_core::CommIdx(i as u32), version, env.clone()) {
                return p;
            }
        }
    }
    let nodes = run.hosts.len().max(1) as u32;
    Predictor::new(cluster, run.ranks.max(1), nodes, v, env.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_names() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("8G").unwrap(), 8 << 30);
        assert_eq!(parse_size("64m").unwrap(), 64 << 20);
        assert!(parse_size("x").is_err());
        assert_eq!(kind_of("all_reduce").unwrap(), OpKind::AllReduce);
        assert_eq!(kind_of("alltoall_perf").unwrap(), OpKind::AllToAll);
        assert!(kind_of("scan").is_err());
    }
}
