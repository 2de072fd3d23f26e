//! Streaming pass over a Chrome-trace JSON document with serde: one event at
//! a time, keeping only what concerns NCCL.
//!
//! The top-level object (or bare event array) is walked by [`TopSeed`];
//! `traceEvents` by [`EventsSeed`], whose `visit_seq` hands each event to
//! [`EventSeed`]. An event's fields are read into locals: `cat` and `name` are
//! classified while being parsed (a name is copied only when it is an NCCL
//! kernel, a communication kernel of another library, an `nccl:*` op or a
//! `ProfilerStep#`), and `args` is parsed into [`Args`] only when the event can
//! matter (otherwise it is skipped with `IgnoredAny`). The [`Collector`] keeps
//! NCCL kernels, CPU-side NCCL ops, kernel launch calls (24 bytes each: they
//! are the only link from a kernel to its CPU op in older traces), steps and
//! the small job metadata. Every other GPU activity (kernels, `gpu_memcpy`,
//! `gpu_memset`) becomes a 32-byte [`RawCompute`] with an interned name id:
//! its name is looked up by `&str` and copied once per distinct name, and its
//! `args` are read into the stack-only [`GpuArgs`]. Memory is therefore
//! bounded by the NCCL activity plus a few dozen bytes per GPU activity and
//! launch, never by the size of the file.

pub(crate) use super::gpu::{GpuArgs, RawCompute};
use super::gpu::{intern_gpu, raw_compute};
use super::values::{Dim3, FirstNelems, FirstText, Id, Micros, Num, RankList, Text};
use crate::kernel_name;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// Visitor arms for a value that should be a string: any other type
/// (containers drained) gives `$bad` instead of failing the file.
macro_rules! not_a_string {
    ($bad:expr) => {
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($bad)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($bad)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($bad)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($bad)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($bad)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($bad)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok($bad)
        }
    };
}

/// Event category, from `cat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cat {
    Kernel,
    /// `gpu_memcpy`, `gpu_memset`.
    GpuMem,
    CpuOp,
    UserAnnotation,
    Runtime,
    Other,
}

/// What an event's `name` is, as far as NCCL is concerned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Name {
    NcclKernel(String),
    /// Any other GPU activity, by id in [`Collector::compute_names`].
    Gpu(u32),
    /// A name read before the category: kept until the category says
    /// whether it is a GPU activity (rare; Kineto writes `cat` first).
    Deferred(String),
    RecordParamComms,
    NcclOp(String),
    Step(String),
    Launch,
    /// Another runtime call (`cudaMemcpyAsync`, …): its correlation id
    /// names the copy or fill it started.
    RuntimeCall,
    Other,
    /// Not a string (the event is malformed).
    Malformed,
}

/// `args` fields used by any kept event. Unknown keys are skipped.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Args {
    #[serde(rename = "External id")]
    pub ext: Num,
    pub correlation: Num,
    pub stream: Num,
    pub device: Num,
    pub grid: Option<Dim3>,
    pub block: Option<Dim3>,
    #[serde(rename = "registers per thread")]
    pub registers: Num,
    #[serde(rename = "shared memory")]
    pub smem: Num,
    #[serde(rename = "Collective name")]
    pub collective: Text,
    #[serde(rename = "In msg nelems")]
    pub in_nelems: Num,
    #[serde(rename = "Out msg nelems")]
    pub out_nelems: Num,
    #[serde(rename = "Group size")]
    pub group_size: Num,
    pub dtype: Text,
    #[serde(rename = "Process Group Name")]
    pub pg_name: Text,
    #[serde(rename = "Process Group Description")]
    pub pg_desc: Text,
    #[serde(rename = "Process Group Ranks")]
    pub pg_ranks: RankList,
    #[serde(rename = "Rank")]
    pub rank: Num,
    #[serde(rename = "Seq")]
    pub seq: Num,
    #[serde(rename = "Dst Rank")]
    pub dst_rank: Num,
    #[serde(rename = "Src Rank")]
    pub src_rank: Num,
    #[serde(rename = "Input Dims")]
    pub input_dims: FirstNelems,
    #[serde(rename = "Input type")]
    pub input_type: FirstText,
}

/// One kept event, before linking.
#[derive(Debug)]
pub(crate) struct RawEvent {
    pub index: u64,
    pub pid: u64,
    pub tid: u64,
    pub ts_ns: i64,
    pub dur_ns: i64,
    pub name: String,
    pub args: Box<Args>,
}

/// A kernel launch call: correlation id, thread, start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawLaunch {
    pub correlation: u64,
    pub tid: u64,
    pub ts_ns: i64,
}

/// `distributedInfo`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct DistInfo {
    pub backend: Text,
    pub rank: Num,
    pub world_size: Num,
    pub nccl_version: Text,
    pub pg_config: PgConfigs,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct PgConfig {
    pub pg_name: Text,
    pub pg_desc: Text,
    pub backend_config: Text,
    pub pg_size: Num,
    pub ranks: RankList,
}

/// `pg_config`: a list of groups, or an object keyed by group name.
#[derive(Debug, Default)]
pub(crate) struct PgConfigs(pub Vec<PgConfig>);

impl<'de> serde::Deserialize<'de> for PgConfigs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PgConfigs;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("pg_config")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PgConfigs, A::Error> {
                let mut out = Vec::new();
                while let Some(pg) = seq.next_element::<PgConfig>()? {
                    out.push(pg);
                }
                Ok(PgConfigs(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PgConfigs, A::Error> {
                let mut out = Vec::new();
                while let Some((name, mut pg)) = map.next_entry::<Text, PgConfig>()? {
                    if pg.pg_name.0.is_none() {
                        pg.pg_name = name;
                    }
                    out.push(pg);
                }
                Ok(PgConfigs(out))
            }
            fn visit_unit<E: de::Error>(self) -> Result<PgConfigs, E> {
                Ok(PgConfigs::default())
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct DeviceProp {
    pub id: Num,
    pub name: Text,
}

/// Everything the pass keeps.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    pub events: u64,
    pub gpu_kernels: u64,
    pub kernels: Vec<RawEvent>,
    pub cpu: Vec<RawEvent>,
    pub steps: Vec<RawEvent>,
    pub launches: Vec<RawLaunch>,
    /// Runtime calls other than kernel launches that carry a correlation id
    /// (24 bytes each): the launches of memcpys and memsets.
    pub other_calls: Vec<RawLaunch>,
    pub compute: Vec<RawCompute>,
    pub compute_names: crate::kineto::trace::ComputeNames,
    /// Per name id: whether it is a non-NCCL communication kernel name
    /// (counted in `other_comm` when it runs as a kernel).
    pub other_comm_name: Vec<bool>,
    pub other_comm: crate::kineto::trace::TraceStats,
    pub dist: Option<DistInfo>,
    pub devices: Vec<DeviceProp>,
    pub base_time_ns: Option<i64>,
    pub schema_version: Option<String>,
    pub saw_trace_events: bool,
    /// Malformed events skipped (the rest of the file is kept).
    pub skipped: crate::kineto::trace::Skipped,
    scratch: Vec<u8>,
}

/// The top level: an object with `traceEvents` (and metadata), or a bare array.
pub(crate) struct TopSeed<'a>(pub &'a mut Collector);

impl<'de> DeserializeSeed<'de> for TopSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Chrome trace (an object with traceEvents, or an array of events)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<TopKey>()? {
            match key {
                TopKey::TraceEvents => {
                    self.0.saw_trace_events = true;
                    map.next_value_seed(EventsSeed(&mut *self.0))?;
                }
                TopKey::DistributedInfo => self.0.dist = Some(map.next_value::<DistInfo>()?),
                TopKey::DeviceProperties => {
                    self.0.devices = map.next_value::<Option<Vec<DeviceProp>>>()?.unwrap_or_default()
                }
                TopKey::BaseTime => {
                    self.0.base_time_ns = map.next_value::<Num>()?.0.and_then(|v| i64::try_from(v).ok())
                }
                TopKey::SchemaVersion => self.0.schema_version = map.next_value::<Text>()?.0,
                TopKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        self.0.saw_trace_events = true;
        EventsSeed(self.0).visit_seq(seq)
    }
}

enum TopKey {
    TraceEvents,
    DistributedInfo,
    DeviceProperties,
    BaseTime,
    SchemaVersion,
    Other,
}

impl<'de> serde::Deserialize<'de> for TopKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = TopKey;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TopKey, E> {
                Ok(match v {
                    "traceEvents" => TopKey::TraceEvents,
                    "distributedInfo" => TopKey::DistributedInfo,
                    "deviceProperties" => TopKey::DeviceProperties,
                    "baseTimeNanoseconds" => TopKey::BaseTime,
                    "schemaVersion" => TopKey::SchemaVersion,
                    _ => TopKey::Other,
                })
            }
        }
        d.deserialize_str(V)
    }
}

struct EventsSeed<'a>(&'a mut Collector);

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of trace events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(EventSeed(&mut *self.0))?.is_some() {}
        Ok(())
    }
}

struct EventSeed<'a>(&'a mut Collector);

impl<'de> DeserializeSeed<'de> for EventSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl EventSeed<'_> {
    /// An element of `traceEvents` that is not an object: counted, skipped.
    fn not_an_object(self, what: &str) {
        let c = self.0;
        c.events += 1;
        let index = c.events - 1;
        c.skipped.add("that are not objects", || format!("traceEvents[{index}]: {what}, not an object"));
    }
}

/// A value that must be an object (`args`): parsed as `T` when it is one,
/// `None` (drained) when it is anything else, `null` included.
struct Obj<T>(Option<T>);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|v| Obj(Some(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Obj<T>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Obj(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

enum EvKey {
    Ph,
    Cat,
    Name,
    Pid,
    Tid,
    Ts,
    Dur,
    Args,
    Other,
}

impl<'de> serde::Deserialize<'de> for EvKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = EvKey;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an event key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<EvKey, E> {
                Ok(match v {
                    "ph" => EvKey::Ph,
                    "cat" => EvKey::Cat,
                    "name" => EvKey::Name,
                    "pid" => EvKey::Pid,
                    "tid" => EvKey::Tid,
                    "ts" => EvKey::Ts,
                    "dur" => EvKey::Dur,
                    "args" => EvKey::Args,
                    _ => EvKey::Other,
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// `cat` → [`Cat`] without allocating; `None` when it is not a string.
struct CatVal(Option<Cat>);

impl<'de> serde::Deserialize<'de> for CatVal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CatVal;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a category")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CatVal, E> {
                let is = |w: &str| v.eq_ignore_ascii_case(w);
                Ok(CatVal(Some(if is("kernel") {
                    Cat::Kernel
                } else if is("gpu_memcpy") || is("gpu_memset") {
                    Cat::GpuMem
                } else if is("cpu_op") || is("operator") {
                    Cat::CpuOp
                } else if is("user_annotation") {
                    Cat::UserAnnotation
                } else if is("cuda_runtime") || is("cuda_driver") || is("runtime") || is("driver") {
                    Cat::Runtime
                } else {
                    Cat::Other
                })))
            }
            not_a_string!(CatVal(None));
        }
        d.deserialize_any(V)
    }
}

/// Classifies a `name` while it is parsed; copies it only when kept.
struct NameSeed<'a> {
    cat: Option<Cat>,
    scratch: &'a mut Vec<u8>,
    names: &'a mut crate::kineto::trace::ComputeNames,
    other_comm: &'a mut Vec<bool>,
}

impl<'de> DeserializeSeed<'de> for NameSeed<'_> {
    type Value = Name;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Name, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NameSeed<'_> {
    type Value = Name;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an event name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Name, E> {
        Ok(match classify_name(v, self.cat) {
            Name::Gpu(_) => Name::Gpu(intern_gpu(v, self.names, self.other_comm, self.scratch)),
            n => n,
        })
    }
    not_a_string!(Name::Malformed);
}

/// Classifies a name; [`Name::Gpu`] comes back with id 0 and is interned by
/// the caller, which owns the interner.
pub(crate) fn classify_name(v: &str, cat: Option<Cat>) -> Name {
    let b = v.as_bytes();
    let gpu = matches!(cat, None | Some(Cat::Kernel));
    let cpu = matches!(cat, None | Some(Cat::CpuOp | Cat::UserAnnotation));
    if gpu && kernel_name::is_nccl_kernel(b) {
        return Name::NcclKernel(v.to_string());
    }
    if cpu && v == "record_param_comms" {
        return Name::RecordParamComms;
    }
    if cpu && v.starts_with("nccl:") {
        return Name::NcclOp(v.to_string());
    }
    if cpu && v.starts_with("ProfilerStep#") {
        return Name::Step(v.to_string());
    }
    if matches!(cat, None | Some(Cat::Runtime)) && (v.starts_with("cu") && v.contains("Launch")) {
        return Name::Launch;
    }
    if cat == Some(Cat::Runtime) {
        return Name::RuntimeCall;
    }
    match cat {
        Some(Cat::Kernel | Cat::GpuMem) => Name::Gpu(0),
        None => Name::Deferred(v.to_string()),
        _ => Name::Other,
    }
}

/// Whether an event with this category and name needs its `args` (when
/// either is not known yet, it might).
fn wants_args(cat: Option<Cat>, name: Option<&Name>) -> bool {
    match name {
        Some(Name::Other | Name::Malformed | Name::Step(_) | Name::Gpu(_) | Name::RuntimeCall) => false,
        _ => cat != Some(Cat::Other),
    }
}

/// `ph` → its first byte (`X`, `M`, `f`), without allocating; `Err` when
/// it is not a string.
struct Ph(Result<Option<u8>, ()>);

impl<'de> serde::Deserialize<'de> for Ph {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ph;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a phase letter")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Ph, E> {
                Ok(Ph(Ok(v.bytes().next())))
            }
            not_a_string!(Ph(Err(())));
        }
        d.deserialize_any(V)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trace event object")
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.not_an_object("a number");
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.not_an_object("a number");
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.not_an_object("a number");
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.not_an_object("a boolean");
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.not_an_object("a string");
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.not_an_object("null");
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        self.not_an_object("an array");
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let c = self.0;
        let (mut ph, mut cat, mut name) = (None::<u8>, None::<Cat>, None::<Name>);
        let (mut pid, mut tid, mut ts, mut dur) = (Id(0), Id(0), Micros(None), None::<Micros>);
        let mut args: Option<Box<Args>> = None;
        let mut gpu_args = GpuArgs::default();
        // Why the event is malformed, when it is (the first problem found).
        let mut bad: Option<&'static str> = None;
        while let Some(key) = map.next_key::<EvKey>()? {
            match key {
                EvKey::Ph => match map.next_value::<Ph>()?.0 {
                    Ok(p) => ph = p,
                    Err(()) => bad = bad.or(Some("with ph not a string")),
                },
                EvKey::Cat => match map.next_value::<CatVal>()?.0 {
                    Some(k) => cat = Some(k),
                    None => bad = bad.or(Some("with cat not a string")),
                },
                EvKey::Name => {
                    let seed = NameSeed {
                        cat,
                        scratch: &mut c.scratch,
                        names: &mut c.compute_names,
                        other_comm: &mut c.other_comm_name,
                    };
                    let n = map.next_value_seed(seed)?;
                    if n == Name::Malformed {
                        bad = bad.or(Some("with a name that is not a string"));
                    }
                    name = Some(n)
                }
                EvKey::Pid => pid = map.next_value::<Id>()?,
                EvKey::Tid => tid = map.next_value::<Id>()?,
                EvKey::Ts => ts = map.next_value::<Micros>()?,
                EvKey::Dur => dur = Some(map.next_value::<Micros>()?),
                EvKey::Args if wants_args(cat, name.as_ref()) => match map.next_value::<Obj<Args>>()?.0 {
                    Some(a) => args = Some(Box::new(a)),
                    None => bad = bad.or(Some("with args not an object")),
                },
                EvKey::Args if matches!(name, Some(Name::Gpu(_) | Name::RuntimeCall)) => {
                    match map.next_value::<Obj<GpuArgs>>()?.0 {
                        Some(a) => gpu_args = a,
                        None => bad = bad.or(Some("with args not an object")),
                    }
                }
                EvKey::Args => {
                    if map.next_value::<Obj<IgnoredAny>>()?.0.is_none() {
                        bad = bad.or(Some("with args not an object"));
                    }
                }
                EvKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        c.events += 1;
        let index = c.events - 1;
        let cat = cat.unwrap_or(Cat::Other);
        // A name read before its category was classified for every category;
        // the match below drops combinations that make no sense.
        let name = match name {
            Some(Name::Deferred(n)) if matches!(cat, Cat::Kernel | Cat::GpuMem) => {
                Name::Gpu(intern_gpu(&n, &mut c.compute_names, &mut c.other_comm_name, &mut c.scratch))
            }
            n => n.unwrap_or(Name::Other),
        };
        let kept = matches!(
            (cat, &name),
            (Cat::Kernel, Name::NcclKernel(_) | Name::Gpu(_))
                | (Cat::GpuMem, Name::Gpu(_))
                | (Cat::CpuOp | Cat::UserAnnotation, Name::RecordParamComms | Name::NcclOp(_) | Name::Step(_))
                | (Cat::Runtime, Name::Launch | Name::RuntimeCall)
        );
        if bad.is_none() && kept {
            // Times of the events kept must be times: a missing, unreadable
            // or negative `ts` (or `dur`) would misplace or drop it silently.
            if ts.0.is_none_or(|t| t < 0) {
                bad = Some("with ts missing, negative or not a time");
            } else if dur.is_some_and(|d| d.0.is_none_or(|d| d < 0)) {
                bad = Some("with dur negative or not a time");
            }
        }
        if let Some(reason) = bad {
            let label = match &name {
                Name::NcclKernel(n) | Name::NcclOp(n) | Name::Step(n) | Name::Deferred(n) => Some(n.as_str()),
                Name::Gpu(id) => c.compute_names.names.get(*id as usize).map(|n| n.name.as_str()),
                Name::RecordParamComms => Some("record_param_comms"),
                Name::Launch => Some("a kernel launch call"),
                _ => None,
            };
            let problem = reason.strip_prefix("with ").unwrap_or(reason);
            c.skipped.add(reason, || match label {
                Some(l) => {
                    let mut end = l.len().min(120);
                    while !l.is_char_boundary(end) {
                        end -= 1;
                    }
                    format!("traceEvents[{index}] \"{}\": {problem}", &l[..end])
                }
                None => format!("traceEvents[{index}]: {problem}"),
            });
            return Ok(());
        }
        if let (Name::Gpu(_) | Name::RuntimeCall, Some(a)) = (&name, &args) {
            // `args` came before the name, so it was read in full.
            gpu_args = GpuArgs { correlation: a.correlation, stream: a.stream, device: a.device };
        }
        let complete = ph.is_none_or(|p| p == b'X');
        let Some(ts_ns) = ts.0 else { return Ok(()) };
        let dur_ns = dur.and_then(|d| d.0).unwrap_or(0).max(0);
        let raw = |name: String, args: Option<Box<Args>>| RawEvent {
            index,
            pid: pid.0,
            tid: tid.0,
            ts_ns,
            dur_ns,
            name,
            args: args.unwrap_or_default(),
        };
        match (cat, name) {
            (Cat::Kernel, n) => {
                c.gpu_kernels += 1;
                match n {
                    Name::NcclKernel(n) if complete => c.kernels.push(raw(n, args)),
                    Name::Gpu(id) => {
                        if c.other_comm_name[id as usize] {
                            let n = &c.compute_names.names[id as usize].name;
                            crate::kineto::trace::count_other_comm(&mut c.other_comm, n, 1);
                        }
                        if complete {
                            c.compute.push(raw_compute(ts_ns, dur_ns, id, &gpu_args, tid.0));
                        }
                    }
                    _ => {}
                }
            }
            (Cat::GpuMem, Name::Gpu(id)) if complete => c.compute.push(raw_compute(ts_ns, dur_ns, id, &gpu_args, tid.0)),
            (Cat::CpuOp | Cat::UserAnnotation, Name::RecordParamComms) if complete => {
                c.cpu.push(raw("record_param_comms".to_string(), args))
            }
            (Cat::CpuOp | Cat::UserAnnotation, Name::NcclOp(n)) if complete => c.cpu.push(raw(n, args)),
            (Cat::CpuOp | Cat::UserAnnotation, Name::Step(n)) if complete => c.steps.push(raw(n, None)),
            (Cat::Runtime, Name::Launch) => {
                if let Some(corr) = args.and_then(|a| a.correlation.0) {
                    c.launches.push(RawLaunch { correlation: corr, tid: tid.0, ts_ns });
                }
            }
            (Cat::Runtime, Name::RuntimeCall) => {
                if let Some(corr) = gpu_args.correlation.0 {
                    c.other_calls.push(RawLaunch { correlation: corr, tid: tid.0, ts_ns });
                }
            }
            _ => {}
        }
        Ok(())
    }
}
