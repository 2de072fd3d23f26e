//! The project's tar and gzip container reading, now in `commlens-archive` (the inputs of
//! every command use it too); re-exported here for the Chakra / Kineto front ends
//! ([`crate::chakra`]) and the simulator's kernel tables (`commlens-sim`).

pub use commlens_archive::tar::*;
