//! The `stats` entry of `stats --format json`, written by hand into a buffer
//! ([`write`], through [`super::json_text::Text`]) with every object's keys
//! in sorted order, as the `serde_json::Value` of the report wrote them (a
//! `Value` map sorts its keys). A row through a `Value` was about 10,000
//! instructions, and through `serde_json`'s serializer still about 4,000 (a
//! table look-up a byte of every key); a large job has thousands of rows,
//! written on one core after the parallel read.
//!
//! The keys of the per-rank and per-communicator rows are listed by hand:
//! `sorted_rows_are_the_value_json` and `report_is_the_value_json` (below)
//! hold them to the `Value` text, so a field added to the row types and not
//! here fails them. The other rows (a few per kind of operation and per
//! size) still go through a `Value`.

use super::json_text::Text;
use commlens_analyze::stats::{CommRow, RankRow, StatsReport};

/// The report as a pretty JSON object, keys sorted, starting `depth`
/// containers deep in the document.
pub fn write(r: &StatsReport, depth: usize) -> serde_json::Result<Vec<u8>> {
    // About 250 bytes a row.
    let mut t = Text::at(depth, 4096 + 256 * (r.ranks.len() + r.comms.len()));
    t.open(b'{');
    t.key(true, "comms");
    t.array(&r.comms, comm);
    t.key(false, "ops");
    t.serde(&serde_json::to_value(&r.ops)?)?;
    t.key(false, "ranks");
    t.array(&r.ranks, rank);
    t.key(false, "sizes");
    t.serde(&serde_json::to_value(&r.sizes)?)?;
    t.key(false, "total_bytes");
    t.u64(r.total_bytes);
    t.key(false, "total_ops");
    t.u64(r.total_ops);
    t.key(false, "total_unknown_size");
    t.u64(r.total_unknown_size);
    if !r.warnings.is_empty() {
        t.key(false, "warnings");
        t.array(&r.warnings, |t, w| t.str(w));
    }
    t.close(b'}', false);
    Ok(t.buf)
}

/// A [`RankRow`], keys sorted.
fn rank(t: &mut Text, r: &RankRow) {
    t.open(b'{');
    t.key(true, "bytes");
    t.u64(r.bytes);
    t.key(false, "collective_ops");
    t.u64(r.collective_ops);
    t.key(false, "cuda_dev");
    t.opt(r.cuda_dev, |t, d| t.u64(u64::from(d)));
    t.key(false, "host");
    t.str(&r.host);
    t.key(false, "ops");
    t.u64(r.ops);
    t.key(false, "p2p_ops");
    t.u64(r.p2p_ops);
    t.key(false, "pid");
    t.u64(u64::from(r.pid));
    t.key(false, "rank");
    t.opt(r.rank, |t, n| t.u64(u64::from(n)));
    t.key(false, "recovered");
    t.u64(r.recovered);
    t.key(false, "unknown_size");
    t.u64(r.unknown_size);
    t.close(b'}', false);
}

/// A [`CommRow`], keys sorted.
fn comm(t: &mut Text, c: &CommRow) {
    // Enum names as serde writes them (a few per row: the serializer is cheap enough).
    const NAMED: &str = "an enum of unit variants serializes";
    t.open(b'{');
    t.key(true, "bytes");
    t.u64(c.bytes);
    t.key(false, "comm_id");
    t.opt(c.comm_id.as_deref(), Text::str);
    t.key(false, "global_ranks");
    t.array(&c.global_ranks, |t, r| t.opt(*r, |t, n| t.u64(u64::from(n))));
    t.key(false, "grouping");
    t.serde(&c.grouping).expect(NAMED);
    t.key(false, "members_seen");
    t.u64(c.members_seen as u64);
    t.key(false, "mix");
    t.array(&c.mix, |t, (kind, n)| {
        t.open(b'[');
        t.line(true);
        t.serde(kind).expect(NAMED);
        t.line(false);
        t.u64(*n);
        t.close(b']', false);
    });
    t.key(false, "name");
    t.str(&c.name);
    t.key(false, "nranks");
    t.u64(u64::from(c.nranks));
    t.key(false, "ops");
    t.u64(c.ops);
    t.key(false, "unknown_size");
    t.u64(c.unknown_size);
    t.close(b'}', false);
}

#[cfg(test)]
mod tests {
    use super::{comm, rank, write, Text};
    use commlens_analyze::stats::{CommRow, OpRow, RankRow, SizeRow, StatsReport};
    use commlens_core::model::Grouping;
    use commlens_core::OpKind;

    fn same<T: serde::Serialize>(f: fn(&mut Text, &T), row: &T) {
        let mut t = Text::at(0, 0);
        f(&mut t, row);
        let value = serde_json::to_value(row).unwrap();
        assert_eq!(String::from_utf8(t.buf).unwrap(), serde_json::to_string_pretty(&value).unwrap());
    }

    fn ranks() -> Vec<RankRow> {
        [(Some(3), Some(0), "gdr114"), (None, None, "h\u{e9}\"\\x"), (Some(u32::MAX), Some(7), "")]
            .into_iter()
            .map(|(rank, dev, host)| RankRow {
                rank,
                host: host.into(),
                pid: 2984736,
                cuda_dev: dev,
                ops: 1186,
                bytes: u64::MAX,
                unknown_size: 2,
                collective_ops: 1100,
                p2p_ops: 86,
                recovered: 8,
            })
            .collect()
    }

    fn comms() -> Vec<CommRow> {
        [
            (Some("0x54fe282d32a87d85"), Grouping::CommId, vec![(OpKind::AllReduce, 990)], vec![Some(85), None, Some(102)]),
            (None, Grouping::OpSequence, vec![], vec![]),
            (None, Grouping::Single, vec![(OpKind::Send, 1), (OpKind::AllGather, u64::MAX)], vec![None]),
        ]
        .into_iter()
        .map(|(id, grouping, mix, global_ranks)| CommRow {
            name: "comm0[85,102]\n".into(),
            comm_id: id.map(Into::into),
            nranks: 2,
            members_seen: 2,
            global_ranks,
            grouping,
            ops: 990,
            bytes: 1545433251840,
            unknown_size: 0,
            mix,
        })
        .collect()
    }

    /// Rows with and without their optional values, odd strings, extremes:
    /// the hand writer gives the text of the row's `Value`.
    #[test]
    fn sorted_rows_are_the_value_json() {
        ranks().iter().for_each(|r| same(rank, r));
        comms().iter().for_each(|c| same(comm, c));
    }

    /// A whole report, with and without warnings and rows, at the top and
    /// one level deep: the text of its `Value`.
    #[test]
    fn report_is_the_value_json() {
        let op = OpRow {
            kind: OpKind::AllReduce,
            ops: 3,
            bytes: 5000,
            min_bytes: 1000,
            max_bytes: 3000,
            mean_bytes: 5000.0 / 3.0,
            unknown_size: 0,
            algorithms: vec![("Ring/LL".into(), 3)],
        };
        let size = SizeRow { lo_bytes: 1024, unknown: false, counts: vec![(OpKind::AllReduce, 3)], total: 3 };
        let full = StatsReport {
            total_ops: 4,
            total_bytes: u64::MAX,
            total_unknown_size: 1,
            ranks: ranks(),
            comms: comms(),
            ops: vec![op],
            sizes: vec![size],
            warnings: vec!["implausible \"byte\" counts".into()],
        };
        let empty = StatsReport { ranks: vec![], comms: vec![], ops: vec![], sizes: vec![], warnings: vec![], ..full.clone() };
        for r in [&full, &empty] {
            let value = serde_json::to_value(r).unwrap();
            assert_eq!(String::from_utf8(write(r, 0).unwrap()).unwrap(), serde_json::to_string_pretty(&value).unwrap());
            let doc = serde_json::to_string_pretty(&serde_json::json!({ "stats": value })).unwrap();
            let part = String::from_utf8(write(r, 1).unwrap()).unwrap();
            assert_eq!(format!("{{\n  \"stats\": {part}\n}}"), doc);
        }
    }
}
