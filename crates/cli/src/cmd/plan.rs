//! `commlens plan (model.conf | --model NAME) --cluster X --gpus N`: the best parallel layouts
//! of a model on a cluster, with memory per GPU, iteration time, MFU and the bottleneck.
//!
//! Owns the arguments, the inputs (a named model or a `model.conf`, the cluster through
//! `cmd::cluster::resolve`, measured nccl-tests outputs for the AxoNN model's bandwidth table),
//! and the outputs: a text table, `--format json|csv`, `--explain RANK`, and `--html FILE` (a
//! report page with the plan section). The models live in `commlens-plan`.

use super::CmdResult;
use commlens_export::report::{write_html, Figure, PlanSection, Report, ReportTable, StackedBar};
use commlens_ingest::nccl_tests::read_nccl_tests;
use commlens_plan::bandwidth::{apply_measured, MeasuredBusbw};
use commlens_plan::conf::from_model_conf;
use commlens_plan::memory::{MemoryOptions, GIB};
use commlens_plan::rank::{plan, Plan, PlanRequest, PlanRow};
use commlens_plan::{Family, Layout};
use commlens_workload::models::{model_by_name, model_names};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanFormat {
    #[value(alias = "table")]
    Text,
    Json,
    Csv,
}

#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// A model file (`key = value`; `model = NAME` starts from a named model); or use --model.
    #[arg(required_unless_present = "model", conflicts_with = "model")]
    pub config: Option<PathBuf>,
    /// A named model: gpt3-13b, gpt3-175b, llama-7b, llama-65b, llama3-70b, mixtral-8x7b, …
    #[arg(long)]
    pub model: Option<String>,
    /// A preset (`commlens cluster list`), a TOML file or a run; default dgx-h100.
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    /// NICs per node and speed, e.g. 8x400g.
    #[arg(long)]
    pub nic: Option<String>,
    /// GPUs of the job.
    #[arg(long)]
    pub gpus: u32,
    /// Sequences per iteration (default: the model file's, else 2M tokens, at least one per GPU).
    #[arg(long)]
    pub global_batch: Option<u32>,
    /// Rows shown (and re-ranked by the simulator).
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Explains one rank: memory, time, bandwidths, simulated figures.
    #[arg(long)]
    pub explain: Option<usize>,
    /// Output: an aligned table, JSON rows (layout fields by their usual names) or CSV.
    #[arg(long, value_enum, default_value_t = PlanFormat::Text)]
    pub format: PlanFormat,
    /// nccl-tests outputs measured on the cluster: they replace the collective model's
    /// bandwidths (one node: the intra-node table; several: β_inter).
    #[arg(long, num_args = 1..)]
    pub measured: Vec<PathBuf>,
    /// Fixes degrees, e.g. `pp=8,mbs=1` or `family=megatron` (repeatable).
    #[arg(long)]
    pub fix: Vec<String>,
    /// SAMO's pruned fraction for the AxoNN family (0–1).
    #[arg(long)]
    pub sparsity: Option<f64>,
    /// Usable memory per GPU, GiB (default: the GPU's).
    #[arg(long)]
    pub memory_gib: Option<f64>,
    /// Also writes the plan as a self-contained HTML page.
    #[arg(long)]
    pub html: Option<PathBuf>,
}

impl PlanArgs {
    /// Files read and written, for the CLI's input/output checks.
    pub fn paths(&self) -> (Vec<PathBuf>, Vec<&Path>) {
        let mut inputs: Vec<PathBuf> = self.config.iter().cloned().collect();
        inputs.extend(self.measured.iter().cloned());
        (inputs, self.html.iter().map(PathBuf::as_path).collect())
    }
}

pub fn run(a: &PlanArgs) -> CmdResult {
    if a.gpus == 0 {
        return Err("--gpus: expected at least 1 GPU".into());
    }
    if a.top == 0 {
        return Err("--top: expected at least 1 row".into());
    }
    let (model, conf_batch, own) = match (&a.config, &a.model) {
        (Some(p), _) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let c = from_model_conf(&text).map_err(|e| format!("{}: {e}", p.display()))?;
            (c.model, c.global_batch, Some(c.layout))
        }
        (None, Some(name)) => {
            let m = model_by_name(name).ok_or_else(|| format!("--model {name}: unknown model; expected one of {}", model_names().join(", ")))?;
            (*m, None, None)
        }
        (None, None) => return Err("plan needs a model file or --model NAME".into()),
    };
    let mut cluster = match &a.cluster {
        Some(c) => super::cluster::resolve(c)?,
        None => commlens_model::presets::preset("dgx-h100").expect("built-in preset"),
    };
    if let Some(nic) = &a.nic {
        cluster.set_nics(nic)?;
    }
    let gpn = cluster.gpus_per_node.max(1);
    cluster = cluster.with_nodes(a.gpus.div_ceil(gpn));
    let global_batch = match a.global_batch.or(conf_batch) {
        Some(0) => return Err("--global-batch: expected at least 1 sequence".into()),
        Some(b) => b,
        None => ((1u32 << 21) / model.seq_len.max(1)).max(1).next_multiple_of(a.gpus),
    };
    let mut req = PlanRequest::new(model, cluster, a.gpus, global_batch);
    for f in &a.fix {
        req.constraints.add(f).map_err(|e| format!("--fix {f}: {e}"))?;
    }
    if let Some(p) = a.sparsity {
        if !(0.0..1.0).contains(&p) {
            return Err(format!("--sparsity {p}: expected a pruned fraction in [0, 1)").into());
        }
        req.memory = MemoryOptions { sparsity: Some(p) };
    }
    if let Some(g) = a.memory_gib {
        if !(g.is_finite() && g > 0.0) {
            return Err(format!("--memory-gib {g}: expected a positive size").into());
        }
        req.capacity_bytes = g * GIB;
    }
    let mut measured_notes = Vec::new();
    if !a.measured.is_empty() {
        let m = measured_busbw(&a.measured)?;
        measured_notes = apply_measured(&mut req.bandwidths, &m);
    }
    req.simulate_top = a.top;
    let mut p = plan(&req);
    // An explained row below the re-ranked top is simulated on its own (its rank stays).
    if let Some(row) = a.explain.and_then(|k| p.rows.get_mut(k.wrapping_sub(1))) {
        if row.simulated.is_none() && row.not_simulated.is_none() {
            match commlens_plan::simulate::simulate(&req.model, &row.layout, req.global_batch, &req.cluster, row.estimate.recompute_s) {
                Ok(s) => row.simulated = Some(s),
                Err(e) => row.not_simulated = Some(e),
            }
        }
    }
    p.notes.extend(measured_notes);
    if let Some(l) = own {
        if let Some(r) = p.rows.iter().find(|r| same_layout(&r.layout, &l)) {
            p.notes.push(format!("the model file's own layout ({}) ranks #{}", r.layout.label(), r.rank));
        } else {
            p.notes.push(format!("the model file's own layout (tp {} pp {} dp {}) is not among the fitting layouts of {} GPUs", l.tp, l.pp, l.dp, a.gpus));
        }
    }
    if let Some(path) = &a.html {
        let report = html_report(&p, a.top);
        crate::outputs::write_atomic(path, |tmp| -> Result<(), Box<dyn std::error::Error>> {
            let mut f = std::io::BufWriter::new(std::fs::File::create(tmp)?);
            write_html(&report, &mut f)?;
            f.flush()?;
            Ok(())
        })?;
    }
    match a.format {
        PlanFormat::Json => println!("{}", serde_json::to_string_pretty(&json(&p, a.top))?),
        PlanFormat::Csv => print!("{}", csv(&p, a.top)),
        PlanFormat::Text => print!("{}", text(&p, a.top)),
    }
    if let Some(rank) = a.explain {
        let row = p.rows.get(rank.wrapping_sub(1)).ok_or_else(|| format!("--explain {rank}: expected a rank from 1 to {}", p.rows.len()))?;
        print!("{}", explain(&p, row, &req));
    }
    if let Some(path) = &a.html {
        eprintln!("wrote {}", path.display());
    }
    if p.rows.is_empty() {
        return Err(format!("no layout of {} fits {} GPUs of {} ({:.0} GiB each)", p.model, a.gpus, p.cluster, p.capacity_gib).into());
    }
    Ok(())
}

fn same_layout(a: &Layout, b: &Layout) -> bool {
    (a.family, a.tp, a.pp, a.dp, a.ep, a.sp, a.mbs, a.zero, a.vpp) == (b.family, b.tp, b.pp, b.dp, b.ep, b.sp, b.mbs, b.zero, b.vpp)
}

/// Bus bandwidth at the largest size of every nccl-tests run in `files`.
fn measured_busbw(files: &[PathBuf]) -> Result<Vec<MeasuredBusbw>, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    for f in files {
        let bench = read_nccl_tests(f).map_err(|e| format!("--measured {}: {e}", f.display()))?;
        let mut found = false;
        for run in &bench.runs {
            let (Some(kind), Some(row)) = (run.kind, run.rows.iter().max_by_key(|r| r.bytes)) else { continue };
            found = true;
            out.push(MeasuredBusbw {
                kind,
                ranks: run.ranks,
                nodes: run.hosts.len().max(1) as u32,
                busbw_gb_s: row.out_of_place.busbw_gb_s,
                source: f.file_name().map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into_owned()),
            });
        }
        if !found {
            return Err(format!("--measured {}: expected an nccl-tests output (all_reduce_perf, …) with a result table", f.display()).into());
        }
    }
    Ok(out)
}

fn ms(s: f64) -> String {
    format!("{:.1}", s * 1e3)
}

fn sim_ms(r: &PlanRow) -> String {
    r.simulated.map_or("-".into(), |s| ms(s.iteration_s))
}

/// Communication per parallelism the row reports (exposed when simulated), ms, `tp 1.2 dp 0.3`.
fn comm_text(r: &PlanRow) -> String {
    let parts: Vec<String> = r
        .parts()
        .into_iter()
        .filter(|(n, v)| !matches!(*n, "compute" | "bubble") && *v > 0.0)
        .map(|(n, v)| format!("{n} {}", ms(v)))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

/// The ranking as text: one line per layout when the table fits the text width (`--wide`
/// lifts it), otherwise two — the layout with memory, step time and MFU, then the estimate,
/// the planner's own rank, the bottleneck and the communication, indented — so 80 columns hold it.
fn text(p: &Plan, top: usize) -> String {
    let mut s = format!(
        "{} on {} GPUs of {} ({:.0} GiB each), global batch {}: {} layouts, {} fit\n",
        p.model, p.gpus, p.cluster, p.capacity_gib, p.global_batch, p.enumerated, p.fitting
    );
    let rows: Vec<&PlanRow> = p.rows.iter().take(top).collect();
    let layout_w = rows.iter().map(|r| r.layout.label().chars().count()).max().unwrap_or(0).max(6);
    let comm_w = rows.iter().map(|r| comm_text(r).chars().count()).max().unwrap_or(0);
    // rank, model rank, layout, memory, estimate, simulated, MFU, bottleneck, communication.
    let one_line = 4 + 1 + 5 + 2 + layout_w + 1 + 8 + 1 + 9 + 1 + 9 + 1 + 6 + 2 + 11 + 1 + comm_w.max(16);
    if one_line <= commlens_export::table::text_width() {
        s.push_str(&format!(
            "{:>4} {:>5}  {:<layout_w$} {:>8} {:>9} {:>9} {:>6}  {:<11} {}\n",
            "rank", "model", "layout", "mem GiB", "est ms", "sim ms", "MFU %", "bottleneck", "communication ms (exposed when simulated)"
        ));
        for r in &rows {
            s.push_str(&format!(
                "{:>4} {:>5}  {:<layout_w$} {:>8.1} {:>9} {:>9} {:>6.1}  {:<11} {}\n",
                r.rank,
                r.model_rank,
                r.layout.label(),
                r.memory.total_gib(),
                ms(r.estimate.step_s),
                sim_ms(r),
                r.mfu * 100.0,
                r.bottleneck,
                comm_text(r)
            ));
        }
    } else {
        s.push_str(&format!("{:>4}  {:<layout_w$} {:>7} {:>9} {:>5}\n", "rank", "layout", "mem GiB", "step ms", "MFU %"));
        s.push_str("      then: estimate ms · analytical rank · bottleneck · comm ms\n");
        for r in &rows {
            let step = r.simulated.map_or(r.estimate.step_s, |x| x.iteration_s);
            s.push_str(&format!(
                "{:>4}  {:<layout_w$} {:>7.1} {:>9} {:>5.1}\n      est {} · #{} · {} · {}\n",
                r.rank,
                r.layout.label(),
                r.memory.total_gib(),
                ms(step),
                r.mfu * 100.0,
                ms(r.estimate.step_s),
                r.model_rank,
                r.bottleneck,
                comm_text(r)
            ));
        }
    }
    for n in &p.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    s.push_str(&format!("ranked analytically in {:.3} s, simulated the top {} in {:.2} s\n", p.rank_wall_s, top.min(p.rows.len()), p.simulate_wall_s));
    s
}

const CSV_HEADER: &str = "rank,model_rank,family,tp,pp,vpp,dp,ep,sp,mbs,zero,gx,gy,gz,gdata,recompute,memory_gib,weights_gib,gradients_gib,optimizer_gib,activations_gib,buffers_gib,estimate_s,axonn_comm_s,simulated_s,iteration_s,mfu,bottleneck,comm_tp_s,comm_y_s,comm_z_s,comm_dp_s,comm_pp_s,comm_ep_s\n";

fn csv(p: &Plan, top: usize) -> String {
    let mut s = String::from(CSV_HEADER);
    for r in p.rows.iter().take(top) {
        let l = &r.layout;
        let m = &r.memory;
        let parts = r.parts();
        let part = |n: &str| parts.iter().find(|(k, _)| *k == n).map_or(0.0, |(_, v)| *v);
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.6},{:.6},{},{:.6},{:.4},{},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6}\n",
            r.rank, r.model_rank, l.family.name(), l.tp, l.pp, l.vpp, l.dp, l.ep, l.sp, l.mbs, l.zero, l.gx, l.gy, l.gz, l.gdata, l.recompute.name(),
            m.total_gib(), m.weights / GIB, m.gradients / GIB, m.optimizer / GIB, m.activations / GIB, m.buffers / GIB,
            r.estimate.step_s, r.estimate.axonn_printed_s, r.simulated.map_or(String::new(), |x| format!("{:.6}", x.iteration_s)),
            r.iteration_s, r.mfu, r.bottleneck,
            part("tp"), part("y"), part("z"), part("dp"), part("pp"), part("ep"),
        ));
    }
    s
}

fn json(p: &Plan, top: usize) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = p
        .rows
        .iter()
        .take(top)
        .map(|r| {
            let l = &r.layout;
            let comm: serde_json::Map<String, serde_json::Value> = r.parts().into_iter().filter(|(n, _)| !matches!(*n, "compute" | "bubble")).map(|(n, v)| (n.to_string(), v.into())).collect();
            serde_json::json!({
                "rank": r.rank,
                "model_rank": r.model_rank,
                "family": l.family.name(),
                "tp": l.tp, "pp": l.pp, "vpp": l.vpp, "dp": l.dp, "ep": l.ep, "sp": l.sp, "mbs": l.mbs, "zero": l.zero,
                "gx": l.gx, "gy": l.gy, "gz": l.gz, "gdata": l.gdata,
                "recompute": l.recompute.name(),
                "label": l.label(),
                "memory": r.memory,
                "memory_gib": r.memory.total_gib(),
                "estimate": r.estimate,
                "simulated": r.simulated,
                "not_simulated": r.not_simulated,
                "iteration_s": r.iteration_s,
                "mfu": r.mfu,
                "bottleneck": r.bottleneck,
                "comm_s": comm,
            })
        })
        .collect();
    serde_json::json!({
        "model": p.model,
        "cluster": p.cluster,
        "gpus": p.gpus,
        "global_batch": p.global_batch,
        "capacity_gib": p.capacity_gib,
        "enumerated": p.enumerated,
        "fitting": p.fitting,
        "notes": p.notes,
        "rank_wall_s": p.rank_wall_s,
        "simulate_wall_s": p.simulate_wall_s,
        "rows": rows,
    })
}

fn explain(p: &Plan, r: &PlanRow, req: &PlanRequest) -> String {
    let l = &r.layout;
    let m = &r.memory;
    let e = &r.estimate;
    let gib = |b: f64| format!("{:.2} GiB", b / GIB);
    let mut s = format!("\n#{} {} (analytical rank #{})\n", r.rank, l.label(), r.model_rank);
    s.push_str(&format!(
        "memory per GPU: {} of {:.0} GiB — weights {}, gradients {}, optimizer {}, activations {} (recompute: {}), buffers {}, runtime {}; {:.3} G parameters held\n",
        gib(m.total()), p.capacity_gib, gib(m.weights), gib(m.gradients), gib(m.optimizer), gib(m.activations), l.recompute.name(), gib(m.buffers), gib(m.runtime), m.params / 1e9
    ));
    s.push_str(&format!(
        "estimate: {} ms = compute {} + recompute {} + bubble {} + communication {} ({} micro-batches; no overlap)\n",
        ms(e.step_s), ms(e.compute_s), ms(e.recompute_s), ms(e.bubble_s), ms(e.comm.total()), e.microbatches
    ));
    let named: Vec<String> = e.comm.named().iter().filter(|(_, v)| *v > 0.0).map(|(n, v)| format!("{n} {}", ms(*v))).collect();
    s.push_str(&format!("  communication by parallelism (ms): {}; AxoNN eq. 5.6 as printed: {} ms\n", named.join(", "), ms(e.axonn_printed_s)));
    let g = l.grid();
    let betas = req.bandwidths.of_grid(&g);
    let bw = |b: f64| if b.is_finite() { format!("{:.0} GB/s", b / 1e9) } else { "-".into() };
    s.push_str(&format!(
        "  grid (G_x, G_y, G_z, G_data) = ({}, {}, {}, {}), β = ({}, {}, {}, {}); {} GPUs per node, β_inter {}\n",
        g.gx, g.gy, g.gz, g.gdata, bw(betas[0]), bw(betas[1]), bw(betas[2]), bw(betas[3]), req.bandwidths.gpus_per_node, bw(req.bandwidths.beta_inter)
    ));
    match (&r.simulated, &r.not_simulated) {
        (Some(x), _) => s.push_str(&format!(
            "simulated (analytical network, roofline): {} ms = compute {} + bubble {} + exposed tp {} pp {} dp {} ep {} (+ recompute {})\n",
            ms(x.iteration_s), ms(x.compute_s), ms(x.bubble_s), ms(x.exposed_tp_s), ms(x.exposed_pp_s), ms(x.exposed_dp_s), ms(x.exposed_ep_s), ms(x.recompute_s)
        )),
        (None, Some(why)) => s.push_str(&format!("not simulated: {why}\n")),
        (None, None) => s.push_str("not simulated: below the re-ranked top rows (raise --top)\n"),
    }
    s.push_str(&format!("MFU {:.1} %, bottleneck: {}\n", r.mfu * 100.0, r.bottleneck));
    if l.family == Family::Megatron && l.pp > 1 {
        s.push_str("pipeline: the first stage holds min(pp, micro-batches) micro-batches of activations (Korthikanti et al. 2022)\n");
    }
    s
}

fn html_report(p: &Plan, top: usize) -> Report {
    let rows: Vec<&PlanRow> = p.rows.iter().take(top).collect();
    let memory = rows
        .iter()
        .map(|r| {
            let m = &r.memory;
            StackedBar {
                label: format!("#{}", r.rank),
                parts: vec![
                    ("weights".into(), m.weights),
                    ("gradients".into(), m.gradients),
                    ("optimizer".into(), m.optimizer),
                    ("activations".into(), m.activations),
                    ("buffers".into(), m.buffers),
                    ("runtime".into(), m.runtime),
                ],
            }
        })
        .collect();
    let time = rows
        .iter()
        .map(|r| StackedBar { label: format!("#{}", r.rank), parts: r.parts().into_iter().map(|(n, v)| (n.to_string(), v * 1e9)).collect() })
        .collect();
    let ranking = ReportTable {
        title: "Ranking".into(),
        headers: ["rank", "layout", "memory GiB", "estimate ms", "simulated ms", "MFU %", "bottleneck", "communication ms"].map(String::from).to_vec(),
        right_aligned: vec![true, false, true, true, true, true, false, false],
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    r.rank.to_string(),
                    r.layout.label(),
                    format!("{:.1}", r.memory.total_gib()),
                    ms(r.estimate.step_s),
                    sim_ms(r),
                    format!("{:.1}", r.mfu * 100.0),
                    r.bottleneck.to_string(),
                    comm_text(r),
                ]
            })
            .collect(),
        notes: vec![],
    };
    let best = p.rows.first();
    Report {
        title: format!("commlens plan: {} on {} GPUs of {}", p.model, p.gpus, p.cluster),
        generated_by: format!("commlens {}", env!("CARGO_PKG_VERSION")),
        summary: vec![
            Figure::new("Layouts", format!("{} of {} fit", p.fitting, p.enumerated)),
            Figure::new("Best", best.map_or("none".into(), |r| r.layout.label())),
            Figure::new("Iteration", best.map_or("-".into(), |r| format!("{} ms", ms(r.iteration_s)))),
            Figure::new("MFU", best.map_or("-".into(), |r| format!("{:.1} %", r.mfu * 100.0))),
        ],
        plan: Some(PlanSection {
            intro: format!(
                "{} on {} GPUs of {} ({:.0} GiB each), global batch {} sequences: every layout enumerated, filtered by the memory model, ranked by the analytical model (AxoNN's eqs. 5.1–5.7 with roofline compute and the pipeline bubble), the top {} re-ranked by the simulator's analytical mode.",
                p.model, p.gpus, p.cluster, p.capacity_gib, p.global_batch, top
            ),
            memory,
            capacity_bytes: p.capacity_gib * GIB,
            time,
            ranking,
            notes: p.notes.clone(),
        }),
        ..Report::default()
    }
}
