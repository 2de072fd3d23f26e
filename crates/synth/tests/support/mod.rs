//! Shared support of the synth integration tests.

pub mod cases;
