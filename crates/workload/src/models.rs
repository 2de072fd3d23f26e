//! Named model architectures (`gpt3-175b`, `llama-65b`, `mixtral-8x7b`, …): the shapes the
//! simulator, the planner and `model.conf` files refer to by name.
//!
//! Owns [`ModelSpec`] (a transformer's shape, independent of how it is parallelised) and its
//! arithmetic: parameter count and training FLOPs per token. Where a published benchmark
//! table fixes a shape (SimAI's Table 3, AICB's suite) its values are used even when they
//! differ from the original paper's, so side-by-side runs agree; the difference is noted
//! beside the entry.

use serde::{Deserialize, Serialize};

/// A decoder-only transformer's shape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    pub name: &'static str,
    pub layers: u32,
    pub hidden: u32,
    /// Feed-forward inner size (per expert for MoE).
    pub ffn: u32,
    pub heads: u32,
    /// Key/value heads (grouped-query attention); `heads` when none.
    pub kv_heads: u32,
    pub vocab: u32,
    /// Sequence length the benchmark tables train with.
    pub seq_len: u32,
    /// Gated MLP (SwiGLU: three matrices) rather than GeLU (two).
    pub gated_mlp: bool,
    /// Experts per MoE layer (1: dense).
    pub experts: u32,
    /// Experts each token is routed to.
    pub top_k: u32,
    /// Input and output embeddings share one matrix.
    pub tied_embeddings: bool,
}

impl ModelSpec {
    /// Attention weights of one layer: Q and output projections `h²` each, K and V `h·kv`
    /// each (grouped-query attention shrinks `kv`).
    pub fn attention_params(&self) -> f64 {
        let h = self.hidden as f64;
        let kv = h * self.kv_heads as f64 / self.heads.max(1) as f64;
        2.0 * h * h + 2.0 * h * kv
    }

    /// Weights of one MLP (one expert's for MoE): two `h × ffn` matrices, three when gated.
    pub fn mlp_params(&self) -> f64 {
        let mats = if self.gated_mlp { 3.0 } else { 2.0 };
        mats * self.hidden as f64 * self.ffn as f64
    }

    /// Parameters of one transformer layer (weights only; biases and norms are < 0.1 %).
    pub fn layer_params(&self) -> f64 {
        let h = self.hidden as f64;
        self.attention_params() + self.mlp_params() * self.experts as f64 + 4.0 * h
    }

    /// Embedding parameters (input, plus output when untied).
    pub fn embedding_params(&self) -> f64 {
        let e = self.vocab as f64 * self.hidden as f64;
        if self.tied_embeddings { e } else { 2.0 * e }
    }

    /// Every parameter of the model.
    pub fn params(&self) -> f64 {
        self.layers as f64 * self.layer_params() + self.embedding_params()
    }

    /// Parameters a token is multiplied by (MoE: only its `top_k` experts).
    pub fn active_params(&self) -> f64 {
        let inactive = self.mlp_params() * (self.experts - self.top_k.min(self.experts)) as f64;
        self.params() - self.layers as f64 * inactive
    }

    /// Training FLOPs per token: 6 × active parameters for the matrix products (forward 2,
    /// backward 4) plus attention scores and values (`12 · layers · hidden · seq`, the term
    /// Megatron-LM's MFU formula adds).
    pub fn train_flops_per_token(&self) -> f64 {
        6.0 * self.active_params() + 12.0 * self.layers as f64 * self.hidden as f64 * self.seq_len as f64
    }
}

const fn dense(name: &'static str, layers: u32, hidden: u32, ffn: u32, heads: u32, seq_len: u32) -> ModelSpec {
    ModelSpec {
        name,
        layers,
        hidden,
        ffn,
        heads,
        kv_heads: heads,
        vocab: 50257,
        seq_len,
        gated_mlp: false,
        experts: 1,
        top_k: 1,
        tied_embeddings: true,
    }
}

const fn llama(name: &'static str, layers: u32, hidden: u32, ffn: u32, heads: u32, kv_heads: u32, vocab: u32, seq_len: u32) -> ModelSpec {
    ModelSpec {
        name,
        layers,
        hidden,
        ffn,
        heads,
        kv_heads,
        vocab,
        seq_len,
        gated_mlp: true,
        experts: 1,
        top_k: 1,
        tied_embeddings: false,
    }
}

/// Every named model. GPT-3 shapes are the GPT-3 paper's (Table 2.1) with SimAI's sequence
/// length; LLaMA-65B follows SimAI's Table 3 (FFN 28672, sequence 4096), not the LLaMA
/// paper (22016, 2048); LLaMA-7B likewise uses sequence 4096.
pub const MODELS: &[ModelSpec] = &[
    dense("gpt3-6.7b", 32, 4096, 16384, 32, 2048),
    dense("gpt3-13b", 40, 5120, 20480, 40, 2048),
    dense("gpt3-22b", 48, 6144, 24576, 64, 2048),
    dense("gpt3-175b", 96, 12288, 49152, 96, 2048),
    llama("llama-7b", 32, 4096, 11008, 32, 32, 32000, 4096),
    llama("llama-13b", 40, 5120, 13824, 40, 40, 32000, 4096),
    llama("llama-65b", 80, 8192, 28672, 64, 64, 32000, 4096),
    llama("llama2-70b", 80, 8192, 28672, 64, 8, 32000, 4096),
    llama("llama3-8b", 32, 4096, 14336, 32, 8, 128256, 8192),
    llama("llama3-70b", 80, 8192, 28672, 64, 8, 128256, 8192),
    llama("llama3-405b", 126, 16384, 53248, 128, 8, 128256, 8192),
    ModelSpec {
        name: "mixtral-8x7b",
        layers: 32,
        hidden: 4096,
        ffn: 14336,
        heads: 32,
        kv_heads: 8,
        vocab: 32000,
        seq_len: 4096,
        gated_mlp: true,
        experts: 8,
        top_k: 2,
        tied_embeddings: false,
    },
];

/// A named model (case-insensitive; `_` and `-` alike).
pub fn model_by_name(name: &str) -> Option<&'static ModelSpec> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('_', "-");
    let want = norm(name);
    MODELS.iter().find(|m| norm(m.name) == want)
}

/// The names, for error messages and `--help`.
pub fn model_names() -> Vec<&'static str> {
    MODELS.iter().map(|m| m.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parameter counts against the published sizes the names carry (within 5 %: the names
    /// round, and biases, norms and vocabulary padding are left out).
    #[test]
    fn parameter_counts_match_the_names() {
        for (name, billions) in [
            ("gpt3-6.7b", 6.7),
            ("gpt3-13b", 13.0),
            ("gpt3-175b", 175.0),
            ("llama-7b", 6.7),
            ("llama-13b", 13.0),
            ("llama2-70b", 69.0),
            ("llama3-8b", 8.0),
            ("llama3-70b", 70.6),
            ("llama3-405b", 405.0),
            ("mixtral-8x7b", 46.7),
        ] {
            let m = model_by_name(name).unwrap();
            let b = m.params() / 1e9;
            assert!((b / billions - 1.0).abs() < 0.05, "{name}: {b:.2} B parameters, published {billions}");
        }
        // Mixtral: 12.9 B active of 46.7 B.
        let m = model_by_name("mixtral-8x7b").unwrap();
        assert!((m.active_params() / 1e9 / 12.9 - 1.0).abs() < 0.05, "{}", m.active_params() / 1e9);
    }

    #[test]
    fn names_resolve_loosely_and_unknown_ones_do_not() {
        assert_eq!(model_by_name("GPT3_175B").unwrap().layers, 96);
        assert!(model_by_name("gpt5").is_none());
        assert!(model_names().len() == MODELS.len());
    }
}
