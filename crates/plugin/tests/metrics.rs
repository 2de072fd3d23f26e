//! Live metrics end to end: the fake-NCCL harness (`tests/harness/metrics.c`,
//! under AddressSanitizer) drives four devices of one process with world rank 2
//! slowed 4x, and the plugin's Prometheus text (the `COMMLENS_PLUGIN_PROM_DIR`
//! file, copied at each phase, and the HTTP endpoint, scraped here) is read with
//! `prometheus-parse`: the slow rank is named within one window, its episode is
//! logged once and ends once, counters, histograms and bandwidths are exact for
//! the fake GPU timers, and the in-flight operation shows. The Grafana dashboard
//! in `examples/grafana` is checked against the metrics a real run exports.

use prometheus_parse::{Sample, Scrape, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod support;
use support::{harness, out_dir, plugin_so, prepare};

const WINDOW: usize = 8;
const WORLD: &str = "0x0000000000a11a11";
const TP: &str = "0x0000000000007e57";
/// 4 MiB AllReduce in 2 ms (bytes / s); rank 2 takes 8 ms while slowed.
const AR_BYTES: f64 = 4.0 * 1048576.0;

fn parse(text: &str, what: &str) -> Scrape {
    let s = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(!s.samples.is_empty(), "{what}: no samples");
    s
}

fn read_scrape(path: &Path) -> Scrape {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse(&text, &path.display().to_string())
}

fn matching<'a>(s: &'a Scrape, metric: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    s.samples.iter().filter(|x| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v))).collect()
}

/// The value of the one sample of `metric` with these labels.
fn val(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let m = matching(s, metric, labels);
    assert_eq!(m.len(), 1, "{metric} {labels:?}: {m:?}");
    match &m[0].value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        v => panic!("{metric}: not a single value: {v:?}"),
    }
}

/// Equal up to floating-point rounding (the plugin divides in another order).
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs()
}

fn rank_val(s: &Scrape, metric: &str, comm: &str, rank: u32) -> f64 {
    val(s, metric, &[("comm", comm), ("rank", &rank.to_string())])
}

/// `(metric, sorted labels)` of every sample: what a scrape exposes.
fn series(s: &Scrape) -> BTreeSet<String> {
    s.samples
        .iter()
        .map(|x| {
            let l: BTreeMap<&String, &String> = x.labels.iter().collect();
            format!("{} {l:?}", x.metric)
        })
        .collect()
}

/// Every sample's family has `# HELP` (histogram parts belong to their family), and every
/// series names a rank of a communicator or its process: node_exporter merges the files of
/// all processes of a host, which must never repeat a series.
fn check_docs(s: &Scrape) {
    for x in &s.samples {
        let family = x.metric.trim_end_matches("_sum").trim_end_matches("_count");
        assert!(s.docs.contains_key(family), "no HELP for {}", x.metric);
        let ranked = x.labels.get("comm").is_some() && x.labels.get("rank").is_some_and(|r| r != "other");
        assert!(ranked || x.labels.get("pid").is_some(), "{} {:?}: neither a rank nor a pid", x.metric, x.labels);
    }
}

fn scenario_env(dir: &Path, port: bool) -> Vec<(String, String)> {
    let prom = dir.join("prom");
    let mut env = vec![
        ("COMMLENS_PLUGIN_PROM_DIR".to_string(), prom.display().to_string()),
        ("COMMLENS_PLUGIN_PROM_INTERVAL_MS".into(), "50".into()),
        ("COMMLENS_PLUGIN_FLUSH_MS".into(), "20".into()),
        ("COMMLENS_PLUGIN_METRICS_WINDOW".into(), WINDOW.to_string()),
        // One low window makes a rank slow here: "named within one window".
        ("COMMLENS_PLUGIN_SLOW_WINDOWS".into(), "1".into()),
        ("COMMLENS_PLUGIN_PROM_JOB".into(), "train-42".into()),
    ];
    if port {
        env.push(("COMMLENS_PLUGIN_PROM_PORT".into(), "0".into()));
    }
    env
}

fn spawn_scenario(exe: &Path, dir: &Path, port: bool, valgrind: bool) -> std::process::Child {
    let snaps = dir.join("snaps");
    std::fs::create_dir_all(&snaps).unwrap();
    let mut cmd = if valgrind {
        let mut c = Command::new("valgrind");
        c.args(["--error-exitcode=1", "--quiet", "--trace-children=no"]).arg(exe);
        c
    } else {
        Command::new(exe)
    };
    cmd.arg(plugin_so()).args(["metrics", &WINDOW.to_string()]).arg(&snaps);
    let env = scenario_env(dir, port);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    prepare(&mut cmd, dir, &env);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.spawn().expect("start the harness")
}

/// GET `/metrics` on the plugin's port.
fn scrape_http(port: u16) -> (String, String) {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    let (head, body) = r.split_once("\r\n\r\n").expect("HTTP head and body");
    (head.to_string(), body.to_string())
}

fn check_phases(snaps: &Path) {
    // A: one window: rank 2 of world named slow, nobody else.
    let a = read_scrape(&snaps.join("snap-a.prom"));
    check_docs(&a);
    for r in 0..4u32 {
        let ratio = rank_val(&a, "commlens_rank_busbw_ratio", WORLD, r);
        let slow = rank_val(&a, "commlens_rank_slow", WORLD, r);
        if r == 2 {
            assert!((0.2..0.3).contains(&ratio), "rank 2 runs at a quarter of its peers: {ratio}");
            assert_eq!(slow, 1.0);
        } else {
            assert!((0.9..1.1).contains(&ratio), "rank {r}: {ratio}");
            assert_eq!(slow, 0.0);
        }
        assert_eq!(rank_val(&a, "commlens_rank_windows_total", WORLD, r), 1.0);
        let l = [("comm", WORLD), ("rank", &r.to_string()), ("kind", "AllReduce")];
        assert_eq!(val(&a, "commlens_ops_total", &l), WINDOW as f64);
        assert_eq!(val(&a, "commlens_bytes_total", &l), WINDOW as f64 * AR_BYTES);
        // Per-operation bandwidth from the GPU timers: exact.
        let ms = if r == 2 { 8e-3 } else { 2e-3 };
        let bus = |stat: &str| val(&a, "commlens_busbw_bytes_per_second", &[l[0], l[1], l[2], ("stat", stat)]);
        for stat in ["last", "window_mean", "window_min"] {
            assert!(close(bus(stat), AR_BYTES * 1.5 / ms), "busbw {stat} of rank {r}: {}", bus(stat));
        }
        let alg = val(&a, "commlens_algbw_bytes_per_second", &[l[0], l[1], l[2], ("stat", "last")]);
        assert!(close(alg, AR_BYTES / ms), "{alg}");
        // Latency histogram: all in the 2.048 ms (or 8.192 ms) bucket.
        let h = matching(&a, "commlens_op_duration_seconds", &l);
        let Value::Histogram(buckets) = &h[0].value else { panic!("a histogram: {h:?}") };
        assert_eq!(buckets.len(), 23);
        for b in buckets {
            let want = if b.less_than >= ms { WINDOW as f64 } else { 0.0 };
            assert_eq!(b.count, want, "rank {r}: bucket le={}", b.less_than);
        }
        assert!((val(&a, "commlens_op_duration_seconds_sum", &l) - WINDOW as f64 * ms).abs() < 1e-12);
        assert_eq!(val(&a, "commlens_op_duration_seconds_count", &l), WINDOW as f64);
    }
    assert_eq!(val(&a, "commlens_comm_local_ranks", &[("comm", WORLD)]), 4.0);
    assert_eq!(val(&a, "commlens_comm_local_ranks", &[("comm", TP)]), 2.0);
    for r in 0..2 {
        assert_eq!(rank_val(&a, "commlens_rank_slow", TP, r), 0.0);
    }
    // Other kinds: the pair's Send/Recv (64 Ki halfs) and world's small AllGather.
    let send = [("comm", TP), ("rank", "0"), ("kind", "Send")];
    assert_eq!((val(&a, "commlens_ops_total", &send), val(&a, "commlens_bytes_total", &send)), (1.0, 131072.0));
    let recv = [("comm", TP), ("rank", "1"), ("kind", "Recv")];
    assert_eq!(val(&a, "commlens_ops_total", &recv), 1.0);
    let ag = [("comm", WORLD), ("rank", "3"), ("kind", "AllGather")];
    let ag_bus = val(&a, "commlens_busbw_bytes_per_second", &[ag[0], ag[1], ag[2], ("stat", "last")]);
    assert!(close(ag_bus, 4096.0 * 4.0 * 0.75 / 30e-6), "AllGather: 4 ranks x 4 KiB in 30 us: {ag_bus}");
    let info = matching(&a, "commlens_comm_info", &[("comm", WORLD), ("rank", "2")]);
    assert_eq!(
        (info[0].labels.get("dev"), info[0].labels.get("nranks"), info[0].labels.get("name")),
        (Some("2"), Some("4"), Some("world"))
    );
    assert!(a.samples.iter().all(|x| x.labels.get("job") == Some("train-42") && x.labels.get("host").is_some()));

    // B: still slow, same episode.
    let b = read_scrape(&snaps.join("snap-b.prom"));
    assert_eq!(rank_val(&b, "commlens_rank_slow", WORLD, 2), 1.0);
    assert_eq!(rank_val(&b, "commlens_rank_low_windows", WORLD, 2), 2.0);
    assert_eq!(rank_val(&b, "commlens_rank_slow_episodes_total", WORLD, 2), 1.0);
    // C: two normal windows: recovered, no new episode; the rolling minimum forgot the slow ops.
    let c = read_scrape(&snaps.join("snap-c.prom"));
    for r in 0..4 {
        assert_eq!(rank_val(&c, "commlens_rank_slow", WORLD, r), 0.0);
        assert_eq!(rank_val(&c, "commlens_rank_slow_episodes_total", WORLD, r), if r == 2 { 1.0 } else { 0.0 });
        assert_eq!(rank_val(&c, "commlens_rank_windows_total", WORLD, r), 4.0);
    }
    let l2 = [("comm", WORLD), ("rank", "2"), ("kind", "AllReduce"), ("stat", "window_min")];
    assert!(close(val(&c, "commlens_busbw_bytes_per_second", &l2), AR_BYTES * 1.5 / 2e-3));
    // D: one AllReduce in flight on every world rank; nothing overdue (timeout 300 s).
    let d = read_scrape(&snaps.join("snap-d.prom"));
    for r in 0..4 {
        assert_eq!(rank_val(&d, "commlens_inflight_ops", WORLD, r), 1.0);
        assert!(rank_val(&d, "commlens_inflight_oldest_age_seconds", WORLD, r) >= 0.02);
        assert_eq!(rank_val(&d, "commlens_hang_overdue_ops", WORLD, r), 0.0);
    }
    assert_eq!(rank_val(&d, "commlens_inflight_ops", TP, 0), 0.0);
    let p = [("reason", "timeout")];
    assert_eq!(val(&d, "commlens_hang_dumps_total", &p), 0.0);
    assert_eq!(val(&d, "commlens_hang_timeout_seconds", &[]), 300.0);
}

/// The episode went to NCCL's log once when it started and once when it ended.
fn check_log(stderr: &str) {
    let slow: Vec<&str> = stderr.lines().filter(|l| l.contains(" is slow: ")).collect();
    let back: Vec<&str> = stderr.lines().filter(|l| l.contains(" is no longer slow: ")).collect();
    assert_eq!((slow.len(), back.len()), (1, 1), "{stderr}");
    assert!(slow[0].contains(&format!("rank 2 of communicator {WORLD} (world, device 2)")), "{}", slow[0]);
    assert!(slow[0].starts_with("[nccl log 2]"), "a warning: {}", slow[0]);
}

#[test]
fn slowed_rank_is_named_within_one_window_in_the_file_and_over_http() {
    let dir = out_dir("metrics");
    let mut child = spawn_scenario(&harness().asan, &dir, true, false);
    let stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        BufReader::new(stderr).read_to_string(&mut s).unwrap();
        s
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("READY ") {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            let _ = child.wait();
            panic!("the harness ended before READY:\n{}", err.join().unwrap());
        }
    }
    let port: u16 = line.trim()["READY port=".len()..].parse().expect("the plugin logged its metrics port");

    // While the harness waits: the endpoint serves what the file holds, and both are refreshed.
    let (head, body) = scrape_http(port);
    assert!(head.starts_with("HTTP/1.0 200 OK") && head.contains("text/plain; version=0.0.4"), "{head}");
    let http = parse(&body, "HTTP /metrics");
    check_docs(&http);
    let snap_d = read_scrape(&dir.join("snaps/snap-d.prom"));
    assert_eq!(series(&http), series(&snap_d), "the endpoint and the file expose the same series");
    for r in 0..4 {
        let l = [("comm", WORLD), ("rank", &r.to_string()), ("kind", "AllReduce")];
        assert_eq!(val(&http, "commlens_ops_total", &l), val(&snap_d, "commlens_ops_total", &l));
    }
    let live = |s: &Scrape| val(s, "commlens_metrics_writes_total", &[]);
    let prom_file = std::fs::read_dir(dir.join("prom"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "prom"))
        .expect("the live metrics file");
    let first = live(&read_scrape(&prom_file));
    let mut refreshed = false;
    for _ in 0..500 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        if live(&read_scrape(&prom_file)) > first && live(&parse(&scrape_http(port).1, "HTTP")) > first {
            refreshed = true;
            break;
        }
    }
    assert!(refreshed, "the writer thread refreshes the file and the endpoint by itself");

    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    let stderr = err.join().unwrap();
    assert!(status.success(), "harness failed ({status}):\n{rest}\n{stderr}");
    assert!(rest.contains("REMOVED 1"), "the metrics file is removed when the session ends:\n{rest}");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "the port is closed after the last finalize");
    check_phases(&dir.join("snaps"));
    check_log(&stderr);
    // Metrics on, the event file is still complete.
    let clp: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "clp"))
        .collect();
    let t = commlens_ingest::plugin_out::read_trace(&clp[0]).unwrap();
    let emitted = rest.lines().find(|l| l.starts_with("EMITTED ")).expect("EMITTED line");
    assert!(emitted.contains(&format!("starts={} ", t.report.starts)), "{emitted} vs {:?}", t.report);
    assert_eq!((t.report.dropped, t.report.clean_end), (0, true));
}

/// Metric names in a PromQL expression: `commlens_…` identifiers.
fn promql_metrics(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = expr[i..].find("commlens_") {
        let s = i + at;
        let starts_word = s == 0 || !(b[s - 1].is_ascii_alphanumeric() || b[s - 1] == b'_');
        let mut e = s;
        while e < b.len() && (b[e].is_ascii_alphanumeric() || b[e] == b'_') {
            e += 1;
        }
        if starts_word {
            out.push(expr[s..e].to_string());
        }
        i = e;
    }
    out
}

fn exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr" | "query", serde_json::Value::String(s)) => out.push(s.clone()),
                    (_, x) => exprs(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| exprs(x, out)),
        _ => {}
    }
}

#[test]
fn grafana_dashboard_reads_only_metrics_the_plugin_exports() {
    // A real run (no stdin: the harness does not wait), its final snapshot.
    let dir = out_dir("metrics-dashboard");
    let child = spawn_scenario(&harness().plain, &dir, false, false);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let scrape = read_scrape(&dir.join("snaps/snap-d.prom"));
    let mut exported: BTreeSet<String> = scrape.samples.iter().map(|s| s.metric.clone()).collect();
    for s in &scrape.samples {
        if matches!(s.value, Value::Histogram(_)) {
            exported.insert(format!("{}_bucket", s.metric));
        }
    }

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/grafana/commlens-dashboard.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dash: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let panels = dash["panels"].as_array().expect("panels");
    let mut all = Vec::new();
    exprs(&dash, &mut all);
    assert!(all.len() >= panels.len() / 2, "{} expressions for {} panels", all.len(), panels.len());
    let mut used = BTreeSet::new();
    for e in &all {
        for m in promql_metrics(e) {
            assert!(exported.contains(&m), "the dashboard queries {m}, which the plugin does not export ({e})");
            used.insert(m);
        }
    }
    // The panels the issue asks for read what they should.
    for m in [
        "commlens_busbw_bytes_per_second",
        "commlens_op_duration_seconds_bucket",
        "commlens_inflight_oldest_age_seconds",
        "commlens_rank_busbw_window_bytes_per_second",
        "commlens_rank_slow",
        "commlens_hang_overdue_ops",
    ] {
        assert!(used.contains(m), "no panel reads {m}");
    }
    assert_eq!(promql_metrics("rate(commlens_ops_total[5m]) / xcommlens_no"), vec!["commlens_ops_total"]);
}

#[test]
fn metrics_under_valgrind() {
    let found = Path::new("/usr/bin/valgrind").is_file() || Command::new("valgrind").arg("--version").output().is_ok();
    if !found {
        commlens_testdata::skip_unless_ci(
            "plugin metrics under valgrind",
            "valgrind not found",
            "apt-get install valgrind",
        );
        return;
    }
    // The writer's refresh, the HTTP thread and the slow-rank rule under valgrind (Rust side
    // included); timings are valgrind's, so only what does not depend on them is checked.
    let dir = out_dir("metrics-vg");
    let child = spawn_scenario(&harness().plain, &dir, true, true);
    let o = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "valgrind: {}\n{stdout}\n{stderr}", o.status);
    assert!(stdout.contains("REMOVED 1"), "{stdout}");
    let d = read_scrape(&dir.join("snaps/snap-d.prom"));
    check_docs(&d);
    let l = [("comm", WORLD), ("rank", "2"), ("kind", "AllReduce")];
    assert_eq!(val(&d, "commlens_ops_total", &l), 4.0 * WINDOW as f64);
}
