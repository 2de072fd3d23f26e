//! `commlens watch DIR` through the binary, on plugin files that grow while it
//! runs. Two sources of real `.clp` bytes: the plugin itself (its fake-NCCL
//! harness replaying NCCL's call sequences, `crates/plugin/tests/harness`),
//! whose complete file is cut at arbitrary byte offsets and appended piece by
//! piece; and jobs of one process per rank built with the plugin's own record
//! encoder (`commlens_plugin::record`), appended operation by operation, with a
//! rank that arrives late, files that appear mid-run and an operation left open.
//!
//! The watcher prints JSON snapshots (`--format json`); the tests read them as
//! they come and append the next piece only once a snapshot has seen the last
//! one, so what each snapshot must show does not depend on timing. The final
//! snapshot is checked against `commlens stats` on the complete files and the
//! bandwidth analysis of the whole-file reader.

#[path = "../../plugin/tests/support/mod.rs"]
mod support;

use commlens_plugin::record::{chunk_header, header_line, kind, Enc};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

fn commlens(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_commlens"))
        .args(args)
        .output()
        .unwrap();
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        s(&out.stdout),
        s(&out.stderr),
    )
}

fn append(path: &Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

/// A running `commlens watch --format json` and its snapshots so far.
struct Watch {
    child: Child,
    out: BufReader<ChildStdout>,
    seen: Vec<Value>,
}

impl Watch {
    fn start(dir: &Path, extra: &[&str]) -> Watch {
        let mut child = Command::new(env!("CARGO_BIN_EXE_commlens"))
            .args([
                "watch",
                dir.to_str().unwrap(),
                "--interval",
                "0.05",
                "--ticks",
                "2000",
                "--format",
                "json",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Watch {
            child,
            out,
            seen: Vec::new(),
        }
    }

    /// Reads snapshots until one satisfies `pred` (panics if the watcher exits first).
    fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let mut line = String::new();
            if self.out.read_line(&mut line).unwrap() == 0 {
                let o = std::mem::replace(&mut self.child, Command::new("true").spawn().unwrap())
                    .wait_with_output()
                    .unwrap();
                panic!(
                    "watch ended before {what}; last: {:?}\nstderr: {}",
                    self.seen.last(),
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            let v: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            self.seen.push(v.clone());
            if pred(&v) {
                return v;
            }
        }
    }

    /// Waits for the watcher to exit by itself; (exit code, stderr).
    fn finish(mut self) -> (i32, String, Vec<Value>) {
        for line in (&mut self.out).lines() {
            self.seen
                .push(serde_json::from_str(&line.unwrap()).unwrap());
        }
        let o = self.child.wait_with_output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
            self.seen,
        )
    }
}

fn dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("commlens-watch")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `comms` of a snapshot or of `stats --format json`, by name: (ops, bytes).
fn comm_figures(comms: &Value) -> Vec<(String, u64, u64)> {
    let mut v: Vec<(String, u64, u64)> = comms
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["ops"].as_u64().unwrap(),
                c["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The final snapshot against `stats` and the whole-file bandwidth analysis of the same folder.
fn check_final_against_whole_files(last: &Value, dir: &Path, rows: usize) {
    let (code, json, err) = commlens(&["stats", dir.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let stats: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        comm_figures(&last["comms"]),
        comm_figures(&stats["stats"]["comms"])
    );
    assert_eq!(last["ops"], stats["stats"]["total_ops"]);
    let (table, _) =
        commlens_ingest::plugin_out::load_plugin_outputs(&[dir.to_path_buf()]).unwrap();
    let bw = commlens_analyze::bandwidth::analyze(&table, &Default::default());
    let mut compared = 0;
    for row in bw.comms.iter().filter(|r| r.busbw.is_some()) {
        let name = &table.logical[row.comm.unwrap().ix()].name;
        let c = last["comms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name.as_str())
            .unwrap();
        let k = c["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["kind"] == row.kind.name())
            .unwrap();
        let (want, got) = (row.busbw.unwrap().median, k["busbw_gb_s"].as_f64().unwrap());
        assert!(
            (got / want - 1.0).abs() < 1e-3,
            "{name} {}: median busbw {got} vs {want}",
            row.kind
        );
        compared += 1;
    }
    assert_eq!(compared, rows, "busbw rows compared");
}

#[test]
fn grows_while_watched_and_ends_as_stats_says() {
    // A real plugin file: the harness's replay (4 devices, groups, p2p, CE, proxy events).
    let made = support::out_dir("cli-watch-replay");
    let mut cmd = Command::new(&support::harness().plain);
    cmd.arg(support::plugin_so()).arg("replay");
    support::run(&mut cmd, &made, &[]);
    let src = std::fs::read_dir(&made)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "clp"));
    let src = src.expect("the harness wrote a .clp file");
    let bytes = std::fs::read(&src).unwrap();
    let d = dir("grows");
    let target = d.join(src.file_name().unwrap());
    let mut w = Watch::start(&d, &[]);
    let first = w.until("the empty folder", |_| true);
    assert!(
        first["waiting"]
            .as_str()
            .unwrap()
            .contains("no commlens plugin file"),
        "{first}"
    );
    // Cut anywhere (inside the header line, chunks and records), 7 pieces.
    let cuts: Vec<usize> = vec![
        40,
        bytes.len() / 6 + 3,
        bytes.len() / 3 + 11,
        bytes.len() / 2 + 5,
        2 * bytes.len() / 3 + 1,
        bytes.len() - 9,
        bytes.len(),
    ];
    let mut at = 0;
    let mut ops = Vec::new();
    for &c in &cuts {
        append(&target, &bytes[at..c]);
        at = c;
        let s = w.until("the piece was read", |v| {
            v["bytes_read"].as_u64() == Some(c as u64)
        });
        ops.push(s["ops"].as_u64().unwrap_or(0));
        if c < bytes.len() {
            assert_eq!(s["job_ended"], false, "no END yet at {c}");
        }
    }
    let (code, err, seen) = w.finish();
    assert_eq!(code, 0, "the job ended (END record): watch exits 0; {err}");
    assert!(
        ops.windows(2).all(|p| p[0] <= p[1]),
        "counts never go back: {ops:?}"
    );
    let rises = ops.windows(2).filter(|p| p[0] < p[1]).count();
    assert!(rises >= 4, "counts grow with the file: {ops:?}");
    // Bandwidth shows before the end.
    let early_bw = seen.iter().filter(|s| s["job_ended"] == false).any(|s| {
        s["comms"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["kinds"][0]["busbw_recent_gb_s"].is_f64())
        })
    });
    assert!(early_bw, "a snapshot before the end has a busbw");
    let last = seen.last().unwrap();
    assert_eq!(last["job_ended"], true);
    assert_eq!(last["in_flight"], 0);
    check_final_against_whole_files(last, &d, 8);
    let _ = std::fs::remove_dir_all(&d);
}

/// One process per rank of a `nranks` communicator running `n` AllReduce of
/// 64 MiB; rank `late` enters every one 2 ms after the others, who wait for it.
/// The file's pieces: header and communicator, one per operation, END.
struct RankFile {
    path: PathBuf,
    pieces: Vec<Vec<u8>>,
}

const GPU_SKEW: u64 = 50_000_000_000;

fn rec(e: &mut Enc) -> Vec<u8> {
    e.finish().to_vec()
}

fn chunk(thread: u32, recs: &[Vec<u8>]) -> Vec<u8> {
    let payload = recs.concat();
    let mut v = chunk_header(thread, payload.len() as u32).to_vec();
    v.extend(payload);
    v
}

/// START common part (`id`, `parent`, comm 1, `rank`, flags 0, `t`).
fn start(ty: u8, id: u64, parent: u64, rank: i32, t: u64) -> Enc {
    let mut e = Enc::new(kind::START, ty);
    e.u64(id).u64(parent).u32(1).i32(rank).u8(0).u64(t);
    e
}

#[allow(clippy::too_many_arguments)]
fn rank_file(
    dir: &Path,
    rank: u32,
    nranks: u32,
    n: u64,
    late: u32,
    real0: u64,
    open_last: bool,
    end: bool,
) -> RankFile {
    let mono0 = 1_000_000_000_000 + rank as u64 * 7_777_777;
    let pid = 4000 + rank;
    let host = format!("node{}", rank / 2);
    let path = dir.join(format!("commlens-{host}-{pid}-{real0:x}.clp"));
    let fields = [
        ("host", host),
        ("pid", pid.to_string()),
        ("session", format!("{real0:x}")),
        ("mono_ns", mono0.to_string()),
        ("real_ns", real0.to_string()),
    ];
    let mut head = header_line(&fields).into_bytes();
    head.push(b'\n');
    let strings: Vec<Vec<u8>> = ["AllReduce", "ncclBfloat16", "RING", "SIMPLE"]
        .iter()
        .enumerate()
        .map(|(i, s)| {
            rec(Enc::new(kind::STRING, 0)
                .u32(i as u32 + 1)
                .bytes(s.as_bytes()))
        })
        .collect();
    let mut cold = strings;
    #[rustfmt::skip]
    cold.push(rec(Enc::new(kind::COMM_INIT, 6).u32(1).u64(0xfeed).i32(rank as i32).i32(nranks as i32).i32(2).u64(mono0)
        .i32((rank % 2) as i32).i64(-1).u32(0).u32(0x7fff)));
    cold.push(rec(Enc::new(kind::THREAD, 0).u32(1).u32(pid + 1)));
    head.extend(chunk(0, &cold));
    let mut pieces = vec![head];
    let count: u64 = 32 << 20; // bf16 elements: 64 MiB
    for i in 0..n {
        // Every rank's clock agrees with the epoch through its header pair.
        let t0 = mono0 + 5_000_000 + i * 10_000_000;
        let enter = t0 + if rank == late { 2_000_000 } else { 0 };
        let transfer = 600_000 + 1_000 * i;
        let end_t = t0 + 2_000_000 + transfer;
        let (api, op) = ((1u64 << 40) | (2 * i + 1), (1u64 << 40) | (2 * i + 2));
        #[rustfmt::skip]
        let user = chunk(1, &[
            rec(start(9, api, 0, rank as i32, enter).u32(1).u64(count).u32(2).i32(0).u64(0x5000).u8(0).u64(0)),
            rec(start(1, op, api, rank as i32, enter + 5_000).u64(i).u32(1).u64(0x10000).u64(0x20000).u64(count).i32(0)
                .u32(2).u8(2).u8(16).u32(3).u32(4).u64(0x9000 + i).u32(0).u8(0).u64(0)),
        ]);
        let mut piece = user;
        if !(open_last && i + 1 == n) {
            let mut proxy = Vec::new();
            for ch in 0..2u64 {
                let k = (2u64 << 40) | (2 * i + 1 + ch);
                proxy.push(rec(start(6, k, op, rank as i32, enter + 20_000)
                    .u8(ch as u8)
                    .u64(enter + 10_000 + GPU_SKEW)));
                proxy.push(rec(Enc::new(kind::STATE, 1)
                    .u64(k)
                    .u64(end_t + 30_000)
                    .i32(22)
                    .u64(end_t + GPU_SKEW)));
            }
            piece.extend(chunk(2, &proxy));
        }
        pieces.push(piece);
    }
    if end {
        pieces.push(chunk(
            0,
            &[rec(Enc::new(kind::END, 0)
                .u64(mono0 + 5_000_000 + n * 10_000_000)
                .u64(0)
                .u64(0))],
        ));
    }
    RankFile { path, pieces }
}

#[test]
fn files_appearing_mid_run_are_followed() {
    let d = dir("new-files");
    let (n, late) = (12u64, 2u32);
    let files: Vec<RankFile> = (0..4)
        .map(|r| rank_file(&d, r, 4, n, late, 1_700_000_000_000_000_000, false, true))
        .collect();
    let half = n as usize / 2 + 1;
    // Ranks 0 and 1 start first.
    for f in &files[..2] {
        append(&f.path, &f.pieces[..half].concat());
    }
    let mut w = Watch::start(&d, &["--window", "1000"]);
    let s = w.until("two files", |v| {
        v["files"] == 2 && v["ops"].as_u64() == Some(2 * (half as u64 - 1))
    });
    assert_eq!(
        (s["ranks"].as_u64(), s["job_ended"].as_bool()),
        (Some(2), Some(false)),
        "{s}"
    );
    // Ranks 2 and 3 appear while it runs.
    for f in &files[2..] {
        append(&f.path, &f.pieces[..half].concat());
    }
    let s = w.until("four files", |v| {
        v["files"] == 4 && v["ops"].as_u64() == Some(4 * (half as u64 - 1))
    });
    assert_eq!(s["ranks"], 4, "{s}");
    assert_eq!(s["comms"][0]["members_seen"], 4, "{s}");
    for f in &files {
        append(&f.path, &f.pieces[half..].concat());
    }
    let (code, err, seen) = w.finish();
    assert_eq!(code, 0, "{err}");
    let last = seen.last().unwrap();
    assert_eq!(
        (last["job_ended"].as_bool(), last["ops"].as_u64()),
        (Some(true), Some(4 * n)),
        "{last}"
    );
    // The late rank: last into every instance, and 2 ms late on average.
    let slow = &last["slow_ranks"][0];
    assert_eq!(
        (slow["rank"].as_u64(), slow["last_share"].as_f64()),
        (Some(late as u64), Some(1.0)),
        "{last}"
    );
    // Within 1 µs: the GPU clock estimate allows for 100 ppm of drift, so even this
    // file's drift-free clock is recovered only to D times the gap between tight observations.
    let late_ns = slow["mean_lateness_ns"].as_f64().unwrap();
    assert!((late_ns - 2_000_000.0).abs() < 1_000.0, "{late_ns}");
    // busbw of the others' ops include their wait; nccl-tests factor 2·3/4 over 64 MiB.
    let k = &last["comms"][0]["kinds"][0];
    let slowest_possible = (64u64 << 20) as f64 / 2_611_000.0 * 1.5;
    assert!(
        k["busbw_gb_s"].as_f64().unwrap() > slowest_possible * 0.99,
        "{k}"
    );
    check_final_against_whole_files(last, &d, 1);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_open_operation_is_the_oldest_in_flight() {
    let d = dir("in-flight");
    let n = 8u64;
    // Timed so that the last operation's API call was 90 s ago by this machine's clock.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let real0 = now - 90_000_000_000 - (5_000_000 + (n - 1) * 10_000_000);
    for r in 0..2 {
        let f = rank_file(&d, r, 2, n, 9, real0, r == 1, false);
        append(&f.path, &f.pieces.concat());
    }
    let dump = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/hang-dumps/commlens-hang-node01-48211-dev0.json");
    std::fs::copy(&dump, d.join("commlens-hang-node01-48211-dev0.json")).unwrap();
    let (code, json, err) = commlens(&["watch", d.to_str().unwrap(), "--once", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let s: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (s["in_flight"].as_u64(), s["job_ended"].as_bool()),
        (Some(1), Some(false)),
        "{s}"
    );
    let o = &s["oldest_in_flight"];
    assert_eq!(
        (o["kind"].as_str(), o["rank"].as_u64(), o["seq"].as_u64()),
        (Some("AllReduce"), Some(1), Some(n - 1)),
        "{o}"
    );
    assert_eq!(
        (o["running"].as_bool(), o["comm"].as_str()),
        (Some(false), Some("world0")),
        "{o}"
    );
    let age = o["age_s"].as_f64().unwrap();
    assert!((90.0..150.0).contains(&age), "age {age}");
    assert_eq!(
        s["hang_dumps"][0]["file"],
        "commlens-hang-node01-48211-dev0.json"
    );
    // The finished ones are counted: 8 on rank 0, 7 on rank 1.
    assert_eq!(s["ops"], 15, "{s}");
    let (code, text, _) = commlens(&["watch", d.to_str().unwrap(), "--once"]);
    assert_eq!(code, 0);
    assert!(
        text.contains(&format!(
            "oldest in flight (of 1): AllReduce seq {} (NCCL seq {}) on world0, rank 1",
            n - 1,
            n - 1
        )),
        "{text}"
    );
    assert!(
        text.contains("queued, kernel not started, for 1 min 3"),
        "{text}"
    );
    assert!(
        text.contains("hang dumps: commlens-hang-node01-48211-dev0.json"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_empty_folder_is_waited_for_and_an_error_with_once() {
    let d = dir("empty");
    let (code, out, err) = commlens(&["watch", d.to_str().unwrap(), "--once"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(d.to_str().unwrap()) && err.contains("no commlens plugin file (.clp)"),
        "{err}"
    );
    // Without --once it waits and says so on every snapshot; ending with nothing is an error.
    let (code, out, err) = commlens(&[
        "watch",
        d.to_str().unwrap(),
        "--interval",
        "0.01",
        "--ticks",
        "3",
    ]);
    assert_eq!(code, 2);
    assert_eq!(
        out.matches(&format!(
            "no commlens plugin file (.clp) in {} yet",
            d.display()
        ))
        .count(),
        3,
        "{out}"
    );
    assert!(err.contains("appeared in 3 snapshot(s)"), "{err}");
    // A missing folder, and a file instead of a folder.
    let gone = d.join("not-yet");
    let (code, _, err) = commlens(&["watch", gone.to_str().unwrap(), "--once"]);
    assert!(code == 2 && err.contains("not-yet"), "{err}");
    let file = d.join("x.clp");
    std::fs::write(&file, b"").unwrap();
    let (code, _, err) = commlens(&["watch", file.to_str().unwrap(), "--once"]);
    assert!(code == 2 && err.contains("not a folder"), "{err}");
    let (code, _, err) = commlens(&["watch", d.to_str().unwrap(), "--interval", "0"]);
    assert!(
        code == 2 && err.contains("--interval must be a positive"),
        "{err}"
    );
}

#[test]
fn a_corrupt_file_is_named_with_its_offset() {
    let d = dir("corrupt");
    let f = rank_file(&d, 0, 1, 2, 9, 1_700_000_000_000_000_000, false, false);
    let good: Vec<u8> = f.pieces.concat();
    append(&f.path, &good);
    append(&f.path, b"JUNKJUNKJUNKJUNKJUNK");
    let (code, out, err) = commlens(&["watch", d.to_str().unwrap(), "--once"]);
    assert_eq!(code, 2, "{out}");
    let want = format!(
        "{}: byte offset {}: bad chunk magic",
        f.path.display(),
        good.len()
    );
    assert!(err.contains(&want) && out.contains(&want), "{err}\n{out}");
    // Another major version of the format: named, not taken for an empty folder.
    std::fs::write(&f.path, b"commlens-plugin v9 host=h pid=1\n").unwrap();
    let (code, _, err) = commlens(&["watch", d.to_str().unwrap(), "--once"]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!("{}:1:", f.path.display())) && err.contains("\"v9\""),
        "{err}"
    );
}

/// What a refresh costs on a large file that grows a little, against the
/// first refresh (the whole file) and `commlens stats` on the same files, all
/// measured in this run. Prints figures; run with
/// `cargo test --release -p commlens --test watch -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_refresh_cost_follows_the_new_bytes() {
    let d = dir("bench");
    let n = 100_000u64;
    let files: Vec<RankFile> = (0..2)
        .map(|r| rank_file(&d, r, 2, n, 9, 1_700_000_000_000_000_000, false, true))
        .collect();
    let keep = 11; // the last operations and END, appended one per refresh
    for f in &files {
        append(&f.path, &f.pieces[..f.pieces.len() - keep].concat());
    }
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(&f.path).unwrap().len())
        .sum();
    let mut w = Watch::start(&d, &[]);
    let first = w.until("the whole files", |v| {
        v["bytes_read"].as_u64() == Some(total)
    });
    let mut small = Vec::new();
    let mut read = total;
    for k in (1..=keep).rev() {
        for f in &files {
            let piece = &f.pieces[f.pieces.len() - k];
            append(&f.path, piece);
            read += piece.len() as u64;
        }
        let s = w.until("the new piece", |v| v["bytes_read"].as_u64() == Some(read));
        small.push((
            s["new_bytes"].as_u64().unwrap(),
            s["tick_ms"].as_f64().unwrap(),
        ));
    }
    let (code, err, seen) = w.finish();
    assert_eq!(code, 0, "{err}");
    assert_eq!(seen.last().unwrap()["ops"], 2 * n);
    let t0 = std::time::Instant::now();
    let (code, _, _) = commlens(&["stats", d.to_str().unwrap()]);
    let stats_ms = t0.elapsed().as_secs_f64() * 1e3;
    assert_eq!(code, 0);
    let mut ms: Vec<f64> = small.iter().map(|x| x.1).collect();
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    let first_ms = first["tick_ms"].as_f64().unwrap();
    println!(
        "files {:.1} MiB in 2 files; first refresh (whole files) {first_ms:.1} ms; `commlens stats` {stats_ms:.1} ms",
        total as f64 / (1 << 20) as f64
    );
    println!(
        "refresh after +{} B: median {median:.2} ms over {} refreshes = {:.4} of the first, {:.4} of stats",
        small[0].0,
        ms.len(),
        median / first_ms,
        median / stats_ms
    );
    let _ = std::fs::remove_dir_all(&d);
}
