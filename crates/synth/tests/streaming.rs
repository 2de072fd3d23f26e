//! `stream_into` (each process's lines written as the simulation makes them,
//! for worlds beyond what fits in memory) writes byte for byte the files of
//! `generate_into`, and the generator accepts worlds up to `MAX_WORLD`.

use commlens_synth::{generate, stream_into, RunConfig, MAX_WORLD};
use std::collections::BTreeMap;

fn files_of(dir: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect()
}

#[test]
fn streamed_files_are_the_generated_ones() {
    let configs = [
        RunConfig::default(),
        RunConfig::all_variants(),
        RunConfig { call_lines: true, timestamps: false, nccl_version: "2.18.1".into(), ..RunConfig::megatron(2, 2, 4) },
    ];
    for (k, cfg) in configs.iter().enumerate() {
        let dir = std::env::temp_dir().join(format!("commlens-synth-stream-{}-{k}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let written = stream_into(cfg, &dir).unwrap();
        let run = generate(cfg);
        let want: BTreeMap<String, Vec<u8>> =
            run.files.iter().map(|f| (f.name.clone(), f.contents.clone().into_bytes())).collect();
        let got = files_of(&dir);
        assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "config {k}");
        for (name, bytes) in &want {
            assert!(got[name] == *bytes, "config {k}: {name} differs");
        }
        assert_eq!(written.files, want.len());
        assert_eq!(written.bytes, run.total_bytes() as u64);
        assert_eq!(written.lines, run.truth.ranks.iter().map(|r| r.lines as u64).sum::<u64>());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn combined_log_is_refused_when_streaming() {
    let cfg = RunConfig { interleave: true, ..RunConfig::default() };
    let dir = std::env::temp_dir().join(format!("commlens-synth-stream-refused-{}", std::process::id()));
    let err = stream_into(&cfg, &dir).unwrap_err();
    assert!(err.to_string().contains("combined.log"), "{err}");
}

#[test]
fn worlds_up_to_the_cap_are_valid() {
    // 102,400 ranks (the scaling benchmark's largest job) validates; one more DP group past the cap does not.
    assert!(RunConfig::megatron(2, 2, 25_600).validate().is_ok());
    let over = RunConfig::megatron(2, 2, MAX_WORLD / 4 + 1);
    let err = over.validate().unwrap_err();
    assert!(err.0.contains(&MAX_WORLD.to_string()), "{}", err.0);
}
