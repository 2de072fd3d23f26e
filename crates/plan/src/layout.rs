//! A parallel layout of one training job, whatever framework runs it.
//!
//! Owns [`Family`] (Megatron-LM, DeepSpeed ZeRO, AxoNN 4D, DeepSpeed-TED), [`Recompute`]
//! (activation checkpointing) and [`Layout`]: one flat record of every parallel degree under
//! its usual name (`tp`, `pp`, `vpp`, `dp`, `ep`, `sp`, `mbs`, `zero`, `gx`, `gy`, `gz`,
//! `gdata`), so JSON and CSV rows carry them as users know them. Degrees a family does not use
//! are 1 (or `false`). [`Layout::tensor_grid`] maps every family onto AxoNN's 4D grid
//! (§5.1.1 special cases: Megatron TP = X with transposed layers, ZeRO-3/FSDP = Z, data = data),
//! which is how one communication model ranks them all.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which framework's parallelism a layout describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// Megatron-LM: TP (+SP) × PP (1F1B, interleaved with `vpp`) × DP, EP inside DP, the
    /// distributed optimizer as `zero = 1`.
    Megatron,
    /// DeepSpeed data parallelism with ZeRO stage 1, 2 or 3 (stage 3 is also PyTorch FSDP).
    Deepspeed,
    /// AxoNN's 4D hybrid: data × a 3D tensor grid (`gx`, `gy`, `gz`, `gdata`).
    Axonn,
    /// DeepSpeed-TED: tensor × expert × data for MoE models, ZeRO-1.
    Ted,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Megatron => "megatron",
            Family::Deepspeed => "deepspeed",
            Family::Axonn => "axonn",
            Family::Ted => "ted",
        }
    }

    pub fn from_name(s: &str) -> Option<Family> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "megatron" | "megatron-lm" => Family::Megatron,
            "deepspeed" | "zero" | "fsdp" => Family::Deepspeed,
            "axonn" | "axonn-4d" | "4d" => Family::Axonn,
            "ted" | "deepspeed-ted" => Family::Ted,
            _ => return None,
        })
    }

    pub const ALL: [Family; 4] = [Family::Megatron, Family::Deepspeed, Family::Axonn, Family::Ted];
}

/// What a layout keeps of the activations for the backward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recompute {
    /// Everything (no recomputation).
    None,
    /// Korthikanti et al.'s selective recomputation: the attention scores are recomputed.
    Selective,
    /// Full checkpointing: a layer's input is kept, the layer is recomputed in the backward
    /// pass (one more forward pass of compute).
    Full,
}

impl Recompute {
    pub fn name(self) -> &'static str {
        match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Full => "full",
        }
    }
}

/// One parallel layout. Every GPU count multiplies out to the world size (see
/// [`Layout::world`]); unused degrees are 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Layout {
    pub family: Family,
    /// Tensor parallelism (Megatron, TED's G_tensor).
    pub tp: u32,
    /// Pipeline stages.
    pub pp: u32,
    /// Virtual stages (model chunks) per pipeline stage: Megatron's interleaved schedule.
    pub vpp: u32,
    /// Data parallelism (Megatron's DP, DeepSpeed's world, TED's G_data^nonexp).
    pub dp: u32,
    /// Expert parallelism (inside `dp`; TED's G_expert).
    pub ep: u32,
    /// Megatron's sequence parallelism.
    pub sp: bool,
    /// Sequences per micro-batch (per data-parallel replica).
    pub mbs: u32,
    /// ZeRO stage (0: none; Megatron's distributed optimizer is 1; 3 is FSDP).
    pub zero: u8,
    /// AxoNN's 4D grid.
    pub gx: u32,
    pub gy: u32,
    pub gz: u32,
    pub gdata: u32,
    /// Activation checkpointing, chosen as the least that fits (not enumerated).
    pub recompute: Recompute,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout {
            family: Family::Megatron,
            tp: 1,
            pp: 1,
            vpp: 1,
            dp: 1,
            ep: 1,
            sp: false,
            mbs: 1,
            zero: 0,
            gx: 1,
            gy: 1,
            gz: 1,
            gdata: 1,
            recompute: Recompute::None,
        }
    }
}

/// A layout on AxoNN's grid: the four group sizes and whether the tensor dimension's layers
/// alternate (transposed every other layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    pub gx: u32,
    pub gy: u32,
    pub gz: u32,
    pub gdata: u32,
}

impl Grid {
    pub fn tensor(&self) -> u32 {
        self.gx * self.gy * self.gz
    }
    pub fn world(&self) -> u32 {
        self.tensor() * self.gdata
    }
}

impl Layout {
    /// Megatron TP × PP × DP.
    pub fn megatron(tp: u32, pp: u32, dp: u32) -> Layout {
        Layout { family: Family::Megatron, tp, pp, dp, ..Layout::default() }
    }

    /// DeepSpeed ZeRO stage `zero` over `dp` GPUs.
    pub fn deepspeed(zero: u8, dp: u32) -> Layout {
        Layout { family: Family::Deepspeed, dp, zero, ..Layout::default() }
    }

    /// AxoNN 4D.
    pub fn axonn(gx: u32, gy: u32, gz: u32, gdata: u32) -> Layout {
        Layout { family: Family::Axonn, gx, gy, gz, gdata, ..Layout::default() }
    }

    /// GPUs the layout occupies.
    pub fn world(&self) -> u32 {
        match self.family {
            Family::Axonn => self.gx * self.gy * self.gz * self.gdata,
            _ => self.tp * self.pp * self.dp,
        }
    }

    /// The layout on AxoNN's grid (§5.1.1's special cases): Megatron/TED TP is X (layers
    /// alternate, so the transposed ones use it as Y), ZeRO-3 shards over Z, data is data.
    /// Pipeline stages are outside the grid ([`Layout::pp`]).
    pub fn grid(&self) -> Grid {
        match self.family {
            Family::Axonn => Grid { gx: self.gx, gy: self.gy, gz: self.gz, gdata: self.gdata },
            Family::Deepspeed if self.zero >= 3 => Grid { gx: 1, gy: 1, gz: self.dp, gdata: 1 },
            _ => Grid { gx: self.tp, gy: 1, gz: 1, gdata: self.dp },
        }
    }

    /// GPUs that split one layer's weights (TP, or AxoNN's X·Y·Z).
    pub fn tensor_degree(&self) -> u32 {
        let g = self.grid();
        g.tensor()
    }

    /// Data-parallel replicas the global batch is split over; each takes micro-batches of
    /// `mbs` sequences (AxoNN: a data group's micro-batch, split again over Z).
    pub fn batch_split(&self) -> u32 {
        match self.family {
            Family::Axonn => self.gdata,
            _ => self.dp,
        }
    }

    /// Short text: `megatron tp4 pp2 vpp2 dp16 sp mbs1 zero1`.
    pub fn label(&self) -> String {
        let mut s = String::from(self.family.name());
        match self.family {
            Family::Axonn => s.push_str(&format!(" gx{} gy{} gz{} gdata{}", self.gx, self.gy, self.gz, self.gdata)),
            Family::Deepspeed => s.push_str(&format!(" zero{} dp{}", self.zero, self.dp)),
            Family::Megatron | Family::Ted => {
                s.push_str(&format!(" tp{} pp{}", self.tp, self.pp));
                if self.vpp > 1 {
                    s.push_str(&format!(" vpp{}", self.vpp));
                }
                s.push_str(&format!(" dp{}", self.dp));
                if self.ep > 1 {
                    s.push_str(&format!(" ep{}", self.ep));
                }
                if self.sp {
                    s.push_str(" sp");
                }
                if self.family == Family::Megatron && self.zero > 0 {
                    s.push_str(" distopt");
                }
            }
        }
        s.push_str(&format!(" mbs{}", self.mbs));
        if self.recompute != Recompute::None {
            s.push_str(&format!(" ckpt-{}", self.recompute.name()));
        }
        s
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}
