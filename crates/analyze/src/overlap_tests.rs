//! Constructed intervals with exact expected figures, and a brute-force
//! cross-check of the sweep on random intervals (unit time steps).

use super::*;

fn sp(start: i64, end: i64, class: Class) -> Span {
    Span { start_ns: start, end_ns: end, name: class.index() as u32, class }
}

const COMM: Class = Class::Communication;
const COMP: Class = Class::Computation;
const MEM: Class = Class::Memory;

#[test]
fn partial_overlap() {
    let r = comm_comp_overlap([sp(0, 100, COMM), sp(50, 150, COMP)], None);
    assert_eq!((r.comm_ns, r.compute_ns, r.overlap_ns, r.exposed_comm_ns), (100, 100, 50, 50));
    assert_eq!(r.overlap_pct, Some(50.0));
    assert_eq!((r.first_ns, r.span_ns, r.idle_ns, r.non_compute_ns), (0, 150, 0, 50));
    assert_eq!(r.kernel_type_breakdown(), vec![
        ("COMPUTATION".to_string(), 50),
        ("COMMUNICATION".to_string(), 50),
        ("COMPUTATION overlapping COMMUNICATION".to_string(), 50),
    ]);
}

#[test]
fn nested_compute_inside_comm_and_comm_inside_compute() {
    let r = comm_comp_overlap([sp(0, 100, COMM), sp(20, 30, COMP)], None);
    assert_eq!((r.overlap_ns, r.exposed_comm_ns), (10, 90));
    assert_eq!(r.overlap_pct, Some(10.0));
    let r = comm_comp_overlap([sp(20, 30, COMM), sp(0, 100, COMP)], None);
    assert_eq!((r.comm_ns, r.overlap_ns, r.exposed_comm_ns), (10, 10, 0));
    assert_eq!(r.overlap_pct, Some(100.0));
}

#[test]
fn compute_on_several_streams_is_merged() {
    // Two compute streams overlap each other: their union [0, 70) covers comm [10, 60).
    let r = comm_comp_overlap([sp(0, 40, COMP), sp(30, 70, COMP), sp(10, 60, COMM)], None);
    assert_eq!((r.comm_ns, r.compute_ns, r.overlap_ns), (50, 70, 50));
    assert_eq!(r.by_class[COMP.index()], Totals { count: 2, sum_ns: 80, max_ns: 40 });
}

#[test]
fn comm_overlapping_comm_counts_once() {
    let r = comm_comp_overlap([sp(0, 50, COMM), sp(25, 75, COMM), sp(60, 100, COMP)], None);
    assert_eq!((r.comm_ns, r.overlap_ns, r.exposed_comm_ns), (75, 15, 60));
    assert_eq!(r.overlap_pct, Some(20.0));
    assert_eq!(r.by_class[COMM.index()].sum_ns, 100, "summed durations are not merged");
}

#[test]
fn touching_intervals_and_idle_gaps() {
    // comp [0,10) touches comm [10,20): no overlap; a gap [20,30) before the last comp.
    let r = comm_comp_overlap([sp(0, 10, COMP), sp(10, 20, COMM), sp(30, 40, COMP)], None);
    assert_eq!((r.overlap_ns, r.span_ns, r.idle_ns, r.compute_ns, r.non_compute_ns), (0, 40, 10, 20, 10));
    assert_eq!(r.by_set_ns[0], 10);
}

#[test]
fn memory_is_neither_side_of_the_overlap() {
    let r = comm_comp_overlap([sp(0, 100, COMM), sp(0, 100, MEM), sp(90, 100, COMP)], None);
    assert_eq!((r.comm_ns, r.overlap_ns), (100, 10));
    let b = r.kernel_type_breakdown();
    assert_eq!(b, vec![
        ("COMMUNICATION overlapping MEMORY".to_string(), 90),
        ("COMPUTATION overlapping COMMUNICATION overlapping MEMORY".to_string(), 10),
    ]);
}

#[test]
fn other_activity_fills_the_span_only() {
    let r = comm_comp_overlap([sp(0, 10, COMM), sp(10, 20, Class::Other), sp(20, 30, COMP)], None);
    assert_eq!((r.span_ns, r.idle_ns, r.compute_ns, r.non_compute_ns), (30, 0, 10, 20));
    assert_eq!(r.kernel_type_breakdown().iter().map(|x| x.1).sum::<i64>(), 20);
}

#[test]
fn iterations_split_exposed_communication() {
    // comm [40,60) crosses the boundary at 50; compute [0,45) hides 5 ns of it.
    let iters = [(0, 50), (50, 100)];
    let r = comm_comp_overlap([sp(40, 60, COMM), sp(0, 45, COMP), sp(90, 95, COMP)], Some(&iters));
    let i = &r.iterations;
    assert_eq!((i[0].comm_ns, i[0].overlap_ns, i[0].exposed_comm_ns, i[0].compute_ns), (10, 5, 5, 45));
    assert_eq!((i[1].comm_ns, i[1].overlap_ns, i[1].exposed_comm_ns, i[1].compute_ns), (10, 0, 10, 5));
    // Idle inside iteration 2: [60,90); after the last end (95) nothing counts.
    assert_eq!((i[0].idle_ns, i[1].idle_ns), (0, 30));
    assert_eq!(i[0].exposed_comm_ns + i[1].exposed_comm_ns, r.exposed_comm_ns);
}

#[test]
fn iterations_outside_and_overlapping_each_other() {
    let iters = [(-100, -50), (0, 100), (25, 75), (200, 300)];
    let r = comm_comp_overlap([sp(0, 100, COMM), sp(50, 100, COMP)], Some(&iters));
    let got: Vec<(i64, i64)> = r.iterations.iter().map(|i| (i.comm_ns, i.overlap_ns)).collect();
    assert_eq!(got, vec![(0, 0), (100, 50), (50, 25), (0, 0)]);
}

#[test]
fn no_communication_and_odd_spans() {
    let r = comm_comp_overlap([sp(0, 10, COMP), sp(5, 5, COMM), sp(9, 3, COMM)], None);
    assert_eq!(r.overlap_pct, None, "zero-length comm is no communication time");
    assert_eq!(r.negative_spans, 1);
    assert_eq!(r.by_class[COMM.index()].count, 1);
    let empty = comm_comp_overlap(std::iter::empty(), Some(&[(0, 10)]));
    assert_eq!((empty.span_ns, empty.comm_ns, empty.iterations[0].comm_ns), (0, 0, 0));
}

#[test]
fn by_name_sums_longest_first() {
    let s = |a, b, name| Span { start_ns: a, end_ns: b, name, class: COMP };
    let r = comm_comp_overlap([s(0, 10, 3), s(10, 40, 1), s(40, 45, 3), s(50, 51, 0)], None);
    let got: Vec<(u32, u64, i64)> = r.by_name.iter().map(|n| (n.name, n.totals.count, n.totals.sum_ns)).collect();
    assert_eq!(got, vec![(1, 1, 30), (3, 2, 15), (0, 1, 1)]);
}

/// Random intervals on a small grid, figures checked against counting every unit of time.
#[test]
fn sweep_matches_brute_force() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for _ in 0..300 {
        let n = 1 + rnd(12);
        let spans: Vec<Span> = (0..n)
            .map(|_| {
                let a = rnd(60) as i64;
                let class = Class::ALL[rnd(4) as usize];
                sp(a, a + rnd(25) as i64, class)
            })
            .collect();
        let iters = [(rnd(40) as i64, 40 + rnd(50) as i64)];
        let r = comm_comp_overlap(spans.iter().copied(), Some(&iters));
        let (mut comm, mut comp, mut both, mut idle, mut it_exposed) = (0, 0, 0, 0, 0);
        let lo = spans.iter().filter(|s| s.end_ns > s.start_ns).map(|s| s.start_ns).min();
        let hi = spans.iter().filter(|s| s.end_ns > s.start_ns).map(|s| s.end_ns).max();
        for t in 0..100i64 {
            let on = |c: Class| spans.iter().any(|s| s.class == c && s.start_ns <= t && t < s.end_ns);
            let any = spans.iter().any(|s| s.start_ns <= t && t < s.end_ns);
            let (m, p) = (on(COMM), on(COMP));
            comm += m as i64;
            comp += p as i64;
            both += (m && p) as i64;
            if lo.is_some_and(|lo| lo <= t) && hi.is_some_and(|hi| t < hi) && !any {
                idle += 1;
            }
            if iters[0].0 <= t && t < iters[0].1 && m && !p {
                it_exposed += 1;
            }
        }
        assert_eq!((r.comm_ns, r.compute_ns, r.overlap_ns, r.idle_ns), (comm, comp, both, idle), "{spans:?}");
        assert_eq!(r.iterations[0].exposed_comm_ns, it_exposed, "{spans:?} {iters:?}");
        assert_eq!(r.by_set_ns.iter().sum::<i64>(), r.span_ns);
    }
}
