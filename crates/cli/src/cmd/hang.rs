//! `commlens hang DIR`: merges the ranks' in-flight dumps and names the first
//! stalled collective, the ranks that never entered it, and a verdict.

use super::CmdResult;
use crate::Format;
use commlens_analyze::hang::{analyze, MemberState, Verdict};
use commlens_export::{human_bytes, Table};
use commlens_ingest::hang_dump::read_dumps;
use std::path::PathBuf;

pub fn run(inputs: &[PathBuf], format: Format, still_running_ms: u64) -> CmdResult {
    let (dumps, skipped) = match read_dumps(inputs) {
        Err(commlens_ingest::IngestError::NoInputs { paths }) => return Err(no_dumps_error(&paths).into()),
        r => r?,
    };
    // One note per reason: a plugin folder holds one .clp per rank beside the dumps.
    let mut reasons: Vec<(&str, Vec<&PathBuf>)> = Vec::new();
    for (p, why) in &skipped {
        match reasons.iter_mut().find(|(w, _)| *w == why.as_str()) {
            Some((_, ps)) => ps.push(p),
            None => reasons.push((why, vec![p])),
        }
    }
    for (why, ps) in &reasons {
        match ps.as_slice() {
            [p] => eprintln!("note: skipped {}: {why}", p.display()),
            _ => eprintln!("note: skipped {} files ({}, ...): {why}", ps.len(), ps[0].display()),
        }
    }
    let report = analyze(&dumps, (still_running_ms as i64).saturating_mul(1_000_000));
    if format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("read {} rank dump{}", dumps.len(), if dumps.len() == 1 { "" } else { "s" });
    for (who, older_s) in &report.stale {
        println!("note: {who}'s dump is {older_s:.1} s older than an operation the others show open: left out (an earlier wait, not this stall)");
    }
    let verdict = match &report.verdict {
        Verdict::NotHung => "not hung: nothing is running or pending in these dumps".to_string(),
        Verdict::RankDidNotJoin { ranks } => format!("rank did not join: {} never entered it", ranks.join(", ")),
        Verdict::StuckInside { lowest_progress: Some(r) } => {
            format!("stuck inside NCCL: every member entered it; {r} has the least progress (stopped first)")
        }
        Verdict::StuckInside { lowest_progress: None } => {
            "stuck inside NCCL: every member entered it, with equal or unknown progress".to_string()
        }
        Verdict::Deadlock { cycle } => {
            let c: Vec<String> = cycle.iter().map(|i| format!("{:#x}#{}", i.comm_hash, i.seq)).collect();
            format!("deadlock: running operations wait on each other: {}", c.join(" → "))
        }
        Verdict::StillRunning { longest_ns } => {
            format!("still running: the oldest has run {:.1} ms, below the threshold", *longest_ns as f64 / 1e6)
        }
    };
    println!("verdict: {verdict}");
    if let Some(s) = &report.first_stalled {
        println!(
            "first stalled: {} seq {} on communicator {:#018x}{} ({} ranks, {})",
            s.op,
            s.instance.seq,
            s.instance.comm_hash,
            if s.desc.is_empty() { String::new() } else { format!(" \"{}\"", s.desc) },
            s.nranks,
            human_bytes(s.bytes)
        );
        let mut t = Table::new("", &["comm rank>", "rank", "state", "progress", "running for"]);
        for m in &s.members {
            t.row(vec![
                m.comm_rank.to_string(),
                m.who.clone(),
                match m.state {
                    MemberState::Done => "done",
                    MemberState::Running => "running",
                    MemberState::Pending => "pending",
                    MemberState::NotReached => "NEVER ENTERED",
                    MemberState::NoDump => "NO DUMP",
                }
                .to_string(),
                m.progress.map_or_else(|| "-".into(), |(d, t)| format!("{d}/{t}")),
                m.running_for_ns.map_or_else(|| "-".into(), |ns| format!("{:.1} s", ns as f64 / 1e9)),
            ]);
        }
        print!("{}", t.to_text());
    }
    if !report.other_roots.is_empty() {
        println!("{} other independent stall(s)", report.other_roots.len());
    }
    if !report.blocked.is_empty() {
        println!("{} pending operation(s) are blocked behind running ones", report.blocked.len());
    }
    Ok(())
}

/// What `hang` was given instead of in-flight dumps, and how to get dumps.
fn no_dumps_error(paths: &[PathBuf]) -> String {
    let mut kinds: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    if let Ok(files) = commlens_ingest::expand_inputs(paths) {
        for (f, _) in files {
            let k = match commlens_ingest::sniff(&f) {
                Ok(k) => k.name().to_string(),
                Err(_) => "other file".to_string(),
            };
            *kinds.entry(k).or_default() += 1;
        }
    }
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let found = if kinds.is_empty() {
        "no files".to_string()
    } else {
        kinds.iter().map(|(k, n)| format!("{n} × {k}")).collect::<Vec<_>>().join(", ")
    };
    format!(
        "no hang dumps in {} (found {found}). `hang` reads the per-rank in-flight dumps \
(`commlens-hang` JSON, docs/hang-dump.md) that commlens's profiler plugin writes when a process \
gets SIGUSR1 or an operation stays open longer than COMMLENS_PLUGIN_HANG_TIMEOUT_S: run the job \
with NCCL_PROFILER_PLUGIN=libcommlens_plugin.so and COMMLENS_PLUGIN_DIR=DIR, `kill -USR1` the \
hung processes, then `commlens hang DIR`. A sample set to try: `commlens hang examples/hang-dumps`",
        shown.join(", ")
    )
}
