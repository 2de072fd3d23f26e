//! The self-contained HTML report (`commlens report … -o report.html`).
//!
//! [`model`] is the contract with the analyses: plain serde data, every
//! section optional. [`html`] draws it as one offline page (the bandwidth
//! section in `html_bandwidth`, the collective-model sections in `html_expected`, the layout plan in `html_plan`, anomalies in `html_anomaly`) with charts from [`svg`] (numbers, ticks and colors in [`scale`]). [`sample`] is a
//! hand-filled example used by tests, the screenshot and demos. Nothing here
//! computes an analysis; callers fill the model.

pub mod html;
mod html_anomaly;
mod html_bandwidth;
mod html_expected;
mod html_plan;
pub mod model;
pub mod sample;
pub mod scale;
pub mod svg;

#[cfg(test)]
mod check;

pub use html::{render_html, write_html};
pub use model::*;
