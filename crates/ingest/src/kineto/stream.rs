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
        d.deserialize_map(self)
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

/// `cat` → [`Cat`] without allocating.
struct CatVal(Cat);

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
                Ok(CatVal(if is("kernel") {
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
                }))
            }
            fn visit_unit<E: de::Error>(self) -> Result<CatVal, E> {
                Ok(CatVal(Cat::Other))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<CatVal, E> {
                Ok(CatVal(Cat::Other))
            }
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
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Name, E> {
        Ok(Name::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Name, E> {
        Ok(Name::Other)
    }
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
        Some(Name::Other | Name::Step(_) | Name::Gpu(_) | Name::RuntimeCall) => false,
        _ => cat != Some(Cat::Other),
    }
}

/// `ph` → its first byte (`X`, `M`, `f`), without allocating.
struct Ph(Option<u8>);

impl<'de> serde::Deserialize<'de> for Ph {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ph;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a phase letter")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Ph, E> {
                Ok(Ph(v.bytes().next()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Ph, E> {
                Ok(Ph(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Ph, E> {
                Ok(Ph(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trace event object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let c = self.0;
        let (mut ph, mut cat, mut name) = (None::<u8>, None::<Cat>, None::<Name>);
        let (mut pid, mut tid, mut ts, mut dur) = (Id(0), Id(0), Micros(None), Micros(None));
        let mut args: Option<Box<Args>> = None;
        let mut gpu_args = GpuArgs::default();
        while let Some(key) = map.next_key::<EvKey>()? {
            match key {
                EvKey::Ph => ph = map.next_value::<Ph>()?.0,
                EvKey::Cat => cat = Some(map.next_value::<CatVal>()?.0),
                EvKey::Name => {
                    let seed = NameSeed {
                        cat,
                        scratch: &mut c.scratch,
                        names: &mut c.compute_names,
                        other_comm: &mut c.other_comm_name,
                    };
                    name = Some(map.next_value_seed(seed)?)
                }
                EvKey::Pid => pid = map.next_value::<Id>()?,
                EvKey::Tid => tid = map.next_value::<Id>()?,
                EvKey::Ts => ts = map.next_value::<Micros>()?,
                EvKey::Dur => dur = map.next_value::<Micros>()?,
                EvKey::Args if wants_args(cat, name.as_ref()) => args = Some(Box::new(map.next_value::<Args>()?)),
                EvKey::Args if matches!(name, Some(Name::Gpu(_) | Name::RuntimeCall)) => {
                    gpu_args = map.next_value::<GpuArgs>()?
                }
                EvKey::Args | EvKey::Other => {
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
        if let (Name::Gpu(_) | Name::RuntimeCall, Some(a)) = (&name, &args) {
            // `args` came before the name, so it was read in full.
            gpu_args = GpuArgs { correlation: a.correlation, stream: a.stream, device: a.device };
        }
        let complete = ph.is_none_or(|p| p == b'X');
        let Some(ts_ns) = ts.0 else { return Ok(()) };
        let dur_ns = dur.0.unwrap_or(0).max(0);
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
