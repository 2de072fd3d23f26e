//! Fuzzing the topology-dump parser: arbitrary bytes, damaged and truncated
//! real dump lines of every shape, inside and outside an open block.
use super::*;

/// A tiny deterministic generator, so the fuzz test needs no dependency.
struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Dump lines of every shape, including the real 2.18.1 and 2.28.9 forms.
fn sample_lines() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = messages(THESIS).into_iter().map(<[u8]>::to_vec).collect();
    for l in [
        "CPU/0 (1/1/2)",
        "+ PCI[24.0] - PCI/C000 (11f8400011f8beef)",
        "              + PCI[24.0] - GPU/F000 (8)",
        "              + PCI[24.0] - NIC/9A000",
        "                            + NET[7.0] - NET/0 (9cc7170003fd7010/1/7.000000)",
        "==========================================",
        "Paths from GPU/F000 :",
        " (5000.000000)",
        "--PCI->PCI/C000--PCI->CPU/0--SYS->CPU/1--PCI->PCI/98000--PCI->NIC/9A000--NET->NET/0 (7.000000)",
        "GPU/0-17000 :GPU/0-17000 (0/5000.0/LOC) GPU/0-65000 (1/240.0/NVL) CPU/0-0 (1/24.0/PHB) ",
        "NET/0-1 :GPU/0-26000 (3/1.2/PHB) NET/0-0 (4/0.1/PHB) NET/0-8 (2/1.2/L",
        "=== System : maxBw 240.0 totalBw 240.0 ===",
    ] {
        v.push(l.as_bytes().to_vec());
    }
    v
}

fn fuzz_parser(p: &mut TopoParser, rng: &mut XorShift, samples: &[Vec<u8>], rounds: usize) {
    const ALPHABET: &[u8] = b" +-=[]()/:.0123456789abcdefABCDEFGPUCINVLSYTOHX\t\r\x00\xff>";
    let mut buf = Vec::new();
    for _ in 0..rounds {
        buf.clear();
        match rng.below(4) {
            0 => {
                let n = rng.below(120);
                buf.extend((0..n).map(|_| rng.next() as u8));
            }
            1 => {
                let n = rng.below(120);
                buf.extend((0..n).map(|_| ALPHABET[rng.below(ALPHABET.len())]));
            }
            2 => {
                // A real line with a few bytes changed.
                buf.extend_from_slice(&samples[rng.below(samples.len())]);
                for _ in 0..rng.below(4) {
                    if !buf.is_empty() {
                        let i = rng.below(buf.len());
                        buf[i] = ALPHABET[rng.below(ALPHABET.len())];
                    }
                }
            }
            _ => {
                // A real line, cut at a random point, perhaps with another glued on.
                let s = &samples[rng.below(samples.len())];
                buf.extend_from_slice(&s[..rng.below(s.len() + 1)]);
                if rng.below(3) == 0 {
                    let o = &samples[rng.below(samples.len())];
                    buf.extend_from_slice(&o[rng.below(o.len() + 1)..]);
                }
            }
        }
        p.feed(&buf);
    }
}

#[test]
fn arbitrary_bytes_and_truncations_never_panic() {
    let samples = sample_lines();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut p = TopoParser::new();
    fuzz_parser(&mut p, &mut rng, &samples, 200_000);
    // Every truncation of every sample line, inside an open block and outside.
    for s in &samples {
        for cut in 0..=s.len() {
            p.feed(b"=== System : maxBw 1.0 totalBw 1.0 ===");
            p.feed(b"CPU/0 (1/1/2)");
            p.feed(&s[..cut]);
            p.feed(&s[cut..]);
            p.feed(b"Paths from GPU/F000 :");
            p.feed(&s[..cut]);
        }
    }
    p.finish();
    let blocks = p.take_blocks();
    assert!(!blocks.is_empty());
    blocks.iter().for_each(check_indices);
    assert!(p.malformed_lines() > 0);
}

/// The one-pass bandwidth reader gives exactly what `str::parse::<f64>`
/// gives on the number's bytes, for plain decimals and every other form.
#[test]
fn bandwidths_read_as_the_float_parser_reads_them() {
    use crate::nccl_log::topo_lex::parse_bw;
    fn reference(s: &[u8]) -> Option<(f64, &[u8])> {
        let n = s
            .iter()
            .take_while(|&&b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
            .count();
        if n == 0 || n > 40 || !s[0].is_ascii_digit() {
            return None;
        }
        let v: f64 = std::str::from_utf8(&s[..n]).ok()?.parse().ok()?;
        (v.is_finite() && v >= 0.0).then_some((v, &s[n..]))
    }
    let alphabet = b"0123456789012345678901234567890123456789..eE+-/ )x";
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    let mut fixed: Vec<Vec<u8>> = [
        "24.0",
        "5000.000000",
        "0.1",
        "240.0/NVL",
        "1.",
        "1e5",
        "123456789012345.5",
        "1234567890123456.5",
        "0.000000000000001",
        "9007199254740993",
        "07.50)",
        "1..2",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    for _ in 0..200_000 {
        let len = rng.below(24);
        fixed.push(
            (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect(),
        );
    }
    for s in &fixed {
        let (got, want) = (parse_bw(s), reference(s));
        assert_eq!(
            got.map(|(v, r)| (v.to_bits(), r)),
            want.map(|(v, r)| (v.to_bits(), r)),
            "{:?}",
            String::from_utf8_lossy(s)
        );
    }
}
