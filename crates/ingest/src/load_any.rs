//! Inputs of every kind into one table ([`load_any`]): each file is read by
//! its own kind ([`crate::kind::classify`]), and what cannot be read is passed
//! over with a note (found in a folder) or refused naming the file (named on
//! the command line).
//!
//! * NCCL logs through [`crate::inputs`]; files found in folders that are no
//!   log (notes, exporter logs, scripts) are skipped there;
//! * nccl-tests outputs are read into `Loaded::benchmarks` (and by the log
//!   reader too when NCCL's debug lines share the file);
//! * kernel traces (Kineto, nsys) through their readers and
//!   `kineto::to_op_table`;
//! * profiler-plugin outputs (commlens' `.clp`, NVIDIA's Inspector and example
//!   plugin) each through its reader; their tables are merged when no process
//!   is in two of them (the same process in two would count its operations
//!   twice, and is refused naming both groups of files);
//! * topology XML and archives found in folders are passed over with a note
//!   (`commlens topo` reads the XML; archives are read when named).
//!
//! Logs, kernel traces and plugin outputs see the same operations from
//! different sides ([`crate::kind::Side`]): two sides with operations are not
//! merged (joining them is `commlens fuse`); the refusal lists every file with
//! its kind.

use crate::error::IngestError;
use crate::inputs::{conflict_notes, expand_inputs, read_log_files, Loaded};
use crate::kind::{classify, FileKind, InputFormat, Side};
use crate::kineto::{KernelTrace, TraceOptions};
use crate::merge::merge_tables;
use crate::nccl_log::ReadOptions;
use commlens_core::OpTable;
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::PathBuf;

/// Skipped files named one by one in the notes; more are counted.
const NAMED_SKIPS: usize = 20;

/// Reads inputs of any supported kind into one table (see the module doc).
pub fn load_any(paths: &[PathBuf], opts: &ReadOptions) -> Result<Loaded, IngestError> {
    load_any_noting(paths, opts, false)
}

/// [`load_any`]; with `note`, the hardware lines of every NCCL log read are
/// kept too (`Loaded::noted`, [`crate::noted`]).
pub fn load_any_noting(paths: &[PathBuf], opts: &ReadOptions, note: bool) -> Result<Loaded, IngestError> {
    // One read of each file's first bytes gives its kind and the fingerprint copies are found by.
    use commlens_core::timing::time;
    let listed = time("load: list files", || expand_inputs(paths))?;
    let probes = time("load: probe files", || listed.par_iter().map(|(p, _)| crate::same_content::probe(p)).collect());
    let (files, kinds, dup_notes) = crate::same_content::drop_probed(listed, probes);
    let mut logs: Vec<(PathBuf, bool)> = Vec::new();
    let mut bench: Vec<(PathBuf, bool)> = Vec::new();
    let mut others: Vec<(PathBuf, InputFormat)> = Vec::new();
    let mut skipped: Vec<(PathBuf, String)> = Vec::new();
    for ((p, explicit), k) in files.iter().zip(kinds) {
        match k? {
            FileKind::Ops(InputFormat::NcclLog) => logs.push((p.clone(), *explicit)),
            FileKind::Ops(f) => others.push((p.clone(), f)),
            FileKind::Benchmark { nccl_lines } => {
                bench.push((p.clone(), *explicit));
                if nccl_lines {
                    // Also a log, but one whose benchmark tables are read: not an error when it holds no NCCL operation lines.
                    logs.push((p.clone(), false));
                }
            }
            k @ (FileKind::TopoXml | FileKind::Archive(_)) => {
                let why = match k {
                    FileKind::TopoXml => "an NCCL topology XML (NCCL_TOPO_DUMP_FILE): `commlens topo` reads it".to_string(),
                    _ if *explicit => format!("a {}: unpack it first (`inputs::unpack_archives`, as the commlens command line does)", k.name()),
                    _ => format!("a {} inside a folder: name it on the command line to read it unpacked", k.name()),
                };
                if *explicit {
                    return Err(IngestError::Format { path: p.clone(), line: None, what: format!("is {why}; it holds no operations") });
                }
                skipped.push((p.clone(), why));
            }
        }
    }
    let mut loaded = Loaded { notes: dup_notes, ..Loaded::empty() };
    // nccl-tests tables.
    for (p, explicit) in &bench {
        match crate::nccl_tests::read_nccl_tests(p) {
            Ok(b) => loaded.benchmarks.push(b),
            Err(e) if !explicit => skipped.push((p.clone(), e.to_string())),
            Err(e) => return Err(e),
        }
    }
    // One table per side that has files.
    let mut sides: Vec<(Side, Vec<PathBuf>, Loaded)> = Vec::new();
    if !logs.is_empty() {
        let (l, _) = read_log_files(&logs, Vec::new(), opts, true, note, || (), |_: &mut (), _| {})?;
        let read: Vec<PathBuf> = logs.iter().map(|f| f.0.clone()).filter(|p| !l.skipped_files.iter().any(|s| &s.0 == p)).collect();
        sides.push((Side::Log, read, l));
    }
    let traces: Vec<(PathBuf, InputFormat)> = others.iter().filter(|o| o.1.side() == Side::Kernels).cloned().collect();
    if !traces.is_empty() {
        sides.push((Side::Kernels, traces.iter().map(|t| t.0.clone()).collect(), load_traces(&traces)?));
    }
    let plugins: Vec<(PathBuf, InputFormat)> = others.into_iter().filter(|o| o.1.side() == Side::Plugin).collect();
    if !plugins.is_empty() {
        sides.push((Side::Plugin, plugins.iter().map(|t| t.0.clone()).collect(), load_plugins(&plugins)?));
    }
    for (_, _, l) in &mut sides {
        skipped.append(&mut l.skipped_files);
    }
    refuse_two_sides(&sides, &files)?;
    // The side with operations, else the first that read anything.
    let pick = sides
        .iter()
        .position(|s| s.2.table.n_ops() > 0)
        .or_else(|| sides.iter().position(|s| !s.1.is_empty() && !s.2.table.processes.is_empty()));
    if let Some(i) = pick {
        let (_, _, l) = sides.swap_remove(i);
        let Loaded { table, reports, traces, plugin_reports, nvidia_reports, remaps, notes, noted, .. } = l;
        loaded.notes.extend(notes);
        loaded = Loaded { table, reports, traces, plugin_reports, nvidia_reports, remaps, noted, ..loaded };
    }
    for (side, files, _) in sides.iter().filter(|s| !s.1.is_empty()) {
        loaded.notes.push(format!(
            "note: {} {} ({}) hold no operations and were left out",
            files.len(),
            side.name(),
            list(files)
        ));
    }
    note_skips(&skipped, &mut loaded.notes);
    loaded.skipped_files = skipped;
    if loaded.table.processes.is_empty() && loaded.benchmarks.is_empty() {
        return Err(IngestError::NoInputs { paths: paths.to_vec() });
    }
    Ok(loaded)
}

/// The first few paths, and how many more.
fn list(paths: &[PathBuf]) -> String {
    let mut s: Vec<String> = paths.iter().take(5).map(|p| p.display().to_string()).collect();
    if paths.len() > 5 {
        s.push(format!("… {} more", paths.len() - 5));
    }
    s.join(", ")
}

/// One note per skipped file (the first [`NAMED_SKIPS`]), then a count.
fn note_skips(skipped: &[(PathBuf, String)], notes: &mut Vec<String>) {
    for (p, why) in skipped.iter().take(NAMED_SKIPS) {
        let shown = p.display().to_string();
        let why = why.strip_prefix(&format!("{shown}: ")).unwrap_or(why);
        notes.push(format!("note: skipped {shown}: {why}"));
    }
    if skipped.len() > NAMED_SKIPS {
        notes.push(format!("note: … and {} more files skipped", skipped.len() - NAMED_SKIPS));
    }
    if skipped.len() > 1 {
        notes.push(format!("note: {} files skipped in all (not inputs commlens reads here)", skipped.len()));
    }
}

/// Refuses operations from two sides, naming every file with its kind.
fn refuse_two_sides(sides: &[(Side, Vec<PathBuf>, Loaded)], files: &[(PathBuf, bool)]) -> Result<(), IngestError> {
    let with_ops: Vec<&(Side, Vec<PathBuf>, Loaded)> = sides.iter().filter(|s| s.2.table.n_ops() > 0).collect();
    if with_ops.len() < 2 {
        return Ok(());
    }
    let mut what = String::from("operations from two sides cannot be read as one table; the inputs hold:");
    for (side, paths, _) in &with_ops {
        for p in paths.iter().take(10) {
            let kind = classify(p).map(|k| k.name()).unwrap_or("unreadable file");
            what.push_str(&format!("\n  {}: {kind} ({})", p.display(), side.name()));
        }
        if paths.len() > 10 {
            what.push_str(&format!("\n  … {} more {}", paths.len() - 10, side.name()));
        }
    }
    what.push_str(
        "\nNCCL logs, kernel traces and profiler-plugin outputs describe the same operations from different sides: \
         read each kind on its own, or join NCCL logs with kernel traces: commlens fuse --nccl-log LOGS --nsys|--kineto TRACES -o DIR",
    );
    let first = with_ops[1].1.first().cloned().unwrap_or_else(|| files[0].0.clone());
    Err(IngestError::Format { path: first, line: None, what })
}

/// Kineto and nsys traces into one table (ranks claimed twice are screened).
fn load_traces(files: &[(PathBuf, InputFormat)]) -> Result<Loaded, IngestError> {
    let trace_opts = TraceOptions::default();
    let traces: Vec<Result<KernelTrace, _>> = files
        .par_iter()
        .map(|(p, k)| match k {
            InputFormat::NsysSqlite => crate::nsys::load_nsys_with(p, &trace_opts),
            _ => crate::kineto::load_kineto_with(p, &trace_opts),
        })
        .collect();
    let mut ok = Vec::new();
    for (t, (p, _)) in traces.into_iter().zip(files) {
        ok.push(t.map_err(|e| IngestError::Format { path: p.clone(), line: None, what: e.to_string() })?);
    }
    let mut notes = Vec::new();
    let ok = screen_trace_ranks(ok, &mut notes);
    let (table, conv) = crate::kineto::to_op_table(&ok);
    notes.extend(conv.warnings.into_iter().map(|w| format!("warning: {w}")));
    notes.extend(conflict_notes(&table, |_| None));
    Ok(Loaded { table, traces: ok, notes, ..Loaded::empty() })
}

/// Plugin outputs, each format through its reader, merged when their
/// processes differ (see the module doc).
fn load_plugins(files: &[(PathBuf, InputFormat)]) -> Result<Loaded, IngestError> {
    let mut out = Loaded::empty();
    let mut parts: Vec<(InputFormat, Vec<PathBuf>, OpTable)> = Vec::new();
    for fmt in [InputFormat::PluginOutput, InputFormat::Inspector, InputFormat::ExamplePlugin] {
        let paths: Vec<PathBuf> = files.iter().filter(|f| f.1 == fmt).map(|f| f.0.clone()).collect();
        if paths.is_empty() {
            continue;
        }
        let table = if fmt == InputFormat::PluginOutput {
            let (table, reports) = crate::plugin_out::load_plugin_outputs(&paths)?;
            out.plugin_reports.extend(reports);
            table
        } else {
            let opts = crate::json_util::PluginOptions::default();
            let res = if fmt == InputFormat::Inspector {
                crate::inspector::load_paths(&paths, &opts)
            } else {
                crate::example_plugin::load_paths(&paths, &opts)
            };
            let (table, reports) =
                res.map_err(|e| IngestError::Format { path: paths[0].clone(), line: None, what: e.to_string() })?;
            out.nvidia_reports.extend(reports);
            table
        };
        parts.push((fmt, paths, table));
    }
    if parts.len() == 1 {
        out.table = parts.pop().expect("one part").2;
        return Ok(out);
    }
    // The same process in two formats: its operations would be counted twice.
    let mut owner: HashMap<(&str, u32), usize> = HashMap::new();
    for (i, (fmt, paths, t)) in parts.iter().enumerate() {
        for p in &t.processes {
            match owner.get(&(p.host.as_str(), p.pid)) {
                Some(&j) if j != i => {
                    return Err(IngestError::Format {
                        path: paths[0].clone(),
                        line: None,
                        what: format!(
                            "process {}:{} is in this {} ({}) and in the {} ({}): the two plugins recorded the same \
                             operations, and reading both would count them twice; read one kind",
                            p.host,
                            p.pid,
                            fmt.name(),
                            list(paths),
                            parts[j].0.name(),
                            list(&parts[j].1)
                        ),
                    })
                }
                _ => {
                    owner.insert((p.host.as_str(), p.pid), i);
                }
            }
        }
    }
    let (mut table, _) = merge_tables(parts.into_iter().map(|p| p.2).collect());
    commlens_core::assemble::assemble(&mut table);
    out.table = table;
    Ok(out)
}

/// Kernel traces that claim a global rank an earlier trace already holds are
/// left out: the same process again (a copy, another export of one capture)
/// is read once with a note; another process claiming the rank (two runs, a
/// misnumbered job) is a warning naming both files. Traces without rank
/// numbers are kept as they are.
fn screen_trace_ranks(traces: Vec<KernelTrace>, notes: &mut Vec<String>) -> Vec<KernelTrace> {
    let mut owner: HashMap<u32, (usize, u32)> = HashMap::new();
    let mut kept = Vec::with_capacity(traces.len());
    for t in traces {
        let clash = t.ranks.iter().find_map(|r| {
            let g = r.rank?;
            owner.get(&g).map(|&(k, pid)| (g, k, pid, r.pid))
        });
        if let Some((g, k, first_pid, pid)) = clash {
            let first: &KernelTrace = &kept[k];
            if first_pid == pid {
                notes.push(format!(
                    "note: {} holds rank {g} (process {pid}) already read from {}; read once",
                    t.path, first.path
                ));
            } else {
                notes.push(format!(
                    "warning: {} claims rank {g} (process {pid}), which {} holds (process {first_pid}); {} is left out",
                    t.path, first.path, t.path
                ));
            }
            continue;
        }
        for r in &t.ranks {
            if let Some(g) = r.rank {
                owner.insert(g, (kept.len(), r.pid));
            }
        }
        kept.push(t);
    }
    kept
}
