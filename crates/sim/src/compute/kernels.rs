//! Measured kernel tables: durations of named kernels taken from traces, reduced to a median
//! per name (SimAI-CP's operation library, built from the user's own profiles rather than
//! shipped), and [`KernelCost`], which answers from the table and falls back to the roofline.
//!
//! Lookup is by [`Compute::name`]: exact first, then by the normalised name
//! ([`normalise_kernel_name`]: no `void`, no template arguments or parameter list, no digits,
//! lower case), so `ampere_bf16_s16816gemm_bf16_128x64_…` measured on one build still matches
//! the same kernel with other tile digits, and a C++ signature matches its bare name.

use std::collections::HashMap;

use commlens_model::gpu::gpu_by_name;
use commlens_workload::Compute;

use super::{ComputeCost, Roofline};

/// Statistics of one kernel name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelStat {
    /// Median duration, µs (the mean of the two middle samples for an even count): robust to
    /// the first-call and clock-boost outliers traces carry.
    pub median_us: f64,
    pub mean_us: f64,
    pub count: u64,
}

impl KernelStat {
    fn of(mut v: Vec<f64>) -> KernelStat {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        let mean = v.iter().sum::<f64>() / n as f64;
        KernelStat { median_us: median, mean_us: mean, count: n as u64 }
    }
}

/// Kernel durations by name.
#[derive(Debug, Clone, Default)]
pub struct KernelTable {
    exact: HashMap<String, KernelStat>,
    normalised: HashMap<String, KernelStat>,
    /// The GPU the samples were measured on (most frequent name the traces gave), if known.
    pub gpu: Option<String>,
    /// Files read, and what was passed over, for the user.
    pub notes: Vec<String>,
}

/// A kernel name reduced to what survives recompilation and templating: leading `void `
/// dropped, everything from the first `<` or `(` cut, digits removed, lower case, runs of
/// `_` collapsed.
pub fn normalise_kernel_name(name: &str) -> String {
    let s = name.trim();
    let s = s.strip_prefix("void ").unwrap_or(s);
    let end = s.find(['<', '(']).unwrap_or(s.len());
    let mut out = String::with_capacity(end);
    for ch in s[..end].chars() {
        if ch.is_ascii_digit() {
            continue;
        }
        if ch == '_' && out.ends_with('_') {
            continue;
        }
        out.extend(ch.to_lowercase());
    }
    out.trim_matches(|c: char| c == '_' || c.is_whitespace()).to_string()
}

impl KernelTable {
    /// A table from (kernel name, duration µs) samples; negative and non-finite durations are
    /// dropped.
    pub fn from_samples<S: AsRef<str>>(samples: impl IntoIterator<Item = (S, f64)>) -> KernelTable {
        let mut exact: HashMap<String, Vec<f64>> = HashMap::new();
        for (name, us) in samples {
            if us.is_finite() && us >= 0.0 {
                exact.entry(name.as_ref().to_string()).or_default().push(us);
            }
        }
        let mut normalised: HashMap<String, Vec<f64>> = HashMap::new();
        for (name, v) in &exact {
            let key = normalise_kernel_name(name);
            if !key.is_empty() {
                normalised.entry(key).or_default().extend_from_slice(v);
            }
        }
        KernelTable {
            exact: exact.into_iter().map(|(k, v)| (k, KernelStat::of(v))).collect(),
            normalised: normalised.into_iter().map(|(k, v)| (k, KernelStat::of(v))).collect(),
            gpu: None,
            notes: Vec::new(),
        }
    }

    /// Names the table holds (exact names).
    pub fn len(&self) -> usize {
        self.exact.len()
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty()
    }

    /// Every exact name with its statistics (no particular order).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &KernelStat)> {
        self.exact.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Samples over every name.
    pub fn samples(&self) -> u64 {
        self.exact.values().map(|s| s.count).sum()
    }

    /// The statistics of `name`: exact match, else by normalised name.
    pub fn lookup(&self, name: &str) -> Option<&KernelStat> {
        self.exact.get(name).or_else(|| self.normalised.get(&normalise_kernel_name(name)))
    }

    /// Reads every compute kernel (the non-NCCL, non-copy GPU kernels) of Kineto traces
    /// (`.json`, `.json.gz`, tar or tar.gz archives of them) and nsys SQLite exports; folders
    /// are walked. Files that are neither are passed over with a note.
    #[cfg(feature = "traces")]
    pub fn from_traces(paths: &[std::path::PathBuf]) -> Result<KernelTable, String> {
        let got = super::traces::read_samples(paths)?;
        let mut t = KernelTable::from_samples(got.samples);
        t.gpu = got.gpu;
        t.notes = got.notes;
        Ok(t)
    }
}

/// A kernel table in front of the roofline: a step whose name the table knows takes the
/// measured median (rescaled by SimAI-CP-Model's rule when the traces name another GPU than
/// the simulated one); the rest goes to the roofline (stated time, then FLOPs and bytes).
#[derive(Debug, Clone)]
pub struct KernelCost {
    pub table: KernelTable,
    pub roofline: Roofline,
}

impl KernelCost {
    pub fn new(table: KernelTable, roofline: Roofline) -> KernelCost {
        KernelCost { table, roofline }
    }
}

impl ComputeCost for KernelCost {
    fn time_us(&self, c: &Compute) -> f64 {
        match self.table.lookup(&c.name) {
            Some(s) => match self.table.gpu.as_deref().and_then(gpu_by_name) {
                Some(known) => self.roofline.rescale(s.median_us, c, known),
                None => s.median_us,
            },
            None => self.roofline.time_us(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalised_names() {
        assert_eq!(
            normalise_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)"),
            "at::native::vectorized_elementwise_kernel"
        );
        assert_eq!(
            normalise_kernel_name("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn"),
            normalise_kernel_name("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_32x3_tn")
        );
    }

    #[test]
    fn medians_and_fallback_to_normalised() {
        let t = KernelTable::from_samples([("k<1>", 1.0), ("k<1>", 5.0), ("k<1>", 2.0), ("k<2>", 4.0)]);
        assert_eq!(t.lookup("k<1>").unwrap().median_us, 2.0);
        assert_eq!(t.lookup("k<1>").unwrap().count, 3);
        // Unknown exact name: all four samples of `k` (1, 2, 4, 5) → 3.
        assert_eq!(t.lookup("k<9>").unwrap().median_us, 3.0);
        assert!(t.lookup("other").is_none());
    }
}
