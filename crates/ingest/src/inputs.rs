//! From command-line paths to one assembled table of NCCL logs: expands
//! folders, reads every file in parallel (rayon), merges the per-file tables
//! and runs [`commlens_core::assemble`]; archives named as inputs are
//! unpacked first ([`unpack_archives`]). Inputs of every kind together:
//! [`crate::load_any`].

use crate::error::IngestError;
use crate::kineto::KernelTrace;
use crate::merge::{Merger, Remap, Screen, Screener};
pub use crate::kind::{sniff, InputFormat};
pub use crate::load_any::load_any;
pub use crate::same_content::drop_same_content;
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
        w.named(p)?;
    }
    if w.out.files.is_empty() {
        return Err(IngestError::NoInputs { paths: paths.to_vec() });
    }
    Ok(w.out)
}

/// Whether [`expand_inputs`] would find a file under `paths`: the same
/// answer (and the same error for a path that cannot be read), but the walk
/// stops at the first file, so a caller that only sorts folders (the
/// command line's Parquet check) does not look at 100,000 logs twice.
pub fn has_inputs(paths: &[PathBuf]) -> Result<bool, IngestError> {
    let mut w = Walk { first_only: true, ..Walk::default() };
    for p in paths {
        w.named(p)?;
        if !w.out.files.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The archives among `paths` (`.tar`, `.tar.gz`/`.tgz`, `.zip`, told by
/// their bytes) unpacked, each into its own folder under `into`, and the
/// other paths as they are: the paths to read, in order, and one note per
/// archive. Members are streamed to disk, never held in memory whole; the
/// caller removes `into` when done.
pub fn unpack_archives(paths: &[PathBuf], into: &Path) -> Result<(Vec<PathBuf>, Vec<String>), IngestError> {
    use commlens_archive::unpack::{archive_kind, unpack};
    let mut out = Vec::with_capacity(paths.len());
    let mut notes = Vec::new();
    for (k, p) in paths.iter().enumerate() {
        let kind = match std::fs::metadata(p) {
            Ok(m) if m.is_file() => archive_kind(p).map_err(|e| IngestError::Io { path: p.clone(), source: e })?,
            _ => None,
        };
        let Some(kind) = kind else {
            out.push(p.clone());
            continue;
        };
        let name = p.file_name().map_or_else(|| "archive".into(), |n| n.to_string_lossy().into_owned());
        let dest = into.join(format!("{k}-{name}"));
        let u = unpack(p, &dest).map_err(|e| IngestError::Format { path: p.clone(), line: None, what: e.to_string() })?;
        let mut note = format!(
            "note: {} is a {}: {} files ({} bytes) unpacked to {} to be read",
            p.display(),
            kind.name(),
            u.files.len(),
            u.bytes,
            dest.display()
        );
        if !u.skipped.is_empty() {
            let some: Vec<String> = u.skipped.iter().take(3).map(|(m, why)| format!("{m} ({why})")).collect();
            note.push_str(&format!("; {} members passed over: {}", u.skipped.len(), some.join(", ")));
            if u.skipped.len() > 3 {
                note.push_str(", …");
            }
        }
        notes.push(note);
        out.push(dest);
    }
    Ok((out, notes))
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
    /// Stop at the first file ([`has_inputs`]).
    first_only: bool,
}

impl Walk {
    /// Records `path`; false (and a note) when what it leads to was seen.
    /// A path named on the command line: a folder walked (once), a file taken as named.
    fn named(&mut self, p: &PathBuf) -> Result<(), IngestError> {
        let meta = std::fs::metadata(p).map_err(|e| IngestError::Io { path: p.clone(), source: e })?;
        if meta.is_dir() {
            if self.first(p, &meta) {
                self.walk(p)?;
            }
        } else {
            self.file(p, &meta, true);
        }
        Ok(())
    }

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
            if self.first_only && !self.out.files.is_empty() {
                break;
            }
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

/// One warning per [`commlens_core::assemble::comm_conflicts`] entry of an
/// assembled table, naming the processes and, where `file` knows it, the
/// file of each handle.
pub(crate) fn conflict_notes(table: &OpTable, file: impl Fn(commlens_core::model::CommIdx) -> Option<String>) -> Vec<String> {
    use commlens_core::assemble::{comm_conflicts, CommConflict};
    let who = |c: commlens_core::model::CommIdx| {
        let p = &table.processes[table.comms[c.ix()].proc.ix()];
        match file(c) {
            Some(f) => format!("{}:{} ({f})", p.host, p.pid),
            None => format!("{}:{}", p.host, p.pid),
        }
    };
    let mut out = declared_size_notes(table, &who);
    let conflicts = comm_conflicts(table);
    // A job read twice (or two jobs in one input) contradicts itself at
    // every rank: the first few name the processes, one line counts the rest
    // (the 400 MB bench log gave 468 lines; a 100,000-rank job would give
    // a line per rank).
    let more = conflicts.len().saturating_sub(MAX_CONFLICT_LINES);
    let rest = &conflicts[conflicts.len() - more..];
    let more_ranks = rest.iter().filter(|c| matches!(c, CommConflict::Rank { .. })).count();
    let comms: std::collections::HashSet<u64> = rest
        .iter()
        .map(|c| match c {
            CommConflict::Rank { comm_id, .. } | CommConflict::Size { comm_id, .. } => *comm_id,
        })
        .collect();
    out.extend(conflicts.into_iter().take(MAX_CONFLICT_LINES).map(|c| match c {
            CommConflict::Rank { comm_id, rank, first, later } => format!(
                "warning: rank {rank} of communicator commId {comm_id:#x} is claimed by process {} and by {}; \
                 they are kept as different ranks (two runs in one input?)",
                who(first),
                who(later)
            ),
            CommConflict::Size { comm_id, first, later } => format!(
                "warning: communicator commId {comm_id:#x} has {} ranks for process {} but {} for {} (two runs in one input?)",
                table.comms[first.ix()].nranks.unwrap_or(0),
                who(first),
                table.comms[later.ix()].nranks.unwrap_or(0),
                who(later)
            ),
        }));
    if more > 0 {
        out.push(format!(
            "warning: {more} more contradictions like these in {} communicators ({more_ranks} ranks claimed by two \
             processes, {} sizes declared two ways); each kept apart as above",
            comms.len(),
            more - more_ranks
        ));
    }
    out
}

/// Contradicting communicator handles named one per line; the rest counted
/// in one line ([`conflict_notes`]).
const MAX_CONFLICT_LINES: usize = 8;

/// Declared communicator sizes no run can have: above NCCL's `int` rank
/// count, above 16 M ranks (far beyond any machine), or a rank outside its
/// communicator. Nothing is sized by them (the table holds the ranks seen);
/// the warning says the input is damaged. One line per communicator.
fn declared_size_notes(table: &OpTable, who: &dyn Fn(commlens_core::model::CommIdx) -> String) -> Vec<String> {
    const PLAUSIBLE: u64 = 1 << 24;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (i, c) in table.comms.iter().enumerate() {
        let key = c.comm_id.unwrap_or(c.ptr ^ ((c.proc.ix() as u64) << 48));
        let Some(n) = c.nranks else { continue };
        let what = if n as u64 > i32::MAX as u64 {
            format!("declares {n} ranks, more than NCCL can count (2^31 − 1)")
        } else if n as u64 > PLAUSIBLE {
            format!("declares {n} ranks, more than any machine has")
        } else if let Some(r) = c.rank.filter(|&r| r >= n) {
            format!("has rank {r} of {n}")
        } else {
            continue;
        };
        if seen.insert(key) {
            let name = c.comm_id.map_or_else(|| format!("comm {:#x}", c.ptr), |id| format!("commId {id:#x}"));
            out.push(format!(
                "warning: communicator {name} of process {} {what}: the input is damaged; only the ranks seen are kept",
                who(commlens_core::model::CommIdx(i as u32))
            ));
        }
    }
    out
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
    /// nccl-tests outputs read (benchmark tables; they hold no operations).
    pub benchmarks: Vec<crate::nccl_tests::BenchFile>,
    /// Per part read, how its indices map into `table`: one part per input
    /// file, or, for a large file read in chunks on all cores, one per chunk
    /// plus one for the join. The states of `load_inputs_with` are next to them.
    pub remaps: Vec<Remap>,
    /// Whole lines for stderr, each starting `note: ` or `warning: `: input
    /// files read once because they repeat another (same bytes, or the same
    /// processes with the same operations), files left out because they
    /// claim a communicator rank or size another file's process holds.
    pub notes: Vec<String>,
    /// The hardware lines of every log read ([`crate::noted`]), when asked for
    /// ([`crate::load_any::load_any_noting`]).
    pub noted: Option<crate::noted::NotedLines>,
}

/// Reads all inputs in parallel, one file per task. Each file gets its own
/// state from `make`, and `per_op` folds every operation into it as it is read
/// (with the file's own indices; `Loaded::remaps[i]` maps them into the merged
/// table). With `keep_ops` the operations are also stored in the table.
/// Returns the states in file order, next to `Loaded::remaps`: a large file
/// read in chunks ([`nccl_log::chunked`]) gives one state per chunk, each
/// with its own remap, so folding every state through its remap gives the
/// result of one state per file.
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
    // The paths as given name the error when nothing was read (not the files found).
    match load_listed_with(&expand_inputs(paths)?, opts, keep_ops, make, per_op) {
        Err(IngestError::NoInputs { .. }) => Err(IngestError::NoInputs { paths: paths.to_vec() }),
        r => r,
    }
}

/// [`load_inputs_with`] on files already listed by [`expand_inputs`] (or
/// sorted out of its list): the flag says whether the file was named, so a
/// file found in a folder that is no log is skipped, not refused.
pub fn load_listed_with<S, M, F>(
    files: &[(PathBuf, bool)],
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
    let (kept, notes) = drop_same_content(files.to_vec());
    let (loaded, states) = read_log_files(&kept, notes, opts, keep_ops, false, make, per_op)?;
    if loaded.reports.is_empty() {
        return Err(IngestError::NoInputs { paths: files.iter().map(|f| f.0.clone()).collect() });
    }
    Ok((loaded, states))
}

/// [`load_inputs_with`] on files already listed (and screened for repeated
/// content, `notes` saying which were dropped). Files found in folders that
/// are no NCCL log are left out (`Loaded::skipped_files`); with none read the
/// table is empty and `Loaded::reports` too. With `note`, every file's
/// hardware lines are kept too (`Loaded::noted`), taken while the file is in
/// hand.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_log_files<S, M, F>(
    files: &[(PathBuf, bool)],
    mut notes: Vec<String>,
    opts: &ReadOptions,
    keep_ops: bool,
    note: bool,
    make: M,
    per_op: F,
) -> Result<(Loaded, Vec<S>), IngestError>
where
    S: Send + Default,
    M: Fn() -> S + Sync,
    F: Fn(&mut S, &CollOp) + Sync,
{
    // Files are read in parallel a batch at a time and each, in file order,
    // screened and folded into the merged table as soon as its batch is
    // read: what a file repeats (its host's topology after the first, say)
    // is dropped then, so memory holds the merged table and one batch, not
    // every file's table. Screening and merging in file order give the very
    // table reading all files first gave.
    let chunk_notes = std::sync::Mutex::new(Vec::new());
    let batch = (4 * rayon::current_num_threads()).max(16);
    let mut reports = Vec::new();
    let mut skipped_files = Vec::new();
    // Per part read (successful file, in order): its file, and its remap once merged.
    let mut part_slot: Vec<usize> = Vec::new();
    let mut kept: Vec<(usize, Remap)> = Vec::new();
    let mut states = Vec::with_capacity(files.len());
    let mut screener = Screener::default();
    let mut merger = Merger::default();
    let mut screen_notes = Vec::new();
    let mut noted = crate::noted::NotedLines::default();
    let read_batch = |group: &[(PathBuf, bool)]| -> Vec<_> {
        group
            .par_iter()
            .map(|(path, _)| {
                let (mut res, parts, chunk_note) = nccl_log::chunked::read_file_parts(path, opts, keep_ops, &make, &per_op);
                if let Some(n) = chunk_note {
                    chunk_notes.lock().expect("notes").push(n);
                }
                if let (Ok((_, r)), false) = (&mut res, opts.samples) {
                    r.drop_samples();
                }
                // Right after the reader, while the file is in the page cache (and, small, in the CPU's).
                let lines = if note { crate::noted::noted_lines(path) } else { None };
                (res, parts, lines)
            })
            .collect()
    };
    let mut fold = |b: usize, results: Vec<_>| -> Result<(), IngestError> {
        for (k, (res, state, lines)) in results.into_iter().enumerate() {
            let i = b * batch + k;
            let (path, explicit) = &files[i];
            states.push(state);
            if let Some(lines) = lines {
                noted.add(path, lines);
            }
            let (t, r) = match res {
                Ok(tr) => tr,
                Err(e @ (IngestError::NotNcclLog { .. } | IngestError::Binary { .. })) if !explicit => {
                    skipped_files.push((path.clone(), e.to_string()));
                    continue;
                }
                Err(e) => return Err(e),
            };
            part_slot.push(i);
            let name = |k: usize| files[part_slot[k]].0.display().to_string();
            // Files repeating or contradicting earlier ones are not merged
            // (their per-file state is emptied too, so folded results do
            // not count them).
            match screener.screen(&t) {
                Screen::Keep => {
                    reports.push(r);
                    kept.push((i, merger.add(t)));
                }
                v => {
                    screen_notes.push(match v {
                        Screen::Repeats { of } => format!(
                            "note: {} repeats {} (the same processes and operations); read once",
                            name(part_slot.len() - 1),
                            name(of)
                        ),
                        Screen::Conflict { with, what } => format!(
                            "warning: {} contradicts {}: {what}; {} is left out",
                            name(part_slot.len() - 1),
                            name(with),
                            name(part_slot.len() - 1)
                        ),
                        Screen::Keep => unreachable!(),
                    });
                    states[i] = vec![(S::default(), None)];
                }
            }
        }
        Ok(())
    };
    // While one batch is folded (in file order) the next is read: the fold
    // no longer leaves the other cores idle.
    let reading = commlens_core::timing::Phase::start("load: read+parse+merge (batches)");
    let mut fold_time = std::time::Duration::ZERO;
    let mut groups = files.chunks(batch).enumerate();
    let mut pending = groups.next().map(|(b, g)| (b, read_batch(g)));
    while let Some((b, results)) = pending.take() {
        let next = groups.next();
        let mut read = None;
        // The fold stays on this thread (the merged table grows in its malloc
        // arena, not in the readers'); the next batch is read on rayon's.
        let folded = rayon::in_place_scope(|s| {
            if let Some((nb, g)) = next {
                let (read, read_batch) = (&mut read, &read_batch);
                s.spawn(move |_| *read = Some((nb, read_batch(g))));
            }
            let t0 = std::time::Instant::now();
            let r = fold(b, results);
            fold_time += t0.elapsed();
            r
        });
        folded?;
        pending = read;
    }
    reading.end();
    commlens_core::timing::report("load:   of which screen+merge (main thread)", fold_time);
    let mut chunk_notes = chunk_notes.into_inner().expect("notes");
    chunk_notes.sort();
    notes.extend(chunk_notes);
    if part_slot.is_empty() {
        let states = states.into_iter().flatten().map(|(st, _)| st).collect();
        let noted = note.then_some(noted);
        return Ok((Loaded { skipped_files, notes, remaps: Vec::new(), noted, ..Loaded::empty() }, states));
    }
    let name = |k: usize| files[part_slot[k]].0.display().to_string();
    for (j, i, proc) in std::mem::take(&mut screener.shared) {
        notes.push(format!(
            "warning: process {proc} appears in both {} and {} with different operations; \
             both are read, so operations they share are counted twice",
            name(j),
            name(i)
        ));
    }
    notes.extend(screen_notes);
    let mut table = commlens_core::timing::time("load: merge finish", || merger.finish());
    let (file_slot, part_remaps): (Vec<usize>, Vec<Remap>) = kept.into_iter().unzip();
    // Folded processes interleave; restore source order per rank.
    let sorting = commlens_core::timing::Phase::start("load: sort ranks");
    // Each rank on its own: the ranks share nothing.
    table.per_rank.par_iter_mut().for_each(|r| {
        r.sort_by_key(|op| op.line);
        r.shrink_to_fit();
    });
    sorting.end();
    commlens_core::timing::time("load: assemble (communicator inference)", || commlens_core::assemble::assemble(&mut table));
    let remapping = commlens_core::timing::Phase::start("load: remaps+conflict notes");
    // Remaps indexed by the original file position, so per_op's index works.
    let mut remaps = vec![Remap::default(); files.len()];
    let mut comm_file: Vec<Option<usize>> = vec![None; table.comms.len()];
    for (slot, r) in file_slot.into_iter().zip(part_remaps) {
        for c in &r.comm {
            comm_file[c.ix()].get_or_insert(slot);
        }
        remaps[slot] = r;
    }
    // One state per part read (a file, or a chunk of a large one), each next
    // to the map of its own indices.
    let (states, part_remaps): (Vec<S>, Vec<Remap>) = states
        .into_iter()
        .zip(&remaps)
        .flat_map(|(parts, file)| {
            parts.into_iter().map(move |(st, maps)| (st, maps.map_or_else(|| file.clone(), |m| m.through(file))))
        })
        .unzip();
    // What is left contradicts itself within one file (two runs in one stdout).
    notes.extend(conflict_notes(&table, |c| comm_file[c.ix()].map(|f| files[f].0.display().to_string())));
    remapping.end();
    let noted = note.then_some(noted);
    Ok((Loaded { table, reports, skipped_files, remaps: part_remaps, notes, noted, ..Loaded::empty() }, states))
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
            benchmarks: Vec::new(),
            remaps: Vec::new(),
            notes: Vec::new(),
            noted: None,
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
