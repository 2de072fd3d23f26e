//! The record layout the follower decodes (FORMAT.md of `crates/plugin`):
//! event-type numbers, payload lengths, bounds on what it keeps, and the
//! little-endian cursor over one record's fields.

pub(super) const KERNEL_CH_STOP: i32 = 22;
pub(super) const T_COLL: u8 = 1;
pub(super) const T_P2P: u8 = 2;
pub(super) const T_PROXY_OP: u8 = 3;
pub(super) const T_KERNEL_CH: u8 = 6;
pub(super) const T_COLL_API: u8 = 9;
pub(super) const T_P2P_API: u8 = 10;
pub(super) const T_CE_COLL: u8 = 12;
/// `ncclProfileKernelCh` in a communicator's event mask.
pub(super) const KERNEL_CH_BIT: u32 = 1 << 6;
/// START fields before the payload: id, parent, comm, rank, flags, t.
pub(super) const START_COMMON: usize = 33;
/// Payload bytes of each START type (FORMAT.md), the length `decode` requires.
pub(super) const START_PAYLOAD: [usize; 16] = [0, 75, 45, 21, 4, 0, 9, 38, 5, 37, 33, 8, 77, 5, 13, 14];
/// Fields after the header of the other record kinds (index = kind).
pub(super) const RECORD_BODY: [usize; 10] = [0, 4, 8, 52, 12, 0, 16, 28, 12, 24];
/// Bounds on state kept for records that may never be matched.
pub(super) const MAX_PARKED: usize = 1 << 16;
pub(super) const MAX_API: usize = 1 << 14;
/// Open operations kept per handle (as the plugin's tracker); older ones are
/// finished without a kernel span and counted.
pub const MAX_OPEN: usize = 1024;

/// Little-endian cursor over one record's fields.
pub(super) struct Cur<'a>(pub(super) &'a [u8]);
macro_rules! getters {
    ($($name:ident: $t:ty),*) => {$(
        pub(super) fn $name(&mut self) -> $t {
            let (a, rest) = self.0.split_first_chunk().expect("record length checked before reading");
            self.0 = rest;
            <$t>::from_le_bytes(*a)
        }
    )*};
}
impl Cur<'_> {
    getters!(u8: u8, u32: u32, i32: i32, u64: u64, i64: i64);
}
