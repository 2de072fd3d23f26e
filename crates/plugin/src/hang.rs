//! In-flight dumps: `commlens-hang` JSON version 1 (`docs/hang-dump.md`), one
//! file per rank, i.e. per device this process drives:
//! `$COMMLENS_PLUGIN_DIR/commlens-hang-<host>-<pid>-dev<N>.json` (`h<K>` when
//! the device is unknown: the K-th handle of each communicator). Written by
//! hand (the plugin has no dependencies), to a hidden temporary file renamed
//! into place, so a reader never sees half a dump.
//!
//! Triggers: the signal ([`crate::signal`]) and the timeout, both polled by
//! the background writer ([`poll`]), and `commlens_profiler_dump_inflight()`
//! ([`dump`] with reason `request`). Every trigger dumps every device of the
//! process. A timeout dump marks what it covered, so a stall that goes on does
//! not dump again on the timeout ([`crate::inflight::overdue`]).
//!
//! `global_rank` is the rank in the world communicator: the live communicator
//! whose size is `$WORLD_SIZE` when that is set, else the largest one (the
//! first initialized among equals); else `$RANK` when the process drives one
//! device; else null. Extra keys readers ignore: `writer`, `cuda_dev`,
//! `forgotten_open` per communicator, `nccl_seq` per operation.

use crate::config::{config, output_dir};
use crate::inflight::{self, Op, Snapshot};
use crate::session::{self, lock, log, LOG_WARN, REG};
use crate::{signal, sys};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Serializes dumps (writer thread and requests).
static DUMPING: Mutex<()> = Mutex::new(());
const LOG_INFO: std::ffi::c_int = 3;

/// Called by the background writer at every wake-up: services the signal and the timeout.
pub fn poll() {
    let timeout = config().hang_timeout_ns;
    let reason = if signal::take_request() {
        "signal"
    } else if timeout > 0 && inflight::overdue(sys::mono_ns(), timeout) {
        "timeout"
    } else {
        return;
    };
    // Failures are logged by `dump`; the writer goes on.
    let _ = dump(reason);
}

/// Writes every device's dump now. Returns the number of files written.
pub fn dump(reason: &str) -> Result<usize, String> {
    let _one = lock(&DUMPING);
    let Some(offset) = session::epoch_offset() else {
        return Ok(0);
    };
    if session::forked() {
        return Ok(0);
    }
    // Only timeout dumps cover their stall: after an early signal or request the
    // timeout still writes a fresher dump of it.
    let snaps = inflight::snapshot(reason == "timeout");
    if snaps.is_empty() {
        return Ok(0);
    }
    let ranks = build(&snaps, offset, sys::real_ns() as i64, reason, &|k| std::env::var(k).ok());
    let dir = output_dir();
    let (host, pid) = (sys::hostname(), std::process::id());
    let result =
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display())).and_then(|_| {
            for (key, rank) in &ranks {
                let name = format!("commlens-hang-{host}-{pid}-{key}.json");
                let (tmp, path) = (dir.join(format!(".{name}.tmp")), dir.join(&name));
                std::fs::write(&tmp, render(rank))
                    .and_then(|_| std::fs::rename(&tmp, &path))
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            }
            Ok(ranks.len())
        });
    if result.as_ref().is_ok_and(|n| *n > 0) {
        use crate::metrics::{DUMPS_REQUEST, DUMPS_SIGNAL, DUMPS_TIMEOUT, LAST_DUMP_NS};
        let counter = match reason {
            "timeout" => &DUMPS_TIMEOUT,
            "signal" => &DUMPS_SIGNAL,
            _ => &DUMPS_REQUEST,
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        LAST_DUMP_NS.store(sys::real_ns(), std::sync::atomic::Ordering::Relaxed);
    }
    let logfn = lock(&REG).logfn;
    match &result {
        Ok(n) => log(
            logfn,
            LOG_INFO,
            &format!("commlens profiler plugin: wrote {n} in-flight dump(s) ({reason}) to {}", dir.display()),
        ),
        Err(e) => log(logfn, LOG_WARN, &format!("commlens profiler plugin: in-flight dump failed: {e}")),
    }
    result
}

/// One rank's dump, ready to render.
#[derive(Debug, Clone, PartialEq)]
pub struct RankDump {
    pub host: String,
    pub pid: u32,
    pub global_rank: Option<u32>,
    pub time_ns: i64,
    pub reason: String,
    pub cuda_dev: Option<i32>,
    pub comms: Vec<CommDump>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CommDump {
    pub comm_hash: u64,
    pub nranks: u32,
    pub rank: u32,
    pub desc: String,
    pub forgotten_open: u64,
    pub past: Vec<OpDump>,
    pub current: Vec<OpDump>,
    pub pending: Vec<OpDump>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct OpDump {
    pub seq: u64,
    pub nccl_seq: Option<u64>,
    pub op: String,
    pub bytes: u64,
    pub peer: Option<u32>,
    pub enqueue_ns: Option<i64>,
    pub start_ns: Option<i64>,
    pub end_ns: Option<i64>,
    pub progress: Option<(u64, u64)>,
}

/// Bytes per element of NCCL's datatype names (0: unknown).
pub fn dtype_size(name: &str) -> u64 {
    match name {
        "ncclInt8" | "ncclChar" | "ncclUint8" | "ncclFloat8e4m3" | "ncclFloat8e5m2" => 1,
        "ncclFloat16" | "ncclHalf" | "ncclBfloat16" => 2,
        "ncclInt32" | "ncclInt" | "ncclUint32" | "ncclFloat32" | "ncclFloat" => 4,
        "ncclInt64" | "ncclUint64" | "ncclFloat64" | "ncclDouble" => 8,
        _ => 0,
    }
}

fn rooted(func: &str) -> bool {
    matches!(func, "Broadcast" | "Reduce" | "Gather" | "Scatter")
}

/// Groups the handles by device and turns them into dumps, keyed by file-name suffix.
pub fn build(
    snaps: &[Snapshot],
    offset: i64,
    now: i64,
    reason: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, RankDump)> {
    // Device of each handle; without one, the K-th handle of each communicator is on device K.
    let mut nth: BTreeMap<u64, u32> = BTreeMap::new();
    let mut groups: BTreeMap<(bool, i64), Vec<&Snapshot>> = BTreeMap::new();
    for s in snaps {
        let key = match s.dev {
            Some(d) => (false, d as i64),
            None => {
                let k = nth.entry(s.comm_hash).or_default();
                *k += 1;
                (true, *k as i64 - 1)
            }
        };
        groups.entry(key).or_default().push(s);
    }
    let world_size = env("WORLD_SIZE").and_then(|v| v.trim().parse::<i32>().ok());
    let biggest = snaps.iter().map(|s| s.nranks).max().unwrap_or(0);
    let world = snaps.iter().find(|s| s.nranks == world_size.unwrap_or(biggest)).map(|s| s.comm_hash);
    let env_rank = env("RANK").and_then(|v| v.trim().parse::<u32>().ok()).filter(|_| groups.len() == 1);
    let epoch = |t: u64| (t != 0).then(|| (t as i64).wrapping_add(offset));
    session::with_strings(|text| {
        groups
            .iter()
            .map(|(&(unknown, d), members)| {
                let global = members
                    .iter()
                    .find(|s| Some(s.comm_hash) == world)
                    .and_then(|s| u32::try_from(s.rank).ok())
                    .or(env_rank);
                let op = |o: &Op, snap: &Snapshot, running: bool| {
                    let func = text(o.func);
                    let channels = o.ch_total.max(o.ch_started) as u64;
                    let progress = if snap.proxy_steps && o.steps_total > 0 {
                        Some((o.steps_posted.min(o.steps_total) as u64, o.steps_total as u64))
                    } else {
                        (channels > 0).then_some((o.ch_stopped as u64, channels))
                    };
                    OpDump {
                        seq: o.seq,
                        nccl_seq: o.nccl_seq,
                        bytes: o.count.saturating_mul(dtype_size(&text(o.dtype))),
                        peer: u32::try_from(o.peer).ok().filter(|_| o.p2p || rooted(&func)),
                        op: if func.is_empty() { "Unknown".into() } else { func },
                        enqueue_ns: epoch(o.enqueue),
                        start_ns: epoch(o.start),
                        end_ns: epoch(o.end),
                        progress: progress.filter(|_| running),
                    }
                };
                let comms = members
                    .iter()
                    .map(|s| CommDump {
                        comm_hash: s.comm_hash,
                        nranks: s.nranks.max(0) as u32,
                        rank: s.rank.max(0) as u32,
                        desc: s.name.clone(),
                        forgotten_open: s.forgotten,
                        past: s.past.iter().map(|o| op(o, s, false)).collect(),
                        current: s.open.iter().filter(|o| o.start != 0).map(|o| op(o, s, true)).collect(),
                        pending: s.open.iter().filter(|o| o.start == 0).map(|o| op(o, s, false)).collect(),
                    })
                    .collect();
                let key = if unknown { format!("h{d}") } else { format!("dev{d}") };
                let dump = RankDump {
                    host: sys::hostname(),
                    pid: std::process::id(),
                    global_rank: global,
                    time_ns: now,
                    reason: reason.to_string(),
                    cuda_dev: (!unknown).then_some(d as i32),
                    comms,
                };
                (key, dump)
            })
            .collect()
    })
}

/// A JSON string literal.
pub fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "null".into(), |v| v.to_string())
}

fn render_op(out: &mut String, o: &OpDump) {
    let _ = write!(out, "{{\"seq\": {}, \"op\": ", o.seq);
    json_str(out, &o.op);
    let _ = write!(out, ", \"bytes\": {}", o.bytes);
    if let Some(p) = o.peer {
        let _ = write!(out, ", \"peer\": {p}");
    }
    for (k, v) in [("enqueue_ns", o.enqueue_ns), ("start_ns", o.start_ns), ("end_ns", o.end_ns)] {
        if let Some(v) = v {
            let _ = write!(out, ", \"{k}\": {v}");
        }
    }
    if let Some((d, t)) = o.progress {
        let _ = write!(out, ", \"progress_done\": {d}, \"progress_total\": {t}");
    }
    if let Some(s) = o.nccl_seq {
        let _ = write!(out, ", \"nccl_seq\": {s}");
    }
    out.push('}');
}

/// The dump as JSON text (the `docs/hang-dump.md` schema, one operation per line).
pub fn render(r: &RankDump) -> String {
    let mut out = String::with_capacity(4096);
    out.push_str("{\n  \"format\": \"commlens-hang\", \"version\": 1,\n  \"host\": ");
    json_str(&mut out, &r.host);
    let _ = writeln!(out, ", \"pid\": {}, \"global_rank\": {},", r.pid, opt(r.global_rank));
    let _ = write!(out, "  \"time_ns\": {}, \"reason\": ", r.time_ns);
    json_str(&mut out, &r.reason);
    let _ = write!(out, ", \"cuda_dev\": {}, \"writer\": ", opt(r.cuda_dev));
    json_str(&mut out, &format!("commlens-plugin/{}", env!("CARGO_PKG_VERSION")));
    out.push_str(",\n  \"comms\": [");
    for (i, c) in r.comms.iter().enumerate() {
        out.push_str(if i == 0 { "\n    {" } else { ",\n    {" });
        let _ =
            write!(out, "\"comm_hash\": {}, \"nranks\": {}, \"rank\": {}, \"desc\": ", c.comm_hash, c.nranks, c.rank);
        json_str(&mut out, &c.desc);
        let _ = write!(out, ", \"forgotten_open\": {},", c.forgotten_open);
        for (j, (name, ops)) in [("past", &c.past), ("current", &c.current), ("pending", &c.pending)].iter().enumerate()
        {
            let _ = write!(out, "\n      \"{name}\": [");
            for (k, o) in ops.iter().enumerate() {
                out.push_str(if k == 0 { "\n        " } else { ",\n        " });
                render_op(&mut out, o);
            }
            out.push_str(if ops.is_empty() { "]" } else { "\n      ]" });
            out.push_str(if j < 2 { "," } else { "" });
        }
        out.push_str("\n    }");
    }
    out.push_str(if r.comms.is_empty() { "]\n}\n" } else { "\n  ]\n}\n" });
    out
}

#[cfg(test)]
#[path = "hang_tests.rs"]
mod tests;
