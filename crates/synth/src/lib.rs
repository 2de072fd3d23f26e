//! Synthetic `NCCL_DEBUG=INFO` logs of a Megatron-LM-like training run, with exact ground truth.
//!
//! This crate is commlens's built-in example (`commlens demo`) and test fixture. It writes one
//! log per process (`nccl_debug_<host>_<pid>.log`, one process per GPU as torchrun starts
//! them) in the format of NCCL 2.2x, as captured with `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL`
//! and optionally `NCCL_DEBUG_TIMESTAMP_FORMAT="%s.%6f"`, and a [`Truth`] saying exactly what
//! was written. The format follows `shared/reference/nccl-debug-log.md` and the real logs under
//! `shared/data/real/nccl-logs`; the traffic follows the Megatron-LM description of the
//! Borzyk thesis (chapter 2.4) and Megatron's code structure (see the `traffic` module source).
//!
//! ```
//! let run = commlens_synth::generate(&commlens_synth::RunConfig::default());
//! assert_eq!(run.files.len(), 4);
//! assert_eq!(run.truth.world_size, 4);
//! ```
//!
//! The Megatron program itself (schedules, TP/SP/PP/DP traffic, distributed optimizer, MoE
//! dispatchers, parameters and buckets) is `commlens_workload::megatron`'s, shared with the
//! simulator and the volume model; this crate renders it.
//!
//! Modules: `config` (what to generate), `layout` (ranks, hosts, communicators), `topo`
//! (hardware and topology dump text), `init` (communicator lifecycle text), `traffic`
//! (the shared program rendered per rank, inside comm init/barriers/destroy),
//! `timing` (step durations: the simulator's roofline and collective model on [`cluster`], the
//! cluster the generated files describe), `sim` (clocks, the discrete-event run), `sim_text`
//! (op and tuning line text), `sim_wait` (completion of blocking steps: init, sync
//! collectives, p2p groups), `writer` (prefixes, files, interleaving), `truth` (ground truth).

mod config;
mod init;
mod layout;
mod rng;
mod sim;
mod sim_text;
mod sim_wait;
mod slowdown;
mod timing;
mod topo;
mod traces;
mod traffic;
mod truth;
mod writer;

#[cfg(test)]
mod tests;

pub use config::{parse_version, ConfigError, LogFormat, MoeDispatcher, NcclVersion, RunConfig, Schedule, MAX_WORLD};
pub use slowdown::Slowdown;
pub use timing::cluster;
pub use rng::SplitMix64;
pub use traces::{
    drop_log_ops, generate_traces, DroppedLogOp, GeneratedTraces, KernelTruth, LogOpRef, TraceConfig,
    TraceKernel, TraceTruth,
};
pub use truth::{BrokenLine, CombinedTruth, CommTruth, InjectedOp, OpTruth, RankTruth, Truth};

use std::path::{Path, PathBuf};

/// One generated file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    /// File name (no directory).
    pub name: String,
    /// Full text, `\n`-terminated lines.
    pub contents: String,
}

/// Result of [`generate`]: the files (per-process logs in global-rank order, then
/// `combined.log` when requested) and the ground truth.
#[derive(Clone, Debug)]
pub struct GeneratedRun {
    /// Files to write.
    pub files: Vec<GeneratedFile>,
    /// What the files contain.
    pub truth: Truth,
}

impl GeneratedRun {
    /// Total size of all files in bytes.
    pub fn total_bytes(&self) -> usize {
        self.files.iter().map(|f| f.contents.len()).sum()
    }

    /// File by name.
    pub fn file(&self, name: &str) -> Option<&GeneratedFile> {
        self.files.iter().find(|f| f.name == name)
    }
}

/// Generates a run. Deterministic: the same config (seed included) gives identical output.
///
/// # Panics
/// If the configuration is invalid; use [`try_generate`] to get the error instead.
pub fn generate(cfg: &RunConfig) -> GeneratedRun {
    match try_generate(cfg) {
        Ok(run) => run,
        Err(e) => panic!("{e}"),
    }
}

/// Generates a run, or says why the configuration is invalid.
pub fn try_generate(cfg: &RunConfig) -> Result<GeneratedRun, ConfigError> {
    generate_full(cfg).map(|(run, _, _)| run)
}

/// [`try_generate`] plus the layout and the simulation's recorded events (for `traces`).
pub(crate) fn generate_full(
    cfg: &RunConfig,
) -> Result<(GeneratedRun, layout::Layout, sim::SimOutput), ConfigError> {
    let ver = cfg.validate()?;
    let driver = config::cuda_driver_version(&cfg.cuda_version)?;
    let mut rng = SplitMix64::new(cfg.seed);
    let layout = layout::Layout::build(cfg, &mut rng.fork(1));
    slowdown::resolve(&cfg.slowdowns, &layout)?;
    let timing = timing::Timing::new(cfg, ver);
    let programs = traffic::build(cfg, &layout, &timing);
    let out = sim::run(cfg, ver, driver, &layout, programs, timing, &mut rng.fork(2), None);

    let mut files = Vec::with_capacity(cfg.world() + 1);
    let mut ranks = Vec::with_capacity(cfg.world());
    for (r, lines) in out.lines.iter().enumerate() {
        let p = &layout.procs[r];
        let name = writer::file_name(&p.host, p.pid);
        let contents = writer::render_file(lines, &layout, r, cfg.timestamps);
        ranks.push(RankTruth {
            rank: r,
            host: p.host.clone(),
            pid: p.pid,
            cuda_dev: p.dev,
            node: p.node,
            local_rank: p.local_rank,
            tp_rank: p.tp_rank,
            pp_rank: p.pp_rank,
            dp_rank: p.dp_rank,
            bus_id: format!("{:x}", p.bus_id),
            file: name.clone(),
            lines: lines.len(),
        });
        files.push(GeneratedFile { name, contents });
    }
    let combined = if cfg.interleave {
        let (contents, t) = writer::render_combined(
            &out.lines,
            &layout,
            cfg.timestamps,
            cfg.broken_lines,
            &mut rng.fork(3),
        );
        files.push(GeneratedFile {
            name: t.file.clone(),
            contents,
        });
        Some(t)
    } else {
        None
    };
    let communicators = layout
        .comms
        .iter()
        .map(|c| CommTruth {
            name: c.name.clone(),
            kind: c.kind.label().to_string(),
            strategy: c.kind.strategy(cfg).to_string(),
            comm_id: c.comm_id,
            comm_id_hex: format!("{:#x}", c.comm_id),
            nranks: c.nranks(),
            members: c.members.clone(),
            comm_ptrs: c.ptrs.iter().map(|p| format!("{p:#x}")).collect(),
            n_nodes: c.n_nodes,
            channels: c.channels,
        })
        .collect();
    let ops = out
        .ops
        .iter()
        .map(|(&(rank, comm, op), &(lines, bytes))| OpTruth {
            rank,
            comm: layout.comms[comm].name.clone(),
            op: op.to_string(),
            lines,
            bytes,
        })
        .collect();
    let truth = Truth {
        world_size: cfg.world(),
        tp: cfg.tp,
        pp: cfg.pp,
        dp: cfg.dp,
        ep: cfg.ep,
        nccl_version: cfg.nccl_version.clone(),
        ranks,
        communicators,
        ops,
        tuning_lines: out.tuning.clone(),
        combined,
        injected: slowdown::injected(&layout, &out.events),
    };
    Ok((GeneratedRun { files, truth }, layout, out))
}

/// What [`stream_into`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamedRun {
    /// Files written (one per process).
    pub files: usize,
    /// Lines written.
    pub lines: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Generates a run straight into `dir` (created if missing): each process's lines go to its
/// file as the simulation produces them, so memory stays bounded by the programs and one
/// batch of lines, not the whole output (worlds of 100,000 ranks). The files are byte for
/// byte those of [`generate_into`]; no ground truth is kept and `combined.log` (which
/// needs every line at once) is refused.
pub fn stream_into(cfg: &RunConfig, dir: &Path) -> std::io::Result<StreamedRun> {
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    let ver = cfg.validate().map_err(|e| invalid(e.to_string()))?;
    if cfg.interleave {
        return Err(invalid("stream_into writes no combined.log: set interleave = false".into()));
    }
    let driver = config::cuda_driver_version(&cfg.cuda_version).map_err(|e| invalid(e.to_string()))?;
    std::fs::create_dir_all(dir)?;
    let mut rng = SplitMix64::new(cfg.seed);
    let layout = layout::Layout::build(cfg, &mut rng.fork(1));
    let timing = timing::Timing::new(cfg, ver);
    let programs = traffic::build(cfg, &layout, &timing);
    let mut out = writer::FileStreamer::new(dir, &layout, cfg.timestamps);
    let mut flush = |r: usize, lines: &mut Vec<sim::Line>| out.flush(r, lines);
    sim::run(cfg, ver, driver, &layout, programs, timing, &mut rng.fork(2), Some(&mut flush));
    if let Some(e) = out.error {
        return Err(e);
    }
    Ok(StreamedRun {
        files: out.started.iter().filter(|&&s| s).count(),
        lines: out.lines,
        bytes: out.bytes,
    })
}

/// Writes the files of a run into `dir` (created if missing); returns their paths.
pub fn write_to_dir(run: &GeneratedRun, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut paths = Vec::with_capacity(run.files.len());
    for f in &run.files {
        let path = dir.join(&f.name);
        std::fs::write(&path, f.contents.as_bytes())?;
        paths.push(path);
    }
    Ok(paths)
}

/// Generates a run and writes it into `dir`: the one-call form for demos and tests.
pub fn generate_into(cfg: &RunConfig, dir: &Path) -> std::io::Result<GeneratedRun> {
    let run =
        try_generate(cfg).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    write_to_dir(&run, dir)?;
    Ok(run)
}
