//! Tests of `ops_fast`'s byte-level pieces against plain references: the
//! 16-byte hex run and the opCount read's shortcut (the memo's wide compare
//! is tested in `ops_memo`).
use super::{hex_run16, hex_run16_swar, Cursor};

/// The opCount read with its short-run shortcut against `hex_digits`
/// alone, on every string of up to six bytes over digits, letters, `x`,
/// a space and a non-digit, with and without `0x` and text before it.
#[test]
fn hex_shortcut_matches_hex_digits() {
    let alphabet = b"09aFx g";
    let mut n = 0;
    for len in 0..=6u32 {
        for code in 0..alphabet.len().pow(len) {
            let mut tail = Vec::new();
            let mut c = code;
            for _ in 0..len {
                tail.push(alphabet[c % alphabet.len()]);
                c /= alphabet.len();
            }
            for head in [&b""[..], b"0x", b"0X", b"0"] {
                let s = [b"k ", head, &tail].concat();
                let mut fast = Cursor { s: &s, p: 2 };
                let mut slow = Cursor { s: &s, p: 2 };
                if s[2..].starts_with(b"0x") || s[2..].starts_with(b"0X") {
                    slow.p += 2;
                }
                let want = slow.hex_digits();
                assert_eq!(fast.hex(), want, "{:?}", String::from_utf8_lossy(&s));
                if want.is_some() {
                    assert_eq!(fast.p, slow.p, "{:?}", String::from_utf8_lossy(&s));
                }
                n += 1;
            }
        }
    }
    assert!(n > 100_000);
}

/// The word-at-a-time run against a digit-at-a-time reading, on every
/// length and on every byte value in every position.
#[test]
fn hex_run16_matches_bytewise() {
    let bytewise = |w: &[u8]| {
        let k = w.iter().take_while(|&&b| crate::bytes::hex_digit(b) <= 15).count();
        let v = w[..k].iter().fold(0u64, |v, &b| (v << 4) | crate::bytes::hex_digit(b) as u64);
        (k, v)
    };
    let digits = b"0123456789abcdefABCDEF";
    let mut w = [0u8; 16];
    for k in 0..=16 {
        for (i, x) in w.iter_mut().enumerate() {
            *x = digits[(i * 7 + k) % digits.len()];
        }
        for stop in 0..=255u8 {
            let mut v = w;
            if k < 16 {
                v[k] = stop;
            }
            assert_eq!(hex_run16(&v), bytewise(&v), "{:?}", String::from_utf8_lossy(&v));
            assert_eq!(hex_run16_swar(&v), bytewise(&v), "{:?}", String::from_utf8_lossy(&v));
        }
    }
    assert_eq!(hex_run16(b"7023be000000 rec"), (12, 0x7023_be00_0000));
    assert_eq!(hex_run16(b"ffffffffffffffff"), (16, u64::MAX));
    assert_eq!(hex_run16(b" 1234567890abcde"), (0, 0));
}

/// The pointer read with its one-window shortcut against the plain reading
/// (`0x`, then `hex_digits`; or `(nil)`), on runs of every length up to 20
/// over digits, letters and non-digits, ended by a space, a non-digit or
/// the end of the message, with every prefix `0x`, `0X`, `0`, none.
#[test]
fn pointer_matches_plain_reading() {
    let plain = |c: &mut Cursor| -> Option<u64> {
        match c.s.get(c.p..c.p + 2) {
            Some(b"0x" | b"0X") => {
                c.p += 2;
                c.hex_digits()
            }
            _ => {
                c.lit(b"(nil)")?;
                c.value_end()?;
                Some(0)
            }
        }
    };
    let digits = b"09afAFgx";
    let mut n = 0;
    for head in [&b"0x"[..], b"0X", b"0", b"", b"(nil)", b"(nil"] {
        for len in 0..=20usize {
            for fill in 0..digits.len() {
                for end in [&b""[..], b" ", b"z", b" count 7", b"1234567890abcdef"] {
                    let run: Vec<u8> = (0..len).map(|i| if i + 1 == len { digits[fill] } else { b"0123456789abcdef"[i % 16] }).collect();
                    let s = [b"k ", head, &run, end].concat();
                    let mut fast = Cursor { s: &s, p: 2 };
                    let mut slow = Cursor { s: &s, p: 2 };
                    let want = plain(&mut slow);
                    assert_eq!(fast.pointer(), want, "{:?}", String::from_utf8_lossy(&s));
                    if want.is_some() {
                        assert_eq!(fast.p, slow.p, "{:?}", String::from_utf8_lossy(&s));
                    }
                    n += 1;
                }
            }
        }
    }
    assert!(n > 5000);
}
