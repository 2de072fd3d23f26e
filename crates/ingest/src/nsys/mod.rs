//! Reader of Nsight Systems SQLite exports (`nsys export --type sqlite`)
//! into a [`KernelTrace`]: NCCL kernels per process and GPU, their launch
//! calls, NVTX ranges, GPU descriptions and MPI ranks.
//!
//! * Kernels: `CUPTI_ACTIVITY_KIND_KERNEL` (start/end ns, `deviceId`,
//!   `streamId`, `correlationId`, `globalPid`, grid/block, static and dynamic
//!   shared memory, `registersPerThread`) with names from `StringIds`
//!   (`shortName` classifies, `demangledName` is kept). Names are classified
//!   once per distinct name in Rust ([`crate::kernel_name`]), then only the
//!   NCCL rows are read, in start order. Processes come from `PROCESSES`
//!   (`globalPid` → `pid`), else from the `globalPid` bits.
//! * Other GPU activity ([`compute`]): non-NCCL kernel rows, memcpy and
//!   memset rows, as compact records on the ranks the NCCL kernels made.
//! * Launches: `CUPTI_ACTIVITY_KIND_RUNTIME` rows with the kernels'
//!   correlation ids, matched per process (correlation ids are per process).
//! * `NVTX_EVENTS` push/pop and start/end ranges with their domain names
//!   (event types resolved through `ENUM_NSYS_EVENT_TYPE` when present);
//!   `TARGET_INFO_GPU` (name, PCI bus, CUDA ordinal); `MPI_RANKS`;
//!   `TARGET_INFO_SESSION_START_TIME` (epoch of the session start, which
//!   nsys timestamps are taken to be relative to: unverified);
//!   `META_DATA_EXPORT.EXPORT_SCHEMA_VERSION`.
//! * The host (`TARGET_INFO_SYSTEM_ENV` `Hostname`) and, where NCCL's own
//!   NVTX annotations say so ([`fork`]: the `nccl_nvtx` fork's network
//!   marks), each process's rank and the network bytes moved during each
//!   kernel. NCCL's typed NVTX payloads (message size, rank) are not read:
//!   `nsys export` leaves their values out (`binaryData` is empty unless the
//!   export includes blobs), so sizes stay unknown without such marks.
//!
//! nsys creates tables lazily and adds columns between versions: every table
//! but the kernel table is optional, and every column is selected by name
//! ([`schema`]). The export carries no communicator, count or datatype for
//! NCCL kernels (NCCL's NVTX payloads are not exported), so the canonical
//! table groups kernels per CUDA stream and `assemble` groups streams into
//! communicators by operation sequence. A file without NCCL kernels is
//! [`TraceError::NoNcclKernels`] unless [`TraceOptions::allow_no_kernels`].
//! Several files (one per node or per rank) are read in parallel by
//! [`load_nsys_files`] and join in [`to_op_table`].
//!
//! Hostile or broken files: only real tables are read (a view or virtual
//! table named like an nsys table is ignored with a warning: its query could
//! be anything, a recursive view never ends); all queries of a file share
//! one deadline enforced by SQLite's progress handler
//! ([`TraceOptions::query_time_limit`]), past which the file fails naming
//! itself. A row with a TEXT/REAL/BLOB value in a numeric column, a NULL
//! where a value is required (kernel start and end, ids) or a name id that
//! `StringIds` lacks is skipped and counted by table and reason in
//! [`TraceStats::skipped`], the first named by table and rowid, in the
//! first warning; the good rows are kept.

mod compute;
mod fork;
mod query;
mod schema;

pub use crate::kineto::table::{to_op_table, ConvertNotes};
pub use crate::kineto::trace::*;

use crate::kernel_name;
use crate::kineto::trace::{count_other_comm, warn_other_comm, Names};
use commlens_core::SourceKind;
use rayon::prelude::*;
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Reads one nsys SQLite export.
pub fn load_nsys(path: &Path) -> Result<KernelTrace, TraceError> {
    load_nsys_with(path, &TraceOptions::default())
}

/// Reads several exports (one per node or per rank) in parallel, in the given order.
pub fn load_nsys_files(paths: &[PathBuf], opts: &TraceOptions) -> Result<Vec<KernelTrace>, TraceError> {
    paths.par_iter().map(|p| load_nsys_with(p, opts)).collect()
}

pub fn load_nsys_with(path: &Path, opts: &TraceOptions) -> Result<KernelTrace, TraceError> {
    let mut head = [0u8; 16];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| TraceError::Io { path: path.into(), source: e })?;
    if &head[..n] != b"SQLite format 3\0" {
        return Err(TraceError::NotATrace { path: path.into(), reason: "not an SQLite database".into() });
    }
    let limit = opts.query_time_limit;
    let sql_err = |e: rusqlite::Error| {
        let msg = if e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted) {
            format!(
                "gave up after {:.1} s of queries (COMMLENS_NSYS_TIME_LIMIT_S): a pathological or crafted export?",
                limit.as_secs_f64()
            )
        } else {
            e.to_string()
        };
        TraceError::Sqlite { path: path.into(), msg }
    };
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(sql_err)?;
    // Every query of the file shares one deadline: SQLite calls the handler
    // every few thousand virtual-machine steps and stops when it says so.
    let deadline = std::time::Instant::now() + limit;
    conn.progress_handler(4096, Some(move || std::time::Instant::now() > deadline));
    read(&conn, path, opts).map_err(sql_err)?
}

fn read(conn: &Connection, path: &Path, opts: &TraceOptions) -> rusqlite::Result<Result<KernelTrace, TraceError>> {
    let s = schema::Schema::read(conn)?;
    let mut stats = TraceStats::default();
    let mut warnings = Vec::new();
    let mut skipped = Skipped::default();
    for (name, what) in &s.ignored {
        if name.starts_with("CUPTI_") || name.starts_with("NVTX_") || name.starts_with("TARGET_INFO_") ||
            ["StringIds", "PROCESSES", "MPI_RANKS", "META_DATA_EXPORT", "ENUM_NSYS_EVENT_TYPE"].contains(&name.as_str())
        {
            warnings.push(format!("{name} is {what}, not a table: ignored (only tables are read)"));
        }
    }
    let label = path.display().to_string();
    let no_kernels = |why: String, stats: &TraceStats, skipped: &Skipped, warnings: &mut Vec<String>| {
        if opts.allow_no_kernels {
            warnings.push(format!("no NCCL kernels found: {why}"));
            Ok(())
        } else {
            let others: u64 = stats.other_comm_kernels.iter().map(|(_, n)| n).sum();
            let mut summary =
                format!("{why} ({} GPU kernels, {others} non-NCCL communication kernels)", stats.gpu_kernels);
            if let Some(w) = skipped.warning("rows") {
                summary.push_str("; ");
                summary.push_str(&w);
            }
            Err(TraceError::NoNcclKernels { path: path.into(), summary })
        }
    };

    let name_cols = if s.has(query::KERNELS) { query::name_cols(&s) } else { None };
    let mut keys = Vec::new();
    let mut other_names = Vec::new();
    match &name_cols {
        None => {
            let why = if s.has(query::KERNELS) {
                "the kernel table has no name column".to_string()
            } else if let Some(what) = s.ignored(query::KERNELS) {
                format!("{} is {what}, not a table, and only tables are read", query::KERNELS)
            } else {
                "no CUPTI_ACTIVITY_KIND_KERNEL table: no kernel was traced (nsys profile --trace=cuda)".to_string()
            };
            if let Err(e) = no_kernels(why, &stats, &skipped, &mut warnings) {
                return Ok(Err(e));
            }
        }
        Some(nc) => {
            for (key, name, n) in query::kernel_names(conn, nc)? {
                let Some(name) = name else {
                    // A NULL name key or an id StringIds lacks: these rows
                    // cannot be classified, so they are counted, not guessed.
                    let why = if key == rusqlite::types::Value::Null {
                        format!("NULL {}", nc.key)
                    } else {
                        format!("{} id not in StringIds", nc.key)
                    };
                    let rowid = query::first_rowid_of_key(conn, &s, nc, &key);
                    let table = query::KERNELS;
                    skipped.add_n(&format!("{table}: {why}"), n, || match rowid {
                        Some(r) => format!("{table} rowid {r} ({why})"),
                        None => format!("a row of {table} ({why})"),
                    });
                    continue;
                };
                stats.gpu_kernels += n;
                if kernel_name::is_nccl_kernel(name.as_bytes()) {
                    keys.push(key);
                    continue;
                }
                if kernel_name::is_other_comm_kernel(name.as_bytes(), &mut Vec::new()) {
                    count_other_comm(&mut stats, &name, n);
                }
                other_names.push((key, name));
            }
            if keys.is_empty() {
                let why = "no kernel name is an NCCL kernel".to_string();
                if let Err(e) = no_kernels(why, &stats, &skipped, &mut warnings) {
                    return Ok(Err(e));
                }
            }
        }
    }

    let procs = query::processes(conn, &s, &mut skipped)?;
    let gpus = query::gpus(conn, &s, &mut skipped)?;
    let mpi = query::mpi_ranks(conn, &s, &mut skipped)?;
    let mut ranks: Vec<RankTrace> = Vec::new();
    let mut slot: compute::Slots = HashMap::new();
    if let (Some(nc), false) = (&name_cols, keys.is_empty()) {
        let launches = query::launches(conn, &s, nc, &keys, &mut skipped)?;
        stats.launches = launches.len() as u64;
        let mut event = 0u64;
        query::kernels(conn, &s, nc, &keys, &mut skipped, |row| {
            event += 1;
            let Some(parsed) = kernel_name::parse(row.key_name.as_bytes())
                .or_else(|| row.display_name.as_deref().and_then(|n| kernel_name::parse(n.as_bytes())))
            else {
                return;
            };
            let gpid = row.global_pid.unwrap_or(0);
            let pid = procs.get(&gpid).copied().unwrap_or_else(|| schema::pid_of(gpid));
            let i = *slot.entry((pid, row.device)).or_insert_with(|| {
                let gpu = row.device.and_then(|d| gpus.iter().find(|g| g.id == d));
                ranks.push(RankTrace {
                    rank: mpi.get(&pid).copied(),
                    pid,
                    device: gpu.and_then(|g| g.cu_device).or(row.device.map(|d| d as u32)),
                    gpu_name: gpu.and_then(|g| g.name.clone()),
                    bus_id: gpu.and_then(|g| g.bus_id),
                    ..RankTrace::default()
                });
                ranks.len() - 1
            });
            let u = |v: Option<i64>| v.and_then(|v| u32::try_from(v).ok());
            let (ss, ds) = (u(row.static_smem), u(row.dynamic_smem));
            ranks[i].kernels.push(NcclKernel {
                start_ns: row.start,
                end_ns: row.end,
                stream: row.stream.unwrap_or(0) as u64,
                correlation: row.correlation.map(|c| c as u64),
                external_id: None,
                device: row.device.map(|d| d as u32),
                grid: row.grid.map(|v| u(v).unwrap_or(0)),
                block: row.block.map(|v| u(v).unwrap_or(0)),
                static_smem_bytes: ss,
                dynamic_smem_bytes: ds,
                shared_mem_bytes: ss.unwrap_or(0).saturating_add(ds.unwrap_or(0)),
                registers: u(row.registers).unwrap_or(0),
                launch: row.correlation.and_then(|c| launches.get(&(pid, c)).copied()),
                name: row.display_name.unwrap_or(row.key_name),
                parsed,
                meta: None,
                cpu_op: None,
                event,
                net: None,
            });
        })?;
        if ranks.is_empty() {
            let why = "every NCCL kernel row is malformed".to_string();
            if let Err(e) = no_kernels(why, &stats, &skipped, &mut warnings) {
                return Ok(Err(e));
            }
        }
    }
    // The host and NCCL's own annotations: host names, ranks, network bytes.
    let host = fork::host_name(conn, &s);
    let marks = fork::fork_marks(conn, &s)?;
    for r in &mut ranks {
        r.host = host.clone();
        if r.rank.is_none() {
            r.rank = marks.rank_of(r.pid);
        }
    }
    attach_transfers(&mut ranks, &marks);
    let key_col = name_cols.as_ref().map(|nc| nc.key);
    let unplaced = compute::read(conn, &s, key_col, &other_names, &mut ranks, &slot, &procs, &mut skipped)?;
    if unplaced > 0 {
        warnings.push(format!(
            "{unplaced} non-NCCL GPU activities ran in processes or on GPUs without NCCL kernels and are left out"
        ));
    }
    stats.nccl_kernels = ranks.iter().map(|r| r.kernels.len() as u64).sum();
    stats.kernels_without_kind =
        ranks.iter().flat_map(|r| &r.kernels).filter(|k| k.parsed.kind.is_none()).count() as u64;
    stats.events = stats.gpu_kernels;
    warn_other_comm(&stats, &mut warnings);

    let mut names = Names::default();
    let nvtx =
        query::nvtx_ranges(conn, &s, schema::event_types(conn, &s), opts.max_ranges, &mut names, &mut skipped)?;
    if let Some(w) = skipped.warning("rows") {
        // First, so that a summary showing only a few warnings shows it.
        warnings.insert(0, w);
    }
    stats.skipped = skipped;
    stats.ranges_dropped = nvtx.capped;
    if nvtx.capped > 0 {
        warnings.push(format!("{} NVTX ranges beyond the first {} were dropped", nvtx.capped, opts.max_ranges));
    }
    if nvtx.unclosed > 0 {
        warnings.push(format!("{} NVTX ranges were never closed and are left out", nvtx.unclosed));
    }
    if ranks.len() > 1 && ranks.iter().any(|r| r.rank.is_none()) {
        warnings.push(format!("{} processes/GPUs in one file and neither MPI_RANKS nor NCCL annotations naming ranks: global ranks are unknown", ranks.len()));
    }
    Ok(Ok(KernelTrace {
        source: SourceKind::Nsys,
        path: label,
        source_version: schema::meta_value(conn, &s, "EXPORT_SCHEMA_VERSION"),
        base_time_ns: query::session_start(conn, &s).unwrap_or(0),
        world_size: None,
        nccl_version: None,
        backend: None,
        process_groups: Vec::new(),
        ranks,
        ranges: nvtx.ranges,
        names: names.names,
        stats,
        warnings,
    }))
}

/// Adds each process's network transfers to the NCCL kernel that was the
/// latest to start on it (the proxy works for the kernel in flight); a
/// process driving several GPUs cannot say which kernel a transfer served,
/// and gets none.
fn attach_transfers(ranks: &mut [RankTrace], marks: &fork::ForkMarks) {
    for r in 0..ranks.len() {
        let pid = ranks[r].pid;
        let Some(list) = marks.transfers.get(&pid) else { continue };
        if ranks.iter().filter(|o| o.pid == pid).count() > 1 {
            continue;
        }
        let kernels = &mut ranks[r].kernels;
        for k in kernels.iter_mut() {
            k.net = Some(NetBytes::default());
        }
        for t in list {
            let i = kernels.partition_point(|k| k.start_ns <= t.ts_ns);
            let Some(k) = i.checked_sub(1).and_then(|i| kernels.get_mut(i)) else { continue };
            let n = k.net.get_or_insert_with(NetBytes::default);
            if t.sent {
                n.sent += t.bytes;
            } else {
                n.received += t.bytes;
            }
            n.transfers += 1;
        }
    }
}
