//! Every valid layout of a model on a number of GPUs, per family.
//!
//! Owns [`Constraints`] (degrees the user fixes, `key=value` as in `--fix pp=8,mbs=1`) and
//! [`enumerate`]. Rules: Megatron TP within a node and dividing the (KV) heads, PP dividing the
//! layers, DP the rest, micro-batches dividing the per-replica batch, interleaving (`vpp` ≥ 2)
//! only with PP ≥ 2, `layers % (pp·vpp) = 0` and micro-batches a multiple of PP, SP only with
//! TP ≥ 2, the distributed optimizer on or off, EP dividing DP and the experts (MoE only);
//! DeepSpeed data parallelism with ZeRO 0–3; AxoNN every (G_x, G_y, G_z, G_data) with product
//! G (heads divisible by G_x and G_y, a data group's micro-batch divisible by G_z); TED (MoE
//! only) G_tensor within a node, G_expert = E, ZeRO-1. Recomputation is not enumerated: the
//! memory filter picks the least that fits.

use crate::axonn::grids;
use crate::layout::{Family, Layout};
use commlens_workload::models::ModelSpec;

/// Degrees fixed by the user; `None` leaves a degree free.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Constraints {
    pub families: Option<Vec<Family>>,
    pub tp: Option<u32>,
    pub pp: Option<u32>,
    pub vpp: Option<u32>,
    pub dp: Option<u32>,
    pub ep: Option<u32>,
    pub mbs: Option<u32>,
    pub zero: Option<u8>,
    pub sp: Option<bool>,
    pub gx: Option<u32>,
    pub gy: Option<u32>,
    pub gz: Option<u32>,
    pub gdata: Option<u32>,
}

impl Constraints {
    /// Parses `key=value[,key=value…]` (keys: family, tp, pp, vpp, dp, ep, mbs, zero, sp, gx,
    /// gy, gz, gdata).
    pub fn parse(spec: &str) -> Result<Constraints, String> {
        let mut c = Constraints::default();
        c.add(spec)?;
        Ok(c)
    }

    /// Adds the pairs of `spec` to these constraints.
    pub fn add(&mut self, spec: &str) -> Result<(), String> {
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').ok_or_else(|| format!("{pair:?}: expected key=value (e.g. pp=8)"))?;
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            let n = || v.parse::<u32>().ok().filter(|&x| x > 0).ok_or_else(|| format!("{k}={v}: expected a positive integer"));
            match k.as_str() {
                "family" => {
                    let f = Family::from_name(v).ok_or_else(|| format!("family={v}: expected megatron, deepspeed, axonn or ted"))?;
                    self.families.get_or_insert_with(Vec::new).push(f);
                }
                "tp" => self.tp = Some(n()?),
                "pp" => self.pp = Some(n()?),
                "vpp" => self.vpp = Some(n()?),
                "dp" => self.dp = Some(n()?),
                "ep" => self.ep = Some(n()?),
                "mbs" => self.mbs = Some(n()?),
                "gx" => self.gx = Some(n()?),
                "gy" => self.gy = Some(n()?),
                "gz" => self.gz = Some(n()?),
                "gdata" => self.gdata = Some(n()?),
                "zero" => self.zero = Some(v.parse::<u8>().ok().filter(|&z| z <= 3).ok_or_else(|| format!("zero={v}: expected 0, 1, 2 or 3"))?),
                "sp" => {
                    self.sp = Some(match v.to_ascii_lowercase().as_str() {
                        "1" | "true" | "on" | "yes" => true,
                        "0" | "false" | "off" | "no" => false,
                        _ => return Err(format!("sp={v}: expected true or false")),
                    })
                }
                _ => return Err(format!("{k}: unknown degree; expected one of family, tp, pp, vpp, dp, ep, mbs, zero, sp, gx, gy, gz, gdata")),
            }
        }
        Ok(())
    }

    fn family_ok(&self, f: Family) -> bool {
        self.families.as_ref().is_none_or(|v| v.contains(&f))
    }

    /// Whether `l` agrees with every fixed degree.
    pub fn admits(&self, l: &Layout) -> bool {
        let eq = |want: Option<u32>, have: u32| want.is_none_or(|w| w == have);
        self.family_ok(l.family)
            && eq(self.tp, l.tp)
            && eq(self.pp, l.pp)
            && eq(self.vpp, l.vpp)
            && eq(self.dp, l.dp)
            && eq(self.ep, l.ep)
            && eq(self.mbs, l.mbs)
            && self.zero.is_none_or(|z| z == l.zero)
            && self.sp.is_none_or(|s| s == l.sp)
            && eq(self.gx, l.gx)
            && eq(self.gy, l.gy)
            && eq(self.gz, l.gz)
            && eq(self.gdata, l.gdata)
    }
}

fn divisors(n: u32) -> impl Iterator<Item = u32> {
    (1..=n).filter(move |d| n % d == 0)
}

const MICRO_BATCHES: [u32; 4] = [1, 2, 4, 8];

/// Every layout of `model` on `gpus` GPUs (`gpus_per_node` per node) with `global_batch`
/// sequences per iteration, admitted by `c`, before the memory filter.
pub fn enumerate(model: &ModelSpec, gpus: u32, gpus_per_node: u32, global_batch: u32, c: &Constraints) -> Vec<Layout> {
    let mut out = Vec::new();
    let moe = model.experts > 1;
    let heads_ok = |t: u32| model.heads % t == 0 && model.kv_heads % t == 0;
    let layers = model.layers;
    if c.family_ok(Family::Megatron) {
        for tp in divisors(gpus).filter(|&t| t <= gpus_per_node && heads_ok(t)) {
            for pp in divisors(gpus / tp).filter(|p| layers % p == 0) {
                let dp = gpus / (tp * pp);
                let eps: Vec<u32> = if moe { divisors(dp).filter(|e| model.experts % e == 0).collect() } else { vec![1] };
                for &mbs in MICRO_BATCHES.iter().filter(|&&b| global_batch % (b * dp) == 0) {
                    let m = global_batch / (mbs * dp);
                    let mut vpps = vec![1];
                    if pp >= 2 && m % pp == 0 {
                        vpps.extend((2..=8).filter(|v| layers % (pp * v) == 0));
                    }
                    for &vpp in &vpps {
                        for sp in if tp > 1 && model.seq_len % tp == 0 { vec![false, true] } else { vec![false] } {
                            for zero in [0u8, 1] {
                                for &ep in &eps {
                                    let l = Layout { family: Family::Megatron, tp, pp, vpp, dp, ep, sp, mbs, zero, ..Layout::default() };
                                    if c.admits(&l) {
                                        out.push(l);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    if c.family_ok(Family::Deepspeed) {
        for zero in 0u8..=3 {
            for &mbs in MICRO_BATCHES.iter().filter(|&&b| global_batch % (b * gpus) == 0) {
                let l = Layout { mbs, ..Layout::deepspeed(zero, gpus) };
                if c.admits(&l) {
                    out.push(l);
                }
            }
        }
    }
    if c.family_ok(Family::Axonn) {
        for g in grids(gpus, false) {
            if !(model.heads % g.gx == 0 && model.heads % g.gy == 0 && model.hidden % g.tensor() == 0) {
                continue;
            }
            for k in [1u32, 2, 4] {
                let mbs = g.gz * k;
                if global_batch % (mbs * g.gdata) != 0 {
                    continue;
                }
                let l = Layout { mbs, ..Layout::axonn(g.gx, g.gy, g.gz, g.gdata) };
                if c.admits(&l) {
                    out.push(l);
                }
            }
        }
    }
    if moe && c.family_ok(Family::Ted) {
        for tp in divisors(gpus).filter(|&t| t <= gpus_per_node && heads_ok(t)) {
            let dp = gpus / tp;
            let ep = model.experts;
            if dp % ep != 0 {
                continue;
            }
            for &mbs in MICRO_BATCHES.iter().filter(|&&b| global_batch % (b * dp) == 0) {
                let l = Layout { family: Family::Ted, tp, dp, ep, mbs, zero: 1, ..Layout::default() };
                if c.admits(&l) {
                    out.push(l);
                }
            }
        }
    }
    out
}
