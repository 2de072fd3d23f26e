//! The report's data built through the library alone, without the binary:
//! a generated Megatron run (written as Kineto traces and read back by the
//! reader real traces take), a real NCCL log and a real nccl-tests output go
//! through `commlens_ingest` and `commlens_report::build` /
//! `benchmark_report`, and each section is checked against what the inputs
//! hold, counted independently of the report code.

use commlens_core::OpKind;
use commlens_export::report::{write_html, Report};
use commlens_ingest::load_any;
use commlens_ingest::nccl_log::ReadOptions;
use commlens_report::enrich::{iteration_ranges, Enrichment};
use commlens_synth::{generate_traces, RunConfig, TraceConfig};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn figure<'r>(r: &'r Report, label: &str) -> &'r str {
    &r.summary.iter().find(|f| f.label == label).unwrap_or_else(|| panic!("no summary figure {label:?}")).value
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commlens-report-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_generated_run_read_from_kineto_traces_gives_every_section() {
    // hidden 2048: every stage has several gradient buckets, which run under backward compute.
    let cfg = RunConfig { seed: 11, iterations: 6, hidden: 2048, gpus_per_node: 4, ..RunConfig::megatron(2, 2, 2) };
    let g = generate_traces(&cfg, &TraceConfig::default()).unwrap();
    let dir = tmpdir("kineto");
    let files = g.write_kineto(&dir, false).unwrap();
    let loaded = load_any(&files, &ReadOptions::default()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let (t, traces) = (&loaded.table, &loaded.traces);
    let world = g.run.truth.world_size;
    assert_eq!(world, 8);

    let labels = vec!["generated megatron 2×2×2".to_string()];
    let r = commlens_report::build(t, traces, &labels, None, &[], Some("library test")).unwrap();
    assert_eq!(r.title, "library test");
    assert_eq!(r.inputs, labels);
    assert_eq!(figure(&r, "ranks"), world.to_string());
    assert_eq!(figure(&r, "operations"), t.n_ops().to_string());

    // Operation mix: counts and bytes per kind, counted here straight over the table.
    let mut want: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for op in t.ops() {
        let e = want.entry(op.kind.name()).or_default();
        e.0 += 1;
        e.1 += op.bytes;
    }
    let mix = r.op_mix.as_ref().expect("op mix");
    let got: BTreeMap<&str, (u64, u64)> = mix.rows.iter().map(|x| (x.kind.as_str(), (x.count, x.bytes))).collect();
    assert_eq!(got, want);
    assert!(want.contains_key(OpKind::AllReduce.name()), "a Megatron run all-reduces gradients");

    // Bandwidth: every timed operation is one point of its kind's series.
    let bw = r.bandwidth.as_ref().expect("kernel traces give GPU spans");
    let timed = t.ops().filter(|o| o.gpu.as_ref().is_some_and(|g| g.end_ns > g.start_ns) && o.bytes > 0).count();
    let points: usize = bw.series.iter().map(|s| s.points.len()).sum();
    assert_eq!(points, timed);
    assert!(bw.series.iter().all(|s| s.points.iter().all(|p| p.busbw_gb_s > 0.0 && p.busbw_gb_s.is_finite())));

    // Iterations from the traces' ProfilerStep ranges: one column per generated iteration.
    assert_eq!(iteration_ranges(traces).len(), cfg.iterations);
    let heat = r.iterations.as_ref().expect("iterations");
    assert_eq!(heat.cols.len(), cfg.iterations);
    assert_eq!(heat.rows.len(), world);

    // Overlap: every rank has compute kernels; DP gradient reductions overlap backward compute
    // (`overlap_grad_reduce` is on by default) for as long as the generator says.
    let ov = r.overlap.as_ref().expect("overlap");
    assert_eq!(ov.rows.len(), world);
    for (rank, truth_ns) in g.truth.overlap_ns.iter().enumerate() {
        let row = ov.rows.iter().find(|x| x.rank == format!("rank {rank}")).unwrap_or_else(|| panic!("rank {rank}"));
        assert!(*truth_ns > 0, "rank {rank}");
        eprintln!("rank {rank}: overlap {} ns (generator: {truth_ns}), communication {} ns", row.overlapped_ns, row.comm_ns);
        assert!(row.overlapped_ns <= row.comm_ns);
        assert_eq!(row.overlapped_ns as i64, *truth_ns, "rank {rank}");
    }

    let st = r.stragglers.as_ref().expect("stragglers");
    assert!(st.instances > 0);
    assert_eq!(st.rows.len(), world);

    // The classification table names every logical communicator once, with its size.
    let class = r.tables.iter().find(|x| x.title == "Communicators and their parallelism").unwrap();
    assert_eq!(class.rows.len(), t.logical.len());
    for l in &t.logical {
        assert!(class.rows.iter().any(|row| row[0] == l.name && row[1] == l.nranks.to_string()), "{}", l.name);
    }

    // Per-operation figures for the trace and column sinks agree with the report's points.
    let e = Enrichment::new(t);
    let mut from_sinks = 0;
    for (d, ops) in t.per_rank.iter().enumerate() {
        let ops = &ops.to_vec();
        for i in 0..ops.len() {
            from_sinks += usize::from(e.op_figures(d, i).busbw_gb_s.is_some());
        }
    }
    assert_eq!(from_sinks, points);

    // And the page itself.
    let mut html = Vec::new();
    write_html(&r, &mut html).unwrap();
    let html = String::from_utf8(html).unwrap();
    assert!(html.contains("library test"));
    assert!(html.contains("Communicators and their parallelism"));
}

#[test]
fn a_real_interleaved_log_gives_its_golden_operations() {
    let Some(dir) = commlens_testdata::real_dir("nccl-logs") else { return };
    let path = dir.join("sugarlxn-nccl_test-nccl_trace-4xRTX4090-PCIe-2.28.9.log");
    let loaded = load_any(std::slice::from_ref(&path), &ReadOptions::default()).unwrap();
    let labels = vec![path.display().to_string()];
    let r = commlens_report::build(&loaded.table, &loaded.traces, &labels, None, &[], None).unwrap();
    // Golden records of the four processes (crates/ingest/tests/real_logs.rs, each bounded
    // there by the log's own segment counts): 355 + 1918 + 4773 + 2706.
    assert_eq!(figure(&r, "ranks"), "4");
    assert_eq!(figure(&r, "hosts"), "1");
    assert_eq!(figure(&r, "operations"), "9752");
    let mix = r.op_mix.as_ref().unwrap();
    assert!(mix.rows.iter().all(|x| x.kind == "Send" || x.kind == "Recv"), "{:?}", mix.rows);
    assert_eq!(mix.rows.iter().map(|x| x.count).sum::<u64>(), 9752);
    // A log has CPU timestamps but no GPU spans: no bandwidth chart.
    assert!(r.bandwidth.is_none());
}

#[test]
fn a_real_nccl_tests_output_is_a_report_and_a_baseline() {
    let Some(dir) = commlens_testdata::real_dir("nccl-tests") else { return };
    let path = dir.join("boeschf-alps-all_reduce_perf-16xGH200-4node-nccl2.23.4-aws-ofi-1.13.0.out");
    let file = commlens_ingest::nccl_tests::read_nccl_tests(&path).unwrap();
    let files = vec![file];
    let r = commlens_report::benchmark_report(&files, &[path.display().to_string()], None);
    let runs = &files[0].runs;
    assert_eq!(figure(&r, "benchmark runs"), runs.len().to_string());
    let peak = runs.iter().flat_map(|x| &x.rows).map(|x| x.out_of_place.busbw_gb_s.max(x.in_place.busbw_gb_s)).fold(0.0, f64::max);
    assert!(peak > 0.0);
    assert_eq!(figure(&r, "peak bus bandwidth"), format!("{peak:.2} GB/s"));
    let bw = r.bandwidth.as_ref().unwrap();
    assert_eq!(bw.series.len(), runs.len());
    assert!(bw.series.iter().all(|s| s.kind.starts_with("AllReduce")));

    // As a baseline: one curve per run, read at a measured size it gives that size's best busbw.
    let baselines = commlens_report::baseline::from_files(&files);
    assert_eq!(baselines.len(), runs.len());
    let row = runs[0].rows.iter().rev().find(|x| x.bytes > 0).unwrap();
    let best = row.out_of_place.busbw_gb_s.max(row.in_place.busbw_gb_s);
    assert_eq!(baselines[0].at(row.bytes), Some(best));
    let pick = commlens_report::baseline::pick(&baselines, OpKind::AllReduce, Some(16)).unwrap();
    assert_eq!(pick.kind, OpKind::AllReduce);
}
