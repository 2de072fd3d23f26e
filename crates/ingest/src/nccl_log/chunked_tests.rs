//! Tests of [`super`]: the chunk plan (its steps near the end, its last range).

use super::{plan, step, tail_chunk};
use crate::nccl_log::ReadOptions;

/// The plan covers the file with ranges that start at line starts, and
/// its last range is never a sliver: a remainder under half the tail
/// chunk joins the range before it (less at most a line, as boundaries
/// move to the next line start). Files of 100-byte lines whose lengths
/// put the last nominal boundary at every distance from the end.
#[test]
fn plans_end_without_a_sliver() {
    for_plans("sliver", 90..200, |n, bytes, ranges| {
        assert_eq!(ranges.first().unwrap().0, 0);
        assert_eq!(ranges.last().unwrap().1, bytes.len() as u64);
        for w in ranges.windows(2) {
            assert_eq!(w[0].1, w[1].0, "{n}: contiguous");
            assert_eq!(bytes[w[1].0 as usize - 1], b'\n', "{n}: a line start");
        }
        let (a, b) = *ranges.last().unwrap();
        assert!(b - a + LINE > tail_chunk(SIZE) / 2, "{n} lines: last range {}", b - a);
    });
}

/// The chunk size of [`for_plans`], and the length of its files' lines.
const SIZE: u64 = 4096;
const LINE: u64 = 100;

/// The plan (chunks of [`SIZE`]) of a file of `n` lines of [`LINE`] bytes,
/// for each `n` of `counts`, given to `check` with the file's bytes.
fn for_plans(tag: &str, counts: impl IntoIterator<Item = usize>, mut check: impl FnMut(usize, &[u8], &[(u64, u64)])) {
    let dir = std::env::temp_dir().join(format!("commlens-plan-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("lines.log");
    let opts = ReadOptions { chunk_bytes: Some(SIZE), ..ReadOptions::default() };
    let line = [&[b'x'; LINE as usize - 1][..], b"\n"].concat();
    for n in counts {
        let bytes = line.repeat(n);
        std::fs::write(&path, &bytes).unwrap();
        check(n, &bytes, &plan(&path, &opts).expect("chunked"));
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Near the end the steps shrink, never below a quarter of the size (or
/// the tail chunk) nor above the size, and a file of any length is
/// covered in finitely many steps.
#[test]
fn steps_shrink_near_the_end_within_bounds() {
    for size in [1u64, 7, 64 << 10, 8 << 20, 32 << 20] {
        for workers in [1u64, 2, 3, 16] {
            for len in [0u64, 1, size, 3 * size + 1, 50 * size + 17] {
                let (mut at, mut last, mut n) = (0u64, u64::MAX, 0u64);
                let lo = super::tail_chunk(size);
                while at < len {
                    let s = step(size, len - at, workers);
                    assert!(s >= lo && s <= size.max(1), "{size} {workers} {len}: {s}");
                    assert!(s <= last, "{size} {workers} {len}: steps grow");
                    last = s;
                    at += s;
                    n += 1;
                }
                assert!(n <= len / size.max(1) + 4 * 2 * workers + 8, "{size} {workers} {len}: {n} steps");
            }
        }
    }
}

/// The first range (parsed without speculation) is up to two steps long,
/// never less than the second, and never more than half a worker's share
/// (`len / (2 * workers)`, or one step where that is larger), less at most
/// a line.
#[test]
fn first_range_is_larger_but_bounded() {
    let workers = rayon::current_num_threads().max(1) as u64;
    let mut doubled = false;
    for_plans("first", [90, 130, 200, 400, 1000, 5000], |n, bytes, ranges| {
        let len = bytes.len() as u64;
        let first = ranges[0].1 - ranges[0].0;
        let one = step(SIZE, len, workers);
        let most = (2 * one).min(len / (2 * workers)).max(one);
        assert!(first >= one && first < most + LINE, "{n} lines: first {first}, step {one}, most {most}");
        assert!(first + LINE > ranges[1].1 - ranges[1].0, "{n} lines: first shorter than the second");
        doubled |= first >= 2 * one;
    });
    assert!(doubled, "no file got a first range of two steps");
}
