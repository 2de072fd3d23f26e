//! Inline SVG chart primitives for the HTML report: horizontal bars, stacked
//! columns (also the histogram), a log-log scatter with horizontal limit
//! lines and reference curves, and a heatmap. Each returns one `<svg>` element as a string.
//!
//! Why hand-written: the report must work offline from one file, so no chart
//! library or CDN. Output is bounded: columns and heatmap cells are binned
//! beyond fixed caps, scatter series are thinned to [`MAX_POINTS`], and the
//! chart says so in a caption. Every coordinate goes through [`num`], so
//! NaN or infinity never reaches an attribute. Text styles come from CSS
//! classes in the page (`tick`, `axis`, `lbl`, `cap`).

use super::scale::{clean, esc, fmt_value, group_digits, heat_color, linear_ticks, log10_ticks, log2_ticks, num, Unit};
use std::fmt::Write;

/// Points drawn per scatter series at most.
pub const MAX_POINTS: usize = 5_000;
/// Columns drawn at most; more categories are averaged in consecutive groups.
pub const MAX_COLUMNS: usize = 512;
/// Heatmap rows and columns at most (binned by averaging beyond).
pub const MAX_HEAT_ROWS: usize = 128;
pub const MAX_HEAT_COLS: usize = 200;
/// Cells above this count get no hover tooltip (keeps the file small).
const MAX_CELL_TIPS: usize = 5_000;
const CHAR_W: f64 = 6.6; // average glyph width of the 11px label font

/// One named, colored series of values (aligned with the categories).
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub color: String,
    pub values: Vec<f64>,
}

/// One horizontal bar.
#[derive(Debug, Clone)]
pub struct HBar {
    pub label: String,
    pub value: f64,
    pub color: String,
    /// Text after the value label (e.g. a share `38%`).
    pub suffix: String,
}

/// One scatter series of (x, y) points; non-positive or non-finite points
/// cannot be placed on log axes and are counted in the caption instead.
#[derive(Debug, Clone)]
pub struct Scatter<'a> {
    pub name: &'a str,
    pub color: &'a str,
    pub points: Vec<(f64, f64)>,
}

/// Options of a column chart.
#[derive(Debug, Clone)]
pub struct ColumnOpts<'a> {
    pub width: f64,
    pub height: f64,
    pub unit: Unit,
    pub x_title: &'a str,
    pub y_title: &'a str,
    /// Gap between columns as a fraction of the band (histograms: small).
    pub gap: f64,
}

/// Minimal SVG writer: escaping and number formatting in one place.
struct Svg {
    s: String,
}

impl Svg {
    fn new(w: f64, h: f64, label: &str) -> Svg {
        let mut s = String::with_capacity(4096);
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{}">"#,
            esc(label),
            w = num(w),
            h = num(h)
        );
        Svg { s }
    }
    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, tip: Option<&str>) {
        let _ = write!(
            self.s,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}""#,
            num(x),
            num(y),
            num(w.max(0.0)),
            num(h.max(0.0)),
            esc(fill)
        );
        match tip {
            Some(t) => {
                let _ = write!(self.s, "><title>{}</title></rect>", esc(t));
            }
            None => self.s.push_str("/>"),
        }
    }
    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, class: &str) {
        let _ = write!(
            self.s,
            r#"<line class="{class}" x1="{}" y1="{}" x2="{}" y2="{}"/>"#,
            num(x1),
            num(y1),
            num(x2),
            num(y2)
        );
    }
    fn text(&mut self, x: f64, y: f64, anchor: &str, class: &str, t: &str) {
        let _ = write!(
            self.s,
            r#"<text x="{}" y="{}" text-anchor="{anchor}" class="{class}">{}</text>"#,
            num(x),
            num(y),
            esc(t)
        );
    }
    fn vtext(&mut self, x: f64, y: f64, class: &str, t: &str) {
        let _ = write!(
            self.s,
            r#"<text transform="translate({},{}) rotate(-90)" text-anchor="middle" class="{class}">{}</text>"#,
            num(x),
            num(y),
            esc(t)
        );
    }
    fn finish(mut self) -> String {
        self.s.push_str("</svg>");
        self.s
    }
}

/// A small placeholder chart that says there is nothing to draw.
pub fn empty_chart(width: f64, what: &str) -> String {
    let mut svg = Svg::new(width, 60.0, what);
    svg.rect(0.0, 0.0, width, 60.0, "#f6f7f9", None);
    svg.text(width / 2.0, 35.0, "middle", "cap", &format!("No data: {what}"));
    svg.finish()
}

fn text_w(s: &str) -> f64 {
    s.chars().count() as f64 * CHAR_W
}

/// Cuts a label to about `px` wide with an ellipsis (the tooltip keeps it whole).
fn fit(s: &str, px: f64) -> String {
    let max = (px / CHAR_W).floor().max(2.0) as usize;
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max - 1).collect();
    t.push('…');
    t
}

/// Horizontal bars with the label left and the value at the bar's end.
pub fn hbars(bars: &[HBar], unit: Unit, width: f64, label: &str) -> String {
    let max = bars.iter().map(|b| clean(b.value)).fold(0.0, f64::max);
    if bars.is_empty() || max == 0.0 {
        return empty_chart(width, label);
    }
    let row = 24.0;
    let left = bars.iter().map(|b| text_w(&b.label)).fold(40.0, f64::max).min(width * 0.35) + 12.0;
    // Room for the longest value label after the longest bar.
    let right =
        bars.iter().map(|b| text_w(&format!("{} {}", fmt_value(b.value, unit), b.suffix))).fold(0.0, f64::max) + 12.0;
    let pw = (width - left - right).max(20.0);
    let h = bars.len() as f64 * row + 8.0;
    let mut svg = Svg::new(width, h, label);
    for (i, b) in bars.iter().enumerate() {
        let y = 4.0 + i as f64 * row;
        let w = clean(b.value) / max * pw;
        let v = fmt_value(clean(b.value), unit);
        svg.text(left - 8.0, y + 15.0, "end", "lbl", &fit(&b.label, left - 12.0));
        svg.rect(left, y + 3.0, w.max(1.0), row - 6.0, &b.color, Some(&format!("{}: {v}", b.label)));
        svg.text(left + w + 6.0, y + 15.0, "start", "tick", format!("{v} {}", b.suffix).trim_end());
    }
    svg.finish()
}

/// Averages consecutive categories into at most `cap` groups; returns the
/// group labels (`a–b`), the averaged series and the group size.
fn bin_columns(cats: &[String], series: &[Series], cap: usize) -> (Vec<String>, Vec<Vec<f64>>, usize) {
    let k = cats.len().div_ceil(cap).max(1);
    let groups = cats.len().div_ceil(k);
    let labels = (0..groups)
        .map(|g| {
            let (a, b) = (g * k, ((g + 1) * k).min(cats.len()) - 1);
            if a == b {
                cats[a].clone()
            } else {
                format!("{}–{}", cats[a], cats[b])
            }
        })
        .collect();
    let vals = series
        .iter()
        .map(|s| {
            (0..groups)
                .map(|g| {
                    let r = g * k..((g + 1) * k).min(cats.len());
                    let n = r.len() as f64;
                    r.map(|i| clean(s.values.get(i).copied().unwrap_or(0.0))).sum::<f64>() / n
                })
                .collect()
        })
        .collect();
    (labels, vals, k)
}

/// Vertical stacked columns, one per category, series stacked bottom-up.
pub fn columns(cats: &[String], series: &[Series], o: &ColumnOpts) -> String {
    let (labels, vals, k) = bin_columns(cats, series, MAX_COLUMNS);
    let n = labels.len();
    let totals: Vec<f64> = (0..n).map(|i| vals.iter().map(|v| v[i]).sum()).collect();
    let max = totals.iter().copied().fold(0.0, f64::max);
    if n == 0 || max == 0.0 {
        return empty_chart(o.width, o.y_title);
    }
    let (ticks, top) = linear_ticks(max, o.unit);
    let left = ticks.iter().map(|t| text_w(&fmt_value(*t, o.unit))).fold(0.0, f64::max) + 34.0;
    // Labels that do not fit side by side go on up to three staggered lines
    // before some are skipped (histogram buckets are wide but all matter).
    let band0 = (o.width - left - 16.0) / n as f64;
    let widest = labels.iter().map(|l| text_w(l)).fold(0.0, f64::max) + 8.0;
    let need = (widest / band0).ceil().max(1.0) as usize;
    let (lines, every) = if need <= 3 { (need, 1) } else { (1, need) };
    let extra = 13.0 * (lines - 1) as f64;
    let (right, top_m, bottom) = (16.0, 10.0, extra + if k > 1 { 62.0 } else { 46.0 });
    let (pw, ph) = (o.width - left - right, o.height - top_m - bottom);
    let y_of = |v: f64| top_m + ph - v / top * ph;
    let mut svg = Svg::new(o.width, o.height, o.y_title);
    for t in &ticks {
        svg.line(left, y_of(*t), left + pw, y_of(*t), "grid");
        svg.text(left - 6.0, y_of(*t) + 4.0, "end", "tick", &fmt_value(*t, o.unit));
    }
    let band = pw / n as f64;
    let bw = (band * (1.0 - o.gap)).max(0.5);
    let tips = n * series.len() <= 4 * MAX_COLUMNS;
    for i in 0..n {
        let x = left + i as f64 * band + (band - bw) / 2.0;
        let mut acc = 0.0;
        for (s, v) in series.iter().zip(&vals) {
            if v[i] <= 0.0 {
                continue;
            }
            let tip = format!("{}: {} {}", labels[i], s.name, fmt_value(v[i], o.unit));
            svg.rect(x, y_of(acc + v[i]), bw, v[i] / top * ph, &s.color, tips.then_some(tip.as_str()));
            acc += v[i];
        }
    }
    svg.line(left, top_m + ph, left + pw, top_m + ph, "axis");
    for (i, l) in labels.iter().enumerate().step_by(every) {
        let y = top_m + ph + 16.0 + 13.0 * (i % lines) as f64;
        svg.text(left + (i as f64 + 0.5) * band, y, "middle", "tick", l);
    }
    svg.text(left + pw / 2.0, top_m + ph + 36.0 + extra, "middle", "axis", o.x_title);
    svg.vtext(14.0, top_m + ph / 2.0, "axis", o.y_title);
    if k > 1 {
        let c = format!("{} categories averaged in groups of {k} ({} columns)", group_digits(cats.len() as u64), n);
        svg.text(left + pw / 2.0, top_m + ph + 54.0 + extra, "middle", "cap", &c);
    }
    svg.finish()
}

/// Evenly spaced subset of at most `max` items, in their original order.
pub fn thin<T: Copy>(v: &[T], max: usize) -> Vec<T> {
    if v.len() <= max {
        return v.to_vec();
    }
    (0..max).map(|i| v[i * v.len() / max]).collect()
}

/// Log-log scatter (x in bytes, y in GB/s) with dashed horizontal limits.
pub fn scatter_loglog(
    series: &[Scatter],
    limits: &[(String, f64)],
    width: f64,
    x_title: &str,
    y_title: &str,
) -> String {
    scatter_loglog_with_curves(series, &[], limits, width, x_title, y_title)
}

/// [`scatter_loglog`] plus reference curves drawn as lines through their
/// points (in x order), e.g. a benchmark's bandwidth per message size.
pub fn scatter_loglog_with_curves(
    series: &[Scatter],
    curves: &[Scatter],
    limits: &[(String, f64)],
    width: f64,
    x_title: &str,
    y_title: &str,
) -> String {
    scatter_loglog_styled(series, curves, "curve", limits, width, x_title, y_title)
}

/// [`scatter_loglog_with_curves`] with the curves' CSS class (`curve`:
/// measured references, dotted; `model`: expectations, dashed).
pub fn scatter_loglog_styled(
    series: &[Scatter],
    curves: &[Scatter],
    curve_class: &str,
    limits: &[(String, f64)],
    width: f64,
    x_title: &str,
    y_title: &str,
) -> String {
    let ok = |p: &(f64, f64)| p.0.is_finite() && p.1.is_finite() && p.0 > 0.0 && p.1 > 0.0;
    let mut captions = Vec::new();
    let drawn: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| {
            let valid: Vec<(f64, f64)> = s.points.iter().copied().filter(ok).collect();
            let bad = s.points.len() - valid.len();
            if bad > 0 {
                captions.push(format!(
                    "{}: {} points with zero size or bandwidth not drawn",
                    s.name,
                    group_digits(bad as u64)
                ));
            }
            if valid.len() > MAX_POINTS {
                captions.push(format!(
                    "{}: {} of {} points shown (evenly spaced sample)",
                    s.name,
                    group_digits(MAX_POINTS as u64),
                    group_digits(valid.len() as u64)
                ));
            }
            thin(&valid, MAX_POINTS)
        })
        .collect();
    let lines: Vec<Vec<(f64, f64)>> = curves
        .iter()
        .map(|c| {
            let mut v: Vec<(f64, f64)> = c.points.iter().copied().filter(ok).collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            thin(&v, MAX_POINTS)
        })
        .collect();
    let all = drawn.iter().flatten().chain(lines.iter().flatten());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, 0.0f64, f64::MAX, 0.0f64);
    for p in all {
        x0 = x0.min(p.0);
        x1 = x1.max(p.0);
        y0 = y0.min(p.1);
        y1 = y1.max(p.1);
    }
    if x1 == 0.0 {
        return empty_chart(width, y_title);
    }
    let lims: Vec<&(String, f64)> = limits.iter().filter(|l| l.1.is_finite() && l.1 > 0.0).collect();
    for l in &lims {
        y0 = y0.min(l.1);
        y1 = y1.max(l.1 * 1.2);
    }
    // Six decades below the top are plenty; a stray 1e-300 must not make
    // hundreds of tick lines (points below are pinned to the axis).
    y0 = y0.max(y1 * 1e-6);
    let (xt, xa, xb) = log2_ticks(x0, x1);
    let (yt, ya, yb) = log10_ticks(y0, y1);
    let (left, right, top) = (64.0, 16.0, 12.0);
    let bottom = 50.0 + 16.0 * captions.len() as f64;
    let height = 400.0 + 16.0 * captions.len() as f64;
    let (pw, ph) = (width - left - right, height - top - bottom);
    let xs = |x: f64| left + (x.log2() - xa.log2()) / (xb.log2() - xa.log2()) * pw;
    let ys = |y: f64| top + ph - (y.clamp(ya, yb).log10() - ya.log10()) / (yb.log10() - ya.log10()) * ph;
    let mut svg = Svg::new(width, height, y_title);
    for t in &xt {
        svg.line(xs(*t), top, xs(*t), top + ph, "grid");
        svg.text(xs(*t), top + ph + 16.0, "middle", "tick", &fmt_value(*t, Unit::Bytes));
    }
    for t in &yt {
        svg.line(left, ys(*t), left + pw, ys(*t), "grid");
        svg.text(left - 6.0, ys(*t) + 4.0, "end", "tick", &fmt_value(*t, Unit::Plain));
    }
    svg.line(left, top + ph, left + pw, top + ph, "axis");
    svg.line(left, top, left, top + ph, "axis");
    for (s, pts) in series.iter().zip(&drawn) {
        let _ = write!(svg.s, r#"<g fill="{}" fill-opacity="0.55"><title>{}</title>"#, esc(s.color), esc(s.name));
        for p in pts {
            let _ = write!(svg.s, r#"<circle cx="{}" cy="{}" r="2.6"/>"#, num(xs(p.0)), num(ys(p.1)));
        }
        svg.s.push_str("</g>");
    }
    // Curve labels sit above each curve's last point, moved down a line
    // while they would cover an earlier label.
    let mut placed: Vec<(f64, f64)> = Vec::new();
    for (c, pts) in curves.iter().zip(&lines) {
        if pts.is_empty() {
            continue;
        }
        let path: Vec<String> = pts.iter().map(|p| format!("{},{}", num(xs(p.0)), num(ys(p.1)))).collect();
        let _ = write!(
            svg.s,
            r#"<polyline class="{}" stroke="{}" points="{}"><title>{}</title></polyline>"#,
            esc(curve_class),
            esc(c.color),
            path.join(" "),
            esc(c.name)
        );
        let last = pts[pts.len() - 1];
        let w = text_w(c.name);
        // Right-aligned at the last point, but never past the plot's left edge.
        let (x, mut y) = ((xs(last.0) - 4.0).max(left + w + 4.0), ys(last.1) - 6.0);
        for _ in 0..curves.len() {
            if !placed.iter().any(|(px, py)| (py - y).abs() < 13.0 && (px - x).abs() < w) {
                break;
            }
            y += 14.0;
        }
        placed.push((x, y));
        svg.text(x, y, "end", "lim", c.name);
    }
    for (name, v) in &lims {
        svg.line(left, ys(*v), left + pw, ys(*v), "limit");
        svg.text(left + pw - 4.0, ys(*v) - 5.0, "end", "lim", &format!("{name}: {}", fmt_value(*v, Unit::GbS)));
    }
    svg.text(left + pw / 2.0, top + ph + 36.0, "middle", "axis", x_title);
    svg.vtext(14.0, top + ph / 2.0, "axis", y_title);
    for (i, c) in captions.iter().enumerate() {
        svg.text(left, top + ph + 54.0 + 16.0 * i as f64, "start", "cap", c);
    }
    svg.finish()
}

/// Mean of the present values of `values[r][c]` over one bin of rows×cols.
fn bin_mean(values: &[Vec<Option<f64>>], rows: std::ops::Range<usize>, cols: std::ops::Range<usize>) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0usize);
    for r in rows {
        for c in cols.clone() {
            if let Some(v) = values.get(r).and_then(|row| row.get(c)).copied().flatten().filter(|v| v.is_finite()) {
                sum += v;
                n += 1;
            }
        }
    }
    (n > 0).then(|| sum / n as f64)
}

/// Heatmap of `values[row][col]` with a color scale legend; missing cells
/// are grey. Rows and columns beyond the caps are averaged in groups.
pub fn heatmap(rows: &[String], cols: &[String], values: &[Vec<Option<f64>>], value_label: &str, width: f64) -> String {
    if rows.is_empty() || cols.is_empty() {
        return empty_chart(width, value_label);
    }
    let (kr, kc) = (rows.len().div_ceil(MAX_HEAT_ROWS), cols.len().div_ceil(MAX_HEAT_COLS));
    let (nr, nc) = (rows.len().div_ceil(kr), cols.len().div_ceil(kc));
    let label = |names: &[String], g: usize, k: usize| {
        let (a, b) = (g * k, ((g + 1) * k).min(names.len()) - 1);
        if a == b {
            names[a].clone()
        } else {
            format!("{}–{}", names[a], names[b])
        }
    };
    let grid: Vec<Vec<Option<f64>>> = (0..nr)
        .map(|r| {
            (0..nc)
                .map(|c| {
                    bin_mean(values, r * kr..((r + 1) * kr).min(rows.len()), c * kc..((c + 1) * kc).min(cols.len()))
                })
                .collect()
        })
        .collect();
    // Values are magnitudes (time, bytes), so the scale starts at zero and a
    // 10% wobble stays pale; it tops out at 4× the median so one warm-up
    // iteration ten times slower cannot wash out a rank that is 2× slow.
    let mut present: Vec<f64> = grid.iter().flatten().flatten().copied().collect();
    present.sort_by(f64::total_cmp);
    let (lo, hi) = match (present.first(), present.last()) {
        (Some(first), Some(last)) => {
            let med = present[present.len() / 2];
            let lo = first.min(0.0);
            let hi = if med > 0.0 { last.min(4.0 * med) } else { *last };
            (lo, hi)
        }
        _ => (f64::MAX, f64::MIN),
    };
    let clipped = present.last().is_some_and(|m| *m > hi);
    let left = (0..nr).map(|r| text_w(&label(rows, r, kr))).fold(30.0, f64::max).min(160.0) + 44.0;
    let pw = width - left - 16.0;
    let cw = pw / nc as f64;
    let ch = (360.0 / nr as f64).clamp(3.0, 22.0);
    let ph = ch * nr as f64;
    let binned = kr > 1 || kc > 1;
    let height = 10.0 + ph + 96.0 + if binned { 16.0 } else { 0.0 };
    let mut svg = Svg::new(width, height, value_label);
    let tips = nr * nc <= MAX_CELL_TIPS;
    let t_of = |v: f64| if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
    for (r, row) in grid.iter().enumerate() {
        for (c, v) in row.iter().enumerate() {
            let (fill, val) = match v {
                Some(v) => (heat_color(t_of(*v)), fmt_value(*v, Unit::Plain)),
                None => ("#e9ebef".to_string(), "no data".to_string()),
            };
            let tip = format!("rank {} · iteration {}: {val}", label(rows, r, kr), label(cols, c, kc));
            // Cells overlap by a hair so anti-aliasing leaves no white seams.
            svg.rect(
                left + c as f64 * cw,
                10.0 + r as f64 * ch,
                cw + 0.3,
                ch + 0.3,
                &fill,
                tips.then_some(tip.as_str()),
            );
        }
    }
    let row_every = (14.0 / ch).ceil().max(1.0) as usize;
    for r in (0..nr).step_by(row_every) {
        svg.text(left - 6.0, 10.0 + (r as f64 + 0.5) * ch + 4.0, "end", "tick", &fit(&label(rows, r, kr), left - 30.0));
    }
    let widest = (0..nc).map(|c| text_w(&label(cols, c, kc))).fold(0.0, f64::max) + 10.0;
    let col_every = (widest / cw).ceil().max(1.0) as usize;
    for c in (0..nc).step_by(col_every) {
        svg.text(left + (c as f64 + 0.5) * cw, 10.0 + ph + 16.0, "middle", "tick", &label(cols, c, kc));
    }
    svg.text(left + pw / 2.0, 10.0 + ph + 34.0, "middle", "axis", "iteration");
    svg.vtext(14.0, 10.0 + ph / 2.0, "axis", "rank");
    // Color scale: ten steps from the smallest to the largest value.
    let ly = 10.0 + ph + 50.0;
    let lx = left;
    for i in 0..10 {
        svg.rect(lx + 110.0 + i as f64 * 22.0, ly, 22.0, 12.0, &heat_color(i as f64 / 9.0), None);
    }
    if lo <= hi {
        svg.text(lx + 104.0, ly + 10.0, "end", "tick", &fmt_value(lo, Unit::Plain));
        let top = if clipped {
            format!("≥ {} (4× median)", fmt_value(hi, Unit::Plain))
        } else {
            fmt_value(hi, Unit::Plain)
        };
        svg.text(lx + 336.0, ly + 10.0, "start", "tick", &top);
    }
    svg.text(lx, ly + 10.0, "start", "lbl", "color scale");
    svg.rect(lx + 520.0, ly, 22.0, 12.0, "#e9ebef", None);
    svg.text(lx + 548.0, ly + 10.0, "start", "tick", "no data");
    svg.text(lx, ly + 30.0, "start", "cap", value_label);
    if binned {
        let c = format!(
            "{} ranks × {} iterations averaged into {nr} × {nc} cells",
            group_digits(rows.len() as u64),
            group_digits(cols.len() as u64)
        );
        svg.text(lx, ly + 46.0, "start", "cap", &c);
    }
    svg.finish()
}

#[cfg(test)]
#[path = "svg_tests.rs"]
mod tests;
