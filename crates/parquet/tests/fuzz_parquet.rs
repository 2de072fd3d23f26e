//! Fuzzing that stays: `read_table` over mutated Parquet files written from
//! generated runs (commlens-synth logs read back like `commlens stats` would,
//! several row-group sizes and compressions). Property: Ok or Err within a
//! bounded time, no panic, no unbounded allocation. Knobs: see
//! `crates/ingest/tests/fuzz_support`.

#[path = "../../ingest/tests/fuzz_support/mod.rs"]
mod fuzz_support;

use commlens_ingest::inputs::load_inputs;
use commlens_ingest::nccl_log::ReadOptions;
use commlens_parquet::{read_table, write_table, WriteOptions};
use commlens_synth::{generate, write_to_dir, RunConfig};
use fuzz_support::{mutate, run, scratch, Kind, Seed};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

counting_allocator!();

#[test]
fn fuzz_parquet() {
    let dir = scratch("parquet-seeds");
    let run_ = generate(&RunConfig::default());
    let files = write_to_dir(&run_, &dir.join("logs")).unwrap();
    let per_process: Vec<PathBuf> = files.into_iter().filter(|f| !f.ends_with("combined.log")).collect();
    let table = load_inputs(&per_process, &ReadOptions::default()).unwrap().table;
    let mut seeds = Vec::new();
    for (k, rows) in [1usize << 20, 64, 7].into_iter().enumerate() {
        let p = dir.join(format!("seed{k}.parquet"));
        let opts = WriteOptions { row_group_rows: rows, ..WriteOptions::default() };
        write_table(&table, &p, &opts).unwrap();
        seeds.push(Seed::new(p.display().to_string(), std::fs::read(&p).unwrap()));
    }
    let work = scratch("parquet");
    static N: AtomicUsize = AtomicUsize::new(0);
    run(
        "parquet",
        |rng, i, n| {
            let s = rng.pick(&seeds);
            // The footer (length + magic) is where readers trust sizes: mutate near it often.
            let mut d = mutate(rng, &s.data, Kind { keep_head: 4, ..Kind::default() }, i, n);
            if rng.chance(30) && d.len() > 8 {
                let tail = d.len() - 8 - rng.below(d.len().min(256) - 8 + 1).min(d.len() - 8);
                for _ in 0..1 + rng.below(4) {
                    let at = tail + rng.below(d.len() - tail);
                    d[at] = rng.next() as u8;
                }
            }
            d
        },
        move |d| {
            let p = work.join(format!("case-{}.parquet", N.fetch_add(1, Ordering::Relaxed)));
            std::fs::write(&p, d).unwrap();
            let ok = read_table(&p).is_ok();
            let _ = std::fs::remove_file(&p);
            ok
        },
    );
}
