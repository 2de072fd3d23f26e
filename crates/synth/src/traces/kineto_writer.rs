//! Writer of PyTorch profiler (Kineto) Chrome traces, one per rank, optionally gzipped.
//!
//! Owns the event vocabulary of PyTorch 2.x traces as the real files under
//! `shared/data/real/kineto` show it: top-level `schemaVersion`, `deviceProperties`,
//! `distributedInfo` (`rank`, `world_size`, `nccl_version`, `pg_config`) and
//! `baseTimeNanoseconds`; `ProfilerStep#N` ranges; `record_param_comms` CPU ops with the
//! collective metadata (`Collective name`, `In/Out msg nelems`, `dtype`, `Group size`,
//! `Process Group Name/Description/Ranks`, `Rank`, `Seq`) and the `nccl:*` annotation nested
//! in them; `cudaLaunchKernel` runtime events (`correlation`, `cbid` 211) inside the op that
//! launched the kernel; `ac2g` flow pairs; kernels on `pid` = device, `tid` = stream with
//! `correlation`, the launching op's `External id` (newer Kineto) and, for NCCL kernels, the
//! same collective metadata. Timestamps are µs (3 decimals) after `baseTimeNanoseconds`.
//! Events are written one at a time; the document is never held in memory.

use super::{CpuOp, GeneratedTraces, PgInfo, RankCapture};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// `ts`/`dur` in µs with ns precision.
fn us(ns: i64) -> Value {
    json!(ns as f64 / 1000.0)
}

struct Out<W: Write> {
    w: W,
    first: bool,
}

impl<W: Write> Out<W> {
    fn event(&mut self, v: &Value) -> std::io::Result<()> {
        if !self.first {
            self.w.write_all(b",\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut self.w, v).map_err(std::io::Error::other)
    }
}

fn ranks_text(ranks: &[usize]) -> String {
    format!("[{}]", ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", "))
}

pub(super) fn write(t: &GeneratedTraces, dir: &Path, gzip: bool) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut paths = Vec::new();
    for (r, c) in t.ranks.iter().enumerate() {
        let ext = if gzip { "pt.trace.json.gz" } else { "pt.trace.json" };
        let path = dir.join(format!("rank{r}_{}_{}.{ext}", c.host, c.pid));
        let file = std::io::BufWriter::new(std::fs::File::create(&path)?);
        if gzip {
            let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            write_rank(t, r, &mut gz)?;
            gz.finish()?.flush()?;
        } else {
            let mut f = file;
            write_rank(t, r, &mut f)?;
            f.flush()?;
        }
        paths.push(path);
    }
    Ok(paths)
}

/// Process groups this rank belongs to (the default group first).
fn groups(t: &GeneratedTraces, r: usize) -> Vec<(usize, &PgInfo)> {
    t.pgs.iter().enumerate().filter(|(i, g)| *i == 0 || g.ranks.contains(&r)).collect()
}

fn collective_args(t: &GeneratedTraces, r: usize, op: &CpuOp) -> serde_json::Map<String, Value> {
    let pg = &t.pgs[op.comm];
    let mut a = serde_json::Map::new();
    a.insert("Collective name".into(), json!(op.collective.unwrap_or("")));
    a.insert("In msg nelems".into(), json!(op.in_nelems));
    a.insert("Out msg nelems".into(), json!(op.out_nelems));
    a.insert("Group size".into(), json!(pg.ranks.len()));
    a.insert("dtype".into(), json!(op.dtype));
    a.insert("In split size".into(), json!("[]"));
    a.insert("Out split size".into(), json!("[]"));
    a.insert("Process Group Name".into(), json!(pg.name));
    a.insert("Process Group Description".into(), json!(pg.desc));
    a.insert("Process Group Ranks".into(), json!(ranks_text(&pg.ranks)));
    a.insert("Rank".into(), json!(r));
    a.insert("Seq".into(), json!(op.seq));
    a
}

fn write_rank<W: Write>(t: &GeneratedTraces, r: usize, w: &mut W) -> std::io::Result<()> {
    let c: &RankCapture = &t.ranks[r];
    let base = t.start_epoch_ns;
    let rel = |ns: i64| us(ns - base);
    let pg_config: Vec<Value> = groups(t, r)
        .into_iter()
        .map(|(i, g)| {
            let ranks: Vec<usize> = if i == 0 { (0..t.ranks.len()).collect() } else { g.ranks.clone() };
            json!({"pg_name": g.name, "pg_desc": g.desc, "backend_config": "cuda:nccl",
                   "pg_size": ranks.len(), "ranks": ranks})
        })
        .collect();
    let head = json!({
        "schemaVersion": 1,
        "deviceProperties": [{"id": c.dev, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_899_345_920u64,
            "computeMajor": 8, "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
            "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 108}],
        "distributedInfo": {"backend": "nccl", "rank": r, "world_size": t.ranks.len(), "pg_count": pg_config.len(),
            "pg_config": pg_config, "nccl_version": t.nccl_version},
    });
    // The head's fields, then the events array, then the trailing metadata.
    let mut s = serde_json::to_string(&head).map_err(std::io::Error::other)?;
    s.pop();
    w.write_all(s.as_bytes())?;
    w.write_all(b",\n\"traceEvents\": [\n")?;
    let mut out = Out { w, first: true };
    let (pid, tid) = (c.pid, c.pid);
    out.event(&json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}}))?;
    out.event(&json!({"ph": "M", "name": "process_name", "pid": c.dev, "tid": 0, "args": {"name": format!("GPU {}", c.dev)}}))?;
    let mut ext = 1u64;
    for (i, &(s, e)) in t.truth.iterations[r].iter().enumerate() {
        out.event(&json!({"ph": "X", "cat": "user_annotation", "name": format!("ProfilerStep#{i}"), "pid": pid,
            "tid": tid, "ts": rel(s), "dur": us(e - s), "args": {"External id": ext}}))?;
        ext += 1;
    }
    // External ids of the collective ops, by kernel index.
    let mut kernel_ext = vec![None; c.kernels.len()];
    for op in &c.cpu_ops {
        let (op_ext, ann_ext) = (ext, ext + 1);
        ext += 2;
        let mut args = collective_args(t, r, op);
        args.insert("External id".into(), json!(op_ext));
        out.event(&json!({"ph": "X", "cat": "cpu_op", "name": op.name, "pid": pid, "tid": tid,
            "ts": rel(op.start_ns), "dur": us(op.end_ns - op.start_ns), "args": args}))?;
        out.event(&json!({"ph": "X", "cat": "user_annotation", "name": op.annotation.unwrap_or("nccl:unknown"),
            "pid": pid, "tid": tid, "ts": rel(op.start_ns + 400), "dur": us(op.end_ns - op.start_ns - 800),
            "args": {"External id": ann_ext}}))?;
        if let Some(k) = op.kernel {
            kernel_ext[k] = Some((op_ext, op));
        }
    }
    for (k, kern) in c.kernels.iter().enumerate() {
        let corr = kern.correlation;
        let (k_ext, op) = match kernel_ext[k] {
            Some((e, op)) => (e, Some(op)),
            None => (corr, None),
        };
        out.event(&json!({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
            "ts": rel(kern.launch_ns), "dur": us(kern.launch_end_ns - kern.launch_ns),
            "args": {"External id": k_ext, "cbid": 211, "correlation": corr}}))?;
        out.event(&json!({"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": rel(kern.launch_ns),
            "cat": "ac2g", "name": "ac2g"}))?;
        out.event(&json!({"ph": "f", "id": corr, "pid": c.dev, "tid": kern.stream, "ts": rel(kern.start_ns),
            "cat": "ac2g", "name": "ac2g", "bp": "e"}))?;
        let threads = kern.block[0] * kern.block[1] * kern.block[2];
        let blocks = kern.grid[0] * kern.grid[1] * kern.grid[2];
        let mut args = op.map(|op| collective_args(t, r, op)).unwrap_or_default();
        for (key, v) in [
            ("External id", json!(k_ext)),
            ("queued", json!(0)),
            ("device", json!(c.dev)),
            ("context", json!(1)),
            ("stream", json!(kern.stream)),
            ("correlation", json!(corr)),
            ("registers per thread", json!(kern.registers)),
            ("shared memory", json!(kern.static_smem + kern.dynamic_smem)),
            ("blocks per SM", json!(blocks as f64 / 108.0)),
            ("warps per SM", json!(blocks as f64 * threads as f64 / 32.0 / 108.0)),
            ("grid", json!(kern.grid)),
            ("block", json!(kern.block)),
            ("est. achieved occupancy %", json!(0)),
        ] {
            args.insert(key.into(), v);
        }
        out.event(&json!({"ph": "X", "cat": "kernel", "name": kern.name, "pid": c.dev, "tid": kern.stream,
            "ts": rel(kern.start_ns), "dur": us(kern.end_ns - kern.start_ns), "args": args}))?;
    }
    let w = out.w;
    w.write_all(b"\n],\n")?;
    // A node clock that reads ahead records a later base for the same relative times.
    let recorded_base = base + t.clock_error_ns(r);
    let tail = json!({"traceName": format!("rank{r}"), "displayTimeUnit": "ms", "baseTimeNanoseconds": recorded_base});
    let s = serde_json::to_string(&tail).map_err(std::io::Error::other)?;
    w.write_all(&s.as_bytes()[1..])?;
    w.write_all(b"\n")
}
