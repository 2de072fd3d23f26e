//! Compute model: how long a compute step takes on a GPU.
//!
//! Owns the [`ComputeCost`] interface the engine calls and its implementations:
//!
//! | module | owns |
//! |---|---|
//! | `roofline` | [`Roofline`]: per-kind efficiency curves over the GPU's peak FLOP/s and HBM bandwidth (`commlens_model::gpu`), a launch floor, and SimAI-CP-Model's rule for moving a stated time to another GPU |
//! | `kernels` | [`KernelTable`]: medians of measured kernel durations by name, and [`KernelCost`], the table with the roofline behind it |
//! | `traces` | reading Kineto JSON (plain, gzip, tar.gz archives of them) and nsys SQLite exports into kernel samples (feature `traces`) |
//!
//! Precedence, most specific first: a kernel-table hit for the step's name, then the time the
//! workload states (`Compute::time_us`, rescaled when the user targets another GPU than the one
//! it was measured on), then the roofline from `flops` and `mem_bytes`.

mod kernels;
mod roofline;
#[cfg(feature = "traces")]
mod traces;

pub use kernels::{normalise_kernel_name, KernelCost, KernelStat, KernelTable};
pub use roofline::{curve, Bound, KindCurve, Roofline, DEFAULT_LAUNCH_US};

use commlens_workload::Compute;

/// Turns a compute step into time; shared by every rank (the engine calls it from many threads).
pub trait ComputeCost: Sync {
    /// Duration of `c` in microseconds.
    fn time_us(&self, c: &Compute) -> f64;
}
