//! The checksum the scanning examples (`ack_delay`, `region_scan`) run
//! over a region: one serial pass, as an application checksum is.

use ferroce::volatile::VolatileSlice;

/// FNV-1a over the bytes, read in place through the view 4 KiB at a time.
pub(crate) fn checksum(view: &VolatileSlice<'_>) -> u64 {
    let mut chunk = [0u8; 4096];
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for at in (0..view.len()).step_by(chunk.len()) {
        let part = view
            .subslice(at, chunk.len().min(view.len() - at))
            .expect("inside the view");
        let n = part.copy_to(&mut chunk[..]);
        for &b in &chunk[..n] {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}
