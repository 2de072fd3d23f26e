//! Compute model: how long a compute step takes on a GPU.
//!
//! (being written: GPU presets, roofline per compute kind, measured kernel tables.)

use commlens_workload::Compute;

/// Turns a compute step into time; shared by every rank (the engine calls it from many threads).
pub trait ComputeCost: Sync {
    /// Duration of `c` in microseconds.
    fn time_us(&self, c: &Compute) -> f64;
}
