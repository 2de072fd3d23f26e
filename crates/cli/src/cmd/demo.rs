//! `commlens demo`: placeholder until the generator lands.
use super::CmdResult;
use std::path::PathBuf;
pub fn run(_out: Option<PathBuf>) -> CmdResult {
    Err("demo not yet available".into())
}
