//! Hostile and broken kernel traces through the binary: crafted nsys SQLite
//! exports (a recursive VIEW named like a CUPTI table, a query that runs
//! past the time limit, TEXT/REAL/NULL values in numeric columns, dangling
//! string ids) and Kineto traces with malformed events (`"args": null`,
//! non-string names, bad `ts`, non-object events). A pathological file
//! fails fast naming the file; a broken row or event is skipped, counted by
//! reason and the first one named, and every good one is kept: the output
//! equals the output of the same file without the broken rows.

use rusqlite::{params, Connection};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Runs the binary with a wall-clock guard (a hang is a failure, not a stuck test).
fn commlens_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_commlens"));
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    // Read the pipes on threads so a chatty child cannot block on a full pipe.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut so, &mut s).ok();
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut se, &mut s).ok();
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("commlens {args:?} ran for more than 120 s (hung on a hostile input)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code().unwrap_or(-1), t_out.join().unwrap(), t_err.join().unwrap())
}

fn commlens(args: &[&str]) -> (i32, String, String) {
    commlens_env(args, &[])
}

/// A fresh folder of its own under the temp dir.
fn tmp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "commlens-hostile-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

// ---------------------------------------------------------------- nsys

fn global_pid(pid: i64) -> i64 {
    (1 << 48) | (pid << 24)
}

/// A small export in the documented layout (StringIds ids in the name
/// columns), with columns declared without NOT NULL so broken rows can be
/// written: `n` NCCL kernels and a compute kernel per NCCL kernel, their
/// launches, one process and its GPU.
fn nsys_export(path: &Path, n: i64) -> Connection {
    let _ = std::fs::remove_file(path);
    let c = Connection::open(path).unwrap();
    c.execute_batch(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, contextId INT, streamId INT,
           correlationId INT, globalPid INT, demangledName INT, shortName INT, registersPerThread INT,
           gridX INT, gridY INT, gridZ INT, blockX INT, blockY INT, blockZ INT,
           staticSharedMemory INT, dynamicSharedMemory INT);
         CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT, correlationId INT, nameId INT);
         CREATE TABLE PROCESSES (globalPid INT, pid INT, name TEXT);
         CREATE TABLE TARGET_INFO_GPU (id INT, name TEXT, busLocation TEXT, cuDevice INT);
         INSERT INTO StringIds VALUES (1, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'),
           (2, 'ncclDevKernel_AllGather_RING_LL'), (3, 'ncclDevKernel_SendRecv'), (4, 'ampere_sgemm_128x64_nn'),
           (5, 'cudaLaunchKernel_v7000');
         INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H100', '0000:17:00.0', 0);",
    )
    .unwrap();
    c.execute("INSERT INTO PROCESSES VALUES (?1, 4242, 'python3')", params![global_pid(4242)]).unwrap();
    for i in 0..n {
        let start = 1_000_000 + i * 100_000;
        let name = 1 + i % 3;
        let corr = 100 + 2 * i;
        kernel(&c, start, 900, 7, corr, name);
        kernel(&c, start + 20_000, 5_000, 9, corr + 1, 4);
        for k in [corr, corr + 1] {
            c.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?1, ?2, ?3, ?4, 5)",
                params![start - 5000, start - 4000, global_pid(4242) | 4250, k],
            )
            .unwrap();
        }
    }
    c
}

fn kernel(c: &Connection, start: i64, dur: i64, stream: i64, corr: i64, name: i64) {
    c.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?1, ?2, 0, 1, ?3, ?4, ?5, ?6, ?6, 64, 2, 1, 1, 256, 1, 1, 0, 4096)",
        params![start, start + dur, stream, corr, global_pid(4242), name],
    )
    .unwrap();
}

/// Item 5: a recursive VIEW named like the kernel table must not be run
/// (it never ends): only tables are read, and the file fails fast naming
/// itself and the view.
#[test]
fn nsys_recursive_view_named_like_the_kernel_table_fails_fast() {
    let dir = tmp_dir("nsys-view");
    let db = dir.join("crafted.sqlite");
    {
        let c = Connection::open(&db).unwrap();
        c.execute_batch(
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO StringIds VALUES (1, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL');
             CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS
               WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r)
               SELECT x AS start, x + 10 AS \"end\", 0 AS deviceId, 7 AS streamId, x AS correlationId,
                      0 AS globalPid, 1 AS shortName, 1 AS demangledName FROM r;",
        )
        .unwrap();
    }
    // An endless read fails on the runner's hang guard (`commlens_env`).
    let (code, _, err) = commlens(&["stats", s(&db)]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("crafted.sqlite"), "names the file: {err}");
    assert!(err.contains("CUPTI_ACTIVITY_KIND_KERNEL is a view"), "says why: {err}");
}

/// A recursive view named like an optional table (NVTX_EVENTS) next to
/// good tables: the view is ignored with a warning, the kernels are read.
#[test]
fn nsys_recursive_view_named_like_an_optional_table_is_ignored() {
    let dir = tmp_dir("nsys-view2");
    let (clean, crafted) = (dir.join("clean.sqlite"), dir.join("crafted.sqlite"));
    drop(nsys_export(&clean, 6));
    let c = nsys_export(&crafted, 6);
    c.execute_batch(
        "CREATE VIEW NVTX_EVENTS AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r)
         SELECT x AS start, x + 1 AS \"end\", 59 AS eventType, 'step' AS text, 0 AS globalTid, NULL AS domainId FROM r;",
    )
    .unwrap();
    drop(c);
    let (code0, out0, err0) = commlens(&["stats", "--format", "json", s(&clean)]);
    assert_eq!(code0, 0, "{err0}");
    let (code, out, err) = commlens(&["stats", "--format", "json", s(&crafted)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, out0, "same operations as the clean file");
    assert!(err.contains("NVTX_EVENTS is a view, not a table: ignored"), "{err}");
}

/// Item 5: SQLite's progress handler bounds the time of a file's queries;
/// past the limit the file errors out naming itself (the limit is made tiny
/// here so that an ordinary file reaches it).
#[test]
fn nsys_query_time_is_bounded() {
    let dir = tmp_dir("nsys-limit");
    let db = dir.join("slow.sqlite");
    let c = nsys_export(&db, 3);
    // Enough rows that one query step runs far more than the handler's period.
    c.execute_batch(
        "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r WHERE x < 20000)
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, \"end\", deviceId, streamId, correlationId, globalPid, shortName)
         SELECT 5000000 + x, 5000001 + x, 0, 9, 100000 + x, 0, 4 FROM r;",
    )
    .unwrap();
    drop(c);
    let (code, out, err) = commlens(&["stats", "--format", "json", s(&db)]);
    assert_eq!(code, 0, "reads within the default limit: {err}");
    assert!(out.contains("AllReduce") || out.contains("allreduce"), "{out}");
    let (code, _, err) = commlens_env(&["stats", s(&db)], &[("COMMLENS_NSYS_TIME_LIMIT_S", "0.000001")]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("slow.sqlite") && err.contains("gave up after"), "{err}");
}

/// Item 5: TEXT/REAL values and NULLs in numeric columns, NULL starts and
/// dangling string ids: each broken row is skipped and counted by reason,
/// the first is named by table and rowid, and every good row is kept.
#[test]
fn nsys_broken_rows_are_skipped_counted_and_named() {
    let dir = tmp_dir("nsys-rows");
    let (clean, broken) = (dir.join("clean.sqlite"), dir.join("broken.sqlite"));
    drop(nsys_export(&clean, 9));
    let c = nsys_export(&broken, 9);
    // Rowids 19.. (18 good kernel rows came first).
    let g = global_pid(4242);
    c.execute_batch(&format!(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, \"end\", deviceId, streamId, correlationId, globalPid, shortName, demangledName)
           VALUES ('soon', 9000000, 0, 7, 900, {g}, 1, 1);
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, \"end\", deviceId, streamId, correlationId, globalPid, shortName, demangledName)
           VALUES (9100000, 9100900, 0, 7.5, 901, {g}, 2, 2);
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, \"end\", deviceId, streamId, correlationId, globalPid, shortName, demangledName)
           VALUES (NULL, 9200900, 0, 7, 902, {g}, 1, 1);
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, \"end\", deviceId, streamId, correlationId, globalPid, shortName, demangledName)
           VALUES (9300000, 9300900, 0, 7, 903, {g}, 777, 777);
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, \"end\", deviceId, streamId, correlationId, globalPid, shortName, demangledName)
           VALUES (9400000, 9400900, 0, 9, 904, {g}, 4, 4);
         UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = 'late' WHERE rowid = 23;
         INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES ('x', 1, 0, 100, 5);
         INSERT INTO PROCESSES VALUES ('nope', 1, 'python3');
         INSERT INTO TARGET_INFO_GPU VALUES (NULL, 'ghost', '', 3);"
    ))
    .unwrap();
    drop(c);
    let (code0, out0, err0) = commlens(&["stats", "--format", "json", s(&clean)]);
    assert_eq!(code0, 0, "{err0}");
    let (code, out, err) = commlens(&["stats", "--format", "json", s(&broken)]);
    assert_eq!(code, 0, "broken rows do not reject the file: {err}");
    assert_eq!(out, out0, "every good row kept, no broken one");
    assert!(err.contains("skipped 8 malformed rows"), "{err}");
    for reason in [
        "1 CUPTI_ACTIVITY_KIND_KERNEL: TEXT value in start",
        "1 CUPTI_ACTIVITY_KIND_KERNEL: REAL value in streamId",
        "1 CUPTI_ACTIVITY_KIND_KERNEL: NULL start",
        "1 CUPTI_ACTIVITY_KIND_KERNEL: shortName id not in StringIds",
        "1 CUPTI_ACTIVITY_KIND_KERNEL: TEXT value in end",
        "1 CUPTI_ACTIVITY_KIND_RUNTIME: TEXT value in start",
        "1 PROCESSES: TEXT value in globalPid",
        "1 TARGET_INFO_GPU: NULL id",
    ] {
        assert!(err.contains(reason), "{reason}: {err}");
    }
    // Kernel names are classified first, so the dangling id is the first found.
    assert!(err.contains("the first: CUPTI_ACTIVITY_KIND_KERNEL rowid 22 (shortName id not in StringIds)"), "{err}");
}

// ---------------------------------------------------------------- Kineto

/// A Kineto trace of one rank: `n` NCCL kernels with their
/// `record_param_comms` calls and launches, plus `extra` events spliced in
/// after the first kernel.
fn kineto(n: usize, extra: &[&str]) -> String {
    let mut ev: Vec<String> = Vec::new();
    ev.push(r#"{"name": "process_name", "ph": "M", "ts": 0, "pid": 77, "tid": 0, "args": {"name": "python3"}}"#.into());
    for i in 0..n {
        let t = 100 + i * 100;
        let (coll, kname) = match i % 2 {
            0 => ("allreduce", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            _ => ("_allgather_base", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
        };
        let ext = 1000 + i;
        let corr = 5000 + i;
        ev.push(format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 77, "tid": 78, "ts": {t}, "dur": 20,
  "args": {{"External id": {ext}, "Collective name": "{coll}", "In msg nelems": 1024, "Out msg nelems": 1024, "Group size": 2,
  "dtype": "Float", "Process Group Name": "0", "Process Group Ranks": "[0, 1]", "Rank": 0, "Seq": {i}}}}}"#
        ));
        ev.push(format!(
            r#"{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 77, "tid": 78, "ts": {}, "dur": 3, "args": {{"External id": {ext}, "correlation": {corr}}}}}"#,
            t + 5
        ));
        ev.push(format!(
            r#"{{"ph": "X", "cat": "kernel", "name": "{kname}", "pid": 0, "tid": 7, "ts": {}, "dur": 30,
  "args": {{"External id": {ext}, "device": 0, "stream": 7, "correlation": {corr}, "grid": [2, 1, 1], "block": [256, 1, 1]}}}}"#,
            t + 10
        ));
        ev.push(format!(
            r#"{{"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 8, "ts": {}, "dur": 40, "args": {{"device": 0, "stream": 8}}}}"#,
            t + 50
        ));
        if i == 0 {
            ev.extend(extra.iter().map(|e| e.to_string()));
        }
    }
    format!(
        r#"{{"schemaVersion": 1, "distributedInfo": {{"backend": "nccl", "rank": 0, "world_size": 2}},
  "baseTimeNanoseconds": 1700000000000000000, "traceEvents": [
{}
]}}"#,
        ev.join(",\n")
    )
}

/// Item 6: `"args": null`, non-string names, bad `ts` (string, negative,
/// NaN-like, missing) and non-object events: each skipped and counted, the
/// first named by its index in `traceEvents` and its name, the rest kept
/// exactly; the CLI prints the count.
#[test]
fn kineto_malformed_events_are_skipped_counted_and_named() {
    let dir = tmp_dir("kineto");
    let k = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
    let bad = [
        // traceEvents[5], right after the first kernel and its compute kernel.
        format!(r#"{{"ph": "X", "cat": "kernel", "name": "{k}", "pid": 0, "tid": 7, "ts": 170, "dur": 5, "args": null}}"#),
        r#"{"ph": "X", "cat": "kernel", "name": 42, "pid": 0, "tid": 7, "ts": 171, "dur": 5, "args": {}}"#.to_string(),
        r#"{"ph": "X", "cat": "cpu_op", "name": {"not": "a name"}, "pid": 77, "tid": 78, "ts": 172, "dur": 5}"#.to_string(),
        r#"{"ph": "X", "cat": "kernel", "name": -1.5, "pid": 0, "tid": 7, "ts": 172, "dur": 5}"#.to_string(),
        format!(r#"{{"ph": "X", "cat": "kernel", "name": "{k}", "pid": 0, "tid": 7, "ts": "soon", "dur": 5, "args": {{"stream": 7}}}}"#),
        format!(r#"{{"ph": "X", "cat": "kernel", "name": "{k}", "pid": 0, "tid": 7, "ts": -5, "dur": 5, "args": {{"stream": 7}}}}"#),
        format!(r#"{{"ph": "X", "cat": "kernel", "name": "{k}", "pid": 0, "tid": 7, "ts": "NaN", "dur": 5, "args": {{"stream": 7}}}}"#),
        format!(r#"{{"ph": "X", "cat": "kernel", "name": "{k}", "pid": 0, "tid": 7, "dur": 5, "args": {{"stream": 7}}}}"#),
        "7".to_string(),
        "null".to_string(),
        r#"{"ph": 1, "cat": "kernel", "name": "x", "ts": 1}"#.to_string(),
    ];
    let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
    let (clean, broken) = (dir.join("clean.json"), dir.join("broken.json"));
    std::fs::write(&clean, kineto(8, &[])).unwrap();
    std::fs::write(&broken, kineto(8, &bad)).unwrap();
    let (code0, out0, err0) = commlens(&["stats", "--format", "json", s(&clean)]);
    assert_eq!(code0, 0, "{err0}");
    assert!(!err0.contains("malformed"), "{err0}");
    let (code, out, err) = commlens(&["stats", "--format", "json", s(&broken)]);
    assert_eq!(code, 0, "malformed events do not reject the trace: {err}");
    assert_eq!(out, out0, "every good event kept, no broken one");
    assert!(err.contains("skipped 11 malformed events"), "{err}");
    for reason in [
        "1 with args not an object",
        "3 with a name that is not a string",
        "4 with ts missing, negative or not a time",
        "2 that are not objects",
        "1 with ph not a string",
    ] {
        assert!(err.contains(reason), "{reason}: {err}");
    }
    assert!(err.contains(&format!("the first: traceEvents[5] \"{k}\": args not an object")), "{err}");
    // The warning comes first, so the short summary shows it too.
    let (_, _, err) = commlens(&["stats", s(&broken)]);
    assert!(err.contains("skipped 11 malformed events"), "{err}");
}

/// A valid Kineto trace reads exactly as before and says nothing was skipped.
#[test]
fn kineto_valid_trace_has_no_skip_warning() {
    let dir = tmp_dir("kineto-ok");
    let p = dir.join("ok.json");
    std::fs::write(&p, kineto(4, &[])).unwrap();
    let (code, _, err) = commlens(&["stats", s(&p)]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("4 NCCL kernels") && !err.contains("skipped"), "{err}");
}
