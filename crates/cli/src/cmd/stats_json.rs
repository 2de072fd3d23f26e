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

use super::json_text::{Keys, Text};
use commlens_analyze::stats::{CommRow, RankRow, StatsReport};

/// The report as a pretty JSON object, keys sorted, starting `depth`
/// containers deep in the document.
pub fn write(r: &StatsReport, depth: usize) -> serde_json::Result<Vec<u8>> {
    // About 330 bytes a row (one level deep in the document).
    let mut t = Text::at(depth, 4096 + (384 + 32 * depth) * (r.ranks.len() + r.comms.len()));
    t.open(b'{');
    t.key(true, "comms");
    let mut keys = comm_keys();
    t.array(&r.comms, |t, c| comm(t, &mut keys, c));
    t.key(false, "ops");
    t.value(&serde_json::to_value(&r.ops)?)?;
    t.key(false, "ranks");
    let mut keys = rank_keys();
    t.array(&r.ranks, |t, x| rank(t, &mut keys, x));
    t.key(false, "sizes");
    t.value(&serde_json::to_value(&r.sizes)?)?;
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

/// The keys of a [`RankRow`], sorted; [`rank`] writes value `i` after key `i`.
fn rank_keys() -> Keys<10> {
    Keys::new(["bytes", "collective_ops", "cuda_dev", "host", "ops", "p2p_ops", "pid", "rank", "recovered", "unknown_size"])
}

/// A [`RankRow`], keys sorted.
fn rank(t: &mut Text, k: &mut Keys<10>, r: &RankRow) {
    t.open(b'{');
    t.key_of(k, 0);
    t.u64(r.bytes);
    t.key_of(k, 1);
    t.u64(r.collective_ops);
    t.key_of(k, 2);
    t.opt(r.cuda_dev, |t, d| t.u64(u64::from(d)));
    t.key_of(k, 3);
    t.str(&r.host);
    t.key_of(k, 4);
    t.u64(r.ops);
    t.key_of(k, 5);
    t.u64(r.p2p_ops);
    t.key_of(k, 6);
    t.u64(u64::from(r.pid));
    t.key_of(k, 7);
    t.opt(r.rank, |t, n| t.u64(u64::from(n)));
    t.key_of(k, 8);
    t.u64(r.recovered);
    t.key_of(k, 9);
    t.u64(r.unknown_size);
    t.close(b'}', false);
}

/// The keys of a [`CommRow`], sorted; [`comm`] writes value `i` after key `i`.
fn comm_keys() -> Keys<10> {
    Keys::new(["bytes", "comm_id", "global_ranks", "grouping", "members_seen", "mix", "name", "nranks", "ops", "unknown_size"])
}

/// A [`CommRow`], keys sorted.
fn comm(t: &mut Text, k: &mut Keys<10>, c: &CommRow) {
    // Enum names as serde writes them (a few per row: the serializer is cheap enough).
    const NAMED: &str = "an enum of unit variants serializes";
    t.open(b'{');
    t.key_of(k, 0);
    t.u64(c.bytes);
    t.key_of(k, 1);
    t.opt(c.comm_id.as_deref(), Text::str);
    t.key_of(k, 2);
    t.array(&c.global_ranks, |t, r| t.opt(*r, |t, n| t.u64(u64::from(n))));
    t.key_of(k, 3);
    t.serde(&c.grouping).expect(NAMED);
    t.key_of(k, 4);
    t.u64(c.members_seen as u64);
    t.key_of(k, 5);
    t.array(&c.mix, |t, (kind, n)| {
        t.open(b'[');
        t.line(true);
        t.serde(kind).expect(NAMED);
        t.line(false);
        t.u64(*n);
        t.close(b']', false);
    });
    t.key_of(k, 6);
    t.str(&c.name);
    t.key_of(k, 7);
    t.u64(u64::from(c.nranks));
    t.key_of(k, 8);
    t.u64(c.ops);
    t.key_of(k, 9);
    t.u64(c.unknown_size);
    t.close(b'}', false);
}

#[cfg(test)]
mod tests {
    use super::{comm, comm_keys, rank, rank_keys, write, Text};
    use commlens_analyze::stats::{CommRow, OpRow, RankRow, SizeRow, StatsReport};
    use commlens_core::model::Grouping;
    use commlens_core::OpKind;

    fn same<T: serde::Serialize>(f: impl FnOnce(&mut Text, &T), row: &T) {
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
        let (mut rk, mut ck) = (rank_keys(), comm_keys());
        ranks().iter().for_each(|r| same(|t, r| rank(t, &mut rk, r), r));
        comms().iter().for_each(|c| same(|t, c| comm(t, &mut ck, c), c));
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
