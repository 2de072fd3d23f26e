//! From command-line paths to one assembled table: expands folders, reads
//! every file in parallel (rayon), merges the per-file tables and runs
//! [`commlens_core::assemble`].

use crate::error::IngestError;
use crate::kineto::{KernelTrace, TraceOptions};
use crate::merge::{merge_tables, Remap};
use crate::nccl_log::{self, ReadOptions, ReadReport};
use commlens_core::{CollOp, OpTable};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// Files found under the given paths. Folders are walked recursively, in
/// name order; hidden files and what commlens itself writes (Parquet, HTML,
/// Perfetto and its own Chrome traces, `summary.json`, model files) are
/// skipped, so an output folder next to the inputs does not get in the way. The flag says whether the file was
/// named explicitly (an explicit non-log is an error, a file found in a folder
/// that is not a log is skipped with a note).
///
/// Every real file is listed once and every folder walked once, however
/// many links lead to them (see [`expand_inputs_noted`], which also says
/// what was passed over).
pub fn expand_inputs(paths: &[PathBuf]) -> Result<Vec<(PathBuf, bool)>, IngestError> {
    expand_inputs_noted(paths).map(|e| e.files)
}

/// What [`expand_inputs_noted`] found.
#[derive(Debug, Default, Clone)]
pub struct Expanded {
    /// The files to read, each real file once; the flag says whether it was named explicitly.
    pub files: Vec<(PathBuf, bool)>,
    /// Paths passed over because the file or folder they lead to (through a
    /// symbolic link, or named twice) was already listed or walked: the path
    /// and the one it was read as. A link to an enclosing folder is one of
    /// them, so walks always end.
    pub skipped: Vec<(PathBuf, PathBuf)>,
}

/// [`expand_inputs`], with the paths that were passed over as already read.
/// Files are told apart by (device, inode), so links, hard links and a path
/// named twice are read once.
pub fn expand_inputs_noted(paths: &[PathBuf]) -> Result<Expanded, IngestError> {
    let mut w = Walk::default();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| IngestError::Io { path: p.clone(), source: e })?;
        if meta.is_dir() {
            if w.first(p, &meta) {
                w.walk(p)?;
            }
        } else {
            w.file(p, &meta, true);
        }
    }
    if w.out.files.is_empty() {
        return Err(IngestError::NoInputs { paths: paths.to_vec() });
    }
    Ok(w.out)
}

/// Identity of a file or folder, the same through every link to it.
#[cfg(unix)]
fn file_key(_path: &Path, meta: &std::fs::Metadata) -> (u64, u64, PathBuf) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino(), PathBuf::new())
}

#[cfg(not(unix))]
fn file_key(path: &Path, _meta: &std::fs::Metadata) -> (u64, u64, PathBuf) {
    (0, 0, std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
}

#[derive(Default)]
struct Walk {
    out: Expanded,
    seen: std::collections::HashMap<(u64, u64, PathBuf), PathBuf>,
}

impl Walk {
    /// Records `path`; false (and a note) when what it leads to was seen.
    fn first(&mut self, path: &Path, meta: &std::fs::Metadata) -> bool {
        match self.seen.entry(file_key(path, meta)) {
            std::collections::hash_map::Entry::Occupied(e) => {
                self.out.skipped.push((path.to_path_buf(), e.get().clone()));
                false
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(path.to_path_buf());
                true
            }
        }
    }

    fn file(&mut self, path: &Path, meta: &std::fs::Metadata, explicit: bool) {
        if self.first(path, meta) {
            self.out.files.push((path.to_path_buf(), explicit));
        }
    }

    fn walk(&mut self, dir: &Path) -> Result<(), IngestError> {
        let rd = std::fs::read_dir(dir).map_err(|e| IngestError::Io { path: dir.to_path_buf(), source: e })?;
        let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for e in entries {
            let hidden = e.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
            if hidden {
                continue;
            }
            // Follows links; a dangling one is passed over, as before.
            let Ok(meta) = std::fs::metadata(&e) else { continue };
            if meta.is_dir() {
                if self.first(&e, &meta) {
                    self.walk(&e)?;
                }
            } else if meta.is_file() && !is_commlens_output(&e) {
                self.file(&e, &meta, false);
            }
        }
        Ok(())
    }
}

/// Files commlens writes, recognised by extension or (Chrome traces) by the
/// generator field in their first bytes; never inputs.
fn is_commlens_output(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let ext = p.extension().and_then(|x| x.to_str()).unwrap_or("").to_ascii_lowercase();
    if matches!(ext.as_str(), "parquet" | "html" | "htm" | "pftrace" | "png" | "conf" | "md") || name == "summary.json" {
        return true;
    }
    if ext == "json" {
        use std::io::Read;
        let mut head = [0u8; 256];
        let n = std::fs::File::open(p).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
        return memchr::memmem::find(&head[..n], b"\"generator\":\"commlens").is_some();
    }
    false
}

/// What a file holds, judged by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// `NCCL_DEBUG` text (the default for anything that is not recognised below).
    NcclLog,
    /// PyTorch profiler Chrome-trace JSON (plain or gzip).
    Kineto,
    /// Nsight Systems SQLite export.
    NsysSqlite,
    /// Output of the commlens profiler plugin (`commlens-plugin v1 …`).
    PluginOutput,
    /// NCCL Inspector JSON lines (NVIDIA's Inspector profiler plugin).
    Inspector,
    /// Chrome-trace dump of NVIDIA's example profiler plugin.
    ExamplePlugin,
}

impl InputFormat {
    pub fn name(self) -> &'static str {
        match self {
            InputFormat::NcclLog => "NCCL debug log",
            InputFormat::Kineto => "Kineto trace",
            InputFormat::NsysSqlite => "nsys SQLite export",
            InputFormat::PluginOutput => "commlens plugin output",
            InputFormat::Inspector => "NCCL Inspector output",
            InputFormat::ExamplePlugin => "NCCL example-plugin trace",
        }
    }

    /// Inputs of one family can be read together.
    fn family(self) -> u8 {
        match self {
            InputFormat::NcclLog => 0,
            InputFormat::Kineto | InputFormat::NsysSqlite => 1,
            InputFormat::PluginOutput => 2,
            InputFormat::Inspector => 3,
            InputFormat::ExamplePlugin => 4,
        }
    }
}

/// Looks at the first bytes (decompressed when gzip) of a file.
pub fn sniff(path: &Path) -> Result<InputFormat, IngestError> {
    use std::io::Read;
    let io = |e| IngestError::Io { path: path.to_path_buf(), source: e };
    let mut src = crate::lines::open_maybe_gz(path).map_err(io)?;
    let mut head = vec![0u8; 64 << 10];
    let mut n = 0;
    while n < head.len() {
        match src.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // A corrupt gzip stream: let the reader report it properly.
            Err(_) => break,
        }
    }
    let head = &head[..n];
    if crate::plugin_out::is_plugin_output(head) {
        return Ok(InputFormat::PluginOutput);
    }
    if head.starts_with(b"SQLite format 3\0") {
        return Ok(InputFormat::NsysSqlite);
    }
    let text = crate::bytes::trim_ascii(head);
    if text.starts_with(b"{")
        && [&b"\"traceEvents\""[..], b"\"schemaVersion\"", b"\"deviceProperties\""]
            .iter()
            .any(|k| memchr::memmem::find(text, k).is_some())
    {
        return Ok(InputFormat::Kineto);
    }
    // JSON objects or an array of them: NVIDIA's plugin outputs.
    if text.starts_with(b"{") || text.starts_with(b"[") {
        match crate::json_util::sniff_format(path) {
            Ok(Some(crate::json_util::PluginFormat::Inspector)) => return Ok(InputFormat::Inspector),
            Ok(Some(crate::json_util::PluginFormat::ExamplePlugin)) => return Ok(InputFormat::ExamplePlugin),
            _ => {}
        }
    }
    Ok(InputFormat::NcclLog)
}

/// Reads inputs of any supported kind into one table: NCCL logs through
/// [`load_inputs`], kernel traces (Kineto, nsys) through their readers and
/// `kineto::to_op_table`, plugin output through `plugin_out`. Logs, traces
/// and plugin files describe the same operations from different sides, so
/// mixing the families is refused (joining them is trace fusion).
pub fn load_any(paths: &[PathBuf], opts: &ReadOptions) -> Result<Loaded, IngestError> {
    let files = expand_inputs(paths)?;
    let mut kinds = Vec::with_capacity(files.len());
    for (p, _) in &files {
        kinds.push(sniff(p)?);
    }
    if kinds.iter().all(|k| *k == InputFormat::NcclLog) {
        return load_inputs(paths, opts);
    }
    if let Some(other) = kinds.iter().position(|k| k.family() != kinds[0].family()) {
        return Err(IngestError::Format {
            path: files[0].0.clone(),
            line: None,
            what: format!(
                "is a {} but {} is a {}; read logs, kernel traces and plugin output separately \
                 (to join NCCL logs with kernel traces: commlens fuse --nccl-log LOGS --nsys|--kineto TRACES -o DIR)",
                kinds[0].name(),
                files[other].0.display(),
                kinds[other].name()
            ),
        });
    }
    if matches!(kinds[0], InputFormat::Inspector | InputFormat::ExamplePlugin) {
        let opts = crate::json_util::PluginOptions::default();
        let res = if kinds[0] == InputFormat::Inspector {
            crate::inspector::load_paths(paths, &opts)
        } else {
            crate::example_plugin::load_paths(paths, &opts)
        };
        let (table, nvidia_reports) = res.map_err(|e| IngestError::Format {
            path: files[0].0.clone(),
            line: None,
            what: e.to_string(),
        })?;
        return Ok(Loaded { table, nvidia_reports, ..Loaded::empty() });
    }
    if kinds[0] == InputFormat::PluginOutput {
        let (table, plugin_reports) = crate::plugin_out::load_plugin_outputs(paths)?;
        return Ok(Loaded { table, plugin_reports, ..Loaded::empty() });
    }
    let trace_opts = TraceOptions::default();
    let traces: Vec<Result<KernelTrace, _>> = files
        .par_iter()
        .zip(kinds.par_iter())
        .map(|((p, _), k)| match k {
            InputFormat::NsysSqlite => crate::nsys::load_nsys_with(p, &trace_opts),
            _ => crate::kineto::load_kineto_with(p, &trace_opts),
        })
        .collect();
    let mut ok = Vec::new();
    for (t, (p, _)) in traces.into_iter().zip(&files) {
        ok.push(t.map_err(|e| IngestError::Format { path: p.clone(), line: None, what: e.to_string() })?);
    }
    let (table, _) = crate::kineto::to_op_table(&ok);
    Ok(Loaded { table, traces: ok, ..Loaded::empty() })
}

/// Everything loaded from the inputs.
pub struct Loaded {
    pub table: OpTable,
    /// One per NCCL log read.
    pub reports: Vec<ReadReport>,
    /// Kernel traces read (Kineto, nsys), operations already in `table`.
    pub traces: Vec<KernelTrace>,
    /// Plugin output files read, operations already in `table`.
    pub plugin_reports: Vec<crate::plugin_out::PluginReport>,
    /// NVIDIA plugin outputs read (Inspector, example plugin).
    pub nvidia_reports: Vec<crate::json_util::PluginReport>,
    /// Files found in folders that were not NCCL logs, with the reason.
    pub skipped_files: Vec<(PathBuf, String)>,
    /// Per input file, how its indices map into `table`.
    pub remaps: Vec<Remap>,
}

/// Reads all inputs in parallel, one file per task. Each file gets its own
/// state from `make`, and `per_op` folds every operation into it as it is read
/// (with the file's own indices; `Loaded::remaps[i]` maps them into the merged
/// table). With `keep_ops` the operations are also stored in the table.
/// Returns the states in file order, next to `Loaded::remaps`.
pub fn load_inputs_with<S, M, F>(
    paths: &[PathBuf],
    opts: &ReadOptions,
    keep_ops: bool,
    make: M,
    per_op: F,
) -> Result<(Loaded, Vec<S>), IngestError>
where
    S: Send + Default,
    M: Fn() -> S + Sync,
    F: Fn(&mut S, &CollOp) + Sync,
{
    let files = expand_inputs(paths)?;
    let results: Vec<(PathBuf, bool, Result<(OpTable, ReadReport), IngestError>, S)> = files
        .par_iter()
        .map(|(path, explicit)| {
            // Operations go straight to their device's list (one copy of the
            // table in memory, not a flat list plus the per-device one).
            let mut per_dev: Vec<Vec<CollOp>> = Vec::new();
            let mut state = make();
            let res = nccl_log::read_path(path, opts, &mut |op| {
                per_op(&mut state, &op);
                if keep_ops {
                    let d = op.dev.ix();
                    if per_dev.len() <= d {
                        per_dev.resize_with(d + 1, Vec::new);
                    }
                    per_dev[d].push(op);
                }
            });
            let res = res.map(|(mut t, r)| {
                per_dev.resize_with(t.devices.len().max(per_dev.len()), Vec::new);
                for ops in &mut per_dev {
                    ops.shrink_to_fit();
                }
                t.per_rank = per_dev;
                (t, r)
            });
            (path.clone(), *explicit, res, state)
        })
        .collect();
    let mut parts = Vec::new();
    let mut reports = Vec::new();
    let mut skipped_files = Vec::new();
    let mut file_slot = Vec::new();
    let mut states = Vec::with_capacity(files.len());
    for (i, (path, explicit, res, state)) in results.into_iter().enumerate() {
        states.push(state);
        match res {
            Ok((t, r)) => {
                parts.push(t);
                reports.push(r);
                file_slot.push(i);
            }
            Err(e @ (IngestError::NotNcclLog { .. } | IngestError::Binary { .. })) if !explicit => {
                skipped_files.push((path, e.to_string()));
            }
            Err(e) => return Err(e),
        }
    }
    if parts.is_empty() {
        return Err(IngestError::NoInputs { paths: paths.to_vec() });
    }
    let (mut table, part_remaps) = merge_tables(parts);
    // Folded processes interleave; restore source order per rank.
    for r in &mut table.per_rank {
        r.sort_by_key(|op| op.line);
    }
    commlens_core::assemble::assemble(&mut table);
    // Remaps indexed by the original file position, so per_op's index works.
    let mut remaps = vec![Remap::default(); files.len()];
    for (slot, r) in file_slot.into_iter().zip(part_remaps) {
        remaps[slot] = r;
    }
    Ok((Loaded { table, reports, skipped_files, remaps, ..Loaded::empty() }, states))
}

impl Loaded {
    /// Nothing loaded yet.
    pub fn empty() -> Loaded {
        Loaded {
            table: OpTable::default(),
            reports: Vec::new(),
            traces: Vec::new(),
            plugin_reports: Vec::new(),
            nvidia_reports: Vec::new(),
            skipped_files: Vec::new(),
            remaps: Vec::new(),
        }
    }
}

/// Reads all inputs into one assembled table with every operation stored.
pub fn load_inputs(paths: &[PathBuf], opts: &ReadOptions) -> Result<Loaded, IngestError> {
    load_inputs_with(paths, opts, true, || (), |_: &mut (), _| {}).map(|(l, _)| l)
}

#[cfg(all(test, unix))]
mod walk_tests {
    use super::*;

    #[test]
    fn links_lead_to_each_file_and_folder_once() {
        let root = std::env::temp_dir().join(format!("commlens-walk-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let sub = root.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join("a.log"), "x").unwrap();
        std::fs::write(sub.join("b.log"), "y").unwrap();
        std::os::unix::fs::symlink("..", sub.join("up")).unwrap();
        std::os::unix::fs::symlink("..", sub.join("up2")).unwrap();
        std::os::unix::fs::symlink("a.log", sub.join("c.log")).unwrap();
        std::fs::hard_link(sub.join("b.log"), sub.join("d.log")).unwrap();
        let e = expand_inputs_noted(&[root.clone(), sub.join("a.log")]).unwrap();
        let names: Vec<_> = e.files.iter().map(|(p, _)| p.file_name().unwrap().to_str().unwrap().to_string()).collect();
        assert_eq!(names, ["a.log", "b.log"]);
        // c.log, d.log, up, up2, and the explicit a.log.
        assert_eq!(e.skipped.len(), 5, "{:?}", e.skipped);
        assert!(e.skipped.iter().any(|(p, first)| p.ends_with("c.log") && first.ends_with("a.log")));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
