//! AxoNN's 4D front end (Singh 2025, ch. 5, Algorithm 3): data parallelism × Agarwal's 3D
//! parallel matrix multiply with the weights further sharded along Z, from a `model.conf` with
//! `framework = axonn`, `gx`, `gy`, `gz` and `dp` (`G_data`).
//!
//! Owns [`Grid`] (the layout and its groups), [`fc_layers`] (the fully connected layers of a
//! transformer block), [`closed_form`] (eqs. 5.1–5.5 per layer, in elements) and [`workload`].
//!
//! Layout: `rank = x + G_x·(y + G_y·(z + G_z·d))` (innermost X, then Y, Z, data: the
//! dissertation's group hierarchy; with all dimensions 2, X groups are (0,1),(2,3),… and Y
//! groups (0,2),(1,3),…). A layer `O = I·W` with `I ∈ ℝ^{m×k}`, `W ∈ ℝ^{k×n}`, `m` the rows
//! (tokens, `micro_batch · seq_len`) of one data-parallel replica: rows of `I` split over Z and
//! columns over Y; `W` split `k` over Y and `n` over X, and each block sharded again over Z.
//! Per layer, on GPU `(i, j, k)`:
//! - forward: `AllGather` over Z of the weight shard (`kn/(G_x G_y G_z)` per rank, eq. 5.1),
//!   the local product (`2·m·k·n/G` FLOPs), `AllReduce` over Y of the output block
//!   (`m·n/(G_z G_x)`, eq. 5.3);
//! - backward: the input-gradient product, `AllReduce` over X of it (`m·k/(G_z G_y)`, eq.
//!   5.4), the weight-gradient product, `ReduceScatter` over Z of it (eq. 5.2);
//! - "transposed" layers swap X and Y (the output then lies split over Y, so the next layer
//!   takes it as is).
//!
//! After the backward passes, the gradient shard of every layer is all-reduced over the data
//! group (eq. 5.5). With one microbatch the per-rank volume is exactly eq. 5.6 summed over the
//! layers; with `m` microbatches the Z gathers, Y/X reductions and Z reduce-scatters recur per
//! microbatch (gathered weights are kept from a layer's forward to its backward, no
//! activation checkpointing), the data AllReduce once. All tensors bf16.
//!
//! Block: the four FC layers of Megatron-AxoNN's communication model (`comm_model.py`):
//! QKV (`k = h`, `n = h + 2·kv`), attention output (`h × h`, transposed), MLP up (`h × f`, `2f`
//! for a gated MLP), MLP down (`f × h`, transposed); attention scores and values are local
//! (heads split over X, sequences over Z; `4·b·s²·h/(G_x G_z)` FLOPs, repeated on every Y
//! rank). The embedding and output head are not distributed by the chapter's model: their
//! FLOPs are counted as if split over the tensor grid, with no communication.
//!
//! Overlap (`overlap_comm`, on by default, the dissertation's OAG/ORS/OAR): Z gathers on
//! `Comm(0)`, issued one layer ahead; Z reduce-scatters on `Comm(1)`, waited for after the
//! backward pass; the X (or Y) input-gradient AllReduce on `Comm(2)`, overlapping the
//! weight-gradient product. Without it every call is in line on the compute stream.

use crate::frontend::{group, single_program, TaskList};
use crate::megatron::{ConfigError, Framework, ModelConfig};
use crate::models::ModelSpec;
use crate::{ComputeKind, Group, GroupKind, Phase, Program, Stream, Workload};
use commlens_core::{DataType, OpKind};

const WIRE: DataType = DataType::Bfloat16;

/// The 4D grid `G_x × G_y × G_z × G_data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    pub gx: usize,
    pub gy: usize,
    pub gz: usize,
    pub gdata: usize,
}

impl Grid {
    pub fn world(&self) -> usize {
        self.gx * self.gy * self.gz * self.gdata
    }

    /// `G_tensor = G_x·G_y·G_z`.
    pub fn tensor(&self) -> usize {
        self.gx * self.gy * self.gz
    }

    pub fn rank(&self, x: usize, y: usize, z: usize, d: usize) -> usize {
        x + self.gx * (y + self.gy * (z + self.gz * d))
    }

    /// The X, Y, Z and data groups (groups of one rank left out), in that order.
    pub fn groups(&self) -> Vec<Group> {
        let mut out = Vec::new();
        let (gx, gy, gz, gd) = (self.gx, self.gy, self.gz, self.gdata);
        let mut add = |kind: GroupKind, size: usize, members: &dyn Fn(usize, usize, usize, usize) -> Vec<usize>| {
            if size < 2 {
                return;
            }
            let mut index = 0;
            for d in 0..gd {
                for z in 0..gz {
                    for y in 0..gy {
                        for x in 0..gx {
                            let m = members(x, y, z, d);
                            // Each group once: from its first member.
                            if m[0] == self.rank(x, y, z, d) {
                                out.push(group(kind, index, m));
                                index += 1;
                            }
                        }
                    }
                }
            }
        };
        add(GroupKind::TensorX, gx, &|_, y, z, d| (0..gx).map(|x| self.rank(x, y, z, d)).collect());
        add(GroupKind::TensorY, gy, &|x, _, z, d| (0..gy).map(|y| self.rank(x, y, z, d)).collect());
        add(GroupKind::TensorZ, gz, &|x, y, _, d| (0..gz).map(|z| self.rank(x, y, z, d)).collect());
        add(GroupKind::Dp, gd, &|x, y, z, _| (0..gd).map(|d| self.rank(x, y, z, d)).collect());
        out
    }

    fn has(&self, kind: GroupKind) -> bool {
        match kind {
            GroupKind::TensorX => self.gx > 1,
            GroupKind::TensorY => self.gy > 1,
            GroupKind::TensorZ => self.gz > 1,
            GroupKind::Dp => self.gdata > 1,
            _ => false,
        }
    }
}

/// One fully connected layer `W ∈ ℝ^{k×n}`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FcLayer {
    pub name: &'static str,
    pub k: f64,
    pub n: f64,
    /// X and Y swap roles.
    pub transposed: bool,
}

/// The FC layers of one transformer block (see the module notes).
pub fn fc_layers(m: &ModelSpec) -> [FcLayer; 4] {
    let h = m.hidden as f64;
    let kv = h * m.kv_heads as f64 / m.heads.max(1) as f64;
    let f = m.ffn as f64;
    let up = if m.gated_mlp { 2.0 * f } else { f };
    [
        FcLayer { name: "qkv", k: h, n: h + 2.0 * kv, transposed: false },
        FcLayer { name: "attention proj", k: h, n: h, transposed: true },
        FcLayer { name: "mlp fc1", k: h, n: up, transposed: false },
        FcLayer { name: "mlp fc2", k: f, n: h, transposed: true },
    ]
}

/// Eqs. 5.1–5.5 for one layer, in elements a rank sends (the equations' numerators, before
/// dividing by `β`): `(AG_z, RS_z, AR_out, AR_in, AR_data)`, with `AR_out` over Y (X when
/// transposed) and `AR_in` over X (Y when transposed). `rows` is `m`, the rows one data
/// replica processes.
pub fn closed_form(g: &Grid, l: &FcLayer, rows: f64) -> [f64; 5] {
    let (gx, gy) = if l.transposed { (g.gy as f64, g.gx as f64) } else { (g.gx as f64, g.gy as f64) };
    let (gz, gd) = (g.gz as f64, g.gdata as f64);
    let (k, n) = (l.k, l.n);
    [
        (gz - 1.0) * k * n / (gx * gy * gz),
        (gz - 1.0) / gz * k * n / (gx * gy),
        2.0 * (gy - 1.0) / gy * rows * n / (gz * gx),
        2.0 * (gx - 1.0) / gx * rows * k / (gz * gy),
        2.0 * (gd - 1.0) / gd * k * n / (gx * gy * gz),
    ]
}

/// The AxoNN job a model file describes.
#[derive(Debug, Clone, PartialEq)]
pub struct AxonnJob {
    pub grid: Grid,
    pub spec: ModelSpec,
    pub micro_batch: usize,
    pub microbatches: usize,
    pub iterations: usize,
    pub overlap: bool,
}

impl AxonnJob {
    pub fn from_conf(c: &ModelConfig) -> Result<AxonnJob, ConfigError> {
        c.validate()?;
        if c.framework != Framework::Axonn {
            return Err(ConfigError(format!("framework = {}: not an AxoNN file", c.framework.key())));
        }
        let size = |name: &str, v: u64| usize::try_from(v).map_err(|_| ConfigError(format!("{name} = {v} is too large")));
        let grid = Grid { gx: size("gx", c.gx)?, gy: size("gy", c.gy)?, gz: size("gz", c.gz)?, gdata: size("dp", c.dp)? };
        if (c.micro_batch * c.seq_len) % c.gz != 0 {
            return Err(ConfigError(format!(
                "gz = {}: must divide the rows of a microbatch, micro_batch·seq_len = {}",
                c.gz,
                c.micro_batch * c.seq_len
            )));
        }
        Ok(AxonnJob {
            grid,
            spec: c.shape(),
            micro_batch: size("micro_batch", c.micro_batch)?,
            microbatches: size("num_microbatches", c.microbatches()?)?,
            iterations: size("iterations", c.iterations.max(1))?,
            overlap: c.overlap_comm.unwrap_or(true),
        })
    }

    /// `m`: rows (tokens) of one microbatch of a data replica.
    pub fn rows(&self) -> f64 {
        (self.micro_batch * self.spec.seq_len as usize) as f64
    }

    fn name(&self) -> String {
        let g = self.grid;
        format!("axonn gx{} gy{} gz{} gdata{}", g.gx, g.gy, g.gz, g.gdata)
    }
}

/// Per-rank element counts of one layer's calls (NCCL counts, rounded up).
struct Counts {
    /// Weight shard: AllGather send count, ReduceScatter receive count, data AllReduce buffer.
    shard: u64,
    /// Output block (`AR_out` buffer).
    out: u64,
    /// Input block (`AR_in` buffer).
    input: u64,
    /// Forward FLOPs of the local product.
    flops: f64,
}

fn counts(g: &Grid, l: &FcLayer, rows: f64) -> Counts {
    let (gx, gy) = if l.transposed { (g.gy as f64, g.gx as f64) } else { (g.gx as f64, g.gy as f64) };
    let gz = g.gz as f64;
    let tensor = g.tensor() as f64;
    Counts {
        shard: (l.k * l.n / tensor).ceil() as u64,
        out: (rows / gz * l.n / gx).ceil() as u64,
        input: (rows / gz * l.k / gy).ceil() as u64,
        flops: 2.0 * rows * l.k * l.n / tensor,
    }
}

/// The workload of an AxoNN model file (see the module notes).
pub fn workload(c: &ModelConfig) -> Result<Workload, ConfigError> {
    let j = AxonnJob::from_conf(c)?;
    let g = j.grid;
    let program = program(&j);
    let tensor = g.tensor() as u32;
    // Ranks at the same grid position in every data replica behave alike.
    let representative = (0..g.world() as u32).map(|r| r % tensor).collect();
    let notes = vec![format!(
        "{}: {} FC layers of {} blocks, {} rows per microbatch and replica, overlap {}",
        j.name(),
        4 * j.spec.layers,
        j.spec.layers,
        j.rows(),
        if j.overlap { "OAG+ORS+OAR" } else { "off" }
    )];
    Ok(single_program(j.name(), g.world(), j.iterations as u64, g.groups(), program, representative, notes))
}

fn program(j: &AxonnJob) -> Program {
    let g = j.grid;
    let mut t = TaskList::new();
    let fcs = fc_layers(&j.spec);
    let layers = j.spec.layers as usize;
    let rows = j.rows();
    let (gather, scatter, input_ar) =
        if j.overlap { (Stream::Comm(0), Stream::Comm(1), Stream::Comm(2)) } else { (Stream::Compute, Stream::Compute, Stream::Compute) };
    // (output AllReduce group, input-gradient AllReduce group) of a layer.
    let roles = |l: &FcLayer| if l.transposed { (GroupKind::TensorX, GroupKind::TensorY) } else { (GroupKind::TensorY, GroupKind::TensorX) };
    let h = j.spec.hidden as f64;
    let spread = g.tensor() as f64;
    let scores = 4.0 * j.micro_batch as f64 * (j.spec.seq_len as f64).powi(2) * h / (g.gx * g.gz) as f64;
    let head = 2.0 * rows * h * j.spec.vocab as f64 / spread;
    let coll = |t: &mut TaskList, stream: Stream, deps: Vec<u32>, kind: GroupKind, op: OpKind, count: u64, tag: u64| {
        g.has(kind).then(|| t.coll(stream, deps, kind, op, count, WIRE, tag))
    };
    for it in 0..j.iterations {
        let mut scatters = Vec::new();
        for _mb in 0..j.microbatches {
            t.phase = Phase::Forward;
            t.compute(Vec::new(), "embedding fwd", ComputeKind::Embedding, 2.0 * rows * h / spread, 0.0);
            let mut fwd_end: Vec<u32> = Vec::with_capacity(4 * layers);
            for layer in 0..layers {
                for (q, l) in fcs.iter().enumerate() {
                    let idx = 4 * layer + q;
                    let c = counts(&g, l, rows);
                    // OAG: the gather may start once the layer two before has computed.
                    let after = if idx >= 2 { vec![fwd_end[idx - 2]] } else { Vec::new() };
                    let tag = 0x1000 + 16 * idx as u64;
                    let ag = coll(&mut t, gather, after, GroupKind::TensorZ, OpKind::AllGather, c.shard, tag);
                    let name = format!("{} fwd", l.name);
                    let mm = t.compute(ag.into_iter().collect(), &name, ComputeKind::Gemm, c.flops, 0.0);
                    fwd_end.push(mm);
                    coll(&mut t, Stream::Compute, Vec::new(), roles(l).0, OpKind::AllReduce, c.out, tag + 1);
                    if q == 0 {
                        t.compute(Vec::new(), "attention fwd", ComputeKind::Attention, scores, 0.0);
                    }
                }
            }
            t.compute(Vec::new(), "output layer fwd", ComputeKind::Gemm, head, 0.0);
            t.compute(Vec::new(), "loss", ComputeKind::Elementwise, 0.0, 12.0 * rows * j.spec.vocab as f64 / spread);
            t.phase = Phase::InputGrad;
            t.compute(Vec::new(), "output layer bwd", ComputeKind::Gemm, 2.0 * head, 0.0);
            let mut input_grad: Option<u32> = None;
            for layer in (0..layers).rev() {
                for (q, l) in fcs.iter().enumerate().rev() {
                    let idx = 4 * layer + q;
                    let c = counts(&g, l, rows);
                    let tag = 0x2000 + 16 * idx as u64;
                    t.phase = Phase::InputGrad;
                    let di = t.compute(input_grad.into_iter().collect(), &format!("{} bwd", l.name), ComputeKind::Gemm, c.flops, 0.0);
                    let ar = coll(&mut t, input_ar, vec![di], roles(l).1, OpKind::AllReduce, c.input, tag + 1);
                    input_grad = Some(ar.unwrap_or(di));
                    t.phase = Phase::WeightGrad;
                    let dw = t.compute(Vec::new(), &format!("{} wgrad", l.name), ComputeKind::Gemm, c.flops, 0.0);
                    if let Some(rs) = coll(&mut t, scatter, vec![dw], GroupKind::TensorZ, OpKind::ReduceScatter, c.shard, tag + 2) {
                        scatters.push(rs);
                    }
                    if q == 1 {
                        // Between the attention output projection and QKV: scores and values.
                        t.phase = Phase::InputGrad;
                        let a = t.compute(input_grad.into_iter().collect(), "attention bwd", ComputeKind::Attention, 2.0 * scores, 0.0);
                        input_grad = Some(a);
                    }
                }
            }
            t.compute(input_grad.into_iter().collect(), "embedding bwd", ComputeKind::Embedding, 2.0 * rows * h / spread, 0.0);
        }
        // Data parallelism: each layer's gradient shard, once the Z reduce-scatters are done.
        t.phase = Phase::WeightGrad;
        let mut wait = scatters;
        let mut last = Vec::new();
        let mut held = 0.0;
        for layer in (0..layers).rev() {
            for (q, l) in fcs.iter().enumerate().rev() {
                let c = counts(&g, l, rows);
                held += c.shard as f64;
                let tag = 0x600 + 16 * (4 * layer + q) as u64;
                if let Some(ar) = coll(&mut t, Stream::Compute, std::mem::take(&mut wait), GroupKind::Dp, OpKind::AllReduce, c.shard, tag) {
                    last = vec![ar];
                }
            }
        }
        if !wait.is_empty() {
            last = wait;
        }
        t.phase = Phase::Optimizer;
        t.optimizer(last, held);
        t.end_iteration(it as u32);
    }
    Program { tasks: t.tasks }
}
