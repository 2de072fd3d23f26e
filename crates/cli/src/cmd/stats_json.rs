//! The per-rank and per-communicator rows of `stats --format json`, written
//! straight to the output with their keys in sorted order, as the
//! `serde_json::Value` of each row wrote them (a `Value` map sorts its
//! keys), without building that `Value`: a row through a `Value` was about
//! 10,000 instructions (a `String` per key, a tree to drop), on one core
//! after the parallel read, and a large job has thousands of rows.
//!
//! The keys are listed by hand: `sorted_rows_are_the_value_json` (below)
//! holds them to the `Value` text, so a field added to the row types and not
//! here fails it. The other rows (a few per kind of operation and per size)
//! still go through a `Value`.

use commlens_analyze::stats::{CommRow, RankRow};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// A [`RankRow`], keys sorted.
pub struct SortedRank<'a>(pub &'a RankRow);

impl Serialize for SortedRank<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut m = s.serialize_map(Some(10))?;
        m.serialize_entry("bytes", &r.bytes)?;
        m.serialize_entry("collective_ops", &r.collective_ops)?;
        m.serialize_entry("cuda_dev", &r.cuda_dev)?;
        m.serialize_entry("host", &r.host)?;
        m.serialize_entry("ops", &r.ops)?;
        m.serialize_entry("p2p_ops", &r.p2p_ops)?;
        m.serialize_entry("pid", &r.pid)?;
        m.serialize_entry("rank", &r.rank)?;
        m.serialize_entry("recovered", &r.recovered)?;
        m.serialize_entry("unknown_size", &r.unknown_size)?;
        m.end()
    }
}

/// A [`CommRow`], keys sorted.
pub struct SortedComm<'a>(pub &'a CommRow);

impl Serialize for SortedComm<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut m = s.serialize_map(Some(10))?;
        m.serialize_entry("bytes", &c.bytes)?;
        m.serialize_entry("comm_id", &c.comm_id)?;
        m.serialize_entry("global_ranks", &c.global_ranks)?;
        m.serialize_entry("grouping", &c.grouping)?;
        m.serialize_entry("members_seen", &c.members_seen)?;
        m.serialize_entry("mix", &c.mix)?;
        m.serialize_entry("name", &c.name)?;
        m.serialize_entry("nranks", &c.nranks)?;
        m.serialize_entry("ops", &c.ops)?;
        m.serialize_entry("unknown_size", &c.unknown_size)?;
        m.end()
    }
}

/// A slice written as a JSON array, each element through `wrap`.
pub struct Each<'a, T, W>(pub &'a [T], pub fn(&'a T) -> W);

impl<'a, T, W: Serialize> Serialize for Each<'a, T, W> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for x in self.0 {
            seq.serialize_element(&(self.1)(x))?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::{SortedComm, SortedRank};
    use commlens_analyze::stats::{CommRow, RankRow};
    use commlens_core::model::Grouping;
    use commlens_core::OpKind;

    fn same<T: serde::Serialize>(sorted: &impl serde::Serialize, row: &T) {
        let value = serde_json::to_value(row).unwrap();
        assert_eq!(serde_json::to_string_pretty(sorted).unwrap(), serde_json::to_string_pretty(&value).unwrap());
        assert_eq!(serde_json::to_string(sorted).unwrap(), serde_json::to_string(&value).unwrap());
    }

    /// Rows with and without their optional values, odd strings, extremes:
    /// the sorted writer gives the text of the row's `Value`.
    #[test]
    fn sorted_rows_are_the_value_json() {
        for (rank, dev, host) in [(Some(3), Some(0), "gdr114"), (None, None, "h\u{e9}\"\\x"), (Some(u32::MAX), Some(7), "")] {
            let r = RankRow {
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
            };
            same(&SortedRank(&r), &r);
        }
        for (id, grouping, mix) in [
            (Some("0x54fe282d32a87d85"), Grouping::CommId, vec![(OpKind::AllReduce, 990)]),
            (None, Grouping::OpSequence, vec![]),
            (None, Grouping::Single, vec![(OpKind::Send, 1), (OpKind::AllGather, u64::MAX)]),
        ] {
            let c = CommRow {
                name: "comm0[85,102]".into(),
                comm_id: id.map(Into::into),
                nranks: 2,
                members_seen: 2,
                global_ranks: vec![Some(85), None, Some(102)],
                grouping,
                ops: 990,
                bytes: 1545433251840,
                unknown_size: 0,
                mix,
            };
            same(&SortedComm(&c), &c);
        }
    }
}
