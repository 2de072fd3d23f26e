//! The training simulator: a [`commlens_workload::Workload`] on a
//! [`commlens_model::Cluster`], executed as discrete events over ranks, with its result in
//! the canonical table.
//!
//! | module | owns |
//! |---|---|
//! | `network` | the engine ↔ network interface ([`network::Network`], [`network::NetOp`]) |
//! | `analytical` | the analytical backend: collective time from the collective model, links shared by count |
//! | `flow` | the flow-level backend: max-min fair rates over the cluster's links, ECMP, rail routing |
//! | `compute` | GPU presets, the roofline per compute kind, measured kernel tables |
//! | `engine` | discrete events over ranks: streams, collectives complete when all members arrive, Send/Recv matching |
//! | `output` | the simulated run as an `OpTable` of `Simulated` rows, compute spans, summary |
//! | `simai` | SimAI 1.6 analytical's busbw rule, for side-by-side checks on the same flags |

pub mod analytical;
pub mod compute;
pub mod engine;
pub mod flow;
pub mod network;
pub mod output;
pub mod simai;
