//! The inputs of the table commands (`stats`, `report`, `diff`, `export`,
//! `trace`, `model`): commlens's own Parquet tables (`fused.parquet`,
//! `commlens export --parquet`) are read back with
//! `commlens_parquet::read_table`, every other input goes through
//! `commlens_ingest::load_any` exactly as before.
//!
//! Which paths are Parquet tables: a file named on the command line whose
//! name ends in `.parquet` or whose first bytes are `PAR1`; and the
//! `.parquet` files under a folder that holds no other input (the folder
//! walk skips commlens outputs, so `commlens report out/fused/` finds
//! nothing else there). A folder with other inputs is walked as before and
//! its Parquet files stay skipped, so an output folder next to the logs is
//! not read twice.
//!
//! Hive-partitioned datasets (`commlens export --partition host|rank`, one
//! folder `key=value` per host or rank, written by one run per node) are
//! recognised by their `key=value` folders holding `.parquet` files: every
//! shard is read as if named (a foreign Parquet file is an error naming it),
//! checked against its folder's value, and the shards merged and assembled
//! like the logs of one run (communicators joined by `commId`, global ranks
//! from the world communicator).
//!
//! Projection: `stats` ([`STATS_COLUMNS`]) and `report` ([`REPORT_COLUMNS`])
//! decode only the columns they use (`commlens_parquet::Columns`); the other
//! commands read every column.
//!
//! Mixing: a table already holds everything its inputs said, so a table is
//! merged with other tables or inputs only when they describe different
//! processes (host, pid); otherwise the operations would be counted twice
//! and the mix is refused, as `load_any` refuses logs with traces.

use commlens_core::OpTable;
use commlens_ingest::merge::merge_tables;
use commlens_ingest::nccl_log::ReadOptions;
use commlens_ingest::load_any::load_any_noting;
use commlens_ingest::{expand_inputs, IngestError, Loaded};
use commlens_parquet::dataset::{check_shard, dataset_files, is_dataset};
use commlens_parquet::{read_table_with, Columns, ReadError};
use rayon::prelude::*;
use std::collections::HashMap;
use std::error::Error;
use std::path::{Path, PathBuf};

/// The user's paths, sorted into our Parquet tables and everything else.
#[derive(Debug, Default, Clone)]
pub struct Split {
    /// Parquet files; the flag says whether it was named explicitly (a file
    /// found in a folder that is not a commlens table is skipped, not an error).
    pub parquet: Vec<(PathBuf, bool)>,
    /// Paths for `commlens_ingest`, as given.
    pub rest: Vec<PathBuf>,
}

/// Sorts `paths` (see the module documentation).
pub fn split_inputs(paths: &[PathBuf]) -> Result<Split, Box<dyn Error>> {
    let mut s = Split::default();
    for p in paths {
        if p.is_dir() && is_dataset(p) {
            let ds = dataset_files(p)?;
            for o in &ds.other {
                eprintln!("note: passed over {}: not a .parquet file of the dataset {}", o.display(), p.display());
            }
            // Named as a dataset: every shard must be ours, as a named file must.
            s.parquet.extend(ds.shards.into_iter().map(|(f, _)| (f, true)));
        } else if p.is_dir() {
            // Only whether the folder holds an input: the loader lists it.
            match commlens_ingest::inputs::has_inputs(std::slice::from_ref(p)).and_then(|any| {
                if any {
                    Ok(())
                } else {
                    Err(IngestError::NoInputs { paths: vec![p.clone()] })
                }
            }) {
                Err(IngestError::NoInputs { .. }) => {
                    let before = s.parquet.len();
                    walk_parquet(p, &mut s.parquet, &mut std::collections::HashSet::new())?;
                    if s.parquet.len() == before {
                        s.rest.push(p.clone()); // empty: ingest says so as before
                    }
                }
                Err(e) => return Err(e.into()),
                Ok(_) => s.rest.push(p.clone()),
            }
        } else if is_parquet_file(p) {
            s.parquet.push((p.clone(), true));
        } else {
            s.rest.push(p.clone());
        }
    }
    Ok(s)
}

fn has_parquet_extension(p: &Path) -> bool {
    p.extension().and_then(|x| x.to_str()).is_some_and(|x| x.eq_ignore_ascii_case("parquet"))
}

fn is_parquet_file(p: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let starts_par1 = std::fs::File::open(p).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"PAR1";
    starts_par1 || has_parquet_extension(p)
}

/// `.parquet` files under `dir`, recursively in name order, hidden ones
/// skipped; every real folder and file once (`seen`: canonical paths), so
/// links to files or to an enclosing folder neither repeat nor loop.
fn walk_parquet(
    dir: &Path,
    out: &mut Vec<(PathBuf, bool)>,
    seen: &mut std::collections::HashSet<PathBuf>,
) -> Result<(), Box<dyn Error>> {
    if !seen.insert(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())) {
        return Ok(());
    }
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for e in entries {
        if e.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.')) {
            continue;
        }
        if e.is_dir() {
            walk_parquet(&e, out, seen)?;
        } else if e.is_file()
            && has_parquet_extension(&e)
            && seen.insert(std::fs::canonicalize(&e).unwrap_or_else(|_| e.clone()))
        {
            out.push((e, false));
        }
    }
    Ok(())
}

/// Columns `stats` reads of a commlens table, besides [`Columns::IDENTITY`]:
/// the NCCL version (job line), algorithm and protocol (algorithm mix) and
/// the recovered flag; no buffers, streams, times, kernels or line numbers.
pub const STATS_COLUMNS: &[&str] = &["nccl_version", "algorithm", "protocol", "recovered"];

/// Columns `report` reads, besides [`Columns::IDENTITY`]: everything but
/// the buffers, stream, thread and kernel launch details (name, grid,
/// block, shared memory, registers, correlation id), which no section uses.
pub const REPORT_COLUMNS: &[&str] = &[
    "nccl_version",
    "comm_seq",
    "seq",
    "redop",
    "root",
    "peer",
    "algorithm",
    "protocol",
    "channel_lo",
    "channel_hi",
    "cpu_ts_ns",
    "gpu_start_ns",
    "gpu_end_ns",
    "line",
    "recovered",
];

/// A projection of [`Columns::IDENTITY`] and `more` (names known to the reader).
pub fn columns(more: &[&str]) -> Columns {
    Columns::identity_and(more).expect("the projections name columns the reader knows")
}

/// Reads `paths` into one table: [`split_inputs`], then [`load_split_columns`].
pub fn load(paths: &[PathBuf], opts: &ReadOptions) -> Result<Loaded, Box<dyn Error>> {
    load_columns(paths, opts, &Columns::all())
}

/// [`load`], decoding only `cols` of commlens tables.
pub fn load_columns(paths: &[PathBuf], opts: &ReadOptions, cols: &Columns) -> Result<Loaded, Box<dyn Error>> {
    load_columns_noting(paths, opts, cols, false)
}

/// [`load_columns`]; with `note`, the hardware lines of the NCCL logs read are
/// kept too (`Loaded::noted`, for `commlens_report::expected::run_cluster_noted`).
pub fn load_columns_noting(paths: &[PathBuf], opts: &ReadOptions, cols: &Columns, note: bool) -> Result<Loaded, Box<dyn Error>> {
    let split = commlens_core::timing::time("load: sort inputs (Parquet or not)", || split_inputs(paths))?;
    let loaded = load_split_noting(&split, opts, cols, note)?;
    let checks = commlens_core::timing::Phase::start("load: device and job checks");
    for w in implausible_devices(&loaded.table) {
        eprintln!("warning: {w}");
    }
    if let Some(w) = several_jobs(&loaded.table, &loaded.notes) {
        eprintln!("warning: {w}");
    }
    checks.end();
    Ok(loaded)
}

/// Frees what reading left next to the table that a table command does not use
/// (per-file read reports and index maps) and hands the freed memory back to
/// the system before the analyses start. The files were parsed on rayon's
/// threads, each allocating from its own malloc arena: what they free there
/// the analyses, on the main thread, would not reuse, so it would stay in the
/// peak (about 100 MB on a 100,000-rank job).
pub fn drop_read_state(loaded: &mut Loaded) {
    loaded.reports = Vec::new();
    loaded.remaps = Vec::new();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of glibc's arenas to the
    // kernel; it touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// When the processes of the table form several jobs (no communicator joins
/// them: two runs in one transcript, unrelated captures in one folder), a
/// warning naming each job's processes; `None` for one job, or when a reader
/// already said so (`notes`: the trace readers keep jobs apart by capture
/// time). Processes with no multi-rank communicator (a log cut before init,
/// nccl-tests processes that each run a 1-rank communicator) are not jobs
/// that cross-rank figures could mix.
pub fn several_jobs(t: &OpTable, notes: &[String]) -> Option<String> {
    if notes.iter().any(|n| n.contains("separate jobs")) {
        return None;
    }
    let with_comms: std::collections::HashSet<u32> =
        t.comms.iter().filter(|c| c.nranks.is_some_and(|n| n > 1)).map(|c| c.proc.0).collect();
    let jobs: Vec<Vec<commlens_core::model::ProcIdx>> =
        commlens_core::jobs::jobs(t).into_iter().filter(|j| j.iter().any(|p| with_comms.contains(&p.0))).collect();
    if jobs.len() < 2 {
        return None;
    }
    let name = |j: &[commlens_core::model::ProcIdx]| {
        let mut hosts: Vec<&str> = j.iter().map(|p| t.processes[p.ix()].host.as_str()).collect();
        hosts.sort_unstable();
        hosts.dedup();
        let pids: Vec<String> = j.iter().take(4).map(|p| t.processes[p.ix()].pid.to_string()).collect();
        format!(
            "{} process{} on {} (pids {}{})",
            j.len(),
            if j.len() == 1 { "" } else { "es" },
            hosts.iter().take(3).copied().collect::<Vec<_>>().join(", "),
            pids.join(", "),
            if j.len() > 4 { ", …" } else { "" }
        )
    };
    let listed: Vec<String> = jobs.iter().take(4).enumerate().map(|(i, j)| format!("job {}: {}", i + 1, name(j))).collect();
    Some(format!(
        "the inputs hold {} separate jobs (no communicator joins them): {}{}; cross-rank figures \
         (ranks, stragglers, clock offsets, bandwidth per parallelism) mix them: give each job's files on their own",
        jobs.len(),
        listed.join("; "),
        if jobs.len() > 4 { "; …" } else { "" }
    ))
}

/// More devices (ranks) than this on one GPU (host and PCI bus id) are
/// implausible: no real job puts that many ranks on one GPU.
pub const MAX_DEVICES_PER_GPU: usize = 8;

/// Warnings about GPUs that too many devices claim (one bus id repeated by
/// thousands of devices): the worst few, and how many more.
pub fn implausible_devices(t: &OpTable) -> Vec<String> {
    let mut per_gpu: HashMap<(&str, u64), usize> = HashMap::new();
    for d in &t.devices {
        if let (Some(bus), Some(p)) = (d.bus_id, t.processes.get(d.proc.ix())) {
            *per_gpu.entry((p.host.as_str(), bus)).or_default() += 1;
        }
    }
    let mut bad: Vec<((&str, u64), usize)> = per_gpu.into_iter().filter(|&(_, n)| n > MAX_DEVICES_PER_GPU).collect();
    bad.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut out: Vec<String> = bad
        .iter()
        .take(3)
        .map(|((host, bus), n)| {
            format!(
                "implausible devices: {n} devices (ranks) claim one GPU, busId {bus:x} on host {}; \
                 per-GPU figures of that host are not trustworthy",
                commlens_ingest::bytes::excerpt(host, commlens_ingest::bytes::EXCERPT_CHARS)
            )
        })
        .collect();
    if bad.len() > 3 {
        out.push(format!("implausible devices: {} more GPUs claimed by more than {MAX_DEVICES_PER_GPU} devices each", bad.len() - 3));
    }
    out
}

/// For a table that holds only some of its job's ranks (`simulate` runs ranks with the same
/// program once and records the job's size in the file): how many ranks the rows stand for.
fn represented_note(t: &OpTable, represented: Option<u64>) -> Option<String> {
    let ranks = t.devices.len() as u64;
    let world = represented.filter(|&w| w > ranks)?;
    use commlens_export::report::scale::group_digits;
    Some(format!(
        "simulated: {} ranks representing {} (each stands for the ranks that run its program; per-rank figures are per simulated rank)",
        group_digits(ranks),
        group_digits(world)
    ))
}

/// Reads the Parquet tables and the other inputs and merges them when that
/// is sound. With no Parquet file this is `load_any`; with one table and
/// nothing else, the table exactly as written.
/// Notes on inputs read once or left out (`Loaded::notes`) go to stderr.
/// Decodes only `cols` of commlens tables ([`Columns::all`] for every column).
pub fn load_split_columns(s: &Split, opts: &ReadOptions, cols: &Columns) -> Result<Loaded, Box<dyn Error>> {
    load_split_noting(s, opts, cols, false)
}

fn load_split_noting(s: &Split, opts: &ReadOptions, cols: &Columns, note: bool) -> Result<Loaded, Box<dyn Error>> {
    let loaded = load_split_quiet(s, opts, cols, note)?;
    eprint_lines(&loaded.notes);
    Ok(loaded)
}

/// Writes `lines` to stderr, each ended by a newline, in one write: stderr
/// is unbuffered and `eprintln!` writes a line's text and its newline
/// separately (the 400 MB bench log's 468 rank-conflict warnings were 936
/// system calls on the serial end of `stats`).
pub fn eprint_lines(lines: &[String]) {
    use std::io::Write;
    if lines.is_empty() {
        return;
    }
    let mut all = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for l in lines {
        all.push_str(l);
        all.push('\n');
    }
    // As `eprint!` does: a closed stderr is not an error of the command.
    let _ = std::io::stderr().lock().write_all(all.as_bytes());
}

fn load_split_quiet(s: &Split, opts: &ReadOptions, cols: &Columns, note: bool) -> Result<Loaded, Box<dyn Error>> {
    if s.parquet.is_empty() {
        return Ok(load_any_noting(&s.rest, opts, note)?);
    }
    let read: Vec<(&PathBuf, bool, Result<_, ReadError>)> =
        s.parquet.par_iter().map(|(p, explicit)| (p, *explicit, read_table_with(p, cols))).collect();
    let mut parts: Vec<(String, OpTable)> = Vec::new();
    let mut skipped_files = Vec::new();
    // A dataset's shards are many: one line for them all, not one each.
    let many = read.len() > 8;
    let (mut shard_rows, mut shard_files) = (0u64, 0usize);
    for (path, explicit, res) in read {
        match res {
            Ok((table, sum)) => {
                let values = partition_values(path);
                check_shard(&table, &values).map_err(|e| format!("{}: {e}", path.display()))?;
                if many {
                    shard_rows += sum.rows;
                    shard_files += 1;
                    parts.push((path.display().to_string(), table));
                    continue;
                }
                eprintln!(
                    "{}: commlens table (schema {}{}), {} operations in {} row group{}{}",
                    path.display(),
                    sum.schema_version,
                    sum.writer_version.map(|v| format!(", written by commlens {v}")).unwrap_or_default(),
                    sum.rows,
                    sum.row_groups,
                    if sum.row_groups == 1 { "" } else { "s" },
                    if sum.saturated_values > 0 {
                        format!("; {} values at their column's maximum may have been clamped when written", sum.saturated_values)
                    } else {
                        String::new()
                    }
                );
                if sum.columns_read < Columns::all().len() {
                    eprintln!("  ({} of {} columns read)", sum.columns_read, Columns::all().len());
                }
                if let Some(n) = represented_note(&table, sum.ranks_represented) {
                    eprintln!("  {n}");
                }
                parts.push((path.display().to_string(), table));
            }
            Err(e @ ReadError::NotCommlens { .. }) if !explicit => {
                eprintln!("note: skipped {e}");
                skipped_files.push((path.clone(), e.to_string()));
            }
            Err(e) => return Err(e.into()),
        }
    }
    if shard_files > 0 {
        eprintln!(
            "{shard_files} commlens tables, {shard_rows} operations ({} of {} columns read)",
            cols.len(),
            Columns::all().len()
        );
    }
    let mut loaded = if s.rest.is_empty() {
        if parts.is_empty() {
            let paths = s.parquet.iter().map(|p| p.0.clone()).collect();
            return Err(IngestError::NoInputs { paths }.into());
        }
        Loaded::empty()
    } else {
        let other = load_any_noting(&s.rest, opts, note)?;
        let label = s.rest.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        let Loaded { table, reports, traces, plugin_reports, nvidia_reports, skipped_files, benchmarks, remaps: _, notes, noted } =
            other;
        parts.push((label, table));
        Loaded {
            table: OpTable::default(),
            reports,
            traces,
            plugin_reports,
            nvidia_reports,
            skipped_files,
            benchmarks,
            remaps: Vec::new(),
            notes,
            noted,
        }
    };
    loaded.skipped_files.extend(skipped_files);
    loaded.table = merge_disjoint(parts)?;
    Ok(loaded)
}

/// The `key=value` folders right above a file, outermost first, values
/// unescaped (`None`: Hive's default partition).
fn partition_values(file: &Path) -> Vec<(String, Option<String>)> {
    use commlens_parquet::dataset::{unescape_value, HIVE_DEFAULT_PARTITION};
    let mut out: Vec<(String, Option<String>)> = file
        .ancestors()
        .skip(1)
        .map_while(|d| {
            let name = d.file_name()?.to_str()?;
            let (k, v) = name.split_once('=')?;
            (!k.is_empty()).then(|| (k.to_string(), (v != HIVE_DEFAULT_PARTITION).then(|| unescape_value(v))))
        })
        .collect();
    out.reverse();
    out
}

/// One table as it is; several only when no process appears in two of them
/// (then merged and assembled like the files of one run).
fn merge_disjoint(mut parts: Vec<(String, OpTable)>) -> Result<OpTable, Box<dyn Error>> {
    if parts.len() == 1 {
        return Ok(parts.pop().expect("one part").1);
    }
    let mut owner: HashMap<(&str, u32), usize> = HashMap::new();
    for (i, (_, t)) in parts.iter().enumerate() {
        for p in &t.processes {
            if let Some(&j) = owner.get(&(p.host.as_str(), p.pid)).filter(|&&j| j != i) {
                return Err(format!(
                    "{} and {} both hold the operations of process {}:{}; a commlens Parquet table already holds \
                     everything its inputs said, so reading it together with them (or with another table of the \
                     same processes) would count operations twice: read it alone (to join NCCL logs with kernel \
                     traces: commlens fuse --nccl-log LOGS --nsys|--kineto TRACES -o DIR)",
                    parts[j].0, parts[i].0, p.host, p.pid
                )
                .into());
            }
            owner.insert((p.host.as_str(), p.pid), i);
        }
    }
    let (mut table, _) = merge_tables(parts.into_iter().map(|p| p.1).collect());
    // Merging drops the logical communicators (they span the parts) and
    // global ranks come from the joined world communicator, as for logs.
    commlens_core::assemble::assemble(&mut table);
    Ok(table)
}

/// Why no input was read from `paths` (after `IngestError::NoInputs`): one
/// line per file of the folders given, saying what it was refused or passed
/// over for; empty when there is nothing to add. Reads the refused files
/// again, so only on this error path and for the first few files.
pub fn why_no_inputs(paths: &[PathBuf]) -> String {
    let mut l = Listing::default();
    match expand_inputs(paths) {
        Ok(files) => {
            for (f, _) in files {
                if l.full() {
                    l.more += 1;
                    continue;
                }
                let why = match commlens_ingest::sniff(&f) {
                    Err(e) => e.to_string(),
                    Ok(commlens_ingest::InputFormat::NcclLog) => {
                        match commlens_ingest::nccl_log::read_path(&f, &ReadOptions::default(), &mut |_| {}) {
                            Err(e) => e.to_string(),
                            Ok(_) => "an NCCL debug log with no operations".into(),
                        }
                    }
                    Ok(commlens_ingest::InputFormat::PluginOutput) => match commlens_ingest::plugin_out::read_trace(&f) {
                        Err(e) => e.to_string(),
                        Ok(_) => "commlens plugin output with no operations".into(),
                    },
                    Ok(k) => format!("a {} with no operations", k.name()),
                };
                l.push(&f, why);
            }
        }
        Err(_) => {
            for p in paths.iter().filter(|p| p.is_dir()) {
                let before = l.lines.len() + l.more;
                passed_over(p, &mut l, &mut std::collections::HashSet::new(), 0);
                if l.lines.len() + l.more == before {
                    l.push(p, "the folder holds no files".into());
                }
            }
        }
    }
    if l.lines.is_empty() {
        return String::new();
    }
    let mut s = String::from("; every file was refused or passed over:");
    s.extend(l.lines);
    if l.more > 0 {
        s.push_str(&format!("\n  … and {} more", l.more));
    }
    s
}

/// The first files and their reasons, and how many more there were.
#[derive(Default)]
struct Listing {
    lines: Vec<String>,
    more: usize,
}

impl Listing {
    const SHOWN: usize = 20;

    fn full(&self) -> bool {
        self.lines.len() >= Self::SHOWN
    }

    fn push(&mut self, p: &Path, why: String) {
        if self.full() {
            self.more += 1;
            return;
        }
        let shown = p.display().to_string();
        let why = why.strip_prefix(&format!("{shown}: ")).map(str::to_string).unwrap_or(why);
        self.lines.push(format!("\n  {shown}: {why}"));
    }
}

/// The files under `dir` the folder walk passes over, with the reason.
fn passed_over(dir: &Path, l: &mut Listing, seen: &mut std::collections::HashSet<PathBuf>, depth: usize) {
    if depth > 32 || !seen.insert(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())) {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for e in entries {
        let hidden = e.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
        match std::fs::metadata(&e) {
            Err(err) => l.push(&e, format!("passed over: {err}")),
            Ok(_) if hidden => l.push(&e, "passed over: hidden".into()),
            Ok(m) if m.is_dir() => passed_over(&e, l, seen, depth + 1),
            Ok(m) if !m.is_file() => l.push(&e, "passed over: not a regular file".into()),
            Ok(_) => l.push(
                &e,
                "passed over: a kind of file commlens writes (Parquet, HTML, Perfetto, its own traces, summary.json, .conf, .md)"
                    .into(),
            ),
        }
    }
}
