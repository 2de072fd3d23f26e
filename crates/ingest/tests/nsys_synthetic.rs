//! The nsys reader against SQLite files generated here to the documented
//! export schema (StringIds ids in the kernel name columns, globalPid /
//! globalTid with the pid in bits 24–47, lazily created tables): a full
//! export of two processes, an old/minimal one without optional tables and
//! columns, files without NCCL kernels (loud errors), two files of two nodes
//! joined into one table, and a non-SQLite file.

use commlens_core::{Algorithm, DataType, OpKind, Protocol, RedOp};
use commlens_ingest::nsys::{self, RangeKind, TraceError, TraceOptions};
use rusqlite::{params, Connection};
use std::path::PathBuf;

const KERNEL_COLS_NEW: &str = "start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL, contextId INT NOT NULL, \
    greenContextId INT, streamId INT NOT NULL, correlationId INT, globalPid INT, demangledName INT NOT NULL, \
    shortName INT NOT NULL, mangledName INT, launchType INT, cacheConfig INT, registersPerThread INT NOT NULL, \
    gridX INT NOT NULL, gridY INT NOT NULL, gridZ INT NOT NULL, blockX INT NOT NULL, blockY INT NOT NULL, \
    blockZ INT NOT NULL, staticSharedMemory INT NOT NULL, dynamicSharedMemory INT NOT NULL, \
    localMemoryPerThread INT NOT NULL, localMemoryTotal INT NOT NULL, gridId INT NOT NULL, sharedMemoryExecuted INT, \
    graphNodeId INT, sharedMemoryLimitConfig INT, qmdBulkReleaseDone INT, qmdPreexitDone INT, qmdLastCtaDone INT, \
    graphId INT, clusterX INT, clusterY INT, clusterZ INT, clusterSchedulingPolicy INT, maxPotentialClusterSize INT, \
    maxActiveClusters INT, sharedMemoryRequestedPercentage INT, tensorSizeMinusOneElements INT";

/// An older export: no greenContextId and nothing after gridId, no shortName.
const KERNEL_COLS_OLD: &str = "start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL, contextId INT NOT NULL, \
    streamId INT NOT NULL, correlationId INT, globalPid INT, demangledName INT NOT NULL, registersPerThread INT NOT NULL, \
    gridX INT NOT NULL, gridY INT NOT NULL, gridZ INT NOT NULL, blockX INT NOT NULL, blockY INT NOT NULL, \
    blockZ INT NOT NULL, staticSharedMemory INT NOT NULL, dynamicSharedMemory INT NOT NULL, gridId INT NOT NULL";

const PUSH_POP: i64 = 159; // deliberately not the common 59: must come from ENUM_NSYS_EVENT_TYPE
const START_END: i64 = 160;
const DOMAIN_CREATE: i64 = 175;

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("commlens-nsys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

fn global_pid(pid: i64) -> i64 {
    (1 << 48) | (pid << 24)
}

fn global_tid(pid: i64, tid: i64) -> i64 {
    global_pid(pid) | tid
}

struct Gen {
    conn: Connection,
    strings: Vec<String>,
    full: bool,
}

/// One kernel launch to generate: (pid, device, stream, correlation, start, dur, short name, demangled suffix).
type K = (i64, i64, i64, i64, i64, i64, &'static str);

impl Gen {
    fn new(path: &PathBuf, full: bool) -> Gen {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);").unwrap();
        let cols = if full { KERNEL_COLS_NEW } else { KERNEL_COLS_OLD };
        conn.execute_batch(&format!("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({cols});")).unwrap();
        if full {
            conn.execute_batch(
                "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT NOT NULL, end INT NOT NULL, eventClass INT NOT NULL, \
                   globalTid INT, correlationId INT, nameId INT NOT NULL, returnValue INT NOT NULL, callchainId INT);
                 CREATE TABLE PROCESSES (globalPid INT, pid INT, name TEXT);
                 CREATE TABLE TARGET_INFO_GPU (vmId INT, id INT, name TEXT, busLocation TEXT, uuid TEXT, cuDevice INT, \
                   computeMajor INT, computeMinor INT);
                 CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INT, utcTime TEXT, localTime TEXT);
                 CREATE TABLE MPI_RANKS (globalTid INT, rank INT);
                 CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
                 CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
                 CREATE TABLE NVTX_EVENTS (start INT NOT NULL, end INT, eventType INT NOT NULL, rangeId INT, category INT, \
                   color INT, text TEXT, globalTid INT, endGlobalTid INT, textId INT, domainId INT, uint64Value INT, \
                   int64Value INT, doubleValue REAL, uint32Value INT, int32Value INT, floatValue REAL, jsonTextId INT, jsonText TEXT);
                 INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.28.1');
                 INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '');",
            )
            .unwrap();
            for (id, name, label) in [
                (34, "NvtxMark", "NVTX Mark"),
                (PUSH_POP, "NvtxPushPopRange", "NVTX PushPop Range"),
                (START_END, "NvtxStartEndRange", "NVTX StartEnd Range"),
                (DOMAIN_CREATE, "NvtxDomainCreate", "NVTX Domain Create"),
            ] {
                conn.execute("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?1, ?2, ?3)", params![id, name, label]).unwrap();
            }
        }
        Gen { conn, strings: Vec::new(), full }
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(i) = self.strings.iter().position(|x| x == s) {
            return i as i64 + 1;
        }
        self.strings.push(s.to_string());
        let id = self.strings.len() as i64;
        self.conn.execute("INSERT INTO StringIds VALUES (?1, ?2)", params![id, s]).unwrap();
        id
    }

    fn kernel(&mut self, (pid, dev, stream, corr, start, dur, short): K) {
        let demangled = if short.starts_with("nccl") {
            format!("{short}(ncclDevKernelArgsStorage<(unsigned long)4096>)")
        } else {
            format!("void {short}<float>(float*)")
        };
        let (d, s) = (self.string(&demangled), self.string(short));
        if self.full {
            self.conn
                .execute(
                    "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, greenContextId, streamId, \
                     correlationId, globalPid, demangledName, shortName, mangledName, registersPerThread, gridX, gridY, gridZ, \
                     blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId) \
                     VALUES (?1, ?2, ?3, 1, 0, ?4, ?5, ?6, ?7, ?8, ?7, 96, 2, 1, 1, 544, 1, 1, 7104, 82240, 0, 280756224, ?5)",
                    params![start, start + dur, dev, stream, corr, global_pid(pid), d, s],
                )
                .unwrap();
            let launch = self.string("cudaLaunchKernelExC_v11060");
            self.conn
                .execute(
                    "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?1, ?2, 0, ?3, ?4, ?5, 0, 0)",
                    params![start - 5000, start - 4000, global_tid(pid, pid + 7), corr, launch],
                )
                .unwrap();
        } else {
            self.conn
                .execute(
                    "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, ?7, 32, 4, 1, 1, 256, 1, 1, 0, 4096, ?5)",
                    params![start, start + dur, dev, stream, corr, global_pid(pid), d],
                )
                .unwrap();
        }
    }

    fn process(&mut self, pid: i64, dev: i64, rank: i64, bus: &str) {
        let c = &self.conn;
        c.execute("INSERT INTO PROCESSES VALUES (?1, ?2, 'python3')", params![global_pid(pid), pid]).unwrap();
        c.execute(
            "INSERT INTO TARGET_INFO_GPU VALUES (0, ?1, 'NVIDIA H100 80GB HBM3', ?2, 'GPU-x', ?1, 9, 0)",
            params![dev, bus],
        )
        .unwrap();
        c.execute("INSERT INTO MPI_RANKS VALUES (?1, ?2)", params![global_tid(pid, pid), rank]).unwrap();
    }

    /// An NVTX event; `text` is (inline text, registered string behind textId).
    fn nvtx(
        &mut self,
        ty: i64,
        (start, end): (i64, Option<i64>),
        (text, text_id): (Option<&str>, Option<&str>),
        pid: i64,
        domain: i64,
    ) {
        let tid = text_id.map(|t| self.string(t));
        self.conn
            .execute(
                "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![start, end, ty, text, global_tid(pid, pid), tid, domain],
            )
            .unwrap();
    }
}

/// A node with processes `pids[i]` on device `i`, ranks `rank0 + i`.
fn full_export(path: &PathBuf, pids: [i64; 2], rank0: i64) {
    let mut g = Gen::new(path, true);
    for (i, &pid) in pids.iter().enumerate() {
        let dev = i as i64;
        g.process(pid, dev, rank0 + i as i64, if i == 0 { "0000:17:00.0" } else { "0000:65:00.0" });
        // Inserted out of time order; correlation ids repeat across processes.
        let ks: [K; 8] = [
            (pid, dev, 31, 103, 3_000_000, 900, "ncclDevKernel_AllGather_RING_LL"),
            (pid, dev, 31, 101, 1_000_000, 900, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            (pid, dev, 7, 100, 500_000, 300, "ampere_sgemm_128x64_nn"),
            (pid, dev, 31, 102, 2_000_000, 900, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            (pid, dev, 40, 104, 4_000_000, 900, "ncclDevKernel_SendRecv"),
            (pid, dev, 31, 105, 5_000_000, 900, "ncclDevKernel_ReduceScatter_Sum_bf16_NVLS_TREE_SIMPLE"),
            (pid, dev, 31, 106, 6_000_000, 900, "ncclDevKernel_Generic"),
            (pid, dev, 8, 107, 7_000_000, 100, "multimem_all_reduce_kernel"),
        ];
        for k in ks {
            g.kernel(k);
        }
        g.nvtx(DOMAIN_CREATE, (0, None), (Some("NCCL"), None), pid, 1);
        g.nvtx(PUSH_POP, (900_000, Some(6_500_000)), (Some("iteration 0"), None), pid, 0);
        g.nvtx(PUSH_POP, (950_000, Some(2_500_000)), (None, Some("forward")), pid, 0);
        g.nvtx(START_END, (960_000, Some(3_500_000)), (Some("microbatch 0"), None), pid, 0);
        g.nvtx(PUSH_POP, (990_000, Some(995_000)), (Some("ncclAllReduce"), None), pid, 1);
        g.nvtx(PUSH_POP, (7_000_000, None), (Some("never popped"), None), pid, 0);
        g.nvtx(34, (1_000, None), (Some("a mark"), None), pid, 0);
    }
}

#[test]
fn full_export_two_processes() {
    let path = temp("full.sqlite");
    full_export(&path, [4242, 4243], 0);
    let t = nsys::load_nsys(&path).unwrap();
    assert_eq!(t.source_version.as_deref(), Some("3.28.1"));
    assert_eq!(t.base_time_ns, 1_700_000_000_000_000_000);
    assert_eq!(t.ranks.len(), 2);
    assert_eq!((t.stats.gpu_kernels, t.stats.nccl_kernels, t.stats.kernels_without_kind), (16, 12, 2));
    assert_eq!(t.stats.other_comm_kernels, vec![("multimem_all_reduce_kernel".to_string(), 2)]);
    for (i, r) in t.ranks.iter().enumerate() {
        assert_eq!((r.pid, r.device, r.rank), (4242 + i as u32, Some(i as u32), Some(i as u32)));
        assert_eq!(r.gpu_name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(r.bus_id, Some(if i == 0 { 0x17000 } else { 0x65000 }));
        let starts: Vec<i64> = r.kernels.iter().map(|k| k.start_ns).collect();
        assert_eq!(starts, vec![1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000, 6_000_000]);
        let k = &r.kernels[0];
        assert_eq!(k.name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)");
        assert_eq!((k.grid, k.block, k.registers), ([2, 1, 1], [544, 1, 1], 96));
        assert_eq!((k.static_smem_bytes, k.dynamic_smem_bytes, k.shared_mem_bytes), (Some(7104), Some(82240), 89344));
        assert_eq!((k.stream, k.correlation, k.end_ns), (31, Some(101), 1_000_900));
        assert_eq!(k.launch.map(|l| (l.tid, l.ts_ns)), Some((4242 + i as u64 + 7, 995_000)));
        let p = &r.kernels[4].parsed;
        assert_eq!(
            (p.kind, p.redop, p.dtype),
            (Some(OpKind::ReduceScatter), Some(RedOp::Sum), Some(DataType::Bfloat16))
        );
        assert_eq!((p.algo, p.proto), (Some(Algorithm::NvlsTree), Some(Protocol::Simple)));
        assert!(r.kernels[5].parsed.generic);
        assert!(r.cpu_ops.is_empty() && r.links.is_empty());
    }
    // Ranges: 4 closed push/pop or start/end per process (marks and the unclosed one left out).
    assert_eq!(t.ranges.len(), 8);
    assert!(t.warnings.iter().any(|w| w.contains("2 NVTX ranges were never closed")), "{:?}", t.warnings);
    let fwd = t.ranges.iter().find(|r| t.name(r.name) == "forward").unwrap();
    assert_eq!(
        (fwd.kind, fwd.pid, fwd.start_ns, fwd.end_ns, fwd.domain),
        (RangeKind::PushPop, 4242, 950_000, 2_500_000, None)
    );
    let mb = t.ranges.iter().find(|r| t.name(r.name) == "microbatch 0").unwrap();
    assert_eq!(mb.kind, RangeKind::StartEnd);
    let api = t.ranges.iter().find(|r| t.name(r.name) == "ncclAllReduce").unwrap();
    assert_eq!(api.domain.map(|d| t.name(d)), Some("NCCL"));
    assert!(t.ranges.windows(2).all(|w| w[0].start_ns <= w[1].start_ns));

    let (table, notes) = nsys::to_op_table(std::slice::from_ref(&t));
    assert_eq!((notes.ops, notes.kernels_without_kind), (10, 2));
    for (d, ops) in table.per_rank.iter().enumerate() {
        let ops = &ops.to_vec();
        assert_eq!(ops.len(), 5);
        let kinds: Vec<OpKind> = ops.iter().map(|o| o.kind).collect();
        use OpKind::*;
        assert_eq!(kinds, vec![AllReduce, AllReduce, AllGather, SendRecv, ReduceScatter]);
        let op = &ops[0];
        // No count in an export without NCCL payloads: the size is unknown
        // (the kernel name's float type does not make it 0 B).
        assert_eq!((op.size(), op.dtype, op.algo), (None, DataType::Unknown(-1), Some(Algorithm::Ring)));
        assert_eq!(op.gpu.unwrap().start_ns, 1_700_000_000_000_000_000 + 1_000_000);
        assert_eq!(op.cpu_ts_ns, Some(1_700_000_000_000_000_000 + 995_000));
        assert_eq!(op.kernel.as_ref().unwrap().shared_mem_bytes, 89344);
        assert_eq!(table.devices[d].bus_id, Some(if d == 0 { 0x17000 } else { 0x65000 }));
        // Stream 31 and stream 40 are separate handles.
        assert_ne!(ops[0].comm, ops[3].comm);
    }
    // The two stream-31 handles run the same sequence: one logical
    // communicator of both ranks; likewise stream 40 (plus the op-less world).
    let busy = |l: &&commlens_core::LogicalComm| table.comms[l.members[0].ix()].n_ops > 0;
    let shared: Vec<_> = table.logical.iter().filter(busy).map(|l| l.members.len()).collect();
    assert_eq!(shared, vec![2, 2], "{:?}", table.logical);
    assert_eq!(table.devices.iter().map(|d| d.global_rank).collect::<Vec<_>>(), vec![Some(0), Some(1)]);
}

#[test]
fn old_export_without_optional_tables_and_columns() {
    let path = temp("old.sqlite");
    let mut g = Gen::new(&path, false);
    for k in [
        (77, 0, 13, 5, 200, 50, "ncclKernel_AllReduce_RING_LL_Sum_float"),
        (77, 0, 13, 4, 100, 50, "ncclKernel_Broadcast_RING_LL_Sum_int8_t"),
        (77, 0, 7, 3, 50, 10, "volta_sgemm"),
    ] {
        g.kernel(k);
    }
    drop(g);
    let t = nsys::load_nsys(&path).unwrap();
    assert_eq!((t.source_version.as_deref(), t.base_time_ns), (None, 0));
    assert_eq!(t.ranks.len(), 1);
    let r = &t.ranks[0];
    assert_eq!((r.pid, r.device, r.rank, r.gpu_name.as_deref()), (77, Some(0), None, None));
    let kinds: Vec<_> = r.kernels.iter().map(|k| k.parsed.kind).collect();
    assert_eq!(kinds, vec![Some(OpKind::Broadcast), Some(OpKind::AllReduce)]);
    let k = &r.kernels[1];
    assert_eq!(k.name, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevKernelArgsStorage<(unsigned long)4096>)");
    assert_eq!((k.grid, k.block, k.shared_mem_bytes, k.registers, k.launch), ([4, 1, 1], [256, 1, 1], 4096, 32, None));
    assert!(t.ranges.is_empty() && t.warnings.is_empty(), "{:?}", t.warnings);
    let (table, notes) = nsys::to_op_table(&[t]);
    assert_eq!(notes.ops, 2);
    assert_eq!(table.devices[0].global_rank, Some(0));
}

#[test]
fn no_nccl_kernels_is_loud() {
    // Lazily created tables: a report without any kernel has no kernel table.
    let path = temp("empty.sqlite");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);")
        .unwrap();
    let e = nsys::load_nsys(&path).unwrap_err();
    assert!(
        matches!(e, TraceError::NoNcclKernels { .. }) && e.to_string().contains("CUPTI_ACTIVITY_KIND_KERNEL"),
        "{e}"
    );

    let path = temp("compute-only.sqlite");
    let mut g = Gen::new(&path, true);
    g.kernel((1, 0, 7, 1, 10, 5, "ampere_sgemm"));
    g.kernel((1, 0, 7, 2, 20, 5, "multimem_all_reduce_kernel"));
    drop(g);
    let e = nsys::load_nsys(&path).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("compute-only.sqlite") && msg.contains("2 GPU kernels") && msg.contains("1 non-NCCL"),
        "{msg}"
    );
    let opts = TraceOptions { allow_no_kernels: true, ..Default::default() };
    let t = nsys::load_nsys_with(&path, &opts).unwrap();
    assert!(t.ranks.is_empty() && t.warnings.iter().any(|w| w.contains("no NCCL kernels")));

    let path = temp("not-a-db.sqlite");
    std::fs::write(&path, "{\"traceEvents\": []}").unwrap();
    assert!(matches!(nsys::load_nsys(&path), Err(TraceError::NotATrace { .. })));
}

#[test]
fn two_nodes_in_two_files() {
    let (a, b) = (temp("node-a.sqlite"), temp("node-b.sqlite"));
    full_export(&a, [1001, 1002], 0);
    full_export(&b, [1001, 1002], 2); // same pids on the other node
    let opts = TraceOptions { max_ranges: 3, ..Default::default() };
    let traces = nsys::load_nsys_files(&[a, b], &opts).unwrap();
    assert_eq!(traces.len(), 2);
    assert!(traces.iter().all(|t| t.ranges.len() == 3 && t.stats.ranges_dropped == 5));
    assert!(traces[0].warnings.iter().any(|w| w.contains("beyond the first 3")));
    let (table, notes) = nsys::to_op_table(&traces);
    assert_eq!(notes.ops, 20);
    assert_eq!(table.devices.len(), 4);
    let ranks: Vec<_> = table.devices.iter().map(|d| d.global_rank.unwrap()).collect();
    assert_eq!(ranks, vec![0, 1, 2, 3], "global ranks from MPI_RANKS");
    let busy: Vec<_> =
        table.logical.iter().filter(|l| table.comms[l.members[0].ix()].n_ops > 0).map(|l| l.members.len()).collect();
    assert_eq!(busy, vec![4, 4], "stream 31 and stream 40 handles of all four ranks");
}

/// Non-NCCL kernels, memcpys and memsets become each rank's compact
/// compute records; rows of a GPU without NCCL kernels are counted and left out.
#[test]
fn compute_kernels_memcpy_and_memset() {
    use commlens_ingest::kineto::{ComputeKernel, KernelClass};
    let path = temp("compute.sqlite");
    full_export(&path, [4242, 4243], 0);
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT NOT NULL, end INT NOT NULL, deviceId INT, contextId INT, \
             streamId INT, correlationId INT, globalPid INT, bytes INT, copyKind INT);
             CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INT NOT NULL, end INT NOT NULL, deviceId INT, contextId INT, \
             streamId INT, correlationId INT, globalPid INT, value INT, bytes INT);",
        )
        .unwrap();
        let ins = "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?1, ?2, ?3, 1, 9, 200, ?4, 4096, ?5)";
        c.execute(ins, params![800_000, 800_500, 0, global_pid(4242), 8]).unwrap();
        c.execute(ins, params![100_000, 100_250, 0, global_pid(4242), 1]).unwrap();
        c.execute(ins, params![100_000, 100_250, 5, global_pid(4242), 1]).unwrap();
        c.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?1, ?2, 1, 1, 9, 201, ?3, 0, 64)",
            params![900_000, 900_010, global_pid(4243)],
        )
        .unwrap();
    }
    let t = nsys::load_nsys(&path).unwrap();
    let show = |r: &commlens_ingest::kineto::RankTrace| -> Vec<(i64, u32, u32, String, KernelClass)> {
        r.compute
            .iter()
            .map(|k| {
                let n = &r.compute_names[k.name as usize];
                assert_eq!(k.launch_lag_ns, ComputeKernel::NO_LAUNCH);
                (k.start_ns, k.dur_ns, k.stream, n.name.clone(), n.class)
            })
            .collect()
    };
    use KernelClass::*;
    assert_eq!(show(&t.ranks[0]), vec![
        (100_000, 250, 9, "Memcpy HtoD".to_string(), Memory),
        (500_000, 300, 7, "ampere_sgemm_128x64_nn".to_string(), Computation),
        (800_000, 500, 9, "Memcpy DtoD".to_string(), Memory),
        (7_000_000, 100, 8, "multimem_all_reduce_kernel".to_string(), OtherComm),
    ]);
    assert_eq!(show(&t.ranks[1]), vec![
        (500_000, 300, 7, "ampere_sgemm_128x64_nn".to_string(), Computation),
        (900_000, 10, 9, "Memset".to_string(), Memory),
        (7_000_000, 100, 8, "multimem_all_reduce_kernel".to_string(), OtherComm),
    ]);
    assert_eq!(t.ranks[0].compute_names.len(), 4, "one name per distinct activity");
    assert!(t.warnings.iter().any(|w| w.starts_with("1 non-NCCL GPU activities")), "{:?}", t.warnings);
    assert_eq!(std::mem::size_of::<ComputeKernel>(), 24);
}

/// Hostile exports: views are never run, queries share a time limit, and
/// broken rows of a `WITHOUT ROWID` table are still counted (named without
/// a rowid); the good rows stay.
#[test]
fn hostile_exports() {
    let p = temp("view.sqlite");
    let c = Connection::open(&p).unwrap();
    c.execute_batch(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
         INSERT INTO StringIds VALUES (1, 'ncclDevKernel_SendRecv');
         CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r)
           SELECT x AS start, x + 1 AS \"end\", 0 AS deviceId, 1 AS shortName FROM r;",
    )
    .unwrap();
    drop(c);
    let e = nsys::load_nsys(&p).unwrap_err();
    assert!(matches!(e, TraceError::NoNcclKernels { .. }) && e.to_string().contains("is a view"), "{e}");

    let p = temp("norowid.sqlite");
    let c = Connection::open(&p).unwrap();
    c.execute_batch(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
         INSERT INTO StringIds VALUES (1, 'ncclDevKernel_SendRecv');
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, \"end\" INT, deviceId INT, streamId INT,
           correlationId INT PRIMARY KEY, shortName INT) WITHOUT ROWID;
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 200, 0, 7, 1, 1), ('x', 300, 0, 7, 2, 1), (400, 500, 0, 7, 3, 1);",
    )
    .unwrap();
    drop(c);
    let t = nsys::load_nsys(&p).unwrap();
    assert_eq!(t.ranks[0].kernels.iter().map(|k| k.start_ns).collect::<Vec<_>>(), vec![100, 400]);
    assert_eq!(t.stats.skipped.total, 1);
    assert_eq!(
        t.stats.skipped.first.as_deref(),
        Some("a row of CUPTI_ACTIVITY_KIND_KERNEL (TEXT value in start)")
    );
    assert!(t.warnings[0].starts_with("skipped 1 malformed rows"), "{:?}", t.warnings);

    // The time limit: a query that runs past it stops the file, named.
    let c = Connection::open(&p).unwrap();
    c.execute_batch(
        "WITH RECURSIVE r(x) AS (SELECT 10 UNION ALL SELECT x + 1 FROM r WHERE x < 50000)
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT 1000 + x, 1001 + x, 0, 8, x, 1 FROM r;",
    )
    .unwrap();
    drop(c);
    let opts = TraceOptions { query_time_limit: std::time::Duration::from_nanos(1), ..Default::default() };
    let e = nsys::load_nsys_with(&p, &opts).unwrap_err();
    assert!(matches!(e, TraceError::Sqlite { .. }) && e.to_string().contains("gave up after"), "{e}");
    assert!(e.to_string().contains("norowid.sqlite"), "{e}");
    assert_eq!(nsys::load_nsys(&p).unwrap().n_kernels(), 50_000 - 10 + 1 + 2);
}
