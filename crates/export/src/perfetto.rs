//! Perfetto's native protobuf trace (`.perfetto-trace`/`.pftrace`), written
//! as a stream: each `TracePacket` is encoded on its own and written as one
//! length-delimited `Trace.packet` field (number 1, wire type 2), so the file
//! is a valid `Trace` message and memory stays at one packet plus one rank's
//! layout.
//!
//! Layout (same tracks as [`crate::chrome`], see [`crate::timeline`]): one
//! process track per rank (`ProcessDescriptor`: pid = global rank + 1, since
//! trace processor reserves pid 0 for the idle process; named
//! `rank 3 (host:pid, GPU 1)`), and under it one named child track per
//! stream / overflow lane / CPU thread / communicators track, in explicit
//! order (`child_ordering = EXPLICIT`, `sibling_order_rank`). GPU operations
//! are `TYPE_SLICE_BEGIN`/`TYPE_SLICE_END` pairs, CPU-only ones
//! `TYPE_INSTANT`; the arguments are `debug_annotations` (addresses as
//! `pointer_value`).
//!
//! All packets share one `trusted_packet_sequence_id`. The first packet sets
//! `SEQ_INCREMENTAL_STATE_CLEARED` (and `first_packet_on_sequence`); track
//! events set `SEQ_NEEDS_INCREMENTAL_STATE`, because event names, categories
//! and annotation names are interned (`InternedData`, emitted in the packet
//! that first uses them). Timestamps are ns on the default (boot-time) clock;
//! if any would be negative all are shifted so the earliest is 0.

pub mod proto;

use crate::timeline::{
    device_order, event_content, layout_rank, min_time, pids, process_name, range_tracks, ArgValue, Counting,
    Enrich, Named, TraceOptions, TraceSummary,
};
use commlens_core::OpTable;
use prost::Message;
use proto::{
    DebugAnnotation, EventType, InternedData, InternedString, ProcessDescriptor, TracePacket,
    TrackDescriptor, TrackEvent,
};
use rustc_hash::FxHashMap as HashMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// The `trusted_packet_sequence_id` of every packet commlens writes.
pub const SEQUENCE_ID: u32 = 0x636c;

/// Track uuid of a rank's process track (`k = None`) or of its `k`-th child track.
pub fn track_uuid(pid: u32, k: Option<u32>) -> u64 {
    ((pid as u64 + 1) << 32) | k.map_or(0, |k| k as u64 + 1)
}

/// Writes `table` as a Perfetto protobuf trace to `out` (buffered here).
pub fn write_perfetto_trace<W: Write>(
    table: &OpTable,
    enrich: &dyn Enrich,
    opts: &TraceOptions,
    out: W,
) -> io::Result<TraceSummary> {
    let mut w = PacketWriter {
        w: BufWriter::with_capacity(1 << 16, Counting { inner: out, n: 0 }),
        buf: Vec::with_capacity(1024),
        packets: 0,
        names: HashMap::default(),
        cats: HashMap::default(),
        ann: HashMap::default(),
    };
    let shift = min_time(table, opts).map_or(0, |m| if m < 0 { -(m as i128) } else { 0 });
    let ts = |t: i64| -> u64 { (t as i128 + shift).clamp(0, u64::MAX as i128) as u64 };
    let mut sum = TraceSummary::default();
    let pids = pids(table);
    for d in device_order(&pids) {
        let pid = pids[d];
        let puuid = track_uuid(pid, None);
        sum.processes += 1;
        w.packet(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(puuid),
                process: Some(ProcessDescriptor {
                    pid: Some(pid.saturating_add(1).min(i32::MAX as u32) as i32),
                    process_name: Some(process_name(table, d)),
                }),
                child_ordering: Some(proto::CHILD_ORDERING_EXPLICIT),
                ..Default::default()
            }),
            ..Default::default()
        })?;
        let lay = layout_rank(table, d, enrich, opts);
        sum.untimed_ops += lay.untimed;
        for (k, t) in lay.tracks.iter().enumerate() {
            w.packet(TracePacket {
                track_descriptor: Some(TrackDescriptor {
                    uuid: Some(track_uuid(pid, Some(k as u32))),
                    parent_uuid: Some(puuid),
                    name: Some(t.name.clone()),
                    sibling_order_rank: Some(k.min(i32::MAX as usize) as i32),
                    ..Default::default()
                }),
                ..Default::default()
            })?;
            sum.count_track(t);
        }
        for e in &lay.events {
            let track = track_uuid(pid, Some(e.track));
            let ty = if e.end_ns.is_some() { EventType::SliceBegin } else { EventType::Instant };
            w.event(ts(e.start_ns), track, ty, Some(event_content(table, d, &lay, e, enrich)))?;
            if let Some(end) = e.end_ns {
                w.event(ts(end), track, EventType::SliceEnd, None)?;
            }
            sum.count_event(e);
        }
    }
    if !opts.ranges.is_empty() {
        // One more process after the ranks: the NVTX / iteration ranges.
        let pid = pids.iter().max().map_or(0, |m| m.saturating_add(1));
        let puuid = track_uuid(pid, None);
        w.packet(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(puuid),
                process: Some(ProcessDescriptor {
                    pid: Some(pid.saturating_add(1).min(i32::MAX as u32) as i32),
                    process_name: Some("NVTX ranges".to_string()),
                }),
                child_ordering: Some(proto::CHILD_ORDERING_EXPLICIT),
                ..Default::default()
            }),
            ..Default::default()
        })?;
        for (k, (name, idx)) in range_tracks(&opts.ranges).into_iter().enumerate() {
            let track = track_uuid(pid, Some(k as u32));
            w.packet(TracePacket {
                track_descriptor: Some(TrackDescriptor {
                    uuid: Some(track),
                    parent_uuid: Some(puuid),
                    name: Some(name),
                    sibling_order_rank: Some(k.min(i32::MAX as usize) as i32),
                    ..Default::default()
                }),
                ..Default::default()
            })?;
            for i in idx {
                let r = &opts.ranges[i];
                let off = opts.time_offset_ns;
                w.event(ts(r.start_ns - off), track, EventType::SliceBegin, Some((r.name.as_str(), "nvtx", Vec::new())))?;
                w.event(ts(r.end_ns - off), track, EventType::SliceEnd, None)?;
                sum.ranges += 1;
            }
        }
    }
    if w.packets == 0 {
        // An empty table still gives a trace with one (named, empty) track.
        w.packet(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(1),
                name: Some("commlens: no operations".to_string()),
                ..Default::default()
            }),
            ..Default::default()
        })?;
    }
    sum.bytes = Counting::flush_count(&mut w.w)?;
    Ok(sum)
}

/// [`write_perfetto_trace`] into a new file at `path`.
pub fn write_perfetto_trace_file(
    table: &OpTable,
    enrich: &dyn Enrich,
    opts: &TraceOptions,
    path: &Path,
) -> io::Result<TraceSummary> {
    write_perfetto_trace(table, enrich, opts, std::fs::File::create(path)?)
}

/// Decodes a whole trace (for checks and tests; the writer never builds one).
pub fn read_perfetto_trace(bytes: &[u8]) -> Result<proto::Trace, prost::DecodeError> {
    proto::Trace::decode(bytes)
}

struct PacketWriter<W: Write> {
    w: BufWriter<Counting<W>>,
    buf: Vec<u8>,
    packets: u64,
    names: HashMap<String, u64>,
    cats: HashMap<&'static str, u64>,
    ann: HashMap<&'static str, u64>,
}

/// Interning id of `key`, adding it to `new` on first use (ids start at 1).
fn intern<K: std::hash::Hash + Eq>(
    map: &mut HashMap<K, u64>,
    key: K,
    name: &str,
    new: &mut Vec<InternedString>,
) -> u64 {
    let next = map.len() as u64 + 1;
    let iid = *map.entry(key).or_insert(next);
    if iid == next {
        new.push(InternedString { iid: Some(iid), name: Some(name.to_string()) });
    }
    iid
}

impl<W: Write> PacketWriter<W> {
    fn packet(&mut self, mut p: TracePacket) -> io::Result<()> {
        p.trusted_packet_sequence_id = Some(SEQUENCE_ID);
        if self.packets == 0 {
            p.sequence_flags = Some(p.sequence_flags.unwrap_or(0) | proto::SEQ_INCREMENTAL_STATE_CLEARED);
            p.first_packet_on_sequence = Some(true);
        }
        self.buf.clear();
        p.encode(&mut self.buf).map_err(io::Error::other)?;
        let mut head = Vec::with_capacity(11);
        prost::encoding::encode_key(1, prost::encoding::WireType::LengthDelimited, &mut head);
        prost::encoding::encode_varint(self.buf.len() as u64, &mut head);
        self.w.write_all(&head)?;
        self.w.write_all(&self.buf)?;
        self.packets += 1;
        Ok(())
    }

    fn event(&mut self, ts: u64, track: u64, ty: EventType, named: Option<Named<'_>>) -> io::Result<()> {
        let mut ev = TrackEvent { r#type: Some(ty as i32), track_uuid: Some(track), ..Default::default() };
        let mut interned = InternedData::default();
        if let Some((name, cat, args)) = named {
            let iid = match self.names.get(name) {
                Some(&i) => i,
                None => intern(&mut self.names, name.to_string(), name, &mut interned.event_names),
            };
            ev.name_iid = Some(iid);
            ev.category_iids.push(intern(&mut self.cats, cat, cat, &mut interned.event_categories));
            ev.debug_annotations.reserve(args.len());
            for (k, v) in args {
                let mut a = DebugAnnotation {
                    name_iid: Some(intern(&mut self.ann, k, k, &mut interned.debug_annotation_names)),
                    ..Default::default()
                };
                match v {
                    ArgValue::Bool(b) => a.bool_value = Some(b),
                    ArgValue::Int(x) => a.int_value = Some(x),
                    ArgValue::Uint(x) => a.uint_value = Some(x),
                    ArgValue::Float(x) => a.double_value = Some(x),
                    ArgValue::Str(s) => a.string_value = Some(s),
                    ArgValue::Ptr(p) => a.pointer_value = Some(p),
                }
                ev.debug_annotations.push(a);
            }
        }
        let fresh = !(interned.event_names.is_empty()
            && interned.event_categories.is_empty()
            && interned.debug_annotation_names.is_empty());
        self.packet(TracePacket {
            timestamp: Some(ts),
            track_event: Some(ev),
            interned_data: fresh.then_some(interned),
            sequence_flags: Some(proto::SEQ_NEEDS_INCREMENTAL_STATE),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::proto::*;
    use prost::Message;

    /// Pins the field numbers to hand-computed bytes (independent of prost's
    /// attribute parsing): a wrong tag in `proto.rs` fails here.
    #[test]
    fn golden_bytes() {
        let p = TracePacket {
            timestamp: Some(1),
            trusted_packet_sequence_id: Some(2),
            track_event: Some(TrackEvent {
                category_iids: vec![1, 2],
                debug_annotations: vec![DebugAnnotation {
                    name_iid: Some(3),
                    bool_value: Some(true),
                    uint_value: Some(4),
                    int_value: Some(-1),
                    double_value: Some(0.0),
                    string_value: Some("s".into()),
                    pointer_value: Some(5),
                    name: Some("n".into()),
                }],
                r#type: Some(EventType::SliceBegin as i32),
                name_iid: Some(6),
                track_uuid: Some(7),
                categories: vec!["c".into()],
                name: Some("x".into()),
            }),
            interned_data: Some(InternedData {
                event_categories: vec![InternedString { iid: Some(1), name: Some("a".into()) }],
                event_names: vec![InternedString { iid: Some(2), name: Some("b".into()) }],
                debug_annotation_names: vec![InternedString { iid: Some(3), name: Some("c".into()) }],
            }),
            sequence_flags: Some(3),
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(8),
                name: Some("t".into()),
                process: Some(ProcessDescriptor { pid: Some(9), process_name: Some("p".into()) }),
                parent_uuid: Some(10),
                child_ordering: Some(3),
                sibling_order_rank: Some(11),
            }),
            first_packet_on_sequence: Some(true),
        };
        let got = p.encode_to_vec();
        let mut annotation = vec![0x08, 3, 0x10, 1, 0x18, 4, 0x20];
        annotation.extend([0xff; 9]);
        annotation.push(0x01); // int64 -1 as a 10-byte varint
        annotation.extend([0x29, 0, 0, 0, 0, 0, 0, 0, 0]); // double 0.0 (fixed64)
        annotation.extend([0x32, 1, b's', 0x38, 5, 0x52, 1, b'n']);
        let mut event = vec![0x18, 1, 0x18, 2, 0x22, annotation.len() as u8];
        event.extend(&annotation);
        event.extend([0x48, 1, 0x50, 6, 0x58, 7, 0xb2, 0x01, 1, b'c', 0xba, 0x01, 1, b'x']);
        let interned = [
            0x0a, 5, 0x08, 1, 0x12, 1, b'a', 0x12, 5, 0x08, 2, 0x12, 1, b'b', 0x1a, 5, 0x08, 3, 0x12, 1, b'c',
        ];
        let process = [0x08, 9, 0x32, 1, b'p'];
        let mut track = vec![0x08, 8, 0x12, 1, b't', 0x1a, process.len() as u8];
        track.extend(process);
        track.extend([0x28, 10, 0x58, 3, 0x60, 11]);
        let mut want = vec![0x40, 1, 0x50, 2, 0x5a, event.len() as u8];
        want.extend(&event);
        want.extend([0x62, interned.len() as u8]);
        want.extend(interned);
        want.extend([0x68, 3]);
        want.extend([0xe2, 0x03, track.len() as u8]); // field 60, wire type 2
        want.extend(&track);
        want.extend([0xb8, 0x05, 1]); // field 87, varint
        assert_eq!(got, want);
        assert_eq!(TracePacket::decode(&got[..]).unwrap(), p);
        let trace = Trace { packet: vec![p.clone(), p] };
        let bytes = trace.encode_to_vec();
        assert_eq!(bytes[0], 0x0a);
        assert_eq!(Trace::decode(&bytes[..]).unwrap(), trace);
    }
}
