//! `commlens simulate WORKLOAD --cluster X [--mode analytical|flow] -o DIR`: a training job
//! simulated on a cluster, written as the canonical table so every other command reads it.
//!
//! Owns the choice of front end (a `model.conf`: Megatron-LM, or with `framework =
//! deepspeed|fsdp|axonn|ted` that framework's program; an AICB/SimAI workload file, Chakra
//! execution traces, or a measured run to replay), of the cluster (preset, TOML or a run),
//! compute model (roofline on the cluster's GPU, or measured kernels with `--kernels`) and
//! network backend (analytical, flow-level, or SimAI 1.6's busbw rule with `--simai-nv`),
//! and the outputs: `simulated.parquet` (Simulated rows), `summary.json`, SimAI's summary
//! line (`EndToEnd.csv`), `links.csv`, and Chrome/Perfetto traces with compute spans.

use super::CmdResult;
use commlens_report::enrich::Enrichment;
use commlens_core::OpTable;
use commlens_export::{chrome, perfetto, TimeRange, TraceOptions};
use commlens_ingest::nccl_log::ReadOptions;
use commlens_model::tuner::NcclEnv;
use commlens_model::Cluster;
use commlens_sim::compute::{ComputeCost, KernelCost, KernelTable, Roofline};
use commlens_sim::engine::{self, EngineOptions, Run};
use commlens_sim::network::Network;
use commlens_core::timing::Phase;
use commlens_sim::{analytical, flow, output, simai};
use commlens_workload::{aicb, chakra, megatron, replay, GroupKind, Workload};
use rayon::prelude::*;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Per-collective time from the collective model; concurrent operations share NICs and NVLink by count.
    Analytical,
    /// Max-min fair rates over the cluster's links (rails, ECMP, oversubscription).
    Flow,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadKind {
    Auto,
    ModelConf,
    Aicb,
    Chakra,
    Run,
}

pub struct SimulateArgs<'a> {
    pub workload: &'a [PathBuf],
    pub kind: WorkloadKind,
    pub cluster: Option<&'a Path>,
    pub nic: Option<&'a str>,
    pub gpus: Option<u32>,
    pub mode: Mode,
    pub scale_network: f64,
    pub kernels: &'a [PathBuf],
    pub kineto: &'a [PathBuf],
    pub trace_set: Option<&'a str>,
    pub simai_nv: Option<f64>,
    pub simai_nic: Option<f64>,
    pub simai_nics_per_server: u32,
    pub expand: bool,
    pub out: &'a Path,
    pub json: bool,
    /// `KEY=V1,V2,…`: one run per value, on every core (`sweep.rs`).
    pub sweep: Option<&'a str>,
    /// Write the outputs without printing the summary (the sweep prints one table).
    pub quiet: bool,
}

/// Ops above which the traces are not written (they would be larger than useful).
const TRACE_MAX_OPS: usize = 2_000_000;
/// Compute spans drawn in the traces at most.
const TRACE_MAX_SPANS: usize = 500_000;

pub fn run(a: &SimulateArgs<'_>) -> CmdResult {
    // Flags are checked before the workload is read (which may take long, or fail on its own).
    check_scale(a.scale_network)?;
    if let Some(spec) = a.sweep {
        return super::simulate_sweep::run(a, spec);
    }
    let whole = Phase::start("simulate (all phases)");
    let w = checked_workload(a)?;
    run_on(a, &w)?;
    whole.end();
    Ok(())
}

fn check_scale(f: f64) -> Result<(), String> {
    if f.is_finite() && f > 0.0 {
        Ok(())
    } else {
        Err(format!("--scale-network {f}: expected a positive factor"))
    }
}

/// The workload of `a`, with Kineto compute times attached when given, checked.
pub(crate) fn checked_workload(a: &SimulateArgs<'_>) -> Result<Workload, Box<dyn std::error::Error>> {
    let ph = Phase::start("workload build");
    let mut w = load_workload(a)?;
    if !a.kineto.is_empty() {
        let paths: Vec<&Path> = a.kineto.iter().map(PathBuf::as_path).collect();
        // The ET is the host's program: each op takes its share of the CPU timeline (at least
        // its GPU time), as a launch-bound step really does.
        let rep = chakra::attach_kineto_times_with(&mut w, &paths, chakra::AttachOptions { host_time: true })?;
        w.notes.push(format!("compute times from Kineto: {} of the compute tasks measured", rep.measured_tasks()));
    }
    ph.end();
    let ph = Phase::start("workload check");
    w.validate().map_err(|e| format!("{}: inconsistent workload: {e}", w.name))?;
    ph.end();
    Ok(w)
}

/// Simulates `w` as `a` says (cluster, NICs, network mode and scale) and writes the outputs in
/// `a.out`; the run's summary.
pub(crate) fn run_on(a: &SimulateArgs<'_>, w: &Workload) -> Result<engine::Summary, Box<dyn std::error::Error>> {
    check_scale(a.scale_network)?;
    let mut cluster = match a.cluster {
        Some(c) => super::cluster::resolve(c)?,
        None => commlens_model::presets::preset("dgx-h100").expect("built-in preset"),
    };
    if let Some(nic) = a.nic {
        cluster.set_nics(nic)?;
    }
    let world = w.world;
    let nodes = world.div_ceil(cluster.gpus_per_node.max(1));
    if nodes > cluster.nodes {
        cluster = cluster.with_nodes(nodes);
    }
    if let Some(g) = a.gpus {
        if g < world {
            return Err(format!("--gpus {g}: the workload has {world} ranks").into());
        }
    }
    let compute = compute_model(&cluster, a.kernels)?;
    let mut net: Box<dyn Network> = match (a.simai_nv, a.simai_nic) {
        (Some(nv), Some(nic)) => {
            let flags = simai::SimaiFlags {
                gpus: world,
                nvlink_gb_s: nv,
                nic_gb_s: nic,
                nics_per_server: a.simai_nics_per_server,
                gpus_per_server: cluster.gpus_per_node,
            };
            Box::new(simai::SimaiNetwork::for_workload(w, flags))
        }
        (None, None) => match a.mode {
            Mode::Analytical => Box::new(
                analytical::AnalyticalNetwork::new(&cluster, commlens_model::predict::DEFAULT_VERSION, NcclEnv::default())
                    .with_scale(a.scale_network),
            ),
            Mode::Flow => {
                // The flow network reads link speeds off the cluster: the what-if is a faster NIC.
                if a.scale_network != 1.0 {
                    cluster.nics.gbit_s *= a.scale_network;
                    cluster.provenance.push(format!("NIC speed ×{} from --scale-network", a.scale_network));
                }
                Box::new(flow::FlowNetwork::new(&cluster, flow::FlowConfig::default()))
            }
        },
        _ => return Err("--simai-nv and --simai-nic go together (SimAI's -nv and -nic, GB/s)".into()),
    };
    let started = std::time::Instant::now();
    let bar = if a.quiet { None } else { progress_bar() };
    let tick = |done: u64, total: u64| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
        }
    };
    let opts = EngineOptions { record: true, progress: Some(&tick) };
    let run = engine::run(w, compute.as_ref(), net.as_mut(), &opts)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let sim_s = started.elapsed().as_secs_f64();
    write_outputs(a, w, &run, &cluster, sim_s)?;
    Ok(run.summary)
}

/// The workload named on the command line, by the front end its content asks for.
fn load_workload(a: &SimulateArgs<'_>) -> Result<Workload, Box<dyn std::error::Error>> {
    let first = a.workload.first().ok_or("simulate needs a workload")?;
    let kind = match a.kind {
        WorkloadKind::Auto => sniff(first),
        k => k,
    };
    let aicb_opts = aicb::AicbOptions { gpus: a.gpus, simai_compat: a.simai_nv.is_some(), ..Default::default() };
    Ok(match kind {
        WorkloadKind::Aicb => aicb::load(first, &aicb_opts)?,
        WorkloadKind::ModelConf => {
            let text = std::fs::read_to_string(first).map_err(|e| format!("{}: {e}", first.display()))?;
            let conf = megatron::ModelConfig::parse(&text).map_err(|e| format!("{}: {e}", first.display()))?;
            // `framework = deepspeed|fsdp|axonn|ted` picks that front end; Megatron otherwise.
            let mut w = commlens_workload::from_model_conf(&conf).map_err(|e| format!("{}: {e}", first.display()))?;
            if conf.framework != megatron::Framework::Megatron {
                w.notes.insert(0, format!("front end: {}", w.name));
            }
            w.name = first.display().to_string();
            w
        }
        WorkloadKind::Chakra => {
            let opts = chakra::LoadOptions { world: a.gpus, set: a.trace_set.map(str::to_string) };
            chakra::load_path_with(first, &opts)?
        }
        WorkloadKind::Run | WorkloadKind::Auto => replay_run(a.workload)?,
    })
}

/// Tells the front end from the first bytes and the name.
fn sniff(p: &Path) -> WorkloadKind {
    let name = p.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    if name.ends_with(".et") {
        return WorkloadKind::Chakra;
    }
    if p.is_dir() {
        let has_et = std::fs::read_dir(p)
            .map(|rd| rd.flatten().any(|e| e.file_name().to_string_lossy().ends_with(".et")))
            .unwrap_or(false);
        return if has_et { WorkloadKind::Chakra } else { WorkloadKind::Run };
    }
    if !p.exists() && p.parent().is_some_and(|d| d.is_dir()) {
        // A Chakra prefix (`dir/all_reduce` for all_reduce.N.et).
        return WorkloadKind::Chakra;
    }
    let mut head = [0u8; 4096];
    let n = std::fs::File::open(p).and_then(|mut f| std::io::Read::read(&mut f, &mut head)).unwrap_or(0);
    let text = String::from_utf8_lossy(&head[..n]);
    let first = text.lines().next().unwrap_or("");
    if first.contains("model_parallel_NPU_group") || ["HYBRID_", "DATA", "MICRO", "MODEL"].iter().any(|t| first.starts_with(t)) {
        return WorkloadKind::Aicb;
    }
    let kv = |l: &str| {
        let l = l.split('#').next().unwrap_or("").trim();
        l.split_once('=').is_some_and(|(k, _)| matches!(k.trim(), "tp" | "pp" | "dp" | "layers" | "hidden" | "model" | "framework"))
    };
    if text.lines().filter(|l| kv(l)).count() >= 2 {
        return WorkloadKind::ModelConf;
    }
    let chakra_like = name.ends_with(".tgz") || name.ends_with(".tar.gz") || name.ends_with(".tar");
    let json_et = (name.ends_with(".json") || name.ends_with(".json.gz")) && !text.contains("traceEvents") && text.contains("\"nodes\"");
    if chakra_like || json_et {
        return WorkloadKind::Chakra;
    }
    WorkloadKind::Run
}

/// A measured run read by the usual readers, replayed.
fn replay_run(paths: &[PathBuf]) -> Result<Workload, Box<dyn std::error::Error>> {
    let loaded = crate::load::load(paths, &ReadOptions::default())?;
    let t = &loaded.table;
    if t.n_ops() == 0 {
        return Err("no operations in the inputs: nothing to replay".into());
    }
    let class = commlens_analyze::classify::infer(t);
    let kinds: Vec<GroupKind> = (0..t.logical.len())
        .map(|l| match class.class_of(commlens_core::LogicalCommIdx(l as u32)) {
            Some(p) => group_kind(p),
            None => GroupKind::Other,
        })
        .collect();
    let name = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ");
    let r = replay::from_table(t, &name, &kinds)?;
    Ok(r.workload)
}

fn group_kind(p: commlens_analyze::classify::Parallelism) -> GroupKind {
    use commlens_analyze::classify::Parallelism as P;
    match p {
        P::World => GroupKind::World,
        P::Tensor => GroupKind::Tp,
        P::Pipeline => GroupKind::Pp,
        P::Data => GroupKind::Dp,
        P::Expert => GroupKind::Ep,
        P::Context => GroupKind::Cp,
        P::ModelParallel => GroupKind::Mp,
        P::Embedding => GroupKind::Embedding,
        P::Other => GroupKind::Other,
    }
}

/// Roofline on the cluster's GPU, or measured kernels with the roofline behind them.
fn compute_model(cluster: &Cluster, kernels: &[PathBuf]) -> Result<Box<dyn ComputeCost>, Box<dyn std::error::Error>> {
    let roof = Roofline::new(&cluster.gpu, commlens_model::gpu::Precision::Bf16);
    if kernels.is_empty() {
        return Ok(Box::new(roof));
    }
    let table = KernelTable::from_traces(kernels)?;
    if table.len() == 0 {
        return Err(format!("--kernels: no compute kernels in {}", kernels.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")).into());
    }
    eprintln!("kernel table: {} kernel names from {} files", table.len(), kernels.len());
    Ok(Box::new(KernelCost::new(table, roof)))
}

fn progress_bar() -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} simulating {pos}/{len} tasks [{bar:30}] eta {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    Some(bar)
}

fn write_outputs(a: &SimulateArgs<'_>, w: &Workload, run: &Run, cluster: &Cluster, sim_s: f64) -> CmdResult {
    let out = a.out;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let ph = Phase::start("table build");
    let (t, spans) = output::to_table_with(w, run, cluster, &output::TableOptions { expand: a.expand, ..Default::default() });
    ph.end();
    let ph = Phase::start("enrichment");
    let enrich = Enrichment::new(&t);
    ph.end();
    // The Parquet table, the summary files and the two traces read the same table and write
    // different files: they run side by side. Errors are reported in this order whatever
    // finished first.
    let ph = Phase::start("outputs (Parquet, summary files, traces side by side)");
    let pq = out.join("simulated.parquet");
    let (pq_res, (sum_res, trace_res)) = rayon::join(
        || {
            let ph = Phase::start("parquet write");
            // A table of representatives says how many ranks it stands for (readers print it).
            let represented = (t.devices.len() < w.world as usize).then_some(u64::from(w.world));
            let r = crate::parquet_out::write_with(&t, &enrich, false, Some(output::SOURCE_KIND), represented, &pq)
                .map_err(|e| e.to_string());
            ph.end();
            r
        },
        || rayon::join(|| summary_files(a, w, run, cluster, sim_s), || traces(&t, &enrich, &spans, out)),
    );
    ph.end();
    let s = pq_res?;
    let (sum_path, e2e_path, links_path, body) = sum_res?;
    let mut wrote = vec![pq.display().to_string(), sum_path.display().to_string(), e2e_path.display().to_string(), links_path.display().to_string()];
    wrote.extend(trace_res?);
    if a.quiet {
        return Ok(());
    }
    if a.json {
        println!("{body}");
        return Ok(());
    }
    let sm = &run.summary;
    let mut o = std::io::stdout().lock();
    writeln!(o, "simulated {} on {} ({} ranks, {} simulated) in {:.2} s", w.name, cluster.name, w.world, sm.ranks_simulated, sim_s)?;
    write!(o, "{}", output::summary_text(run))?;
    for n in &w.notes {
        writeln!(o, "note: {n}")?;
    }
    writeln!(o, "wrote {} ({} rows, Simulated)", wrote.join(", "), s.rows)?;
    writeln!(o, "every command reads the table: commlens report {} -o report.html", pq.display())?;
    Ok(())
}

/// `EndToEnd.csv` (SimAI's summary line, from our figures), `links.csv` and `summary.json`;
/// their paths and the JSON text.
fn summary_files(a: &SimulateArgs<'_>, w: &Workload, run: &Run, cluster: &Cluster, sim_s: f64) -> Result<(PathBuf, PathBuf, PathBuf, String), String> {
    let ph = Phase::start("summary files");
    let out = a.out;
    let sm = &run.summary;
    let e2e = simai::EndToEnd {
        file_name: w.name.clone(),
        exposed_dp: sm.exposed(GroupKind::Dp),
        exposed_dp_ep: sm.exposed(GroupKind::DpEp),
        exposed_tp: sm.exposed(GroupKind::Tp),
        exposed_ep: sm.exposed(GroupKind::Ep),
        exposed_pp: sm.exposed(GroupKind::Pp),
        bubble: sm.bubble_us,
        compute: sm.compute_us,
        exposed: sm.exposed_comm_us,
        total: sm.total_us,
        layers: Vec::new(),
    };
    let e2e_path = out.join("EndToEnd.csv");
    crate::outputs::write_atomic(&e2e_path, |p| std::fs::write(p, e2e.summary_csv())).map_err(|e| e.to_string())?;
    // links.csv (lines formatted on every core) beside summary.json: a flow run at scale has
    // tens of thousands of links in both.
    let links_path = out.join("links.csv");
    let csv = || -> Result<(), String> {
        let lines: Vec<String> = run
            .link_usage
            .par_iter()
            .map(|l| {
                let util = if sm.total_us > 0.0 { l.busy_us / sm.total_us } else { 0.0 };
                format!("{},{:.0},{:.3},{:.1},{:.4}\n", l.name, l.bytes, l.busy_us, l.capacity_gb_s, util)
            })
            .collect();
        let mut links = String::from("link,bytes,busy_us,capacity_gb_s,utilisation\n");
        links.extend(lines);
        crate::outputs::write_atomic(&links_path, |p| std::fs::write(p, &links)).map_err(|e| e.to_string())
    };
    let sum_path = out.join("summary.json");
    let json = || -> Result<String, String> {
        let summary = serde_json::json!({
            "workload": w.name,
            "world": w.world,
            "ranks_simulated": sm.ranks_simulated,
            "cluster": cluster.name,
            "mode": if a.simai_nv.is_some() { "simai-busbw" } else if a.mode == Mode::Flow { "flow" } else { "analytical" },
            "scale_network": a.scale_network,
            "summary": sm,
            "links": run.link_usage,
            "engine": run.stats,
            "notes": w.notes,
            "wall_s": sim_s,
        });
        let body = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
        crate::outputs::write_atomic(&sum_path, |p| std::fs::write(p, &body)).map_err(|e| e.to_string())?;
        Ok(body)
    };
    let (c, j) = rayon::join(csv, json);
    c?;
    let body = j?;
    ph.end();
    Ok((sum_path, e2e_path, links_path, body))
}

/// The Chrome JSON and Perfetto traces (side by side), with the compute spans as ranges; their
/// paths, or none for a table too large to draw.
fn traces(t: &OpTable, enrich: &Enrichment<'_>, spans: &output::ComputeSpans, out: &Path) -> Result<Vec<String>, String> {
    if t.n_ops() > TRACE_MAX_OPS {
        eprintln!("note: {} operations: traces not written (more than {TRACE_MAX_OPS})", t.n_ops());
        return Ok(Vec::new());
    }
    let ranges = compute_ranges(t, spans);
    let opts = TraceOptions { ranges, ..TraceOptions::default() };
    let (json, pf) = (out.join("trace.json"), out.join("trace.pftrace"));
    let (j, p) = rayon::join(
        || {
            let ph = Phase::start("chrome trace");
            let r = crate::outputs::write_atomic(&json, |tmp| chrome::write_chrome_trace_par_file(t, enrich, &opts, tmp))
                .map_err(|e| format!("{}: {e}", json.display()));
            ph.end();
            r
        },
        || {
            let ph = Phase::start("perfetto trace");
            let r = crate::outputs::write_atomic(&pf, |tmp| perfetto::write_perfetto_trace_file(t, enrich, &opts, tmp))
                .map_err(|e| format!("{}: {e}", pf.display()));
            ph.end();
            r
        },
    );
    j?;
    p?;
    Ok(vec![json.display().to_string(), pf.display().to_string()])
}

/// Compute spans as trace ranges (one lane per rank in the ranges process).
fn compute_ranges(t: &OpTable, spans: &output::ComputeSpans) -> Vec<TimeRange> {
    let _ = t;
    let mut v = Vec::new();
    for rs in &spans.per_rank {
        for s in &rs.spans {
            if v.len() >= TRACE_MAX_SPANS {
                return v;
            }
            v.push(TimeRange {
                name: spans.names.get(s.name as usize).cloned().unwrap_or_else(|| "compute".into()),
                start_ns: s.start_ns,
                end_ns: s.end_ns,
                rank: Some(rs.rank),
            });
        }
    }
    v
}
