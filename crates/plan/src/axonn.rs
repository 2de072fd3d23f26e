//! AxoNN's communication model (Singh 2025, ch. 5), as printed.
//!
//! Owns the per-layer ring times of eqs. 5.1–5.5 and their sum (5.6) for one fully-connected
//! layer `O = I × W` with `I ∈ ℝ^{m×k}`, `W ∈ ℝ^{k×n}` (`m`: the tokens one data-parallel group
//! processes per batch), the transposed layers (every other layer; X and Y swap roles), the
//! FC layers of a transformer block, the group hierarchy X → Y → Z → data with its rank
//! numbering ([`group_members`]), and the placement-aware bandwidth of each group
//! ([`Bandwidths::of_group`]: the profiled intra-node table, or eq. 5.7 across nodes, which
//! gives Fig. 5.3's concurrent rings their share of β_inter).
//!
//! Assumptions are the dissertation's: ring collectives, bandwidth only (`time = bytes / β`),
//! no compute, uniform node-to-node bandwidth. Sizes are elements × bytes per element (the
//! equations count elements; bf16 = 2 bytes).

use crate::layout::Grid;
use std::collections::BTreeMap;

/// One fully-connected layer: `W ∈ ℝ^{k×n}`; `transposed` layers swap X and Y.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FcLayer {
    pub k: f64,
    pub n: f64,
    pub transposed: bool,
}

/// The FC layers of one transformer block: QKV (`h → h + 2·kv`), attention output (`h → h`,
/// transposed), MLP up (`h → ffn`, or `2·ffn` gated) and down (`ffn → h`, transposed), the
/// same four layers and alternation as Megatron-AxoNN's model (K = 3, 1, 4, 4 for GPT).
pub fn block_layers(hidden: f64, kv_dim: f64, ffn: f64, gated: bool) -> [FcLayer; 4] {
    let up = if gated { 2.0 * ffn } else { ffn };
    [
        FcLayer { k: hidden, n: hidden + 2.0 * kv_dim, transposed: false },
        FcLayer { k: hidden, n: hidden, transposed: true },
        FcLayer { k: hidden, n: up, transposed: false },
        FcLayer { k: ffn, n: hidden, transposed: true },
    ]
}

/// Bandwidth of each group of the hierarchy, bytes per second (β_x, β_y, β_z, β_data).
pub type GroupBetas = [f64; 4];

/// Eqs. 5.1–5.5 for one layer, seconds, each term under its printed name; `m` rows, element
/// size `bytes`. For a transposed layer G_x ↔ G_y and β_x ↔ β_y before the equations apply.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LayerComm {
    pub ag_z: f64,
    pub rs_z: f64,
    pub ar_y: f64,
    pub ar_x: f64,
    pub ar_data: f64,
}

impl LayerComm {
    /// Eq. 5.6.
    pub fn total(&self) -> f64 {
        self.ag_z + self.rs_z + self.ar_y + self.ar_x + self.ar_data
    }
}

/// Eqs. 5.1–5.5 exactly as printed, with `G⃗` and `β⃗` already swapped for transposed layers.
pub fn layer_comm_printed(k: f64, n: f64, m: f64, g: [f64; 4], beta: GroupBetas, bytes: f64) -> LayerComm {
    let [gx, gy, gz, gd] = g;
    let [bx, by, bz, bd] = beta;
    let t = |b: f64, elems: f64| if elems == 0.0 { 0.0 } else { elems * bytes / b };
    LayerComm {
        ag_z: t(bz, (gz - 1.0) * k * n / (gx * gy * gz)),
        rs_z: t(bz, (gz - 1.0) / gz * k * n / (gx * gy)),
        ar_y: t(by, 2.0 * (gy - 1.0) / gy * m * n / (gz * gx)),
        ar_x: t(bx, 2.0 * (gx - 1.0) / gx * m * k / (gz * gy)),
        ar_data: t(bd, 2.0 * (gd - 1.0) / gd * k * n / (gx * gy * gz)),
    }
}

/// Communication of one layer per physical group (X, Y, Z, data), seconds: the printed terms
/// with the swap applied for transposed layers and then attributed to the group that runs
/// them (a transposed layer's `AR_y` runs on the X groups).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GroupComm {
    pub x: f64,
    pub y: f64,
    pub z: f64,
    pub data: f64,
}

impl GroupComm {
    pub fn total(&self) -> f64 {
        self.x + self.y + self.z + self.data
    }
    pub fn add(&mut self, o: &GroupComm, times: f64) {
        self.x += o.x * times;
        self.y += o.y * times;
        self.z += o.z * times;
        self.data += o.data * times;
    }
}

/// One layer on `grid`: eqs. 5.1–5.5, swapped for transposed layers.
pub fn layer_comm(layer: &FcLayer, m: f64, grid: &Grid, beta: &GroupBetas, bytes: f64) -> GroupComm {
    let (gx, gy, gz, gd) = (grid.gx as f64, grid.gy as f64, grid.gz as f64, grid.gdata as f64);
    if layer.transposed {
        let c = layer_comm_printed(layer.k, layer.n, m, [gy, gx, gz, gd], [beta[1], beta[0], beta[2], beta[3]], bytes);
        GroupComm { x: c.ar_y, y: c.ar_x, z: c.ag_z + c.rs_z, data: c.ar_data }
    } else {
        let c = layer_comm_printed(layer.k, layer.n, m, [gx, gy, gz, gd], *beta, bytes);
        GroupComm { x: c.ar_x, y: c.ar_y, z: c.ag_z + c.rs_z, data: c.ar_data }
    }
}

/// Global ranks of every group of dimension `dim` (0 = X, 1 = Y, 2 = Z, 3 = data) of a grid,
/// numbered X fastest: `rank = x + G_x·(y + G_y·(z + G_z·d))` (§5.2.2: 8 GPUs, all dimensions
/// 2, give X groups (0,1),(2,3),… and Y groups (0,2),(1,3),…).
pub fn group_members(grid: &Grid, dim: usize) -> Vec<Vec<u32>> {
    let sizes = [grid.gx, grid.gy, grid.gz, grid.gdata];
    let stride: u32 = sizes[..dim].iter().product();
    let size = sizes[dim];
    let world = grid.world();
    let mut out = Vec::new();
    for base in 0..world {
        // The group's first member has coordinate 0 in `dim`.
        if (base / stride) % size != 0 {
            continue;
        }
        out.push((0..size).map(|i| base + i * stride).collect());
    }
    out
}

/// Placement-aware bandwidths (§5.2.2): an intra-node table keyed by (G_0, G_1) — G_0 the
/// product of the inner group sizes, G_1 the group's own size — profiled with 1 GB
/// collectives run simultaneously in all G_0 groups of a node, and eq. 5.7 across nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Bandwidths {
    /// GPUs per node (G_node).
    pub gpus_per_node: u32,
    /// Node-to-node bandwidth, bytes/s (β_inter).
    pub beta_inter: f64,
    /// (G_0, G_1) → bytes/s, for G_0·G_1 ≤ G_node.
    pub intra: BTreeMap<(u32, u32), f64>,
    /// Where the table came from (collective model, measured files).
    pub source: Vec<String>,
}

impl Bandwidths {
    /// The intra-node entry (G_0, G_1); a missing entry takes the nearest smaller G_0 of the
    /// same G_1 (a table profiled on powers of two, asked for a 6-GPU node's 3).
    pub fn intra_of(&self, inner: u32, size: u32) -> f64 {
        if let Some(b) = self.intra.get(&(inner, size)) {
            return *b;
        }
        self.intra
            .range(..=(inner, size))
            .rev()
            .find(|((_, s), _)| *s == size)
            .or_else(|| self.intra.iter().find(|((_, s), _)| *s >= size))
            .map_or(self.beta_inter, |(_, b)| *b)
    }

    /// Bandwidth of a group of `size` GPUs whose inner groups multiply to `inner`: the table
    /// when the group fits in a node, else eq. 5.7, `β_inter / min(G_node, inner)`.
    pub fn of_group(&self, inner: u32, size: u32) -> f64 {
        if size <= 1 {
            return f64::INFINITY;
        }
        if inner.saturating_mul(size) <= self.gpus_per_node {
            self.intra_of(inner, size)
        } else {
            self.beta_inter / inner.min(self.gpus_per_node).max(1) as f64
        }
    }

    /// β_x, β_y, β_z, β_data of a grid (hierarchy X → Y → Z → data).
    pub fn of_grid(&self, grid: &Grid) -> GroupBetas {
        let sizes = [grid.gx, grid.gy, grid.gz, grid.gdata];
        let mut out = [f64::INFINITY; 4];
        let mut inner = 1u32;
        for (i, &s) in sizes.iter().enumerate() {
            out[i] = self.of_group(inner, s);
            inner = inner.saturating_mul(s);
        }
        out
    }
}

/// Communication of `layers` transformer blocks on `grid` (eq. 5.6 summed over the block's
/// FC layers and the blocks), per physical group, seconds.
pub fn model_comm(block: &[FcLayer], layers: f64, m: f64, grid: &Grid, beta: &GroupBetas, bytes: f64) -> GroupComm {
    let mut total = GroupComm::default();
    for l in block {
        total.add(&layer_comm(l, m, grid, beta, bytes), layers);
    }
    total
}

/// Every (G_x, G_y, G_z, G_data) with product `gpus`; powers of two only when asked
/// (the dissertation's 56 layouts for 32 GPUs and 84 for 64 are the powers of two).
pub fn grids(gpus: u32, powers_of_two: bool) -> Vec<Grid> {
    let divs: Vec<u32> = (1..=gpus).filter(|d| gpus % d == 0 && (!powers_of_two || d.is_power_of_two())).collect();
    let mut out = Vec::new();
    for &gx in &divs {
        for &gy in divs.iter().filter(|&&d| (gpus / gx) % d == 0) {
            for &gz in divs.iter().filter(|&&d| (gpus / (gx * gy)) % d == 0 && gx * gy * d <= gpus) {
                if gpus % (gx * gy * gz) != 0 {
                    continue;
                }
                let gdata = gpus / (gx * gy * gz);
                if powers_of_two && !gdata.is_power_of_two() {
                    continue;
                }
                out.push(Grid { gx, gy, gz, gdata });
            }
        }
    }
    out
}
