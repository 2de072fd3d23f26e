//! The streaming write loop: cuts `table.ops()` into row groups and writes
//! each group column by column with the `parquet` crate's low-level writer.
//! Also owns [`Ctx`], the per-file lookup state the column getters read
//! (per-process and per-communicator strings built once, an interner for
//! repeated strings, the clamp counter).

use crate::schema::{builtin_columns, leaf, physical_of, source_kind_name, Getter, Row, SCHEMA_VERSION};
use crate::{json_string_array, Compression, ExtraValues, WriteError, WriteOptions, WriteSummary};
use crate::{META_COMMLENS_VERSION, META_EXTRA_COLUMNS, META_RANKS_REPRESENTED, META_SCHEMA_VERSION, META_SOURCES, META_SOURCE_KIND};
use commlens_core::{CollOp, DevIdx, OpTable, SourceKind};
use parquet::basic::Type as PhysicalType;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::{SerializedColumnWriter, SerializedFileWriter};
use parquet::schema::types::Type;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

/// Lookup state shared by the column getters of one file.
pub(crate) struct Ctx<'a> {
    pub table: &'a OpTable,
    pub source_kind: Option<SourceKind>,
    // Strings that are constant per process / handle / logical communicator
    // are built once; ByteArray clones share the buffer, so rows cost no
    // allocation for them.
    pub host: Vec<ByteArray>,
    pub nccl_version: Vec<Option<ByteArray>>,
    pub comm_ptr: Vec<ByteArray>,
    pub comm_id: Vec<Option<ByteArray>>,
    pub logical_name: Vec<ByteArray>,
    /// Repeated per-row strings (kinds, datatypes, kernel names, streams).
    /// Cleared per row group so it is bounded by the group, not the file.
    interned: RefCell<HashMap<String, ByteArray>>,
    clamped: Cell<u64>,
}

impl<'a> Ctx<'a> {
    fn new(table: &'a OpTable, source_kind: Option<SourceKind>) -> Self {
        let ba = |s: &str| ByteArray::from(s.as_bytes().to_vec());
        Ctx {
            table,
            source_kind,
            host: table.processes.iter().map(|p| ba(&p.host)).collect(),
            nccl_version: table
                .processes
                .iter()
                .map(|p| p.nccl_version.map(|v| ba(&v.to_string())))
                .collect(),
            comm_ptr: table.comms.iter().map(|c| ba(&format!("{:#x}", c.ptr))).collect(),
            comm_id: table
                .comms
                .iter()
                .map(|c| c.comm_id.map(|id| ba(&format!("{id:#x}"))))
                .collect(),
            logical_name: table.logical.iter().map(|l| ba(&l.name)).collect(),
            interned: RefCell::new(HashMap::new()),
            clamped: Cell::new(0),
        }
    }

    pub fn intern(&self, s: &str) -> ByteArray {
        let mut m = self.interned.borrow_mut();
        if let Some(b) = m.get(s) {
            return b.clone();
        }
        let b = ByteArray::from(s.as_bytes().to_vec());
        m.insert(s.to_string(), b.clone());
        b
    }

    fn clamp_hit(&self) {
        self.clamped.set(self.clamped.get() + 1);
    }

    pub fn u32(&self, v: Option<u32>) -> Option<i32> {
        v.map(|v| {
            i32::try_from(v).unwrap_or_else(|_| {
                self.clamp_hit();
                i32::MAX
            })
        })
    }

    pub fn usize(&self, v: usize) -> Option<i32> {
        self.u32(Some(u32::try_from(v).unwrap_or(u32::MAX)))
    }

    pub fn u64(&self, v: u64) -> i64 {
        i64::try_from(v).unwrap_or_else(|_| {
            self.clamp_hit();
            i64::MAX
        })
    }

    pub fn logical_of(&self, op: &CollOp) -> Option<usize> {
        self.table.comms[op.comm.ix()].logical.map(|l| l.ix())
    }

    /// The handle's own `nranks`; the logical communicator's when the handle
    /// logged none (e.g. plugin outputs), so the column is filled wherever
    /// the table knows the size.
    pub fn nranks_of(&self, op: &CollOp) -> Option<u32> {
        let c = &self.table.comms[op.comm.ix()];
        c.nranks
            .or_else(|| c.logical.map(|l| self.table.logical[l.ix()].nranks))
    }
}

fn properties(table: &OpTable, opts: &WriteOptions, footer: &[(String, String)]) -> Result<WriterProperties, WriteError> {
    let compression = match opts.compression {
        Compression::Uncompressed => parquet::basic::Compression::UNCOMPRESSED,
        Compression::Snappy => parquet::basic::Compression::SNAPPY,
        #[cfg(feature = "zstd")]
        Compression::Zstd(level) => parquet::basic::Compression::ZSTD(parquet::basic::ZstdLevel::try_new(level)?),
    };
    let mut kv = vec![
        KeyValue::new(META_COMMLENS_VERSION.to_string(), env!("CARGO_PKG_VERSION").to_string()),
        KeyValue::new(META_SCHEMA_VERSION.to_string(), SCHEMA_VERSION.to_string()),
        KeyValue::new(
            META_SOURCES.to_string(),
            json_string_array(table.sources.iter().map(String::as_str)),
        ),
        KeyValue::new(
            META_EXTRA_COLUMNS.to_string(),
            json_string_array(opts.extra.iter().map(|e| e.name.as_str())),
        ),
    ];
    if let Some(k) = opts.source_kind {
        kv.push(KeyValue::new(
            META_SOURCE_KIND.to_string(),
            source_kind_name(k).to_string(),
        ));
    }
    if let Some(n) = opts.ranks_represented {
        kv.push(KeyValue::new(META_RANKS_REPRESENTED.to_string(), n.to_string()));
    }
    kv.extend(footer.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())));
    Ok(WriterProperties::builder()
        .set_compression(compression)
        .set_created_by(format!("commlens-parquet {} (parquet-rs)", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(kv))
        .build())
}

fn file_schema(opts: &WriteOptions) -> Result<Type, WriteError> {
    let mut fields = Vec::new();
    for c in builtin_columns() {
        fields.push(leaf(c.name, physical_of(&c.get), c.nullable)?);
    }
    for e in &opts.extra {
        let physical = match e.values {
            ExtraValues::F64(_) => PhysicalType::DOUBLE,
            ExtraValues::Str(_) => PhysicalType::BYTE_ARRAY,
        };
        fields.push(leaf(&e.name, physical, true)?);
    }
    Ok(Type::group_type_builder("commlens_op").with_fields(fields).build()?)
}

/// Reused value and definition-level buffers, so a row group allocates them
/// once, not once per column.
#[derive(Default)]
struct Buffers {
    defs: Vec<i16>,
    i32s: Vec<i32>,
    i64s: Vec<i64>,
    f64s: Vec<f64>,
    bools: Vec<bool>,
    strs: Vec<ByteArray>,
}

/// Pushes `v` (value + definition level 1) or a null (definition level 0).
fn push<T>(vals: &mut Vec<T>, defs: &mut Vec<i16>, v: Option<T>) {
    match v {
        Some(v) => {
            vals.push(v);
            defs.push(1);
        }
        None => defs.push(0),
    }
}

/// Writes one built-in column of a row group.
fn write_builtin(
    cw: &mut SerializedColumnWriter<'_>,
    get: &Getter,
    nullable: bool,
    rows: &[Row<'_>],
    b: &mut Buffers,
) -> Result<(), WriteError> {
    b.defs.clear();
    // Required columns carry no definition levels; their getters never
    // return None (the schema module pairs them), so `defs` goes unused.
    match get {
        Getter::Bool(f) => {
            b.bools.clear();
            b.bools.extend(rows.iter().map(f));
            cw.typed::<BoolType>().write_batch(&b.bools, None, None)?;
        }
        Getter::I32(f) => {
            b.i32s.clear();
            rows.iter().for_each(|r| push(&mut b.i32s, &mut b.defs, f(r)));
            cw.typed::<Int32Type>()
                .write_batch(&b.i32s, nullable.then_some(&b.defs[..]), None)?;
        }
        Getter::I64(f) => {
            b.i64s.clear();
            rows.iter().for_each(|r| push(&mut b.i64s, &mut b.defs, f(r)));
            cw.typed::<Int64Type>()
                .write_batch(&b.i64s, nullable.then_some(&b.defs[..]), None)?;
        }
        Getter::Str(f) => {
            b.strs.clear();
            rows.iter().for_each(|r| push(&mut b.strs, &mut b.defs, f(r)));
            cw.typed::<ByteArrayType>()
                .write_batch(&b.strs, nullable.then_some(&b.defs[..]), None)?;
        }
    }
    Ok(())
}

/// Writes rows `range` of one extra column.
fn write_extra(
    cw: &mut SerializedColumnWriter<'_>,
    values: &ExtraValues,
    range: std::ops::Range<usize>,
    b: &mut Buffers,
) -> Result<(), WriteError> {
    b.defs.clear();
    match values {
        ExtraValues::F64(v) => {
            b.f64s.clear();
            v[range].iter().for_each(|x| push(&mut b.f64s, &mut b.defs, *x));
            cw.typed::<DoubleType>().write_batch(&b.f64s, Some(&b.defs), None)?;
        }
        ExtraValues::Str(v) => {
            b.strs.clear();
            for x in &v[range] {
                let ba = x.as_ref().map(|s| ByteArray::from(s.as_bytes().to_vec()));
                push(&mut b.strs, &mut b.defs, ba);
            }
            cw.typed::<ByteArrayType>().write_batch(&b.strs, Some(&b.defs), None)?;
        }
    }
    Ok(())
}

/// Which operations of the table a file holds, and footer keys to add.
#[derive(Default)]
pub(crate) struct Selection<'s> {
    /// These devices' operations, in this order; every device when `None`
    /// (then the rows are `OpTable::ops()` in order). Extra columns must hold
    /// one value per selected operation.
    pub devices: Option<&'s [DevIdx]>,
    pub footer: Vec<(String, String)>,
}

/// The write loop over the whole table; options and indices were validated by the caller.
pub(crate) fn write<W: Write + Send>(table: &OpTable, out: W, opts: &WriteOptions) -> Result<WriteSummary, WriteError> {
    write_selected(table, out, opts, &Selection::default())
}

/// The write loop over the selected devices' operations.
pub(crate) fn write_selected<W: Write + Send>(
    table: &OpTable,
    out: W,
    opts: &WriteOptions,
    sel: &Selection<'_>,
) -> Result<WriteSummary, WriteError> {
    let schema = Arc::new(file_schema(opts)?);
    let props = Arc::new(properties(table, opts, &sel.footer)?);
    let mut fw = SerializedFileWriter::new(out, schema, props)?;
    let ctx = Ctx::new(table, opts.source_kind);
    let group = opts.row_group_rows.max(1);
    let mut bufs = Buffers::default();
    let all: Vec<DevIdx>;
    let devices = match sel.devices {
        Some(d) => d,
        None => {
            all = (0..table.per_rank.len() as u32).map(DevIdx).collect();
            &all
        }
    };
    let n_rows: usize = devices.iter().map(|d| table.per_rank[d.ix()].len()).sum();
    let mut ops = devices.iter().flat_map(|d| table.per_rank[d.ix()].iter());
    // Rows are materialised one row group at a time (the table stores them packed).
    let mut group_ops: Vec<CollOp> = Vec::with_capacity(group.min(n_rows));
    let (mut start, mut row_groups) = (0usize, 0usize);
    loop {
        group_ops.clear();
        group_ops.extend(ops.by_ref().take(group));
        let rows: Vec<Row<'_>> = group_ops.iter().map(|op| Row { ctx: &ctx, op }).collect();
        if rows.is_empty() {
            break;
        }
        ctx.interned.borrow_mut().clear();
        let mut rg = fw.next_row_group()?;
        for c in builtin_columns() {
            let mut cw = rg.next_column()?.expect("schema has a leaf per built-in column");
            write_builtin(&mut cw, &c.get, c.nullable, &rows, &mut bufs)?;
            cw.close()?;
        }
        for e in &opts.extra {
            let mut cw = rg.next_column()?.expect("schema has a leaf per extra column");
            write_extra(&mut cw, &e.values, start..start + rows.len(), &mut bufs)?;
            cw.close()?;
        }
        rg.close()?;
        start += rows.len();
        row_groups += 1;
    }
    let columns = builtin_columns().len() + opts.extra.len();
    // `finish` writes the footer and flushes the sink (a BufWriter's errors
    // surface here, not in a silent drop); `into_inner` would write the
    // footer a second time.
    fw.finish()?;
    let bytes_written = fw.bytes_written() as u64;
    Ok(WriteSummary {
        rows: start as u64,
        row_groups,
        columns,
        bytes_written,
        clamped_values: ctx.clamped.get(),
    })
}
