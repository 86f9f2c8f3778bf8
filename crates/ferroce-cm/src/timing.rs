//! The CM's timeouts, computed as the Linux kernel's ib_cm computes them.
//!
//! IBA encodes a time as 4.096 µs × 2^t. The kernel turns that into
//! milliseconds as 2^(t-8) (t ≤ 8 gives 1 ms), which rounds 4.096 µs × 256
//! = 1.048 ms down to 1 ms; ferroce uses the same rounding so that both ends
//! of a mixed connection time out alike.

use core::time::Duration;

/// An IBA time code as the kernel's CM reads it: 2^(t-8) ms, at least 1 ms.
pub fn cm_time(code: u8) -> Duration {
    Duration::from_millis(1u64 << code.min(31).saturating_sub(8))
}

/// The active side's wait for a REP: twice the packet life time plus the
/// passive side's response time (the REQ's remote_cm_response_timeout).
pub fn req_timeout(packet_life_time: u8, remote_cm_response_timeout: u8) -> Duration {
    cm_time(packet_life_time) * 2 + cm_time(remote_cm_response_timeout)
}

/// The local ACK timeout the REQ advertises for a packet life time, given
/// the device's ACK delay (the kernel's rule: one more than the life time,
/// raised past the ACK delay when that is larger).
pub fn local_ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    let ack = packet_life_time.saturating_add(1);
    let out = if ack >= ca_ack_delay {
        ack.saturating_add(u8::from(ca_ack_delay >= ack - 1))
    } else {
        ca_ack_delay.saturating_add(u8::from(ack >= ca_ack_delay - 1))
    };
    out.min(31)
}

/// The packet life time the passive side infers from a REQ's local ACK
/// timeout (one less, as the kernel does).
pub fn packet_life_time_from_ack(local_ack_timeout: u8) -> u8 {
    local_ack_timeout.saturating_sub(1)
}

/// How long a connection stays in TimeWait: the kernel waits the time of
/// (packet life time + 1); ferroce caps it at `cap` so that a hostile REQ
/// cannot pin an entry for hours.
pub fn timewait(packet_life_time: u8, cap: Duration) -> Duration {
    cm_time(packet_life_time.saturating_add(1)).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_conversions() {
        assert_eq!(cm_time(0), Duration::from_millis(1));
        assert_eq!(cm_time(8), Duration::from_millis(1));
        assert_eq!(cm_time(20), Duration::from_millis(4096));
        assert_eq!(cm_time(31), Duration::from_millis(1 << 23));
        // rdma_cm over RoCE: life time 18, response timeout 20.
        assert_eq!(req_timeout(18, 20), Duration::from_millis(1024 * 2 + 4096));
        // rxe's ACK delay is 15; the capture's REQ says 19.
        assert_eq!(local_ack_timeout(15, 18), 19);
        assert_eq!(local_ack_timeout(15, 0), 15);
        assert_eq!(packet_life_time_from_ack(19), 18);
        assert_eq!(
            timewait(18, Duration::from_secs(60)),
            Duration::from_millis(2048)
        );
        assert_eq!(
            timewait(30, Duration::from_secs(10)),
            Duration::from_secs(10)
        );
    }
}
