//! Writer of Nsight Systems SQLite exports (`nsys export --type sqlite`), one file per node.
//!
//! Owns the table layout of the documented export schema (`shared/reference/nsys-and-kineto.md`
//! §2): `StringIds` (kernel and API names by id), `CUPTI_ACTIVITY_KIND_KERNEL` (start/end ns,
//! device, context, stream, correlation, `globalPid`, name ids, launch configuration),
//! `CUPTI_ACTIVITY_KIND_RUNTIME` (`cudaLaunchKernel_v7000` rows sharing the kernels'
//! correlation ids), `NVTX_EVENTS` (iteration push/pop ranges on the main thread, the `NCCL`
//! domain and its per-call ranges), `ENUM_NSYS_EVENT_TYPE`, `TARGET_INFO_GPU`,
//! `TARGET_INFO_SESSION_START_TIME`, `PROCESSES`, optionally `MPI_RANKS`, and
//! `META_DATA_EXPORT`. Times are ns relative to the session start, as nsys writes them;
//! `globalPid` carries the pid in bits 24–47 and `globalTid` adds the tid in bits 0–23.

use super::{GeneratedTraces, TraceConfig};
use rusqlite::{params, Connection};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const SCHEMA: &str = "
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER,
  cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
  gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
  staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL,
  localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
  domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
  int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, uuid TEXT,
  cuDevice INTEGER, totalMemory INTEGER, computeMajor INTEGER, computeMinor INTEGER, smCount INTEGER);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.28.1');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (59, 'NvtxPushPopRange', 'NVTX PushPop Range'),
  (60, 'NvtxStartEndRange', 'NVTX StartEnd Range'), (75, 'NvtxDomainCreate', 'NVTX Domain Create');
";

const PUSH_POP: i64 = 59;
const DOMAIN_CREATE: i64 = 75;
const NCCL_DOMAIN: i64 = 1;

fn global_pid(pid: u32) -> i64 {
    (1i64 << 48) | ((pid as i64) << 24)
}

struct Strings(HashMap<String, i64>);

impl Strings {
    fn id(&mut self, conn: &Connection, s: &str) -> rusqlite::Result<i64> {
        if let Some(&id) = self.0.get(s) {
            return Ok(id);
        }
        let id = self.0.len() as i64 + 1;
        conn.execute("INSERT INTO StringIds VALUES (?1, ?2)", params![id, s])?;
        self.0.insert(s.to_string(), id);
        Ok(id)
    }
}

pub(super) fn write(t: &GeneratedTraces, dir: &Path, cfg: &TraceConfig) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut nodes: Vec<usize> = t.ranks.iter().map(|r| r.node).collect();
    nodes.dedup();
    let mut paths = Vec::new();
    for node in nodes {
        let ranks: Vec<usize> = (0..t.ranks.len()).filter(|&r| t.ranks[r].node == node).collect();
        let path = dir.join(format!("{}.sqlite", t.ranks[ranks[0]].host));
        let _ = std::fs::remove_file(&path);
        write_node(t, &ranks, &path, cfg).map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
        paths.push(path);
    }
    Ok(paths)
}

fn write_node(t: &GeneratedTraces, ranks: &[usize], path: &Path, cfg: &TraceConfig) -> rusqlite::Result<()> {
    let mut conn = Connection::open(path)?;
    conn.execute_batch(SCHEMA)?;
    if cfg.nsys_mpi_ranks {
        conn.execute_batch("CREATE TABLE MPI_RANKS (globalTid INTEGER, rank INTEGER);")?;
    }
    // The session starts a second before the first thing the node's processes recorded.
    let first = ranks
        .iter()
        .flat_map(|&r| {
            let c = &t.ranks[r];
            c.kernels.iter().map(|k| k.launch_ns).chain(c.nvtx.iter().map(|n| n.0))
        })
        .min()
        .unwrap_or(t.start_epoch_ns);
    let session = (first / 1_000_000_000 - 1) * 1_000_000_000;
    let tx = conn.transaction()?;
    let mut strings = Strings(HashMap::new());
    let launch_name = strings.id(&tx, "cudaLaunchKernel_v7000")?;
    // Times are stored relative to the session start; a node clock that reads ahead records
    // a later start for the same relative times.
    let recorded_session = session + t.clock_error_ns(ranks[0]);
    tx.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?1, '', '')", params![recorded_session])?;
    tx.execute(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?1, NULL, ?2, 'NCCL', ?3, ?4)",
        params![0, DOMAIN_CREATE, global_pid(t.ranks[ranks[0]].pid) | t.ranks[ranks[0]].pid as i64, NCCL_DOMAIN],
    )?;
    let mut grid_id = 0i64;
    for &r in ranks {
        let c = &t.ranks[r];
        let gpid = global_pid(c.pid);
        let gtid = gpid | (c.pid as i64 & 0xff_ffff);
        tx.execute("INSERT INTO PROCESSES VALUES (?1, ?2, 'python')", params![gpid, c.pid])?;
        tx.execute(
            "INSERT INTO TARGET_INFO_GPU VALUES (0, ?1, 'NVIDIA A100-SXM4-80GB', ?2, ?3, ?1, 85899345920, 8, 0, 108)",
            params![c.dev as i64, format!("0000:{:02x}:00.0", c.bus_id >> 12), format!("GPU-{:08x}-{r:04}", c.bus_id)],
        )?;
        if cfg.nsys_mpi_ranks {
            tx.execute("INSERT INTO MPI_RANKS VALUES (?1, ?2)", params![gtid, r as i64])?;
        }
        {
            let mut ks = tx.prepare(
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, ?7, ?8, ?7, 0, 0, ?9, ?10, ?11, \
                 ?12, ?13, ?14, ?15, ?16, ?17, 0, 0, ?18, 0, NULL)",
            )?;
            let mut rt = tx.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?1, ?2, 0, ?3, ?4, ?5, 0, NULL)")?;
            for k in &c.kernels {
                let name = strings.id(&tx, &k.name)?;
                let short = strings.id(&tx, &k.short_name)?;
                grid_id += 1;
                ks.execute(params![
                    k.start_ns - session,
                    k.end_ns - session,
                    c.dev as i64,
                    k.stream,
                    k.correlation as i64,
                    gpid,
                    name,
                    short,
                    k.registers,
                    k.grid[0],
                    k.grid[1],
                    k.grid[2],
                    k.block[0],
                    k.block[1],
                    k.block[2],
                    k.static_smem,
                    k.dynamic_smem,
                    grid_id
                ])?;
                rt.execute(params![k.launch_ns - session, k.launch_end_ns - session, gtid, k.correlation as i64, launch_name])?;
            }
            let mut nv = tx.prepare(
                "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, endGlobalTid, domainId) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)",
            )?;
            for (s, e, text, nccl) in &c.nvtx {
                let dom = if *nccl { NCCL_DOMAIN } else { 0 };
                nv.execute(params![s - session, e - session, PUSH_POP, text, gtid, dom])?;
            }
        }
    }
    tx.commit()?;
    conn.execute_batch("CREATE INDEX kernel_start ON CUPTI_ACTIVITY_KIND_KERNEL (start);")?;
    Ok(())
}
