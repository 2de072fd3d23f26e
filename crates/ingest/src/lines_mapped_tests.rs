//! Tests of [`super`]: the block scans (SSE2, AVX2, the out-of-line AVX2
//! loop) against the scalar reference.

use super::*;

#[test]
fn block_masks_match_a_plain_scan() {
    let mut s = [b'a'; 64];
    for i in [0, 1, 15, 16, 31, 32, 47, 48, 63] {
        s[i] = b'\n';
    }
    let want: u64 = [0, 1, 15, 16, 31, 32, 47, 48, 63].iter().map(|i| 1u64 << i).sum();
    assert_eq!(block_mask::<false>(&s), want);
    assert_eq!(block_mask::<false>(&s[..17]), want & 0x1_ffff);
    assert_eq!(block_mask::<false>(&[]), 0);
}

/// The SSE2 and AVX2 block scans against the scalar reference: a
/// newline alone and in every pair of positions, on backgrounds with
/// and without bytes near `\n` (`\x0b`, `\x8a`), and blocks of only
/// newlines.
#[test]
fn block_scans_match_the_scalar_reference() {
    let avx2 = cfg!(target_arch = "x86_64") && std::is_x86_feature_detected!("avx2");
    let check = |b: &[u8; 64]| {
        let want = newlines_scalar(b);
        assert_eq!(newlines64(b), want, "{b:?}");
        assert_eq!(block_mask::<false>(b), want, "{b:?}");
        if avx2 {
            assert_eq!(block_mask::<true>(b), want, "{b:?}");
        }
    };
    for bg in [b'a', 0x0b, 0x8a, 0x00] {
        let base = [bg; 64];
        check(&base);
        for i in 0..64 {
            for j in i..64 {
                let mut b = base;
                b[i] = b'\n';
                b[j] = b'\n';
                check(&b);
            }
        }
    }
    check(&[b'\n'; 64]);
}

/// `whole_blocks_avx2` against a scan of whole blocks by the scalar
/// reference: one newline at every position (and none) of every
/// length from 64 to 200, from every block start.
#[cfg(target_arch = "x86_64")]
#[test]
fn whole_blocks_match_the_scalar_scan() {
    if !std::is_x86_feature_detected!("avx2") {
        return;
    }
    for n in 64..=200 {
        for nl in (0..n).map(Some).chain([None]) {
            let mut d = vec![b'a'; n];
            if let Some(i) = nl {
                d[i] = b'\n';
            }
            for next in (0..=n - 64).step_by(64) {
                let mut at = next;
                let want = loop {
                    if at + 64 > n {
                        break (at, 0);
                    }
                    let m = newlines_scalar(&d[at..at + 64]);
                    at += 64;
                    if m != 0 {
                        break (at, m);
                    }
                };
                // SAFETY: AVX2 detected above.
                assert_eq!(unsafe { whole_blocks_avx2(&d, next) }, want, "n {n} nl {nl:?} from {next}");
            }
        }
    }
}
