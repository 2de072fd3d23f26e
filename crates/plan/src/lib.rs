//! The planner: AxoNN's performance and memory models (Singh 2025) and the best parallel
//! layout for a model on a cluster (`commlens plan`).
//!
//! | module | owns |
//! |---|---|
//! | `layout` | [`Layout`]: one record of every family's degrees under their usual names; the mapping onto AxoNN's 4D grid |
//! | `axonn` | eqs. 5.1–5.7: per-layer ring times, transposed layers, group membership, placement-aware bandwidths |
//! | `bandwidth` | the intra-node table and β_inter from the collective model (concurrent 1 GB AllReduces) or measured nccl-tests |
//! | `memory` | per-GPU memory: states (18/16/20 bytes, ZeRO 1–3, SAMO), activations (Korthikanti; eq. 3.1), in-flight micro-batches, buffers |
//! | `samo` | eqs. 4.1–4.11: SAMO's state, savings, break-even, pipeline terms |
//! | `ted` | eqs. 7.1–7.7: TED's parameter split, memory bound, largest base model; the dissertation's machines |
//! | `conf` | a `model.conf` (or `model = NAME`) as the planner's model, batch and own layout |
//! | `enumerate` | every valid layout per family, user constraints |
//! | `estimate` | the analytical iteration: roofline compute, bubble, AxoNN communication (+ PP, EP extensions) |
//! | `simulate` | a Megatron layout through the simulator's analytical mode |
//! | `rank` | [`plan`]: memory filter, analytical ranking, simulator re-ranking of the top K, MFU and bottleneck |

pub mod axonn;
pub mod bandwidth;
pub mod conf;
pub mod enumerate;
pub mod estimate;
pub mod layout;
pub mod memory;
pub mod rank;
pub mod samo;
pub mod simulate;
pub mod ted;

pub use enumerate::Constraints;
pub use layout::{Family, Layout, Recompute};
pub use rank::{plan, Plan, PlanRequest, PlanRow};
