//! `commlens simulate` gives the same bytes whatever the thread count (the table rows,
//! breakdowns and outputs are built on every core, merged in rank order), in both network
//! modes; and a table of representative ranks says, when read, how many ranks it stands for.

mod common;

use common::{commlens_cmd, run_limited, temp_dir};
use std::path::Path;

const CONF: &str = "layers = 4\nhidden = 1024\nseq_len = 1024\nvocab = 50304\nmicro_batch = 1\n\
num_microbatches = 4\niterations = 1\ntp = 2\npp = 2\ndp = 4\n";

const FILES: [&str; 6] = ["simulated.parquet", "summary.json", "EndToEnd.csv", "links.csv", "trace.json", "trace.pftrace"];

fn simulate(conf: &Path, mode: &str, threads: u32, out: &Path) {
    let mut c = commlens_cmd(&["simulate", conf.to_str().unwrap(), "--mode", mode, "-o", out.to_str().unwrap()]);
    c.env("RAYON_NUM_THREADS", threads.to_string());
    let r = run_limited(c, 300, "commlens simulate");
    assert_eq!(r.code, 0, "{}", r.err);
    // 4 of 16 ranks are simulated: the others share their programs.
    assert!(r.out.contains("(16 ranks, 4 simulated)"), "{}", r.out);
}

/// A file's bytes; `summary.json` without its wall-clock line.
fn content(p: &Path) -> Vec<u8> {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    if p.ends_with("summary.json") {
        let s = String::from_utf8(b).unwrap();
        return s.lines().filter(|l| !l.contains("\"wall_s\"")).collect::<Vec<_>>().join("\n").into_bytes();
    }
    b
}

#[test]
fn outputs_are_the_same_bytes_for_any_thread_count() {
    let dir = temp_dir("simulate", "threads");
    let conf = dir.join("m.conf");
    std::fs::write(&conf, CONF).unwrap();
    for mode in ["analytical", "flow"] {
        let runs: Vec<_> = [1, 2, 3]
            .iter()
            .map(|&n| {
                let out = dir.join(format!("{mode}-{n}"));
                simulate(&conf, mode, n, &out);
                out
            })
            .collect();
        for f in FILES {
            let one = content(&runs[0].join(f));
            assert!(!one.is_empty(), "{mode}: {f} is empty");
            for other in &runs[1..] {
                assert!(one == content(&other.join(f)), "{mode}: {f} differs between 1 thread and {}", other.display());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_table_of_representatives_says_how_many_ranks_it_stands_for() {
    let dir = temp_dir("simulate", "represents");
    let conf = dir.join("m.conf");
    std::fs::write(&conf, CONF).unwrap();
    let out = dir.join("sim");
    simulate(&conf, "analytical", 2, &out);
    let pq = out.join("simulated.parquet");
    for cmd in ["stats", "report"] {
        let mut args = vec![cmd, pq.to_str().unwrap()];
        let html = dir.join("r.html");
        if cmd == "report" {
            args.extend(["-o", html.to_str().unwrap()]);
        }
        let r = run_limited(commlens_cmd(&args), 300, cmd);
        assert_eq!(r.code, 0, "{cmd}: {}", r.err);
        assert!(r.err.contains("simulated: 4 ranks representing 16"), "{cmd}: {}", r.err);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
