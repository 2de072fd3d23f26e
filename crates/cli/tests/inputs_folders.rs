//! Inputs as users hand them over (issue 14, items 1–4 and 11), through the
//! binary: folders that hold logs beside notes, topology XML and exporter
//! logs; folders of NVIDIA plugin outputs; trace archives (.tar.gz, .zip);
//! nccl-tests outputs of any job size, also cut by call-site marks, on every
//! command that reads runs; and the job line (NCCL version, nodes) of `stats`
//! and `topo`. Every input is generated or hand-made here.

mod common;

use common::{commlens_cmd, run_limited, temp_dir, Run};
use std::io::Write;
use std::path::{Path, PathBuf};

fn run(args: &[&str]) -> Run {
    run_limited(commlens_cmd(args), 120, &args.join(" "))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A generated 4-rank run's NCCL logs in `dir`.
fn logs(dir: &Path) {
    commlens_synth::write_to_dir(&commlens_synth::generate(&commlens_synth::RunConfig::default()), dir).unwrap();
}

const TOPO_XML: &str = r#"<system version="1">
  <cpu numaid="0" affinity="ffffffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:17:00.0" class="0x030200" vendor="0x10de" device="0x20b0" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="80" rank="0" gdr="1"/>
    </pci>
  </cpu>
</system>
"#;

/// Files that are no input of the table commands.
fn clutter(dir: &Path) {
    std::fs::write(dir.join("notes.txt"), "run 3: lr 1e-4, 4 GPUs\n").unwrap();
    std::fs::write(dir.join("dcgm-exporter.log"), "level=info msg=\"Starting dcgm-exporter\"\nlevel=info msg=\"scraping\"\n").unwrap();
    std::fs::write(dir.join("nccl_topo.xml"), TOPO_XML).unwrap();
}

fn assert_skipped(label: &str, r: &Run) {
    assert_eq!(r.code, 0, "{label}: {}{}", r.out, r.err);
    for f in ["notes.txt", "dcgm-exporter.log"] {
        assert!(r.err.contains("skipped") && r.err.contains(f), "{label}: no note on {f}: {}", r.err);
    }
}

#[test]
fn a_folder_of_logs_and_other_files_is_read_on_every_command() {
    let root = temp_dir("inputs", "clutter");
    let dir = root.join("run");
    logs(&dir);
    clutter(&dir);
    let out = root.join("out");
    let r = run(&["stats", s(&dir)]);
    assert_skipped("stats", &r);
    assert!(r.out.contains("Ranks") && r.out.contains("job: NCCL"), "{}", r.out);
    let r = run(&["report", s(&dir), "-o", s(&out.join("r.html"))]);
    assert_skipped("report", &r);
    assert!(std::fs::read_to_string(out.join("r.html")).unwrap().contains("</html>"));
    let r = run(&["trace", s(&dir), "-o", s(&out.join("trace"))]);
    assert_skipped("trace", &r);
    let r = run(&["export", "--parquet", s(&out.join("t.parquet")), s(&dir)]);
    assert_skipped("export", &r);
    assert!(std::fs::metadata(out.join("t.parquet")).unwrap().len() > 0);
    let r = run(&["diff", s(&dir), s(&dir)]);
    assert_skipped("diff", &r);
    assert!(!r.out.is_empty());
    // topo reads the XML beside the logs and passes over the rest.
    let r = run(&["topo", s(&dir)]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.err.contains("notes.txt") && r.err.contains("nccl_topo.xml: NCCL topology XML"), "{}", r.err);
    let r = run(&["simulate", s(&dir), "--kind", "run", "-o", s(&out.join("sim"))]);
    assert!(r.err.contains("skipped") && r.err.contains("notes.txt"), "simulate: {}", r.err);
    // Kernel traces beside the same clutter (the kind sniffing used to stop at the first unknown file).
    let kdir = root.join("kineto");
    let g = commlens_synth::generate_traces(&commlens_synth::RunConfig::default(), &commlens_synth::TraceConfig::default())
        .unwrap();
    g.write_kineto(&kdir, true).unwrap();
    clutter(&kdir);
    for cmd in ["stats", "report"] {
        let mut args = vec![cmd, s(&kdir)];
        let html = out.join("k.html");
        if cmd == "report" {
            args.extend(["-o", s(&html)]);
        }
        let r = run(&args);
        assert_skipped(cmd, &r);
        assert!(r.err.contains("nccl_topo.xml: an NCCL topology XML"), "{}", r.err);
    }
    // Logs and kernel traces together: refused, every file named with its kind.
    let r = run(&["stats", s(&dir), s(&kdir)]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("Kineto trace (kernel traces)") && r.err.contains("NCCL debug log (NCCL debug logs)"), "{}", r.err);
    assert!(r.err.contains("commlens fuse"), "{}", r.err);
    std::fs::remove_dir_all(&root).unwrap();
}

const INSPECTOR: &str = r#"{"header":{"id":"0xabc","comm_name":"tp","rank":RANK,"n_ranks":2,"nnodes":1},"metadata":{"inspector_output_format_version":"v4.2","dump_timestamp_us":5000,"hostname":"h","pid":PID},"coll_perf":{"coll":"AllReduce","coll_algo":"RING","coll_proto":"SIMPLE","coll_sn":1,"coll_msg_size_bytes":1048576,"coll_exec_time_us":100,"coll_timing_source":"kernel_gpu"}}
{"header":{"id":"0xabc","comm_name":"tp","rank":RANK,"n_ranks":2,"nnodes":1},"metadata":{"dump_timestamp_us":6000,"hostname":"h","pid":PID},"coll_perf":{"coll":"AllReduce","coll_sn":2,"coll_msg_size_bytes":1048576,"coll_exec_time_us":90,"coll_timing_source":"kernel_gpu"}}
"#;

const EXAMPLE: &str = r#"[
{"name": "AllGather", "cat": "COLL", "ph": "b", "id": 0, "pid": 9, "tid": 1, "ts": 10.0, "args": {"SeqNum": 1, "CommHash": 77, "Rank": 0, "Count": 256, "Datatype": "ncclFloat32", "nChannels": 2}},
{"name": "AllGather", "cat": "COLL", "ph": "e", "id": 0, "pid": 9, "tid": 1, "ts": 20.0},
{}]"#;

#[test]
fn folders_of_plugin_outputs_read_each_file_by_its_kind() {
    let root = temp_dir("inputs", "plugins");
    let dir = root.join("inspector");
    std::fs::create_dir_all(dir.join("host-h")).unwrap();
    for (rank, pid) in [(0, 100), (1, 101)] {
        let body = INSPECTOR.replace("RANK", &rank.to_string()).replace("PID", &pid.to_string());
        std::fs::write(dir.join("host-h").join(format!("h-pid{pid}.log")), body).unwrap();
    }
    std::fs::write(dir.join("inspector-exporter.log"), "exporter: listening on :9400\nexporter: wrote 2 files\n").unwrap();
    let r = run(&["stats", s(&dir), "--format", "json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let v: serde_json::Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["stats"]["total_ops"], 4, "{}", r.out);
    assert!(r.err.contains("skipped") && r.err.contains("inspector-exporter.log"), "{}", r.err);
    // An example-plugin dump of another process joins them; each file is read by its own reader.
    std::fs::write(dir.join("example-rank0.json"), EXAMPLE).unwrap();
    let r = run(&["stats", s(&dir), "--format", "json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let v: serde_json::Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["stats"]["total_ops"], 5, "{}", r.out);
    assert!(r.err.contains("nccl-inspector") && r.err.contains("nccl-example-plugin"), "{}", r.err);
    let r = run(&["report", s(&dir), "-o", s(&root.join("r.html"))]);
    assert_eq!(r.code, 0, "{}", r.err);
    std::fs::remove_dir_all(&root).unwrap();
}

/// A ustar header for a regular member.
fn tar_header(name: &str, size: usize) -> [u8; 512] {
    commlens_archive::tar::ustar_header(name, size, b'0')
}

/// The files of `dir` (flat) as `(prefix/name, bytes)`.
fn members(dir: &Path, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v.into_iter().map(|p| (format!("{prefix}/{}", p.file_name().unwrap().to_str().unwrap()), std::fs::read(&p).unwrap())).collect()
}

#[test]
fn trace_and_log_archives_read_as_if_unpacked() {
    let root = temp_dir("inputs", "archives");
    let plain = root.join("plain");
    logs(&plain);
    std::fs::write(plain.join("README.txt"), "how this run was made\n").unwrap();
    let files = members(&plain, "run_0042");
    // .tar.gz
    let tgz = root.join("run.tar.gz");
    let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(&tgz).unwrap(), flate2::Compression::fast());
    for (name, data) in &files {
        enc.write_all(&tar_header(name, data.len())).unwrap();
        enc.write_all(data).unwrap();
        enc.write_all(&vec![0u8; (512 - data.len() % 512) % 512]).unwrap();
    }
    enc.write_all(&[0u8; 1024]).unwrap();
    enc.finish().unwrap();
    // .zip (stored)
    let zpath = root.join("run.zip");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&zpath).unwrap());
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, data) in &files {
        z.start_file(name.as_str(), opts).unwrap();
        z.write_all(data).unwrap();
    }
    z.finish().unwrap();
    let want = run(&["stats", s(&plain), "--format", "json"]);
    assert_eq!(want.code, 0, "{}", want.err);
    let want: serde_json::Value = serde_json::from_str(&want.out).unwrap();
    for a in [&tgz, &zpath] {
        let r = run(&["stats", s(a), "--format", "json"]);
        assert_eq!(r.code, 0, "{}: {}", a.display(), r.err);
        assert!(r.err.contains("archive") && r.err.contains("unpacked"), "{}", r.err);
        let got: serde_json::Value = serde_json::from_str(&r.out).unwrap();
        assert_eq!(got["stats"]["total_ops"], want["stats"]["total_ops"], "{}", a.display());
        assert_eq!(got["stats"]["total_bytes"], want["stats"]["total_bytes"]);
        let r = run(&["report", s(a), "-o", s(&root.join("a.html"))]);
        assert_eq!(r.code, 0, "{}", r.err);
    }
    let r = run(&["diff", s(&tgz), s(&zpath)]);
    assert_eq!(r.code, 0, "the same run in two archives: {}{}", r.out, r.err);
    // An archive found inside a folder is passed over with a note saying how to read it.
    std::fs::copy(&tgz, plain.join("old-run.tgz")).unwrap();
    let r = run(&["stats", s(&plain)]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.err.contains("old-run.tgz: a gzipped tar archive inside a folder"), "{}", r.err);
    std::fs::remove_dir_all(&root).unwrap();
}

/// An `srun -l` labelled nccl-tests output of `ranks` ranks, 4 per node,
/// one `# Rank` line per rank before the table; busbw scaled by `speed`.
fn bench_output(ranks: u32, speed: f64) -> String {
    let mut o = String::new();
    o += "0: # nThread 1 nGpus 1 minBytes 1024 maxBytes 1048576 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n0: #\n0: # Using devices\n";
    for r in 0..ranks {
        o += &format!(
            "0: #  Rank {r:4} Group  0 Pid {:6} on nid{:06} device  {} [0x{:02x}] NVIDIA H100 80GB HBM3\n",
            40000 + r,
            r / 4,
            r % 4,
            r % 4 + 1
        );
    }
    o += "0: #\n0: #                                                              out-of-place                       in-place          \n";
    o += "0: #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
    o += "0: #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";
    for (i, bytes) in [1024u64, 4096, 16384, 65536, 262144, 1048576].iter().enumerate() {
        let bus = speed * (i + 1) as f64;
        let alg = bus / (2.0 * (ranks - 1) as f64 / ranks as f64);
        let t = *bytes as f64 / (alg * 1e3);
        o += &format!(
            "0: {bytes:12} {:13}     float     sum      -1 {t:8.2} {alg:7.2} {bus:7.2}      0 {t:8.2} {alg:7.2} {bus:7.2}      0\n",
            bytes / 4
        );
    }
    o += "0: # Out of bounds values : 0 OK\n0: # Avg bus bandwidth    : 10.5\n0: #\n";
    o
}

#[test]
fn nccl_tests_outputs_of_any_job_size_on_every_command() {
    let root = temp_dir("inputs", "bench");
    let a = root.join("all_reduce_perf-2048.out");
    let b = root.join("all_reduce_perf-2048-slow.out");
    std::fs::write(&a, bench_output(2048, 20.0)).unwrap();
    std::fs::write(&b, bench_output(2048, 10.0)).unwrap();
    assert!(std::fs::metadata(&a).unwrap().len() > 128 << 10, "the rank lines alone exceed the old 64 KiB look");
    let r = run(&["stats", s(&a)]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("AllReduce") && r.out.contains("2048") && r.out.contains("120.00"), "{}", r.out);
    assert!(r.out.contains("512 nodes"), "{}", r.out);
    let html = root.join("r.html");
    let r = run(&["report", s(&a), "-o", s(&html)]);
    assert_eq!(r.code, 0, "{}", r.err);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("nccl-tests") && page.contains("<svg"), "no benchmark chart");
    let r = run(&["topo", s(&a)]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("512 nodes") && r.out.contains("nid000511") && r.out.contains("NVIDIA H100 80GB HBM3"), "{}", r.out);
    // Two benchmark runs compared per collective and size: half the bandwidth regresses.
    let r = run(&["diff", s(&a), s(&b)]);
    assert_eq!(r.code, 1, "{}{}", r.out, r.err);
    assert!(r.out.contains("nccl-tests AllReduce") && r.out.contains("(1.0 MiB) busbw") && r.out.contains("REGRESSED"), "{}", r.out);
    let r = run(&["diff", s(&a), s(&a)]);
    assert_eq!(r.code, 0, "{}{}", r.out, r.err);
    // Beside notes in a folder: still the tables, the note said.
    std::fs::write(root.join("notes.txt"), "benchmarks of the new fabric\n").unwrap();
    std::fs::remove_file(&b).unwrap();
    std::fs::remove_file(&html).unwrap();
    let r = run(&["stats", s(&root)]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("AllReduce") && r.err.contains("notes.txt"), "{}{}", r.out, r.err);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_table_cut_by_call_site_marks_is_read() {
    let root = temp_dir("inputs", "callsite");
    let f = root.join("all_gather.log");
    let mut o = String::from("main(), all_gather.cu:90, # nThread 1 nGpus 1 minBytes 64 maxBytes 1024 step: 2(factor)\n");
    o += "main(), common.cu:900, # Using devices\n";
    o += "main(), common.cu:905, #  Rank  0 Group  0 Pid   1234 on     gdr114 device  0 [0x1a] Tesla V100-SXM2-16GB\n";
    o += "main(), common.cu:905, #  Rank  1 Group  0 Pid   1235 on     gdr116 device  0 [0x1a] Tesla V100-SXM2-16GB\n";
    o += "run(), common.cu:1084, #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
    for (bytes, t) in [(64u64, 477.8), (128, 475.5), (256, 476.5)] {
        o += &format!(
            "TimeTest(), common.cu:610, {bytes:12} {:13}     float    none      -1BenchTime(), common.cu:561, {t:9.1}    0.00    0.00      0BenchTime(), common.cu:561, {t:9.1}    0.00    0.00      0TimeTest(), common.cu:613, \n",
            bytes / 8
        );
    }
    o += "main(), common.cu:1200, # Avg bus bandwidth    : 0.001\n";
    std::fs::write(&f, o).unwrap();
    for format in ["table", "csv", "json"] {
        let r = run(&["stats", s(&f), "--format", format]);
        assert_eq!(r.code, 0, "{format}: {}", r.err);
        assert!(r.out.contains("477.8") && r.out.contains("476.5"), "{format}: {}", r.out);
        assert!(r.out.contains("gdr114"), "{format}: the job's hosts: {}", r.out);
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn stats_and_topo_say_the_nccl_version_and_nodes_in_every_format() {
    let root = temp_dir("inputs", "job");
    logs(&root);
    let r = run(&["stats", s(&root)]);
    assert_eq!(r.code, 0, "{}", r.err);
    let line = r.out.lines().find(|l| l.starts_with("job: ")).unwrap_or_else(|| panic!("{}", r.out));
    assert!(line.contains("NCCL 2.") && line.contains("node"), "{line}");
    let r = run(&["stats", s(&root), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&r.out).unwrap();
    let nodes = v["job"]["nodes"].as_u64().unwrap();
    assert!(nodes >= 1 && v["job"]["nccl_versions"][0].as_str().unwrap().starts_with("2."), "{}", v["job"]);
    let r = run(&["stats", s(&root), "--format", "csv"]);
    let header = r.out.lines().next().unwrap();
    assert!(header.ends_with("nccl_version,job_nodes"), "{header}");
    assert!(r.out.lines().nth(1).unwrap().ends_with(&format!(",{nodes}")), "{}", r.out);
    for format in ["table", "csv", "json"] {
        let r = run(&["topo", s(&root), "--format", format]);
        if r.code != 0 {
            assert!(r.err.contains("no topology dump"), "{}", r.err);
            continue;
        }
        assert!(r.out.contains("job") && r.out.contains("2."), "{format}: {}", r.out);
    }
    std::fs::remove_dir_all(&root).unwrap();
}
