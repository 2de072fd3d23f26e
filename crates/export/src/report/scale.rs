//! Numbers and colors for the report charts: escaping, NaN-proof coordinate
//! formatting, axis ticks (linear 1-2-5, binary log for bytes, decimal log),
//! value labels per unit, and the fixed color of each operation kind.
//!
//! Everything that ends up in an SVG attribute goes through [`num`], so a
//! NaN or infinity from an analysis can never make the document invalid.

use std::borrow::Cow;

/// What a value measures; picks tick spacing and label format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Bytes,
    Ns,
    GbS,
    Plain,
}

/// HTML/XML text and attribute escaping.
pub fn esc(s: &str) -> Cow<'_, str> {
    if !s.contains(['&', '<', '>', '"', '\'']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A coordinate for an SVG attribute: at most one decimal, never NaN/inf
/// (those become 0, which draws nothing harmful).
pub fn num(x: f64) -> String {
    let x = if x.is_finite() { x.clamp(-1e9, 1e9) } else { 0.0 };
    let r = (x * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// Finite and non-negative, else 0: chart values are magnitudes.
pub fn clean(x: f64) -> f64 {
    if x.is_finite() && x > 0.0 {
        x
    } else {
        0.0
    }
}

/// Linear ticks from 0 covering `max` with a 1-2-5 step; returns (ticks, top).
/// Bytes and times use a step in their display unit (KiB, ms) so labels stay
/// round numbers.
pub fn linear_ticks(max: f64, unit: Unit) -> (Vec<f64>, f64) {
    let max = clean(max);
    if max == 0.0 {
        return (vec![0.0, 1.0], 1.0);
    }
    let base = display_base(max, unit);
    let m = max / base;
    let raw = m / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|k| k * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    // Counts are whole numbers: a step below 1 would give duplicate labels.
    let step = if unit == Unit::Count { step.max(1.0) } else { step };
    let n = (m / step).ceil().max(1.0) as usize;
    let ticks: Vec<f64> = (0..=n).map(|i| i as f64 * step * base).collect();
    let top = *ticks.last().unwrap_or(&1.0);
    (ticks, top)
}

/// The power of the display unit for `max` (1024^k for bytes, 1000^k for ns).
fn display_base(max: f64, unit: Unit) -> f64 {
    let (k, n) = match unit {
        Unit::Bytes => (1024f64, 6),
        Unit::Ns => (1000f64, 3),
        _ => return 1.0,
    };
    let mut b = 1.0;
    for _ in 0..n {
        if max / b < k {
            break;
        }
        b *= k;
    }
    b
}

/// Binary log ticks for byte axes: powers of two at a step of 1, 2, 5, 10 or
/// 20 bits, at most about ten of them, covering `[lo, hi]` (both > 0).
pub fn log2_ticks(lo: f64, hi: f64) -> (Vec<f64>, f64, f64) {
    let a = lo.max(1.0).log2().floor();
    let b = hi.max(2.0).log2().ceil().max(a + 1.0);
    let span = b - a;
    let step = [1.0, 2.0, 5.0, 10.0, 20.0].into_iter().find(|s| span / s <= 10.0).unwrap_or(20.0);
    let start = (a / step).floor() * step;
    let end = (b / step).ceil() * step;
    let mut t = Vec::new();
    let mut e = start;
    while e <= end + 1e-9 {
        t.push(2f64.powf(e));
        e += step;
    }
    (t, 2f64.powf(start), 2f64.powf(end))
}

/// Decimal log ticks (1, 10, 100 …, plus 2 and 5 when the span is short).
pub fn log10_ticks(lo: f64, hi: f64) -> (Vec<f64>, f64, f64) {
    let a = lo.log10().floor();
    let b = hi.log10().ceil().max(a + 1.0);
    let mut t = Vec::new();
    let dense = b - a <= 2.0;
    let mut e = a;
    while e <= b + 1e-9 {
        let p = 10f64.powf(e);
        t.push(p);
        if dense && e < b {
            t.push(2.0 * p);
            t.push(5.0 * p);
        }
        e += 1.0;
    }
    (t, 10f64.powf(a), 10f64.powf(b))
}

/// A short value label: `1.5k`, `256 MiB`, `3.2 ms`, `370 GB/s`.
pub fn fmt_value(v: f64, unit: Unit) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    match unit {
        Unit::Count => fmt_count(v),
        Unit::Bytes => fmt_bytes(v),
        Unit::Ns => fmt_ns(v),
        Unit::GbS => format!("{} GB/s", trim_num(v)),
        Unit::Plain => trim_num(v),
    }
}

fn trim_num(v: f64) -> String {
    let a = v.abs();
    let s = if a == 0.0 {
        "0".to_string()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else if a >= 1e-3 {
        format!("{v:.3}")
    } else if a >= 1e-9 {
        // Two significant digits rather than a bare 0 (a 4-byte call's GB/s).
        let digits = (-a.log10()).ceil() as usize + 1;
        format!("{v:.digits$}")
    } else {
        format!("{v:.1e}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

pub fn fmt_count(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{}G", trim_num(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", trim_num(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim_num(v / 1e3))
    } else {
        trim_num(v)
    }
}

pub fn fmt_bytes(v: f64) -> String {
    const U: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut x = v;
    let mut u = 0;
    while x.abs() >= 1024.0 && u + 1 < U.len() {
        x /= 1024.0;
        u += 1;
    }
    format!("{} {}", trim_num(x), U[u])
}

pub fn fmt_ns(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{} s", trim_num(v / 1e9))
    } else if a >= 1e6 {
        format!("{} ms", trim_num(v / 1e6))
    } else if a >= 1e3 {
        format!("{} µs", trim_num(v / 1e3))
    } else {
        format!("{} ns", trim_num(v))
    }
}

/// Thousands separators for exact counts in tables: `1,234,567`.
pub fn group_digits(v: u64) -> String {
    let s = v.to_string();
    // Groups of three from the right; digits are ASCII, so bytes are chars.
    let groups: Vec<&str> = s.as_bytes().rchunks(3).rev().map(|c| std::str::from_utf8(c).unwrap_or("")).collect();
    groups.join(",")
}

/// The fixed color of an operation kind, the same in every chart. Unknown
/// names get a stable color from a second palette (hash of the name).
pub fn kind_color(kind: &str) -> &'static str {
    match kind {
        "AllReduce" => "#4e79a7",
        "AllGather" => "#f28e2b",
        "ReduceScatter" => "#59a14f",
        "Broadcast" => "#e15759",
        "Reduce" => "#76b7b2",
        "AllToAll" => "#edc948",
        "Gather" => "#b07aa1",
        "Scatter" => "#ff9da7",
        "Send" => "#9c755f",
        "Recv" => "#bab0ac",
        "SendRecv" => "#8c6bb1",
        _ => {
            const EXTRA: [&str; 6] = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#a6761d"];
            let h = kind.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
            EXTRA[h as usize % EXTRA.len()]
        }
    }
}

/// Sequential color for a heatmap value in `[0, 1]` (light yellow → dark red),
/// interpolated between five stops so low values stay readable on white.
pub fn heat_color(t: f64) -> String {
    const STOPS: [(u8, u8, u8); 5] = [(255, 247, 204), (254, 204, 92), (253, 141, 60), (227, 26, 28), (128, 0, 38)];
    let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 };
    let x = t * (STOPS.len() - 1) as f64;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let f = x - i as f64;
    let lerp = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    format!("#{:02x}{:02x}{:02x}", lerp(a.0, b.0), lerp(a.1, b.1), lerp(a.2, b.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_numbers() {
        assert_eq!(esc("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
        assert!(matches!(esc("plain"), Cow::Borrowed(_)));
        assert_eq!(num(f64::NAN), "0");
        assert_eq!(num(f64::INFINITY), "0");
        assert_eq!(num(1e300), "1000000000");
        assert_eq!(num(1.23456), "1.2");
        assert_eq!(num(-2.0), "-2");
        assert_eq!(clean(f64::NEG_INFINITY), 0.0);
        assert_eq!(group_digits(1234567), "1,234,567");
        assert_eq!(group_digits(12), "12");
    }

    #[test]
    fn ticks() {
        let (t, top) = linear_ticks(9.3, Unit::Plain);
        assert_eq!(t, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(top, 10.0);
        // Byte ticks are round in MiB, not in decimal bytes.
        let (t, _) = linear_ticks(3.0 * 1048576.0, Unit::Bytes);
        assert!(t.iter().all(|v| (v / 1048576.0 * 2.0).fract() == 0.0), "{t:?}");
        assert_eq!(linear_ticks(f64::NAN, Unit::Count).1, 1.0);
        assert_eq!(linear_ticks(2.0, Unit::Count).0, [0.0, 1.0, 2.0]);
        let (t, lo, hi) = log2_ticks(4.0, 1073741824.0);
        assert!(t.len() <= 11 && lo <= 4.0 && hi >= 1073741824.0);
        let (t, lo, hi) = log10_ticks(3.0, 40.0);
        assert_eq!((lo, hi), (1.0, 100.0));
        assert_eq!(t, [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
    }

    #[test]
    fn labels_and_colors() {
        assert_eq!(fmt_value(1536.0, Unit::Bytes), "1.5 KiB");
        assert_eq!(fmt_value(268435456.0, Unit::Bytes), "256 MiB");
        assert_eq!(fmt_value(2_500_000.0, Unit::Ns), "2.5 ms");
        assert_eq!(fmt_value(12_345.0, Unit::Count), "12.3k");
        assert_eq!(fmt_value(370.0, Unit::GbS), "370 GB/s");
        assert_eq!(fmt_value(f64::NAN, Unit::GbS), "n/a");
        assert_eq!(fmt_value(0.000204, Unit::GbS), "0.0002 GB/s");
        assert_eq!(fmt_value(0.0016, Unit::Plain), "0.002");
        assert_eq!(fmt_value(0.0001, Unit::Plain), "0.0001");
        assert_eq!(fmt_value(2.5e-12, Unit::Plain), "2.5e-12");
        assert_eq!(kind_color("AllReduce"), kind_color("AllReduce"));
        assert_ne!(kind_color("AllReduce"), kind_color("AllGather"));
        assert!(kind_color("Custom").starts_with('#'));
        assert_eq!(heat_color(0.0), "#fff7cc");
        assert_eq!(heat_color(1.0), "#800026");
        assert_eq!(heat_color(f64::NAN), "#fff7cc");
    }
}
