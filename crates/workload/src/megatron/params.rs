//! Model parameters of a pipeline stage and Megatron DDP's gradient buckets.
//!
//! Owns the parameter tensors of a stage (dense and expert, registration order, the stage's
//! layers chunk after chunk under virtual stages), the gradient buckets (filled in reverse
//! registration order, capped at max(40M, 1M × group size) elements), the layer-norm
//! parameters reduced on TP under sequence parallelism, and the distributed optimizer's shard
//! of a bucket (padded to a multiple of lcm(group size, 128)).

use super::Config;

/// Global indices of the layers a pipeline stage holds, chunk after chunk (model chunk
/// `k · pp + stage` is the stage's `k`-th chunk).
pub fn stage_layers(cfg: &Config, stage: usize) -> Vec<usize> {
    let lpc = cfg.layers_per_chunk();
    (0..cfg.virtual_stages.max(1))
        .flat_map(|k| {
            let first = (k * cfg.pp + stage) * lpc;
            first..first + lpc
        })
        .collect()
}

/// Element counts of the parameter tensors of one stage (registration order) that DP
/// reduces: everything but the experts.
pub fn stage_params(cfg: &Config, stage: usize) -> Vec<u64> {
    stage_param_split(cfg, stage).0
}

/// (dense, expert) parameter element counts of one stage, registration order.
pub fn stage_param_split(cfg: &Config, stage: usize) -> (Vec<u64>, Vec<u64>) {
    let (h, tp, v, s) = (cfg.hidden as u64, cfg.tp as u64, cfg.vocab as u64, cfg.seq_len as u64);
    let mut out = Vec::new();
    let mut experts = Vec::new();
    if stage == 0 {
        out.push(v / tp * h); // word embeddings (vocab-parallel)
        out.push(s * h); // learned absolute position embeddings
    }
    for layer in stage_layers(cfg, stage) {
        out.extend([h, h, 3 * h * h / tp, 3 * h / tp, h * h / tp, h, h, h]);
        if cfg.is_moe_layer(layer) {
            out.push(cfg.num_experts as u64 * h); // router (replicated)
            for _ in 0..cfg.num_experts / cfg.ep {
                experts.extend([4 * h * h / tp, 4 * h * h / tp]); // fc1, fc2 of a local expert
            }
        } else {
            out.extend([4 * h * h / tp, 4 * h / tp, 4 * h * h / tp, h]);
        }
    }
    if stage + 1 == cfg.pp {
        out.extend([h, h]); // final layernorm
        if cfg.pp > 1 {
            out.push(v / tp * h); // tied output layer copy of the word embeddings
        }
    }
    (out, experts)
}

/// Megatron DDP gradient buckets (element counts) of the dense weights, reduced over DP.
pub fn grad_buckets(cfg: &Config, stage: usize) -> Vec<u64> {
    buckets_of(stage_params(cfg, stage), cfg.dp)
}

/// Gradient buckets of the expert weights, reduced over the expert-DP group.
pub fn expert_grad_buckets(cfg: &Config, stage: usize) -> Vec<u64> {
    buckets_of(stage_param_split(cfg, stage).1, cfg.dp / cfg.ep.max(1))
}

/// Layer-norm weights and biases of one stage: what `_allreduce_layernorm_grads` reduces on TP
/// under sequence parallelism (two layer norms per layer, the final one on the last stage).
pub fn layernorm_params(cfg: &Config, stage: usize) -> u64 {
    let h = cfg.hidden as u64;
    let last = if stage + 1 == cfg.pp { 2 * h } else { 0 };
    stage_layers(cfg, stage).len() as u64 * 4 * h + last
}

/// A rank's shard of a bucket on a group of `n` ranks, the bucket padded to a multiple of
/// lcm(n, 128) as Megatron's distributed optimizer pads its buffers.
pub fn shard(n: u64, bucket: u64) -> u64 {
    let align = n * 128 / gcd(n, 128);
    bucket.div_ceil(align) * align / n
}

fn buckets_of(params: Vec<u64>, dp: usize) -> Vec<u64> {
    let cap = 40_000_000u64.max(1_000_000 * dp as u64);
    let mut buckets = Vec::new();
    let mut acc = 0u64;
    for n in params.into_iter().rev() {
        acc += n;
        if acc >= cap {
            buckets.push(acc);
            acc = 0;
        }
    }
    if acc > 0 {
        buckets.push(acc);
    }
    buckets
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_all_params() {
        let cfg = Config { dp: 2, hidden: 2048, ..Config::default() };
        let total: u64 = stage_params(&cfg, 0).iter().sum();
        let b = grad_buckets(&cfg, 0);
        assert_eq!(b.iter().sum::<u64>(), total);
        assert!(b.len() >= 2);
        assert_eq!(shard(4, 1000), 256);
    }
}
