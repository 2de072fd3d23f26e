//! The layout plan section (`commlens plan --html`): memory per GPU and the iteration's
//! breakdown of the ranked layouts as stacked columns, then the ranking table.

use super::html::{intro, legend, notes, W};
use super::model::{PlanSection, StackedBar};
use super::scale::{fmt_bytes, Unit};
use super::svg::{self, ColumnOpts, Series};
use std::fmt::Write as _;

/// Colours of the parts, by name, so the two charts and the legend agree.
fn part_color(name: &str) -> &'static str {
    match name {
        "weights" => "#4e79a7",
        "gradients" => "#59a14f",
        "optimizer" => "#f28e2b",
        "activations" => "#e15759",
        "buffers" => "#b07aa1",
        "runtime" => "#9c9c9c",
        "compute" => "#4e79a7",
        "bubble" => "#bab0ac",
        "tp" => "#f28e2b",
        "y" => "#edc948",
        "z" => "#b07aa1",
        "dp" => "#59a14f",
        "pp" => "#e15759",
        "ep" => "#76b7b2",
        _ => "#9c755f",
    }
}

fn stacked(h: &mut String, bars: &[StackedBar], unit: Unit, x_title: &str, y_title: &str) {
    let cats: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    let mut names: Vec<&str> = Vec::new();
    for b in bars {
        for (n, _) in &b.parts {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    let series: Vec<Series> = names
        .iter()
        .map(|n| Series {
            name: n.to_string(),
            color: part_color(n).to_string(),
            values: bars.iter().map(|b| b.parts.iter().find(|(p, _)| p == n).map_or(0.0, |(_, v)| *v)).collect(),
        })
        .collect();
    let o = ColumnOpts { width: W, height: 300.0, unit, x_title, y_title, gap: 0.3 };
    legend(h, names.iter().map(|n| (*n, part_color(n))));
    h.push_str(&svg::columns(&cats, &series, &o));
}

pub(super) fn plan(h: &mut String, p: &PlanSection) {
    intro(h, &p.intro);
    if !p.memory.is_empty() {
        let _ = write!(h, r#"<h3>Memory per GPU (capacity {})</h3>"#, fmt_bytes(p.capacity_bytes));
        stacked(h, &p.memory, Unit::Bytes, "rank", "bytes per GPU");
    }
    if !p.time.is_empty() {
        h.push_str("<h3>Where the iteration goes</h3>");
        stacked(h, &p.time, Unit::Ns, "rank", "time per iteration");
    }
    super::html::generic_table(h, &p.ranking);
    notes(h, &p.notes);
}
