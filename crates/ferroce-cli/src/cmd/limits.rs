//! What the command line and the peers' TCP messages may ask for: checked
//! before anything is allocated, so that `-q 0` or a peer asking for a
//! 2^40-byte message is refused with the range instead of failing later
//! (or aborting in an allocation).

use ferroce::Mtu;

/// Queue pairs per test (perf `-q`).
pub(crate) const MAX_QPS: u32 = 4096;
/// Work requests per queue (perf `-t`, pingpong `-r`): the device's
/// `max_qp_wr`, less the one slot the tools keep spare.
pub(crate) const MAX_DEPTH: u32 = ferroce::MAX_QP_WR - 1;
/// Message bytes: the device's `max_msg_sz`.
pub(crate) const MAX_SIZE: u64 = ferroce::MAX_MSG_SIZE;

/// The MTUs IB defines, by their byte counts.
pub(crate) fn mtu_of(bytes: usize) -> Option<Mtu> {
    Mtu::from_bytes(bytes)
}

/// clap's parser for `-m`: one of the IB MTUs, nothing rounded.
pub(crate) fn parse_mtu(s: &str) -> Result<Mtu, String> {
    let bytes: usize = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    mtu_of(bytes).ok_or_else(|| format!("{bytes} is not an MTU: use 256, 512, 1024, 2048 or 4096"))
}

/// `value` within `1 ..= max`, or an error naming `what` and the range.
pub(crate) fn check(what: &str, value: u64, max: u64) -> Result<u64, String> {
    if (1..=max).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{what} {value} is outside 1 ..= {max}"))
    }
}

/// Room for one latency sample per iteration, or an error saying that
/// `-n` asks for more than memory holds (rather than an abort).
pub(crate) fn samples<T>(iters: u32) -> Result<Vec<T>, crate::error::Error> {
    let mut v = Vec::new();
    v.try_reserve_exact(iters as usize).map_err(|_| {
        crate::error::Error::Usage(format!(
            "-n {iters}: no memory for a latency sample per iteration; use a smaller -n"
        ))
    })?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ib_mtus_parse() {
        assert_eq!(parse_mtu("1024"), Ok(Mtu::Mtu1024));
        for bad in ["1500", "0", "9000", "x"] {
            assert!(parse_mtu(bad).is_err(), "{bad}");
        }
        assert!(check("size", 0, 8).is_err());
        assert!(check("size", 9, 8).unwrap_err().contains("1 ..= 8"));
        assert_eq!(check("size", 8, 8), Ok(8));
    }
}
