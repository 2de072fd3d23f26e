//! The 8-rank DLRM PyTorch ET with the same job's Kineto traces: compute times attached, and
//! the measured step (ProfilerStep duration, NCCL kernels with collective and bytes) per rank.

use commlens_core::OpKind;
use commlens_workload::chakra::{attach_kineto_times, load_path, read_measured};
use commlens_workload::Work;
use std::collections::BTreeMap;

#[test]
fn dlrm_et_with_kineto() {
    let Some(wl) = commlens_testdata::real_dir("workloads") else {
        return;
    };
    let Some(kin) = commlens_testdata::real_dir("kineto") else {
        return;
    };
    let et = wl.join("param-dlrm_pytorch_et-8rank.tar.gz");
    let kt = kin.join("param-dlrm_kineto-8rank-V100-worker0-7.tar.gz");
    let mut w = load_path(&et).unwrap_or_else(|e| panic!("{e}"));
    let report = attach_kineto_times(&mut w, &[&kt]).unwrap_or_else(|e| panic!("{e}"));
    for n in &report.notes {
        println!("note: {n}");
    }
    assert_eq!(report.measured.len(), 8);
    assert_eq!(report.ranks.len(), 8);
    for (link, m) in report.ranks.iter().zip(&report.measured) {
        let r = link.rank;
        let p = w.program_of(r);
        let mut comm: BTreeMap<String, (usize, u64)> = BTreeMap::new();
        for t in &p.tasks {
            if let Work::Coll(c) = &t.work {
                let e = comm.entry(c.kind.to_string()).or_default();
                e.0 += 1;
                e.1 += c.bytes();
            }
        }
        let compute_us: f64 = p
            .tasks
            .iter()
            .filter_map(|t| match &t.work {
                Work::Compute(c) => c.time_us,
                _ => None,
            })
            .sum();
        let mut mk: BTreeMap<String, usize> = BTreeMap::new();
        for c in &m.colls {
            *mk.entry(format!("{:?}", c.kind)).or_default() += 1;
        }
        println!(
            "rank {r}: {} tasks; comm {:?}; compute {} tasks, {} linked, {} fallback, {} unmeasured, {:.0} us (trace compute {:.0} us in {} activities); step {:?} us; nccl kernels {:?}",
            p.tasks.len(), comm, link.compute_tasks, link.linked, link.fallback, link.unmeasured, compute_us, m.compute_us, m.compute_activities,
            m.step_us(), mk
        );
        // Measured NCCL kernels: one per collective of the ET, same kinds, bytes stated.
        let et_colls: Vec<(OpKind, u64)> = p
            .tasks
            .iter()
            .filter_map(|t| match &t.work {
                Work::Coll(c) => Some((c.kind, c.bytes())),
                _ => None,
            })
            .collect();
        assert_eq!(m.colls.len(), et_colls.len(), "rank {r}");
        let mut a: Vec<_> = m
            .colls
            .iter()
            .map(|c| (c.kind.unwrap(), c.bytes.unwrap()))
            .collect();
        let mut b = et_colls.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b, "rank {r}: measured vs ET collectives");
        assert!(m.step_us().is_some_and(|s| s > 1000.0));
        assert!(
            link.linked * 10 >= link.compute_tasks * 8,
            "rank {r}: {link:?}"
        );
        // The attached compute time cannot exceed what the trace measured.
        assert!(
            compute_us <= m.compute_us * 1.0001 + 1.0,
            "rank {r}: {compute_us} > {}",
            m.compute_us
        );
    }
    assert!(report.measured_tasks() > 0);
    // read_measured alone gives the same.
    let m2 = read_measured(&[&kt]).unwrap();
    assert_eq!(m2, report.measured);
}
