//! Chakra execution traces as workloads: the protobuf `.et` files ASTRA-sim reads (one per
//! rank, `<prefix>.<rank>.et`), their JSON `workload_graph` form, and PyTorch execution
//! traces (JSON, `.json.gz`), alone, as a folder or prefix, or packed in `.tar.gz` archives.
//! Each rank file becomes one program (`rank_program[r] = r`); a lone trace of a multi-rank
//! job (its process groups say how many ranks) is replicated to every rank.
//!
//! | module | owns |
//! |---|---|
//! | `archive` | inputs → named in-memory members (folders, gzip, tar), bounded |
//! | `proto` | the `.et` protobuf record stream |
//! | `et` | Chakra graph nodes (protobuf and JSON) → raw nodes |
//! | `pytorch` | PyTorch ET JSON (both schemas) → raw nodes |
//! | `torch_args` | PyTorch ET argument values: tensors, `record_param_comms` fields |
//! | `raw` | the intermediate form and shared name heuristics |
//! | `build` | raw traces → [`Workload`]: groups, dependency order, streams |
//! | `kineto` | measured times from the same job's Kineto traces |
//! | `host_deps` | with host time: compute tasks wait for collectives only where the CPU did |

mod archive;
mod build;
mod et;
pub mod kineto;
mod host_deps;
mod proto;
mod pytorch;
mod raw;
mod torch_args;

pub use kineto::{
    attach_kineto_times, attach_kineto_times_with, read_measured, AttachOptions, LinkReport,
    MeasuredColl, MeasuredRank, RankLink,
};

use crate::Workload;
use raw::RawTrace;
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// Largest file, archive member or decompressed stream read (1 GiB).
pub const MAX_MEMBER_BYTES: u64 = 1 << 30;

/// Most ranks a lone trace may be replicated to (its process groups state the job size).
pub const MAX_WORLD: u32 = 1 << 20;

/// Why a trace could not be loaded. Every variant names the file (`archive!member` inside
/// archives).
#[derive(Debug, Clone, PartialEq)]
pub enum ChakraError {
    Io {
        path: String,
        message: String,
    },
    /// The bytes are not what the format expects at `at`.
    Format {
        file: String,
        at: String,
        expected: String,
    },
    /// The dependency graph is unusable (cycle, duplicate id, dependency on an absent node).
    Graph {
        file: String,
        message: String,
    },
    /// A member or stream over the size limit.
    TooLarge {
        file: String,
        limit: u64,
    },
    /// Nothing to load, or several trace sets where one was expected.
    Input {
        path: String,
        message: String,
    },
}

impl ChakraError {
    pub(crate) fn format(
        file: impl Into<String>,
        at: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        ChakraError::Format {
            file: file.into(),
            at: at.into(),
            expected: expected.into(),
        }
    }
}

impl fmt::Display for ChakraError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChakraError::Io { path, message } => write!(f, "{path}: {message}"),
            ChakraError::Format { file, at, expected } => {
                write!(f, "{file}: {at}: expected {expected}")
            }
            ChakraError::Graph { file, message } => write!(f, "{file}: {message}"),
            ChakraError::TooLarge { file, limit } => {
                write!(f, "{file}: larger than the {limit}-byte limit")
            }
            ChakraError::Input { path, message } => write!(f, "{path}: {message}"),
        }
    }
}

impl std::error::Error for ChakraError {}

/// Choices for [`load_path_with`].
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Ranks of the job when a lone trace does not say (a lone `.et` otherwise loads as one
    /// rank).
    pub world: Option<u32>,
    /// Which trace set to load when the input holds several (matched against the set's name,
    /// the file name with its rank number removed, e.g. `small_chakra`).
    pub set: Option<String>,
}

/// Loads a Chakra `.et` file, a PyTorch ET JSON (`.json`, `.json.gz`), a folder of rank files,
/// a prefix (`dir/all_reduce` for `dir/all_reduce.<r>.et`), or a `.tar.gz` / `.tgz` of them.
pub fn load_path(path: &Path) -> Result<Workload, ChakraError> {
    load_path_with(path, &LoadOptions::default())
}

/// A parsed rank file with the set it belongs to.
struct Parsed {
    set: String,
    number: Option<u32>,
    trace: RawTrace,
}

/// `dir/all_reduce.3.et` → (`dir/all_reduce`, 3); `dlrm_eg_3.json` → (`dlrm_eg`, 3).
fn set_and_number(name: &str) -> (String, Option<u32>) {
    let mut stem = name;
    for ext in [".gz", ".json", ".et", ".pb"] {
        stem = stem.strip_suffix(ext).unwrap_or(stem);
    }
    let digits = stem.len() - stem.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 9 {
        return (stem.to_string(), None);
    }
    let (head, num) = stem.split_at(stem.len() - digits);
    let head = head.strip_suffix(['.', '_', '-']).unwrap_or(head);
    (head.to_string(), num.parse().ok())
}

#[derive(Deserialize)]
struct JsonDoc {
    #[serde(default)]
    nodes: Option<Vec<pytorch::PtNode>>,
    #[serde(default)]
    workload_graph: Option<Vec<et::WgNode>>,
    #[serde(rename = "traceEvents", default)]
    trace_events: Option<serde::de::IgnoredAny>,
}

/// Parses one member by its content (JSON when it starts with `{`, else protobuf), unless its
/// name says otherwise. `Ok(None)`: not a trace (passed over inside folders and archives).
fn parse_member(name: &str, bytes: &[u8], strict: bool) -> Result<Option<RawTrace>, ChakraError> {
    let lower = name.to_ascii_lowercase();
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
    let is_et = lower.ends_with(".et") || lower.ends_with(".et.gz");
    let is_json = lower.ends_with(".json") || lower.ends_with(".json.gz");
    if !is_et && first == Some(b'{') || is_json {
        let doc: JsonDoc = serde_json::from_slice(bytes).map_err(|e| {
            ChakraError::format(
                name,
                format!("line {} column {}", e.line(), e.column()),
                format!("a PyTorch ET or Chakra JSON document ({e})"),
            )
        })?;
        if let Some(nodes) = doc.nodes {
            return pytorch::from_pytorch(name, nodes).map(Some);
        }
        if let Some(g) = doc.workload_graph {
            return et::from_workload_graph(name, g).map(Some);
        }
        if doc.trace_events.is_some() && !strict {
            return Ok(None); // a Kineto trace beside the execution traces
        }
        return Err(ChakraError::format(
            name,
            "top level",
            "a \"nodes\" (PyTorch ET) or \"workload_graph\" (Chakra JSON) array",
        ));
    }
    if !is_et && !strict {
        return Ok(None);
    }
    let f = proto::parse_et(name, bytes)?;
    Ok(Some(et::from_et(name, f)))
}

/// Loads one trace held in memory (`name` says its format when the content does not).
pub fn load_bytes(name: &str, bytes: &[u8]) -> Result<Workload, ChakraError> {
    let bytes = archive::gunzip_if(name, bytes.to_vec())?;
    let trace = parse_member(name, &bytes, true)?.ok_or_else(|| ChakraError::Input {
        path: name.into(),
        message: "not a trace".into(),
    })?;
    assemble(
        name,
        vec![Parsed {
            set: name.into(),
            number: None,
            trace,
        }],
        &LoadOptions::default(),
    )
}

/// Files named `<prefix>.<n>.et` (or `_<n>`, `.json`, `.json.gz`) beside a prefix.
fn prefix_files(path: &Path) -> Result<Vec<PathBuf>, ChakraError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let Some(stem) = path.file_name().map(|s| s.to_string_lossy().into_owned()) else {
        return Err(ChakraError::Input {
            path: path.display().to_string(),
            message: "no such file, folder or prefix".into(),
        });
    };
    let rd = std::fs::read_dir(dir).map_err(|e| ChakraError::Io {
        path: path.display().to_string(),
        message: format!("no such file; as a prefix: {e}"),
    })?;
    let mut out = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let (set, num) = set_and_number(&name);
        if set == stem && num.is_some() {
            out.push(e.path());
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(ChakraError::Input {
            path: path.display().to_string(),
            message: "no such file or folder, and no rank files <prefix>.<rank>.et beside it"
                .into(),
        });
    }
    Ok(out)
}

/// [`load_path`] with options.
pub fn load_path_with(path: &Path, opts: &LoadOptions) -> Result<Workload, ChakraError> {
    let shown = path.display().to_string();
    let inputs: Vec<PathBuf> = if path.exists() {
        vec![path.to_path_buf()]
    } else {
        prefix_files(path)?
    };
    let single_file = inputs.len() == 1 && path.is_file() && !archive::is_archive(&shown);
    let mut parsed: Vec<Parsed> = Vec::new();
    for p in &inputs {
        archive::for_each_member(p, &mut |m| {
            if let Some(trace) = parse_member(&m.name, &m.bytes, single_file)? {
                let base = m
                    .name
                    .rsplit(['/', '!'])
                    .next()
                    .unwrap_or(&m.name)
                    .to_string();
                let (set, number) = set_and_number(&base);
                let dir = m.name[..m.name.len() - base.len()].to_string();
                parsed.push(Parsed {
                    set: format!("{dir}{set}"),
                    number,
                    trace,
                });
            }
            Ok(())
        })?;
    }
    if parsed.is_empty() {
        return Err(ChakraError::Input {
            path: shown,
            message: "holds no Chakra ET (.et) or PyTorch ET (.json) trace".into(),
        });
    }
    assemble(&shown, parsed, opts)
}

fn assemble(
    shown: &str,
    mut parsed: Vec<Parsed>,
    opts: &LoadOptions,
) -> Result<Workload, ChakraError> {
    let mut sets: Vec<String> = Vec::new();
    for p in &parsed {
        if !sets.contains(&p.set) {
            sets.push(p.set.clone());
        }
    }
    if sets.len() > 1 {
        let pick: Vec<String> = match &opts.set {
            Some(want) => sets
                .iter()
                .filter(|s| {
                    s.ends_with(want.as_str()) || s.rsplit(['/', '!']).next() == Some(want.as_str())
                })
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        if pick.len() != 1 {
            return Err(ChakraError::Input {
                path: shown.to_string(),
                message: format!(
                    "holds {} trace sets ({}); choose one by name (`--trace-set NAME` on the command line)",
                    sets.len(),
                    sets.join(", ")
                ),
            });
        }
        parsed.retain(|p| p.set == pick[0]);
    }
    let set = parsed[0].set.clone();
    let name = set.rsplit(['/', '!']).next().unwrap_or(&set).to_string();
    let mut notes = Vec::new();
    if parsed.len() == 1 {
        let p = parsed.pop().expect("one");
        let world = opts.world.or(p.trace.world_hint).unwrap_or(1).max(1);
        if world > MAX_WORLD {
            return Err(ChakraError::Input {
                path: p.trace.source.clone(),
                message: format!(
                    "states a {world}-rank job; at most {MAX_WORLD} ranks are replicated"
                ),
            });
        }
        if world > 1 {
            notes.push(format!(
                "one trace ({}) of a {world}-rank job: every rank runs its program",
                p.trace.source
            ));
        } else if p.trace.world_hint.is_none() {
            notes.push(format!(
                "{}: the trace names no job size; loaded as one rank",
                p.trace.source
            ));
        }
        return build::build(
            &name,
            vec![p.trace],
            build::Layout::Replicated { world },
            notes,
        );
    }
    let n = parsed.len();
    let is_perm = |v: &[Option<u32>]| {
        let mut seen = vec![false; n];
        v.iter().all(|x| matches!(x, Some(r) if (*r as usize) < n && !std::mem::replace(&mut seen[*r as usize], true)))
    };
    let by_name: Vec<Option<u32>> = parsed.iter().map(|p| p.number).collect();
    let by_trace: Vec<Option<u32>> = parsed.iter().map(|p| p.trace.rank_hint).collect();
    let ranks: Vec<u32> = if is_perm(&by_name) {
        by_name.into_iter().map(|r| r.unwrap_or(0)).collect()
    } else if is_perm(&by_trace) {
        notes.push("ranks taken from the traces (file numbers are not 0..n-1)".to_string());
        by_trace.into_iter().map(|r| r.unwrap_or(0)).collect()
    } else {
        notes.push(
            "neither file numbers nor traces give ranks 0..n-1: ranks in file-name order"
                .to_string(),
        );
        parsed.sort_by(|a, b| a.trace.source.cmp(&b.trace.source));
        (0..n as u32).collect()
    };
    for (p, &r) in parsed.iter().zip(&ranks) {
        if let Some(h) = p.trace.rank_hint.filter(|&h| h != r) {
            notes.push(format!(
                "{}: loaded as rank {r}, the trace says rank {h}",
                p.trace.source
            ));
        }
        if let Some(w) = p.trace.world_hint.filter(|&w| w as usize != n) {
            notes.push(format!(
                "{}: the trace says {w} ranks, the set holds {n} files",
                p.trace.source
            ));
        }
    }
    let mut slots: Vec<Option<RawTrace>> = (0..n).map(|_| None).collect();
    for (p, r) in parsed.into_iter().zip(ranks) {
        slots[r as usize] = Some(p.trace);
    }
    let traces: Vec<RawTrace> = slots
        .into_iter()
        .map(|t| t.expect("ranks are a permutation"))
        .collect();
    build::build(&name, traces, build::Layout::PerRank, notes)
}
