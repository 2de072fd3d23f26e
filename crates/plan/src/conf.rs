//! A `model.conf` as the planner's input: the model's shape, the batch, and the layout the
//! file itself describes (to find it in the ranking).
//!
//! Owns [`from_model_conf`], on top of `commlens_workload::megatron::ModelConfig` (its
//! `model = NAME` key starts from a named shape; explicit keys override it).

use crate::layout::{Family, Layout};
use commlens_workload::megatron::ModelConfig;
use commlens_workload::models::ModelSpec;

/// What a model file gives the planner.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfInput {
    pub model: ModelSpec,
    /// Sequences per iteration: `global_batch`, or `num_microbatches · micro_batch · dp`.
    pub global_batch: Option<u32>,
    /// The file's own Megatron layout (tp, pp, dp, sp, distributed optimizer, micro-batch).
    pub layout: Layout,
}

/// Reads a model file's text.
pub fn from_model_conf(text: &str) -> Result<ConfInput, String> {
    let c = ModelConfig::parse(text).map_err(|e| e.to_string())?;
    let model = c.shape();
    let small = |name: &str, v: u64| u32::try_from(v).map_err(|_| format!("{name} = {v} is too large"));
    let global_batch = match (c.global_batch, c.num_microbatches) {
        (Some(g), _) => Some(small("global_batch", g)?),
        (None, Some(m)) => Some(small("global_batch", m.saturating_mul(c.micro_batch).saturating_mul(c.dp))?),
        (None, None) => None,
    };
    let layout = Layout {
        family: Family::Megatron,
        tp: small("tp", c.tp)?,
        pp: small("pp", c.pp)?,
        dp: small("dp", c.dp)?,
        ep: small("ep", c.ep)?,
        sp: c.sequence_parallel,
        mbs: small("micro_batch", c.micro_batch)?,
        zero: u8::from(c.distributed_optimizer),
        ..Layout::default()
    };
    Ok(ConfInput { model, global_batch, layout })
}
