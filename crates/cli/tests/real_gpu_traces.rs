//! Real Nsight Systems exports and Kineto traces through the binary (issue
//! #14 items 6 and 10), checked against SQL and JSON read independently here
//! and against the ground truth of ../shared/data/real/SOURCES.md.
//!
//! * nsys: the four per-process exports of one 4-rank job (ZhiyiHu1999
//!   DistributedSysLab) are one job on one clock, ranks from NCCL's own NVTX
//!   marks (pid 190148 → 0, 190146 → 1, 622044 → 2, 622048 → 3), hosts from
//!   the export (ault42 / ault44), 8 MiB per AllReduce (2M floats); the
//!   2-GPU training window (GindaChen) has no size in it: unknown, never
//!   0 B; a folder with both jobs names them as two jobs; every command
//!   reads the exports.
//! * Kineto: kernels launched before the capture (no launch record, no CPU
//!   call) are not extra operations; operations without process-group
//!   metadata on one NCCL stream get the world group's size.

mod common;

use commlens_testdata::real_dir;
use common::{commlens_cmd, run_limited, temp_dir};
use serde_json::Value;
use std::path::{Path, PathBuf};

const ZHIYI: [(&str, u32, u32, &str); 4] = [
    ("rank0-ault42", 190148, 0, "ault42"),
    ("rank1-ault42", 190146, 1, "ault42"),
    ("rank2-ault44", 622044, 2, "ault44"),
    ("rank3-ault44", 622048, 3, "ault44"),
];

fn zhiyi_files(dir: &Path) -> Vec<PathBuf> {
    ZHIYI
        .iter()
        .map(|(tag, ..)| {
            dir.join(format!(
                "ZhiyiHu1999-DistributedSysLab_FS24-nccl-example2-allreduce-ring-4ranks-2nodes-RTX3090-{tag}.sqlite"
            ))
        })
        .collect()
}

fn ginda(dir: &Path) -> PathBuf {
    dir.join("GindaChen-nsys-ai-fastvideo-wan2.1-torchrun-2xH100-sendrecv-derived-300ms-window.sqlite")
}

/// Kernel counts by independent SQL: (all kernels, NCCL kernels) per pid.
fn sql_kernels(path: &Path) -> Vec<(u32, u64, u64)> {
    let c = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut st = c
        .prepare(
            "SELECT p.pid, COUNT(*), SUM(s.value LIKE 'nccl%Kernel%') FROM CUPTI_ACTIVITY_KIND_KERNEL k \
             JOIN StringIds s ON s.id = k.shortName JOIN PROCESSES p ON p.globalPid = k.globalPid \
             GROUP BY p.pid ORDER BY p.pid",
        )
        .unwrap();
    st.query_map([], |r| Ok((r.get::<_, i64>(0)? as u32, r.get::<_, i64>(1)? as u64, r.get::<_, i64>(2)? as u64)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn stats_json(paths: &[PathBuf]) -> (Value, String) {
    let mut args: Vec<String> = vec!["stats".into(), "--format".into(), "json".into()];
    args.extend(paths.iter().map(|p| p.display().to_string()));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run_limited(commlens_cmd(&a), 300, "commlens stats --format json");
    assert_eq!(run.code, 0, "stats failed: {}", run.err);
    (serde_json::from_str(&run.out).expect("stats JSON"), run.err)
}

fn stats_text(paths: &[PathBuf]) -> (String, String) {
    let mut args: Vec<String> = vec!["stats".into()];
    args.extend(paths.iter().map(|p| p.display().to_string()));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run_limited(commlens_cmd(&a), 300, "commlens stats");
    assert_eq!(run.code, 0, "stats failed: {}", run.err);
    (run.out, run.err)
}

#[test]
fn nsys_four_process_job_has_its_ranks_hosts_clock_and_sizes() {
    let Some(dir) = real_dir("nsys") else { return };
    let files = zhiyi_files(&dir);
    let (j, _) = stats_json(&files);
    let ranks = j["stats"]["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4);
    for ((_, pid, rank, host), (file, row)) in ZHIYI.iter().zip(files.iter().zip(ranks)) {
        assert_eq!(row["pid"], *pid, "{row}");
        assert_eq!(row["rank"], *rank, "pid {pid} is NCCL rank {rank} (SOURCES.md): {row}");
        assert!(row["host"].as_str().unwrap().starts_with(host), "{row}");
        // Operations = NCCL kernels, counted by SQL on the file.
        let sql = sql_kernels(file);
        assert_eq!(sql.len(), 1);
        assert_eq!(row["ops"], sql[0].2, "{}: ops vs SQL NCCL kernel count", file.display());
        // Two AllReduces of 2M floats = 8 MiB each (SOURCES.md), nothing unknown.
        assert_eq!(row["bytes"], 2 * 8 * 1024 * 1024, "{row}");
        assert_eq!(row["unknown_size"], 0, "{row}");
    }
    let comms = j["stats"]["comms"].as_array().unwrap();
    let with_ops: Vec<&Value> = comms.iter().filter(|c| c["ops"].as_u64() > Some(0)).collect();
    assert_eq!(with_ops.len(), 1, "one communicator of the 4 ranks: {comms:?}");
    assert_eq!((with_ops[0]["nranks"].as_u64(), with_ops[0]["members_seen"].as_u64()), (Some(4), Some(4)));
    assert_eq!(j["job"]["nodes"], 2, "{}", j["job"]);

    // One clock: the Parquet export's GPU spans of the same AllReduce on the
    // four ranks (epoch ns from each file's session start) overlap; before
    // alignment they were seconds apart in per-file time.
    let out = temp_dir("real-gpu-traces", "nsys-parquet");
    let pq = out.join("ops.parquet");
    let mut args = vec!["export".to_string(), "--parquet".into(), pq.display().to_string()];
    args.extend(files.iter().map(|p| p.display().to_string()));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run_limited(commlens_cmd(&a), 300, "commlens export");
    assert_eq!(run.code, 0, "export failed: {}", run.err);
    let (table, _) = commlens_parquet::read_table(&pq).expect("read back the Parquet export");
    let mut spans: Vec<Vec<(i64, i64)>> = Vec::new();
    for ops in &table.per_rank {
        spans.push(ops.iter().map(|o| o.gpu.map(|g| (g.start_ns, g.end_ns)).unwrap()).collect());
    }
    assert_eq!(spans.len(), 4);
    for i in 0..2 {
        let latest_start = spans.iter().map(|s| s[i].0).max().unwrap();
        let earliest_end = spans.iter().map(|s| s[i].1).min().unwrap();
        // AllReduce i ends on every rank after it started on every rank.
        assert!(latest_start < earliest_end, "AllReduce {i} spans do not overlap on one clock: {spans:?}");
    }
}

#[test]
fn nsys_window_without_sizes_says_unknown_not_zero() {
    let Some(dir) = real_dir("nsys") else { return };
    let file = ginda(&dir);
    let sql = sql_kernels(&file);
    let (j, _) = stats_json(std::slice::from_ref(&file));
    let s = &j["stats"];
    let nccl: u64 = sql.iter().map(|x| x.2).sum();
    assert_eq!(s["total_ops"], nccl, "operations vs SQL NCCL kernel count");
    assert_eq!(s["total_unknown_size"], nccl, "no size is in this export");
    for (pid, _, n) in &sql {
        let row = s["ranks"].as_array().unwrap().iter().find(|r| r["pid"] == *pid).unwrap();
        assert_eq!(row["ops"], *n, "pid {pid}");
    }
    let (text, _) = stats_text(std::slice::from_ref(&file));
    assert!(!text.contains("0 B"), "unknown sizes shown as 0 B:\n{text}");
    assert!(text.contains("unknown "), "no unknown-size bucket:\n{text}");
    assert!(text.contains("modal"), "host from TARGET_INFO_SYSTEM_ENV:\n{text}");
}

#[test]
fn nsys_folder_with_two_jobs_names_both_and_keeps_ranks() {
    let Some(dir) = real_dir("nsys") else { return };
    let (j, err) = stats_json(&[dir.clone()]);
    let warn = err.lines().find(|l| l.contains("separate jobs")).unwrap_or_else(|| panic!("no job warning:\n{err}"));
    assert!(warn.contains("2 separate jobs"), "{warn}");
    assert!(err.contains("GindaChen-nsys-ai") && err.contains("RTX3090-rank2-ault44"), "jobs not named:\n{err}");
    let ranks = j["stats"]["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 6);
    for (_, pid, rank, _) in ZHIYI {
        let row = ranks.iter().find(|r| r["pid"] == pid).unwrap();
        assert_eq!(row["rank"], rank, "{row}");
    }
    // No communicator joins ranks of the two jobs.
    let zhiyi_ranks: Vec<u64> = (0..4).collect();
    for c in j["stats"]["comms"].as_array().unwrap() {
        let g: Vec<u64> = c["global_ranks"].as_array().unwrap().iter().filter_map(Value::as_u64).collect();
        let inside = g.iter().filter(|r| zhiyi_ranks.contains(r)).count();
        assert!(inside == 0 || inside == g.len(), "communicator across jobs: {c}");
    }
}

#[test]
fn every_command_reads_nsys_exports() {
    let Some(dir) = real_dir("nsys") else { return };
    let files = zhiyi_files(&dir);
    let out = temp_dir("real-gpu-traces", "every-command");
    let f: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    let report = out.join("report.html").display().to_string();
    let trace = out.join("trace").display().to_string();
    let pq = out.join("t.parquet").display().to_string();
    let cmds: Vec<Vec<&str>> = vec![
        vec!["stats"],
        vec!["topo"],
        vec!["report", "-o", &report],
        vec!["trace", "-o", &trace],
        vec!["export", "--parquet", &pq],
        vec!["diff", &f[0], &f[1]],
    ];
    for c in cmds {
        let mut args = c.clone();
        if c[0] != "diff" {
            args.extend(f.iter().map(String::as_str));
        }
        let run = run_limited(commlens_cmd(&args), 300, c[0]);
        // An export holds no topology: `topo` says so (and how to get one) instead of failing to read it.
        let no_topo = c[0] == "topo" && run.err.contains("no topology dump");
        let ok = run.code == 0 || (c[0] == "diff" && run.code == 1) || no_topo;
        assert!(ok, "{} failed ({}): {}", c[0], run.code, run.err);
        assert!(!run.err.contains("not an NCCL debug log"), "{}: {}", c[0], run.err);
    }
}

/// Independent read of a Kineto trace: (NCCL kernels, NCCL kernels whose
/// correlation id has no runtime launch event).
fn kineto_kernels(path: &Path) -> (u64, u64) {
    let f = std::fs::File::open(path).unwrap();
    let v: Value = serde_json::from_reader(flate2::read::GzDecoder::new(f)).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let launched: std::collections::HashSet<u64> = ev
        .iter()
        .filter(|e| matches!(e["cat"].as_str(), Some("cuda_runtime" | "cuda_driver")))
        .filter_map(|e| e["args"]["correlation"].as_u64())
        .collect();
    let nccl: Vec<&Value> = ev
        .iter()
        .filter(|e| e["cat"] == "kernel" && e["name"].as_str().is_some_and(|n| n.starts_with("nccl")))
        .collect();
    let unlaunched =
        nccl.iter().filter(|k| !k["args"]["correlation"].as_u64().is_some_and(|c| launched.contains(&c))).count();
    (nccl.len() as u64, unlaunched as u64)
}

#[test]
fn kineto_kernels_without_launch_are_no_extra_operations_and_groups_have_their_size() {
    let Some(dir) = real_dir("kineto") else { return };
    for (name, world, rank) in
        [("hta-trace_diff-test-rank1of2-V100.json.gz", 2, 1), ("hta-trace_diff-control-rank3of8-A100.json.gz", 8, 3)]
    {
        let file = dir.join(name);
        let (kernels, unlaunched) = kineto_kernels(&file);
        let (j, err) = stats_json(std::slice::from_ref(&file));
        let s = &j["stats"];
        assert_eq!(s["total_ops"], kernels - unlaunched, "{name}: ops = launched NCCL kernels\n{err}");
        if unlaunched > 0 {
            assert!(err.contains(&format!("{unlaunched} NCCL kernels have no launch record")), "{name}: {err}");
        }
        // Every operation here has its size from the CPU call: none unknown, none 0 B.
        assert_eq!(s["total_unknown_size"], 0, "{name}");
        for o in s["ops"].as_array().unwrap() {
            assert!(o["min_bytes"].as_u64() > Some(0), "{name}: a 0-byte operation: {o}");
        }
        // The collectives are on the world group (distributedInfo), not a 1-rank communicator.
        let comms = s["comms"].as_array().unwrap();
        let c = comms.iter().find(|c| c["ops"].as_u64() > Some(0)).unwrap();
        assert_eq!(c["nranks"], world, "{name}: {comms:?}");
        assert_eq!(c["global_ranks"], serde_json::json!([rank]), "{name}");
        // The report's bandwidth table has every timed operation of known size
        // (the kernel counts per kind of SOURCES.md: all have sizes and GPU spans).
        if name.contains("control") {
            let html = temp_dir("real-gpu-traces", "report").join("r.html");
            let h = html.display().to_string();
            let run = run_limited(commlens_cmd(&["report", "-o", &h, file.to_str().unwrap()]), 300, "report");
            assert_eq!(run.code, 0, "{}", run.err);
            let page = std::fs::read_to_string(&html).unwrap();
            let at = page.find("median busbw").expect("bandwidth table");
            let cells: String =
                page[at..(at + 600).min(page.len())].split(['<', '>']).step_by(2).collect::<Vec<_>>().join("|");
            assert!(cells.contains("AllReduce||18||") && cells.contains("AllToAll||42||"), "bandwidth rows: {cells}");
        }
        let (_, summary) = stats_text(std::slice::from_ref(&file));
        assert!(summary.contains("CPU-side collective calls (record_param_comms/nccl:* ops"), "{name}:\n{summary}");
    }
}
