//! What one refresh of `commlens watch` shows ([`Snapshot`], also its JSON
//! form, one object per line) and its text rendering: a status line, the
//! communicators (per kind: operations, bytes, calls per second, recent and
//! since-start median busbw), the slowest ranks, the oldest operation in
//! flight, hang dumps, notes and errors. Units are in the field names.

use commlens_export::{human_bytes_of, Table};
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

#[derive(Debug, Clone, Default, Serialize)]
pub struct KindView {
    pub kind: String,
    /// Per-rank operations since the start (as `stats` counts them).
    pub ops: u64,
    pub bytes: u64,
    /// Operations that finished in the window.
    pub recent_ops: u64,
    /// Median busbw (nccl-tests convention) over the window and since the start.
    pub busbw_recent_gb_s: Option<f64>,
    pub busbw_gb_s: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CommView {
    pub name: String,
    pub comm_id: Option<String>,
    pub nranks: u32,
    pub members_seen: usize,
    pub ops: u64,
    pub bytes: u64,
    pub unknown_size: u64,
    /// Operations per second of one member over the window (collective calls).
    pub calls_per_s: f64,
    pub kinds: Vec<KindView>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RankView {
    pub rank: Option<u32>,
    pub host: String,
    pub pid: u32,
    pub cuda_dev: Option<u32>,
    /// Timed collective instances in the window.
    pub instances: u64,
    /// Share of them it started last in.
    pub last_share: f64,
    pub mean_lateness_ns: f64,
    pub mean_wait_ns: Option<f64>,
    /// Lowest window busbw against its peers' median (only below 0.7 windows are listed by the analysis).
    pub busbw_ratio: Option<f64>,
    pub comm: Option<String>,
    pub flagged: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct InFlightView {
    pub kind: String,
    pub comm: String,
    pub rank: Option<u32>,
    pub comm_rank: Option<u32>,
    pub host: String,
    pub pid: u32,
    /// The handle's operation counter, as in hang dumps; NCCL's own number.
    pub seq: u64,
    pub nccl_seq: Option<u64>,
    /// Since the API call, by this machine's clock.
    pub age_s: f64,
    /// The kernel started (else still queued).
    pub running: bool,
    pub channels_done: u16,
    pub channels: u16,
    pub file: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DumpView {
    pub file: String,
    pub age_s: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    pub tick: u64,
    pub dir: String,
    pub unix_time_s: f64,
    pub window_s: f64,
    /// Set while there is nothing to show yet, saying what is awaited.
    pub waiting: Option<String>,
    pub files: usize,
    pub files_ended: usize,
    /// Every file has its END record.
    pub job_ended: bool,
    pub ranks: usize,
    pub bytes_read: u64,
    pub new_bytes: u64,
    /// Bytes of chunks the writers have not finished.
    pub pending_bytes: u64,
    /// Time this snapshot took to read the new bytes and derive the figures.
    pub tick_ms: f64,
    pub dropped: u64,
    pub ops: u64,
    pub in_flight: u64,
    /// Since the latest record of any file.
    pub last_activity_s: Option<f64>,
    pub comms: Vec<CommView>,
    pub slow_ranks: Vec<RankView>,
    pub oldest_in_flight: Option<InFlightView>,
    pub hang_dumps: Vec<DumpView>,
    pub notes: Vec<String>,
    pub errors: Vec<String>,
}

impl Snapshot {
    pub fn new(tick: u64, dir: &Path, window_s: f64) -> Snapshot {
        let unix_time_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Snapshot {
            tick,
            dir: dir.display().to_string(),
            unix_time_s,
            window_s,
            ..Snapshot::default()
        }
    }
}

/// `0.4 s`, `12 s`, `3 min 20 s`, `2 h 05 min`.
pub fn age(s: f64) -> String {
    let s = s.max(0.0);
    if s < 10.0 {
        format!("{s:.1} s")
    } else if s < 60.0 {
        format!("{s:.0} s")
    } else if s < 3600.0 {
        format!("{} min {:02} s", (s / 60.0) as u64, s as u64 % 60)
    } else {
        format!(
            "{} h {:02} min",
            (s / 3600.0) as u64,
            (s as u64 % 3600) / 60
        )
    }
}

fn ns(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1} ms", v / 1e6)
    } else {
        format!("{:.0} µs", v / 1e3)
    }
}

fn gb_s(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"))
}

fn rank_name(rank: Option<u32>, host: &str, pid: u32, dev: Option<u32>) -> String {
    let r = rank.map_or_else(|| "?".to_string(), |r| r.to_string());
    match dev {
        Some(d) => format!("{r} ({host}:{pid} gpu{d})"),
        None => format!("{r} ({host}:{pid})"),
    }
}

/// The snapshot as text; `hint` is the status line's key help (live screen only).
pub fn render_text(s: &Snapshot, hint: &str) -> String {
    let mut out = String::new();
    let clock = clock_of(s.unix_time_s);
    let _ = writeln!(
        out,
        "commlens watch {} — {clock}, snapshot {}{hint}",
        s.dir, s.tick
    );
    if let Some(w) = &s.waiting {
        let _ = writeln!(out, "{w}");
    } else {
        let last = s
            .last_activity_s
            .map_or_else(String::new, |a| format!(", last record {} ago", age(a)));
        let ended = if s.job_ended { ", job ended" } else { "" };
        let _ = writeln!(
            out,
            "{} file(s) ({} ended{ended}), {} rank(s), {} read (+{})",
            s.files,
            s.files_ended,
            s.ranks,
            commlens_export::human_bytes(s.bytes_read),
            commlens_export::human_bytes(s.new_bytes),
        );
        let _ = writeln!(out, "{} ops done, {} in flight{last}", s.ops, s.in_flight);
        if s.dropped > 0 {
            let _ = writeln!(
                out,
                "the plugin dropped {} records (full thread buffers)",
                s.dropped
            );
        }
        out.push('\n');
        out.push_str(&comm_table(s).to_text());
        if !s.slow_ranks.is_empty() {
            out.push('\n');
            out.push_str(&rank_table(s).to_text());
        }
        out.push('\n');
        match &s.oldest_in_flight {
            None => out.push_str("nothing in flight\n"),
            Some(o) => {
                let state = if o.running {
                    format!(
                        "kernel running, {}/{} channels done",
                        o.channels_done, o.channels
                    )
                } else {
                    "queued, kernel not started".to_string()
                };
                let nccl = o
                    .nccl_seq
                    .map_or_else(String::new, |n| format!(" (NCCL seq {n})"));
                let _ = writeln!(
                    out,
                    "oldest in flight (of {}): {} seq {}{nccl} on {}, rank {} — {state}, for {}",
                    s.in_flight,
                    o.kind,
                    o.seq,
                    o.comm,
                    rank_name(o.rank, &o.host, o.pid, None),
                    age(o.age_s)
                );
            }
        }
    }
    if !s.hang_dumps.is_empty() {
        let names: Vec<String> = s
            .hang_dumps
            .iter()
            .take(4)
            .map(|d| {
                d.age_s.map_or_else(
                    || d.file.clone(),
                    |a| format!("{} ({} ago)", d.file, age(a)),
                )
            })
            .collect();
        let more = s.hang_dumps.len().saturating_sub(4);
        let more = if more > 0 {
            format!(", and {more} more")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "hang dumps: {}{more} — see `commlens hang {}`",
            names.join(", "),
            s.dir
        );
    }
    for n in &s.notes {
        let _ = writeln!(out, "note: {n}");
    }
    for e in &s.errors {
        let _ = writeln!(out, "error: {e}");
    }
    out
}

fn comm_table(s: &Snapshot) -> Table {
    let w = format!("{}", s.window_s);
    let recent = format!("busbw {w}s>");
    let mut t = Table::new(
        "communicators (busbw: median GB/s, nccl-tests convention)",
        &[
            "communicator",
            "ranks>",
            "kind",
            "ops>",
            "bytes>",
            "calls/s>",
            &recent,
            "busbw all>",
        ],
    );
    for c in &s.comms {
        for (i, k) in c.kinds.iter().enumerate() {
            let first = i == 0;
            let unknown = if c.kinds.len() == 1 {
                c.unknown_size
            } else {
                0
            };
            t.row(vec![
                if first { c.name.clone() } else { String::new() },
                if first {
                    format!("{}/{}", c.members_seen, c.nranks)
                } else {
                    String::new()
                },
                k.kind.clone(),
                k.ops.to_string(),
                human_bytes_of(k.bytes, k.ops, unknown),
                if first {
                    format!("{:.1}", c.calls_per_s)
                } else {
                    String::new()
                },
                gb_s(k.busbw_recent_gb_s),
                gb_s(k.busbw_gb_s),
            ]);
        }
    }
    if s.comms.is_empty() {
        t.note("no operation has finished yet");
    }
    t
}

fn rank_table(s: &Snapshot) -> Table {
    let mut t = Table::new(
        &format!("slowest ranks (collectives of the last {} s)", s.window_s),
        &[
            "rank",
            "instances>",
            "last in>",
            "mean late>",
            "mean wait>",
            "busbw/peers>",
            "on",
        ],
    );
    for r in s.slow_ranks.iter().take(5) {
        let ratio = r.busbw_ratio.map_or_else(
            || "-".to_string(),
            |v| format!("{v:.2}{}", if r.flagged { " SLOW" } else { "" }),
        );
        t.row(vec![
            rank_name(r.rank, &r.host, r.pid, r.cuda_dev),
            r.instances.to_string(),
            format!("{:.0}%", 100.0 * r.last_share),
            ns(r.mean_lateness_ns),
            r.mean_wait_ns.map_or_else(|| "-".to_string(), ns),
            ratio,
            r.comm.clone().unwrap_or_default(),
        ]);
    }
    t
}

/// `HH:MM:SS` UTC of a Unix time.
fn clock_of(unix_s: f64) -> String {
    let s = unix_s as u64 % 86_400;
    format!("{:02}:{:02}:{:02} UTC", s / 3600, (s / 60) % 60, s % 60)
}
