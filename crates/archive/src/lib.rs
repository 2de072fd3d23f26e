//! Containers commlens reads its inputs from.
//!
//! | module | owns |
//! |---|---|
//! | [`tar`] | gzip detection and decoding, the tar reader (member by member, streamed or buffered) |
//! | [`unpack`] | which files are archives (`.tar`, `.tar.gz`/`.tgz`, `.zip`, told by their bytes) and unpacking one into a folder, streamed, so that every reader sees plain files |
//!
//! `commlens-workload` re-exports [`tar`] as `commlens_workload::archive` (Chakra archives,
//! measured kernel traces); `commlens-ingest` re-exports [`unpack`] for the inputs of every
//! command. Zip support is the `zip` feature (the `zip` crate, deflate only).

pub mod tar;
pub mod unpack;

pub use tar::*;
