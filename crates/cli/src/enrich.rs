//! Glue between analyses and trace export: per-operation bandwidth figures
//! and the communicator's parallelism class, as extra slice arguments.

use commlens_analyze::bandwidth::{self, BandwidthOptions, BandwidthReport, OpRef};
use commlens_analyze::classify::{self, Parallelism};
use commlens_core::model::DevIdx;
use commlens_core::{CollOp, OpTable};
use commlens_export::{ArgValue, Enrich};
use std::collections::HashMap;

pub struct Enrichment<'t> {
    table: &'t OpTable,
    bw: BandwidthReport,
    /// Address of an operation in the table → its [`OpRef`]: `Enrich` only
    /// sees the operation, and the table is borrowed for our whole lifetime.
    refs: HashMap<usize, OpRef>,
    class: Vec<Option<Parallelism>>,
}

impl<'t> Enrichment<'t> {
    pub fn new(table: &'t OpTable) -> Self {
        let bw = bandwidth::analyze(table, &BandwidthOptions::default());
        let mut refs = HashMap::new();
        for (d, ops) in table.per_rank.iter().enumerate() {
            for (i, op) in ops.iter().enumerate() {
                refs.insert(op as *const CollOp as usize, OpRef { dev: DevIdx(d as u32), index: i as u32 });
            }
        }
        let mut class = vec![None; table.logical.len()];
        for c in classify::infer(table).comms {
            class[c.comm.ix()] = Some(c.class);
        }
        Enrichment { table, bw, refs, class }
    }
}

impl Enrich for Enrichment<'_> {
    fn args(&self, op: &CollOp) -> Vec<(&'static str, ArgValue)> {
        let mut out = Vec::new();
        if let Some(p) = self.class_label(op) {
            out.push(("parallelism", ArgValue::Str(p)));
        }
        let Some(b) = self.refs.get(&(op as *const CollOp as usize)).and_then(|r| self.bw.get(*r)) else {
            return out;
        };
        out.push(("bus factor", ArgValue::Float(b.m.bus_factor)));
        let f = |name, v: Option<f64>, out: &mut Vec<(&'static str, ArgValue)>| {
            if let Some(v) = v {
                out.push((name, ArgValue::Float(v)));
            }
        };
        f("algbw GB/s", b.m.algbw_gb_s, &mut out);
        f("busbw GB/s", b.m.busbw_gb_s, &mut out);
        f("theoretical algbw GB/s", b.m.theo_algbw_gb_s, &mut out);
        f("theoretical busbw GB/s", b.m.theo_busbw_gb_s, &mut out);
        f("efficiency", b.m.efficiency, &mut out);
        if let Some(row) = b.comm.and_then(|l| self.bw.comms.iter().find(|r| r.comm == Some(l))) {
            if let (Some(bn), Some(link)) = (row.bottleneck_gb_s, row.link) {
                out.push(("bottleneck", ArgValue::Str(format!("{} {bn:.1} GB/s", link.name()))));
            }
        }
        out
    }

    fn class_label(&self, op: &CollOp) -> Option<String> {
        let l = self.table.comms.get(op.comm.ix())?.logical?;
        self.class.get(l.ix()).copied().flatten().map(|c| c.label().to_string())
    }
}
