//! Megatron-LM front end: the program of every rank of a Megatron job from its configuration.
//!
//! Owns the entry points: [`program_for_rank`] (one rank's iterations as [`Task`]s of the
//! shared model) and [`workload`] (all ranks, their groups, programs shared by ranks that run
//! the same, and representatives). `commlens-synth` renders these programs as NCCL log lines,
//! the simulator executes them and [`volumes`] sums their bytes, so the three agree by
//! construction. Submodules: `config` ([`Config`], [`Schedule`], [`MoeDispatcher`]),
//! `model_conf` (the `key = value` model file), `frameworks` (its `model` and `framework` keys:
//! the front end a file picks, named shapes), `groups` (process groups and membership),
//! `schedule` (1F1B, all-forward-all-backward, interleaved), `traffic` (TP/SP/PP/DP/optimizer
//! calls), `moe` (token dispatchers and routing), `params` (parameters, buckets, shards),
//! `volume` (bytes per group kind), `from_model` (a configuration from a named
//! [`crate::models::ModelSpec`] and a [`Layout`], with its memory estimate).
//!
//! [`ProgramOptions`] hold program choices that are not Megatron flags `commlens-synth`
//! renders (overlapped DP gradient reduction, a non-GPT layer shape for the FLOPs); the
//! plain entry points use their defaults, so the generator's output does not depend on them.
//!
//! A program holds the training iterations only: what a launcher does around them (communicator
//! creation, start-up barriers, shutdown) belongs to whoever runs the program.

mod config;
mod frameworks;
mod from_model;
pub mod groups;
mod model_conf;
mod moe;
pub mod params;
pub mod schedule;
mod traffic;
mod volume;

pub use config::{Config, ConfigError, MoeDispatcher, Schedule};
pub use from_model::{Layout, MemoryEstimate, ModelJob};
pub use frameworks::{Framework, FsdpSharding, DEEPSPEED_BUCKET, DEEPSPEED_PERSISTENCE_THRESHOLD, DEEPSPEED_PREFETCH_BUCKET};
pub use model_conf::{ModelConfig, ParamFormula, MAX_PARALLEL};
pub use moe::{mix64, routing};
pub use volume::{moved_bytes, volumes, GroupVolume, StageRole, Volumes};

use crate::{Group, GroupId, GroupKind, Origin, Program, Task, Workload};
use traffic::{Builder, EpPos};

/// Program choices beyond the Megatron flags of [`Config`]; the default is what
/// `commlens-synth` renders.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProgramOptions {
    /// Megatron's `--overlap-grad-reduce`: DP bucket reductions on `Stream::Comm(0)`, each
    /// started when the last microbatch's backward pass has produced its bucket's gradients;
    /// the end-of-iteration work (grad norm, optimizer step) waits for them. Dense models with
    /// the plain schedules only (virtual stages or experts keep the reductions at the end).
    pub overlap_grad_reduce: bool,
    /// Layer shape for the compute FLOPs; `None`: a GPT layer (4h GeLU MLP, full attention).
    pub shape: Option<LayerShape>,
}

/// FLOPs of a layer's matrices relative to a GPT layer of the same hidden size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerShape {
    /// QKV and output projections: `(2h² + 2h·kv) / 4h²` (grouped-query attention < 1).
    pub attn_proj_scale: f64,
    /// MLP matrices: `mats · ffn / 8h` (SwiGLU: 3 matrices; GPT: 2 of `4h`, = 1).
    pub mlp_scale: f64,
}

/// The program of global rank `rank` (`rank < cfg.world()`; `cfg` valid).
pub fn program_for_rank(cfg: &Config, rank: usize) -> Program {
    program_for_rank_with(cfg, &ProgramOptions::default(), rank)
}

/// [`program_for_rank`] with program options.
pub fn program_for_rank_with(cfg: &Config, opts: &ProgramOptions, rank: usize) -> Program {
    let gs = groups::groups(cfg);
    let member = groups::membership(cfg.world(), &gs);
    program_with(cfg, opts, rank, &gs, &member[rank])
}

fn program_with(cfg: &Config, opts: &ProgramOptions, rank: usize, gs: &[Group], member: &[GroupId]) -> Program {
    let ep = groups::group_of(gs, member, GroupKind::Ep).map(|(group, g)| EpPos {
        group,
        me: g.ranks.iter().position(|&r| r as usize == rank).unwrap_or(0),
        n: g.ranks.len(),
    });
    let mut b = Builder::new(cfg, cfg.stage_of(rank), ep, *opts);
    b.iterations();
    Program { tasks: b.tasks }
}

/// Every rank's program and groups. Ranks whose programs are equal share one (checked, not
/// assumed: the all-to-all dispatcher's uneven splits give every EP rank its own); a rank's
/// representative is the first data replica of its stage and tensor rank with the same
/// program (itself when none).
pub fn workload(cfg: &Config) -> Result<Workload, ConfigError> {
    workload_with(cfg, &ProgramOptions::default())
}

/// [`workload`] with program options. Without expert parallelism a rank's program depends on
/// its stage only, so each stage's program is built once (what keeps 100,000-rank jobs cheap).
pub fn workload_with(cfg: &Config, opts: &ProgramOptions) -> Result<Workload, ConfigError> {
    cfg.validate()?;
    let world = cfg.world();
    let gs = groups::groups(cfg);
    let membership = groups::membership(world, &gs);
    let mut programs: Vec<Program> = Vec::new();
    // Programs of each stage (indices into `programs`): only ranks of one stage can match.
    let mut by_stage: Vec<Vec<usize>> = vec![Vec::new(); cfg.pp];
    let mut rank_program = Vec::with_capacity(world);
    let mut representative = Vec::with_capacity(world);
    let per_stage = cfg.ep <= 1;
    for rank in 0..world {
        let stage = cfg.stage_of(rank);
        let known = if per_stage { by_stage[stage].first().copied() } else { None };
        let idx = match known {
            Some(i) => i,
            None => {
                let p = program_with(cfg, opts, rank, &gs, &membership[rank]);
                match by_stage[stage].iter().copied().find(|&i| programs[i] == p) {
                    Some(i) => i,
                    None => {
                        programs.push(p);
                        by_stage[stage].push(programs.len() - 1);
                        programs.len() - 1
                    }
                }
            }
        };
        rank_program.push(idx as u32);
        // Data replicas of (stage, tensor rank): rank = t + tp·(d + dp·p), d varies.
        let t = rank % cfg.tp;
        let first_replica = t + cfg.tp * cfg.dp * stage;
        let rep = (first_replica..rank)
            .step_by(cfg.tp)
            .find(|&r| rank_program[r] == idx as u32 && representative[r] == r as u32)
            .unwrap_or(rank);
        representative.push(rep as u32);
    }
    let w = Workload {
        name: format!("megatron tp{} pp{} dp{}{}", cfg.tp, cfg.pp, cfg.dp, if cfg.ep > 1 { format!(" ep{}", cfg.ep) } else { String::new() }),
        origin: Origin::ModelConf,
        world: world as u32,
        gpus_per_node: None,
        iterations: cfg.iterations as u32,
        groups: gs,
        programs,
        rank_program,
        membership,
        representative,
        notes: Vec::new(),
    };
    debug_assert_eq!(w.validate(), Ok(()));
    Ok(w)
}

/// Tasks of a program that are communication (collectives and p2p groups).
pub fn comm_tasks(p: &Program) -> impl Iterator<Item = &Task> {
    p.tasks.iter().filter(|t| matches!(t.work, crate::Work::Coll(_) | crate::Work::P2p { .. }))
}

#[cfg(test)]
mod tests;
