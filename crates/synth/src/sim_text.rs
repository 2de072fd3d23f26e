//! Text of the synthetic log's operation lines: the `<Op>: opCount …` enqueue line (with
//! `[nranks=…]` where the NCCL version prints it) and the `Bytes -> Algo` tuning line
//! (protocol by size, channels reduced for small messages), checked against real logs.

use crate::config::{LogFormat, NcclVersion};

/// `AllReduce: 262144 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..7}`: protocol by size,
/// channels reduced for small messages as NCCL does (bytes per channel >= threads x threshold).
pub(crate) fn tuning_text(name: &str, bytes: u64, nranks: usize, channels: usize) -> String {
    let n = nranks.max(1) as u64;
    let (proto, per_channel) = if bytes <= 64 << 10 {
        ("LL", 512 * 8 * n)
    } else if bytes <= 4 << 20 {
        ("LL128", 640 * 8 * n)
    } else {
        ("SIMPLE", 512 * 64 * n)
    };
    let nc = (bytes / per_channel).clamp(1, channels.max(1) as u64);
    format!(
        "{name}: {bytes} Bytes -> Algo RING proto {proto} channel{{Lo..Hi}}={{0..{}}}",
        nc - 1
    )
}

/// `<Op>: opCount <hex> sendbuff <ptr|(nil)> recvbuff <ptr> count <n> datatype <d> op <o> root <r> comm <ptr> [nranks=<n>] stream <ptr>`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn op_text(
    ver: &NcclVersion,
    name: &str,
    opcount: u64,
    sendbuff: Option<u64>,
    recvbuff: u64,
    count: u64,
    dtype: u8,
    redop: u8,
    root: usize,
    comm: u64,
    nranks: usize,
    stream: u64,
) -> String {
    let sb = match sendbuff {
        Some(p) => format!("{p:#x}"),
        None => "(nil)".to_string(),
    };
    let nr = if ver.nranks_field() {
        format!(" [nranks={nranks}]")
    } else {
        String::new()
    };
    format!(
        "{name}: opCount {opcount:x} sendbuff {sb} recvbuff {recvbuff:#x} count {count} datatype {dtype} op {redop} root {root} comm {comm:#x}{nr} stream {stream:#x}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuning_examples_match_real_logs() {
        // thesis: 131072 x fp16 on 4 ranks, 8 channels (it saw LL on PCIe A40s, which lack LL128)
        assert_eq!(
            tuning_text("AllReduce", 262144, 4, 8),
            "AllReduce: 262144 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..7}"
        );
        // timez-zx 2.27.7: 8 MiB on 2 ranks, 24 channels
        assert_eq!(
            tuning_text("AllReduce", 8388608, 2, 24),
            "AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}"
        );
        assert_eq!(
            tuning_text("AllReduce", 4, 4, 8),
            "AllReduce: 4 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"
        );
    }

    #[test]
    fn op_line_format() {
        let v = crate::config::parse_version("2.27.7").unwrap();
        let t = op_text(
            &v,
            "Send",
            0x1f,
            None,
            0x7f1fd2c00000,
            256,
            2,
            0,
            1,
            0x55f7d902f5e0,
            4,
            0x55f7d84eb710,
        );
        assert_eq!(t, "Send: opCount 1f sendbuff (nil) recvbuff 0x7f1fd2c00000 count 256 datatype 2 op 0 root 1 comm 0x55f7d902f5e0 [nranks=4] stream 0x55f7d84eb710");
    }
}
