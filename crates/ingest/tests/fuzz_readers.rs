//! Fuzzing that stays: every reader of this crate over mutated real files
//! (`../shared/data/real`) and generated ones (`commlens-synth`, hand-built
//! per the format documents). The property: on any input the reader returns
//! Ok or Err within a bounded time, never panics and never allocates
//! without bound. Cases per reader: `COMMLENS_FUZZ_CASES` (default 200),
//! time budget per reader: `COMMLENS_FUZZ_SECONDS`; see `fuzz_support`.

mod fuzz_support;

use commlens_ingest::json_util::PluginOptions;
use commlens_ingest::kineto::{read_kineto, to_op_table, TraceOptions};
use commlens_ingest::nccl_log::{read_stream, ReadOptions};
use commlens_ingest::plugin_out::{decode, trace_to_table};
use commlens_ingest::{example_plugin, hang_dump, inspector, nccl_tests, nsys, topo_xml};
use commlens_synth::{generate, generate_traces, RunConfig, TraceConfig};
use fuzz_support::{mutate, run, scratch, window, Kind, Rng, Seed};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use commlens_testdata::clp::{chunk, comm, rec, start, string, HDR};

counting_allocator!();

/// Largest slice of a seed one case reads (bigger seeds are windowed).
const WINDOW: usize = 256 << 10;

/// Files of `../shared/data/real/<sub>` whose names satisfy `keep`, sorted;
/// empty (with the testdata crate's skip note) when the folder is absent.
pub fn real_seeds(sub: &str, keep: impl Fn(&str) -> bool) -> Vec<Seed> {
    let Some(dir) = commlens_testdata::real_dir(sub) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read shared data folder")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file() && keep(&p.file_name().unwrap().to_string_lossy()))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| Seed::new(format!("{sub}/{}", p.file_name().unwrap().to_string_lossy()), std::fs::read(&p).unwrap()))
        .collect()
}

/// Writes `data` to a fresh file under the reader's scratch folder, runs `f`
/// on it and removes it.
fn via_file<T>(dir: &Path, ext: &str, data: &[u8], f: impl FnOnce(&Path) -> T) -> T {
    static N: AtomicUsize = AtomicUsize::new(0);
    let p = dir.join(format!("case-{}.{ext}", N.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&p, data).expect("write case");
    let out = f(&p);
    let _ = std::fs::remove_file(&p);
    out
}

/// Picks a seed, windows it and mutates it.
fn mutated(rng: &mut Rng, seeds: &[Seed], kind: Kind, i: usize, n: usize) -> Vec<u8> {
    let s = rng.pick(seeds);
    let w = window(rng, &s.data, WINDOW);
    mutate(rng, &w, kind, i, n)
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(data).read_to_end(&mut out).expect("gunzip seed");
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A valid, smaller Chrome trace: the first 1,500 events of `traceEvents`
/// (NCCL kernels kept first), the rest of the document unchanged.
fn shrink_trace(json: &[u8]) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(json) else { return json.to_vec() };
    if let Some(ev) = v.get_mut("traceEvents").and_then(|e| e.as_array_mut()) {
        let is_nccl = |e: &serde_json::Value| e.to_string().contains("nccl");
        let mut kept: Vec<serde_json::Value> = ev.iter().filter(|e| is_nccl(e)).take(500).cloned().collect();
        kept.extend(ev.iter().filter(|e| !is_nccl(e)).take(1000).cloned());
        *ev = kept;
    }
    serde_json::to_vec(&v).unwrap()
}

const TEXT: Kind = Kind { text: true, json: false, keep_head: 0 };
const JSON: Kind = Kind { text: true, json: true, keep_head: 0 };

fn synth_logs() -> Vec<Seed> {
    let run = generate(&RunConfig::default());
    run.files.iter().take(3).map(|f| Seed::new(format!("synth/{}", f.name), f.contents.as_bytes())).collect()
}

#[test]
fn fuzz_nccl_log() {
    let mut seeds = real_seeds("nccl-logs", |n| n.ends_with(".log"));
    seeds.extend(synth_logs());
    run(
        "nccl_log",
        |rng, i, n| mutated(rng, &seeds, TEXT, i, n),
        |d| {
            let mut ops = 0u64;
            read_stream(Path::new("fuzz.log"), d, &ReadOptions::default(), &mut |_| ops += 1).is_ok()
        },
    );
}

#[test]
fn fuzz_nccl_tests() {
    let mut seeds = real_seeds("nccl-tests", |_| true);
    seeds.extend(real_seeds("nccl-logs", |n| n.ends_with(".log")));
    seeds.push(Seed::new(
        "hand",
        "#  Rank  0 Group  0 Pid  1 on host device  0 [0x00] NVIDIA H100\n\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n\
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n\
           8             2     float     sum      -1    10.00    0.00    0.00      0    10.00    0.00    0.00      0\n\
     1048576        262144     float     sum      -1    50.00   20.97   39.32      0    50.00   20.97   39.32      0\n\
# Avg bus bandwidth    : 19.66\n",
    ));
    let dir = scratch("nccl-tests");
    run(
        "nccl_tests",
        |rng, i, n| mutated(rng, &seeds, TEXT, i, n),
        move |d| via_file(&dir, "out", d, |p| nccl_tests::read_nccl_tests(p).is_ok()),
    );
}

#[test]
fn fuzz_kineto() {
    let mut seeds: Vec<Seed> = real_seeds("kineto", |n| n.ends_with(".json.gz"))
        .into_iter()
        .map(|s| Seed::new(s.name, shrink_trace(&gunzip(&s.data))))
        .collect();
    let dir = scratch("kineto-seeds");
    let traces = generate_traces(&RunConfig::default(), &TraceConfig::default()).expect("valid config");
    for p in traces.write_kineto(&dir, false).unwrap().into_iter().take(2) {
        seeds.push(Seed::new(p.display().to_string(), std::fs::read(&p).unwrap()));
    }
    run(
        "kineto",
        |rng, i, n| {
            let d = mutated(rng, &seeds, JSON, i, n);
            // Some cases go in gzip, some of those with the compressed bytes damaged too.
            match rng.below(10) {
                0 => gzip(&d),
                1 => mutate(rng, &gzip(&d), Kind { keep_head: 10, ..Kind::default() }, i, n),
                _ => d,
            }
        },
        |d| match read_kineto(d, "fuzz.json", &TraceOptions::default()) {
            Ok(t) => {
                let _ = to_op_table(&[t]);
                true
            }
            Err(_) => false,
        },
    );
}

/// Changes rows of a copy of an SQLite seed: values set to NULL, huge,
/// negative, text or blobs; rows deleted; tables emptied or dropped.
fn mutate_rows(rng: &mut Rng, seed: &[u8], path: &Path) -> Vec<u8> {
    std::fs::write(path, seed).unwrap();
    {
        let db = rusqlite::Connection::open(path).unwrap();
        let tables: Vec<String> = db
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for _ in 0..1 + rng.below(4) {
            let Some(t) = (!tables.is_empty()).then(|| rng.pick(&tables).clone()) else { break };
            let cols: Vec<String> = db
                .prepare(&format!("PRAGMA table_info(\"{t}\")"))
                .unwrap()
                .query_map([], |r| r.get(1))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let m = 1 + rng.below(5);
            let r = rng.below(m);
            let sel = format!("rowid % {m} = {r}");
            let sql = match rng.below(10) {
                0 => format!("DELETE FROM \"{t}\" WHERE {sel}"),
                1 => format!("DELETE FROM \"{t}\""),
                2 => format!("DROP TABLE \"{t}\""),
                _ if cols.is_empty() => continue,
                k => {
                    let c = rng.pick(&cols);
                    let v = match k {
                        3 => "NULL".to_string(),
                        4 => "9223372036854775807".into(),
                        5 => "-9223372036854775808".into(),
                        6 => "-1".into(),
                        7 => "'ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)\u{1}\u{ff}'".into(),
                        8 => "x'00ff00ff'".into(),
                        _ => "1e308".into(),
                    };
                    format!("UPDATE \"{t}\" SET \"{c}\" = {v} WHERE {sel}")
                }
            };
            // Constraint failures (NOT NULL, types) are fine: that change is just not made.
            let _ = db.execute_batch(&sql);
        }
    }
    let out = std::fs::read(path).unwrap();
    let _ = std::fs::remove_file(path);
    out
}

#[test]
fn fuzz_nsys() {
    let mut seeds = real_seeds("nsys", |n| n.ends_with(".sqlite"));
    let dir = scratch("nsys-seeds");
    let traces = generate_traces(&RunConfig::default(), &TraceConfig::default()).expect("valid config");
    for p in traces.write_nsys(&dir, &TraceConfig::default()).unwrap() {
        seeds.push(Seed::new(p.display().to_string(), std::fs::read(&p).unwrap()));
    }
    let work = scratch("nsys");
    let rows = dir.join("rows.sqlite");
    run(
        "nsys",
        |rng, i, n| {
            let s = rng.pick(&seeds);
            if rng.chance(50) {
                mutate_rows(rng, &s.data, &rows)
            } else {
                // The SQLite header (100 bytes) is kept in half of these.
                mutate(rng, &s.data, Kind { keep_head: 100, ..Kind::default() }, i, n)
            }
        },
        move |d| {
            via_file(&work, "sqlite", d, |p| match nsys::load_nsys_with(p, &TraceOptions::default()) {
                Ok(t) => {
                    let _ = to_op_table(&[t]);
                    true
                }
                Err(_) => false,
            })
        },
    );
}

const INSPECTOR_LINE: &str = r#"{"header":{"id":"0x7f1a2b3c4d5e6f70","rank":0,"n_ranks":4,"nnodes":1},"metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"profiler_plugin","dump_timestamp_us":1700000000123456,"hostname":"node0","pid":1234},"coll_perf":{"coll":"AllReduce","coll_sn":5,"coll_msg_size_bytes":1048576,"coll_exec_time_us":120,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":8.7,"coll_busbw_gbs":13.1}}"#;

#[test]
fn fuzz_inspector() {
    let mut seeds =
        real_seeds("plugin-json", |n| n.ends_with(".jsonl") || n.ends_with(".json") || n.contains("exporter-output"));
    seeds.push(Seed::new("hand", format!("{INSPECTOR_LINE}\n{INSPECTOR_LINE}\n")));
    let dir = scratch("inspector");
    run(
        "inspector",
        |rng, i, n| mutated(rng, &seeds, JSON, i, n),
        move |d| via_file(&dir, "jsonl", d, |p| inspector::load_path(p, &PluginOptions::default()).is_ok()),
    );
}

#[test]
fn fuzz_example_plugin() {
    let mut seeds = real_seeds("plugin-json", |n| n.ends_with(".txt"));
    seeds.push(Seed::new(
        "hand",
        r#"[
{"name": "AllReduce", "cat": "COLL", "ph": "b", "id": 0, "pid": 5, "tid": 1, "ts": 10.5, "args": {"SeqNum": 7, "CommHash": 99, "Rank": 0, "Count": 8, "Datatype": "ncclFloat32", "Algorithm": "RING", "Protocol": "LL128", "nChannels": 4}},
{"name": "KernelCh", "cat": "GPU", "ph": "b", "id": 1, "pid": 5, "tid": 1, "ts": 11.0, "args": {"Channel": 0, "StartGpuClk": 1000, "StopGpuClk": 2000}},
{"name": "KernelCh", "cat": "GPU", "ph": "e", "id": 1, "pid": 5, "tid": 1, "ts": 12.0},
{"name": "AllReduce", "cat": "COLL", "ph": "e", "id": 0, "pid": 5, "tid": 1, "ts": 13.0},
{}]"#,
    ));
    let dir = scratch("example-plugin");
    run(
        "example_plugin",
        |rng, i, n| mutated(rng, &seeds, JSON, i, n),
        move |d| via_file(&dir, "txt", d, |p| example_plugin::load_path(p, &PluginOptions::default()).is_ok()),
    );
}

// --- .clp files, built by hand per crates/plugin/FORMAT.md (records from commlens_testdata::clp).

/// A valid file of `ops` AllGathers (CollApi parent, Coll, two KernelCh each).
fn clp_file(ops: u64) -> Vec<u8> {
    let strings = [string(1, "AllGather"), string(2, "ncclFloat32"), string(3, "ncclInt8"), string(4, "RING")];
    let mut cold = strings.to_vec();
    cold.extend([
        comm(1, 0xc0, 1, 2, -1),
        comm(2, 0xc0, 0, 2, 0),
        rec(2, 0, &[&1u32.to_le_bytes(), &4242u32.to_le_bytes()]),
    ]);
    let mut f = HDR.to_vec();
    f.extend(chunk(0, &cold));
    for k in 0..ops {
        let (t0, gpu0, id) = (10_000 + k * 50_000, 900_000_000 + k * 50_000, 100 + k * 10);
        #[rustfmt::skip]
        let api = start(9, id, 0, 1 + (k % 2) as u32, t0, &[&1u32.to_le_bytes(), &100u64.to_le_bytes(), &2u32.to_le_bytes(),
            &0i32.to_le_bytes(), &0x77u64.to_le_bytes(), &[0], &0u64.to_le_bytes()]);
        #[rustfmt::skip]
        let coll = start(1, id + 1, id, 1 + (k % 2) as u32, t0 + 500, &[&k.to_le_bytes(), &1u32.to_le_bytes(), &1u64.to_le_bytes(),
            &2u64.to_le_bytes(), &400u64.to_le_bytes(), &0i32.to_le_bytes(), &3u32.to_le_bytes(), &[2, 8],
            &4u32.to_le_bytes(), &0u32.to_le_bytes(), &0u64.to_le_bytes(), &0u32.to_le_bytes(), &[0], &0u64.to_le_bytes()]);
        let k0 = start(6, id + 2, id + 1, 1, t0 + 2000, &[&[0], &gpu0.to_le_bytes()]);
        let k1 = start(6, id + 3, id + 1, 1, t0 + 2100, &[&[1], &(gpu0 + 50).to_le_bytes()]);
        let st = |i: u64, t: u64, g: u64| rec(7, 1, &[&i.to_le_bytes(), &t.to_le_bytes(), &22i32.to_le_bytes(), &g.to_le_bytes()]);
        let stops: Vec<Vec<u8>> =
            (0..4).map(|j| rec(6, 0, &[&(id + j).to_le_bytes(), &(t0 + 4000).to_le_bytes()])).collect();
        f.extend(chunk(1, &[api, coll, k0, k1, st(id + 2, t0 + 3000, gpu0 + 1000), st(id + 3, t0 + 3000, gpu0 + 2900)]));
        f.extend(chunk(2, &stops));
    }
    f.extend(chunk(0, &[rec(8, 0, &[&1u32.to_le_bytes(), &3u64.to_le_bytes()])]));
    f
}

#[test]
fn fuzz_plugin_clp() {
    let seeds = [Seed::new("one", clp_file(1)), Seed::new("many", clp_file(40))];
    run(
        "plugin_clp",
        |rng, i, n| mutated(rng, &seeds, Kind { keep_head: HDR.len(), ..Kind::default() }, i, n),
        |d| match decode(Path::new("fuzz.clp"), d) {
            Ok(mut t) => {
                let table = trace_to_table(&mut t);
                assert!(table.ops().all(|o| o.dev.ix() < table.devices.len()), "op on a device out of range");
                true
            }
            Err(_) => false,
        },
    );
}

fn hang_comm(hash: u64, nranks: u64, rank: u32) -> String {
    format!(
        r#"{{"comm_hash":{hash},"nranks":{nranks},"rank":{rank},"past":[{{"seq":2,"op":"AllReduce","bytes":1,"start_ns":1,"end_ns":2}}],"current":[{{"seq":3,"op":"AllReduce","bytes":1048576,"start_ns":1000000000,"progress_done":3,"progress_total":16}}],"pending":[{{"seq":4,"op":"AllGather","bytes":64,"enqueue_ns":5}}]}}"#
    )
}

#[test]
fn fuzz_hang_dump() {
    let dump = |rank: u32, comms: &[String]| {
        format!(
            r#"{{"format":"commlens-hang","version":1,"host":"n0","pid":{},"global_rank":{rank},"time_ns":100000000000,"reason":"timeout","comms":[{}]}}"#,
            100 + rank,
            comms.join(",")
        )
    };
    let seeds = [
        Seed::new("one", dump(0, &[hang_comm(42, 2, 0)])),
        Seed::new("many", dump(3, &(0..20).map(|c| hang_comm(c, 8, 3)).collect::<Vec<_>>())),
    ];
    let dir = scratch("hang");
    run(
        "hang_dump",
        |rng, i, n| mutated(rng, &seeds, JSON, i, n),
        move |d| via_file(&dir, "json", d, |p| hang_dump::read_dump(p).is_ok()),
    );
}

#[test]
fn fuzz_topo_xml() {
    let mut seeds = real_seeds("nccl-logs", |n| n.ends_with(".xml"));
    seeds.push(Seed::new(
        "hand",
        r#"<?xml version="1.0"?>
<!-- hand -->
<system version="1">
  <cpu numaid="0" affinity="ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:17:00.0" class="0x030200" vendor="0x10de" device="0x20b0" subsystem_vendor="0x10de" subsystem_device="0x134f" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="80" rank="0" gdr="1">
        <nvlink target="0000:65:00.0" count="12" tclass="0x030200"/>
      </gpu>
    </pci>
    <pci busid="0000:65:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="80" rank="1" gdr="1"/>
    </pci>
    <nic><net name="mlx5_0" dev="0" speed="100000" port="1" guid="0x1" maxconn="131072" gdr="1"/></nic>
  </cpu>
</system>
"#,
    ));
    let dir = scratch("topo-xml");
    run(
        "topo_xml",
        |rng, i, n| {
            let mut d = mutated(rng, &seeds, JSON, i, n);
            // XML's own deep nesting.
            if rng.chance(5) {
                let depth = 1 + rng.below(100_000);
                let at = rng.below(d.len() + 1);
                d.splice(at..at, b"<pci busid=\"0\">".repeat(depth));
            }
            d
        },
        move |d| via_file(&dir, "xml", d, |p| topo_xml::read_topo_xml(p).is_ok()),
    );
}

/// The seeds themselves read without trouble (so the mutations start from
/// inputs the readers accept).
#[test]
fn clp_seeds_decode() {
    for f in [clp_file(1), clp_file(40)] {
        let mut t = decode(Path::new("seed.clp"), &f).expect("seed decodes");
        assert!(trace_to_table(&mut t).ops().count() > 0);
    }
    let _ = PathBuf::new();
}
