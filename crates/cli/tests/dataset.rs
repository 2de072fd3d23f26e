//! Hive-partitioned datasets through the binary: a 64-node job exported by
//! 64 independent `commlens export --partition host` runs (one per node's
//! logs, in parallel, into one folder) reads back through `stats` and
//! `report` with the same operations, bytes, ranks and communicators as
//! the logs read at once, and DuckDB's SQL over the folder gives the same
//! totals; `--partition rank`; the errors of a bad target, key or folder.

mod common;

use common::{commlens_cmd, run_limited, temp_dir, Run};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn commlens(args: &[&str]) -> Run {
    run_limited(commlens_cmd(args), 600, &format!("commlens {}", args.join(" ")))
}

fn ok(args: &[&str]) -> Run {
    let r = commlens(args);
    assert_eq!(r.code, 0, "commlens {}: {}", args.join(" "), r.err);
    r
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A generated run written as one folder of logs per host; the hosts in order.
fn job_by_host(root: &Path, cfg: &commlens_synth::RunConfig) -> (PathBuf, Vec<String>) {
    let run = commlens_synth::generate(cfg);
    let logs = root.join("logs");
    let mut hosts: Vec<String> = Vec::new();
    // Per-process logs come in global-rank order, as the truth's ranks.
    for (f, r) in run.files.iter().zip(&run.truth.ranks) {
        let d = logs.join(&r.host);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(&f.name), &f.contents).unwrap();
        if !hosts.contains(&r.host) {
            hosts.push(r.host.clone());
        }
    }
    (logs, hosts)
}

/// One `commlens export <host's logs> -o ds --partition KEY` per host, four at a time.
fn export_every_host(logs: &Path, hosts: &[String], ds: &Path, key: &str) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(h) = hosts.get(i) else { break };
                let r = ok(&["export", s(&logs.join(h)), "-o", s(ds), "--partition", key]);
                assert!(r.out.contains(&format!("dataset {}", ds.display())), "{}", r.out);
            });
        }
    });
}

fn stats_json(input: &Path) -> (Value, String) {
    let r = ok(&["stats", "--format", "json", s(input)]);
    (serde_json::from_str(&r.out).unwrap(), r.err)
}

/// The figures of `stats --format json` that must not depend on how the
/// job was read: totals, per rank, per communicator (named by commId and
/// members' global ranks, not by the table-local index in its name), per
/// kind, per size bucket.
fn figures(v: &Value) -> Value {
    let st = &v["stats"];
    let mut ranks: Vec<Value> = st["ranks"].as_array().unwrap().clone();
    ranks.sort_by_key(|r| r["rank"].as_u64());
    let mut comms: Vec<Value> = st["comms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.as_object_mut().unwrap().remove("name");
            c
        })
        .collect();
    comms.sort_by_key(|c| c.to_string());
    serde_json::json!({
        "job": v["job"], "total_ops": st["total_ops"], "total_bytes": st["total_bytes"],
        "ranks": ranks, "comms": comms, "ops": st["ops"], "sizes": st["sizes"],
    })
}

/// `wrote X (N operations, M ranks)` of `report`.
fn report_counts(out: &str) -> String {
    let line = out.lines().find(|l| l.starts_with("wrote ")).unwrap_or_else(|| panic!("{out}"));
    line[line.find('(').unwrap()..line.find(')').unwrap() + 1].to_string()
}

fn python_has(module: &str) -> bool {
    std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs the README's DuckDB queries over `glob`; tab-separated tagged lines.
fn duckdb(glob: &str) -> Vec<Vec<String>> {
    let script = r#"
import sys, duckdb
src = "read_parquet('" + sys.argv[1].replace("'", "''") + "', hive_partitioning=true)"
con = duckdb.connect()
n, b = con.execute(f"SELECT count(*), sum(bytes) FROM {src}").fetchone()
print(f"total\t{n}\t{b}")
for r in con.execute(f"SELECT comm_id, any_value(nranks), count(*), sum(bytes), count(DISTINCT global_rank) FROM {src} GROUP BY comm_id ORDER BY comm_id").fetchall():
    print("comm\t" + "\t".join(str(x) for x in r))
for r in con.execute(f"SELECT global_rank, count(*), sum(bytes) FROM {src} GROUP BY global_rank ORDER BY global_rank").fetchall():
    print("rank\t" + "\t".join(str(x) for x in r))
print("hosts\t" + str(con.execute(f"SELECT count(DISTINCT host) FROM {src}").fetchone()[0]))
"#;
    let out = std::process::Command::new("python3").args(["-c", script, glob]).output().unwrap();
    assert!(out.status.success(), "duckdb: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| l.split('\t').map(str::to_string).collect()).collect()
}

#[test]
fn sixty_four_host_exports_read_back_as_the_whole_job() {
    let root = temp_dir("dataset", "64");
    // 64 nodes × 2 GPUs: TP inside a node, PP and DP across nodes.
    let cfg = commlens_synth::RunConfig {
        tp: 2,
        pp: 2,
        dp: 32,
        gpus_per_node: 2,
        layers: 2,
        num_microbatches: 2,
        iterations: 1,
        ..commlens_synth::RunConfig::default()
    };
    let (logs, hosts) = job_by_host(&root, &cfg);
    assert_eq!(hosts.len(), 64);
    let ds = root.join("ds");
    export_every_host(&logs, &hosts, &ds, "host");

    // One folder per host, each holding one shard named by its run.
    let folders: Vec<String> =
        std::fs::read_dir(&ds).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(folders.len(), 64, "{folders:?}");
    for h in &hosts {
        let shards: Vec<_> =
            std::fs::read_dir(ds.join(format!("host={h}"))).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(shards.len(), 1, "{shards:?}");
        let name = shards[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("part-") && name.ends_with(".parquet"), "{name}");
    }

    // stats: the same figures as all the logs at once; only some columns read.
    let (from_logs, _) = stats_json(&logs);
    let (from_ds, err) = stats_json(&ds);
    assert_eq!(figures(&from_ds), figures(&from_logs));
    assert!(err.contains("64 commlens tables"), "{err}");
    assert!(err.contains("(19 of 44 columns read)"), "{err}");
    let st = &from_ds["stats"];
    assert_eq!(st["ranks"].as_array().unwrap().len(), 128);
    let ranks: Vec<u64> = st["ranks"].as_array().unwrap().iter().map(|r| r["rank"].as_u64().unwrap()).collect();
    assert_eq!(ranks.iter().copied().collect::<std::collections::BTreeSet<_>>(), (0..128).collect());
    // The world and the cross-node groups were re-assembled from the 64 shards.
    let world = st["comms"].as_array().unwrap().iter().find(|c| c["nranks"] == 128).expect("world communicator");
    assert_eq!(world["members_seen"], 128);
    let cross_node = st["comms"].as_array().unwrap().iter().filter(|c| c["nranks"] == 32).count();
    assert_eq!(cross_node, 4, "the 4 data-parallel groups of 32 ranks");

    // report: same operations and ranks.
    let a = ok(&["report", s(&ds), "-o", s(&root.join("ds.html"))]);
    let b = ok(&["report", s(&logs), "-o", s(&root.join("logs.html"))]);
    assert_eq!(report_counts(&a.out), report_counts(&b.out));
    assert!(report_counts(&a.out).contains("128 ranks"), "{}", a.out);
    assert!(a.err.contains("(30 of 44 columns read)"), "{}", a.err);

    // export of the dataset into one file: the single-file path.
    let one = root.join("one.parquet");
    ok(&["export", s(&ds), "-o", s(&one)]);
    let (from_one, _) = stats_json(&one);
    assert_eq!(figures(&from_one), figures(&from_logs));

    if !python_has("duckdb") {
        commlens_testdata::skip_unless_ci(
            "DuckDB over a partitioned dataset",
            "the duckdb Python module is not installed",
            "pip install duckdb",
        );
        return;
    }
    let glob = format!("{}/*/*.parquet", ds.display());
    let sql = duckdb(&glob);
    let tagged = |t: &str| sql.iter().filter(|l| l[0] == t).cloned().collect::<Vec<_>>();
    let total = &tagged("total")[0];
    assert_eq!(total[1], from_logs["stats"]["total_ops"].to_string());
    assert_eq!(total[2], from_logs["stats"]["total_bytes"].to_string());
    assert_eq!(tagged("hosts")[0][1], "64");
    // Per communicator (commId): size, operations, bytes and members as commlens says.
    let mut want: BTreeMap<String, (u64, u64, u64, usize)> = BTreeMap::new();
    for c in from_logs["stats"]["comms"].as_array().unwrap() {
        let id = c["comm_id"].as_str().expect("every synthetic communicator logs its commId").to_string();
        let members = c["members_seen"].as_u64().unwrap() as usize;
        want.insert(
            id,
            (c["nranks"].as_u64().unwrap(), c["ops"].as_u64().unwrap(), c["bytes"].as_u64().unwrap(), members),
        );
    }
    let got: BTreeMap<String, (u64, u64, u64, usize)> = tagged("comm")
        .into_iter()
        .map(|l| {
            (l[1].clone(), (l[2].parse().unwrap(), l[3].parse().unwrap(), l[4].parse().unwrap(), l[5].parse().unwrap()))
        })
        .collect();
    assert_eq!(got, want);
    // Per global rank, as written by each host's run (the world's init lines name them).
    let want_ranks: Vec<(String, String, String)> = from_logs["stats"]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["rank"].to_string(), r["ops"].to_string(), r["bytes"].to_string()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut got_ranks: Vec<(String, String, String)> =
        tagged("rank").into_iter().map(|l| (l[1].clone(), l[2].clone(), l[3].clone())).collect();
    got_ranks.sort();
    let mut want_sorted = want_ranks;
    want_sorted.sort();
    assert_eq!(got_ranks, want_sorted);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn rank_partitions_read_back_and_name_each_rank() {
    let root = temp_dir("dataset", "rank");
    let cfg = commlens_synth::RunConfig { tp: 2, pp: 2, dp: 2, gpus_per_node: 2, iterations: 1, ..Default::default() };
    let (logs, hosts) = job_by_host(&root, &cfg);
    let ds = root.join("by-rank");
    export_every_host(&logs, &hosts, &ds, "rank");
    let mut folders: Vec<String> =
        std::fs::read_dir(&ds).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    folders.sort();
    let want: Vec<String> = {
        let mut w: Vec<String> = (0..8).map(|r| format!("rank={r}")).collect();
        w.sort();
        w
    };
    assert_eq!(folders, want);
    let (from_logs, _) = stats_json(&logs);
    let (from_ds, _) = stats_json(&ds);
    assert_eq!(figures(&from_ds), figures(&from_logs));
    // Every table command takes the folder.
    let trace = root.join("trace");
    ok(&["trace", s(&ds), "-o", s(&trace)]);
    let d = commlens(&["diff", s(&ds), s(&logs)]);
    assert!(d.code == 0 || d.code == 1, "{}", d.err);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn bad_targets_keys_and_folders_are_errors_naming_them() {
    let root = temp_dir("dataset", "errors");
    let cfg = commlens_synth::RunConfig { iterations: 1, ..Default::default() };
    let (logs, hosts) = job_by_host(&root, &cfg);
    let host_logs = logs.join(&hosts[0]);

    let file = root.join("x.parquet");
    let r = commlens(&["export", s(&host_logs), "-o", s(&file), "--partition", "host"]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("--partition writes a dataset folder") && r.err.contains("x.parquet"), "{}", r.err);
    assert!(!file.exists());

    let ds = root.join("ds");
    let r = commlens(&["export", s(&host_logs), "-o", s(&ds), "--partition", "node"]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("unknown partition key `node`") && r.err.contains("host or rank"), "{}", r.err);
    assert!(!ds.exists());

    // A folder of other files is not a dataset target; a dataset is not a file target.
    let r = commlens(&["export", s(&host_logs), "-o", s(&logs), "--partition", "host"]);
    assert_eq!(r.code, 2, "{}", r.err);
    ok(&["export", s(&host_logs), "-o", s(&ds), "--partition", "host"]);
    let r = commlens(&["export", s(&host_logs), "-o", s(&ds)]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("is a folder") && r.err.contains("--partition"), "{}", r.err);

    // Exporting the same host again duplicates its processes: reading says so.
    let again = root.join("again");
    ok(&["export", s(&host_logs), "-o", s(&again), "--partition", "host"]);
    ok(&["export", s(&host_logs), "-o", s(&again), "--partition", "host"]);
    let r = commlens(&["stats", s(&again)]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("both hold the operations of process"), "{}", r.err);

    // A foreign Parquet file inside a partition folder: an error naming it.
    let shard = std::fs::read_dir(ds.join(format!("host={}", hosts[0]))).unwrap().next().unwrap().unwrap().path();
    let foreign = ds.join("host=zz").join("foreign.parquet");
    std::fs::create_dir_all(foreign.parent().unwrap()).unwrap();
    let mut bytes = b"PAR1".to_vec();
    bytes.extend_from_slice(&[0u8; 64]);
    bytes.extend_from_slice(b"PAR1");
    std::fs::write(&foreign, &bytes).unwrap();
    let r = commlens(&["stats", s(&ds)]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("foreign.parquet"), "{}", r.err);
    std::fs::remove_file(&foreign).unwrap();

    // A shard moved into another host's folder: its folder and contents disagree.
    let moved = ds.join("host=zz").join(shard.file_name().unwrap());
    std::fs::rename(&shard, &moved).unwrap();
    let r = commlens(&["report", s(&ds), "-o", s(&root.join("r.html"))]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("host=zz") && r.err.contains(&hosts[0]), "{}", r.err);
    std::fs::rename(&moved, &shard).unwrap();

    // A file beside the partition folders.
    std::fs::write(ds.join("stray.parquet"), b"x").unwrap();
    let r = commlens(&["stats", s(&ds)]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("stray.parquet") && r.err.contains("beside"), "{}", r.err);
    let _ = std::fs::remove_dir_all(&root);
}

/// The README's busbw and slowest-rank queries over `src` (a DuckDB table
/// expression), plus the largest relative gap between the busbw computed
/// from the base columns and commlens's `busbw_gb_s` column.
const BUSBW_SQL: &str = r#"
import sys, duckdb
src = sys.argv[1]
con = duckdb.connect()
busbw = """
  bytes * (CASE WHEN kind IN ('AllGather','ReduceScatter','AllToAll','Gather','Scatter') THEN nranks ELSE 1 END)
  * (CASE WHEN kind = 'AllReduce' THEN 2.0 * (nranks - 1) / nranks
          WHEN kind IN ('AllGather','ReduceScatter','AllToAll','Gather','Scatter') THEN (nranks - 1.0) / nranks
          ELSE 1.0 END)
  / gpu_dur_ns"""
for r in con.execute(f"""SELECT comm_id, kind, count(*), median({busbw}), median(busbw_gb_s)
    FROM {src} WHERE gpu_dur_ns > 0 GROUP BY comm_id, kind ORDER BY comm_id, kind""").fetchall():
    print("comm\t" + "\t".join(repr(x) for x in r))
for r in con.execute(f"""SELECT global_rank, any_value(host), sum(gpu_dur_ns), median(busbw_gb_s)
    FROM {src} WHERE gpu_dur_ns IS NOT NULL GROUP BY global_rank ORDER BY sum(gpu_dur_ns) DESC, global_rank LIMIT 5""").fetchall():
    print("slow\t" + "\t".join(repr(x) for x in r))
gap = con.execute(f"SELECT max(abs({busbw} - busbw_gb_s) / busbw_gb_s) FROM {src} WHERE gpu_dur_ns > 0 AND busbw_gb_s > 0").fetchone()[0]
print(f"gap\t{gap}")
"#;

fn busbw_sql(src: &str) -> Vec<String> {
    let out = std::process::Command::new("python3").args(["-c", BUSBW_SQL, src]).output().unwrap();
    assert!(out.status.success(), "duckdb: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn fused_nodes_give_the_same_busbw_and_slowest_ranks_as_one_file() {
    if !python_has("duckdb") {
        commlens_testdata::skip_unless_ci(
            "DuckDB busbw over a partitioned dataset",
            "the duckdb Python module is not installed",
            "pip install duckdb",
        );
        return;
    }
    let root = temp_dir("dataset", "fused");
    // 4 nodes × 2 GPUs, logs and one nsys export per node.
    let cfg = commlens_synth::RunConfig { tp: 2, pp: 2, dp: 2, gpus_per_node: 2, iterations: 1, ..Default::default() };
    let tcfg = commlens_synth::TraceConfig::default();
    let g = commlens_synth::generate_traces(&cfg, &tcfg).unwrap();
    let (logs, nsys) = (root.join("logs"), root.join("nsys"));
    let files = g.write_logs(&logs).unwrap();
    g.write_nsys(&nsys, &tcfg).unwrap();
    let ds = root.join("ds");
    for n in 0..4 {
        // What one node holds: its processes' logs and its own nsys export.
        let host = format!("node{n:02}");
        let mine = root.join("logs-of").join(&host);
        std::fs::create_dir_all(&mine).unwrap();
        for f in files.iter().filter(|f| f.file_name().unwrap().to_string_lossy().contains(&format!("_{host}_"))) {
            std::fs::copy(f, mine.join(f.file_name().unwrap())).unwrap();
        }
        let fused = root.join("fused").join(&host);
        let db = nsys.join(format!("{host}.sqlite"));
        ok(&["fuse", "--nccl-log", s(&mine), "--nsys", s(&db), "-o", s(&fused), "--clock-sync", "off"]);
        ok(&["export", s(&fused.join("fused.parquet")), "-o", s(&ds), "--partition", "host"]);
    }
    // The single-file path: every node's files fused at once, exported as one file.
    let all = root.join("fused-all");
    ok(&["fuse", "--nccl-log", s(&logs), "--nsys", s(&nsys), "-o", s(&all), "--clock-sync", "off"]);
    let one = root.join("one.parquet");
    ok(&["export", s(&all.join("fused.parquet")), "-o", s(&one)]);

    let from_ds = busbw_sql(&format!("read_parquet('{}/*/*.parquet', hive_partitioning = true)", ds.display()));
    let from_one = busbw_sql(&format!("read_parquet('{}')", one.display()));
    let tagged =
        |v: &[String], t: &str| v.iter().filter(|l| l.starts_with(&format!("{t}\t"))).cloned().collect::<Vec<_>>();
    assert!(tagged(&from_ds, "comm").len() >= 4, "{from_ds:?}");
    assert_eq!(tagged(&from_ds, "comm"), tagged(&from_one, "comm"));
    assert_eq!(tagged(&from_ds, "slow"), tagged(&from_one, "slow"));
    assert_eq!(tagged(&from_ds, "slow").len(), 5);
    // The README's formula is commlens's busbw.
    for v in [&from_ds, &from_one] {
        let gap: f64 = tagged(v, "gap")[0].split('\t').nth(1).unwrap().parse().unwrap();
        assert!(gap < 1e-9, "busbw from the base columns differs from busbw_gb_s by {gap}");
    }
    // commlens reads the dataset as the single file: the same operations and ranks.
    let a = ok(&["report", s(&ds), "-o", s(&root.join("a.html"))]);
    let b = ok(&["report", s(&one), "-o", s(&root.join("b.html"))]);
    assert_eq!(report_counts(&a.out), report_counts(&b.out));
    let (sa, _) = stats_json(&ds);
    let (sb, _) = stats_json(&one);
    assert_eq!(figures(&sa), figures(&sb));
    let _ = std::fs::remove_dir_all(&root);
}
