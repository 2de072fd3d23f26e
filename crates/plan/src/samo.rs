//! SAMO, sparsity-aware memory optimisation (Singh 2025, ch. 4): model-state memory with a
//! pruned fraction `p`, and the pipeline terms it trades against.
//!
//! Owns eqs. 4.1–4.5 (`M^SAMO = 24(1−p)φ + 2φ = M^default − (24p − 6)φ`, with the default
//! mixed-precision state `20φ`), the savings fraction, the break-even sparsity, and the
//! communication side (eqs. 4.6–4.11): the bubble is `(t_f + t_b)(1 − 1/G_inter)` and the
//! per-GPU point-to-point volume grows with `G_inter`, so the memory SAMO saves buys a smaller
//! G_inter and a larger G_data.

/// Default mixed-precision state per parameter (bytes): 20φ.
pub const DEFAULT_BYTES_PER_PARAM: f64 = 20.0;

/// Eq. 4.4: SAMO's state per parameter, `24(1−p) + 2` bytes (θ¹⁶ stays dense).
pub fn samo_bytes_per_param(p: f64) -> f64 {
    18.0 * (1.0 - p) + 4.0 * (1.0 - p) + 2.0 + 2.0 * (1.0 - p)
}

/// Eq. 4.5: bytes per parameter saved against the default, `(24p − 6)`.
pub fn saved_bytes_per_param(p: f64) -> f64 {
    DEFAULT_BYTES_PER_PARAM - samo_bytes_per_param(p)
}

/// Fraction of the default state saved, `(24p − 6)/20` (Fig. 4.2).
pub fn savings_fraction(p: f64) -> f64 {
    saved_bytes_per_param(p) / DEFAULT_BYTES_PER_PARAM
}

/// The sparsity at which SAMO neither saves nor costs memory (root of `24p − 6`), found by
/// bisection on [`saved_bytes_per_param`] rather than solved by hand.
pub fn break_even_sparsity() -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if saved_bytes_per_param(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Smallest G_inter (pipeline stages) whose share of `params` parameters' state fits
/// `capacity` bytes per GPU, at `bytes_per_param`.
pub fn min_pipeline_stages(params: f64, bytes_per_param: f64, capacity: f64) -> u32 {
    (params * bytes_per_param / capacity).ceil().max(1.0) as u32
}

/// Eq. 4.9: relative per-GPU point-to-point volume, `4·(B/mbs)·(G_inter/G)` messages.
pub fn p2p_messages(batch: f64, mbs: f64, g_inter: f64, gpus: f64) -> f64 {
    4.0 * (batch / mbs) * (g_inter / gpus)
}
