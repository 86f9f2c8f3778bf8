use super::*;

/// A block as the kernel lays it out: `frames` of (data, tci), each
/// after a 48-byte header, 16-byte aligned.
fn block(frames: &[(&[u8], Option<u16>)]) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    let first = 48;
    b[v3::NUM_PKTS..v3::NUM_PKTS + 4].copy_from_slice(&(frames.len() as u32).to_ne_bytes());
    b[v3::FIRST_PKT..v3::FIRST_PKT + 4].copy_from_slice(&(first as u32).to_ne_bytes());
    let mut at = first;
    for (i, (data, tci)) in frames.iter().enumerate() {
        let mac = v3::HEADER_LEN as u16;
        let next = if i + 1 == frames.len() {
            0
        } else {
            (v3::HEADER_LEN + data.len()).next_multiple_of(16)
        };
        let put = |b: &mut Vec<u8>, off: usize, v: &[u8]| {
            b[at + off..at + off + v.len()].copy_from_slice(v)
        };
        put(&mut b, v3::NEXT_OFFSET, &(next as u32).to_ne_bytes());
        put(&mut b, v3::SNAPLEN, &(data.len() as u32).to_ne_bytes());
        put(&mut b, v3::LEN, &(data.len() as u32).to_ne_bytes());
        let status = if tci.is_some() {
            libc::TP_STATUS_VLAN_VALID
        } else {
            0
        };
        put(&mut b, v3::STATUS, &status.to_ne_bytes());
        put(&mut b, v3::MAC, &mac.to_ne_bytes());
        put(
            &mut b,
            v3::VLAN_TCI,
            &u32::from(tci.unwrap_or(0)).to_ne_bytes(),
        );
        put(&mut b, usize::from(mac), data);
        at += next;
    }
    b
}

#[test]
fn a_block_is_walked_and_bad_offsets_stop_the_walk() {
    let frames: [(&[u8], Option<u16>); 3] = [
        (&[1; 60], None),
        (&[2; 100], Some(0x6005)),
        (&[3; 61], None),
    ];
    let mut b = block(&frames);
    let mut seen = Vec::new();
    assert_eq!(
        walk_block(&mut b, 0, &mut |d: &mut [u8], t, cut| seen.push((
            d.to_vec(),
            t,
            cut
        ))),
        3
    );
    let want: Vec<_> = frames
        .iter()
        .map(|(d, t)| (d.to_vec(), *t, false))
        .collect();
    assert_eq!(seen, want);
    // A count larger than the frames there, offsets past the end, and
    // every truncation of the block: the walk stops, never panics.
    let mut lying = b.clone();
    lying[v3::NUM_PKTS..v3::NUM_PKTS + 4].copy_from_slice(&1000u32.to_ne_bytes());
    assert_eq!(walk_block(&mut lying, 0, &mut |_: &mut [u8], _, _| {}), 3);
    let mut far = b.clone();
    far[v3::FIRST_PKT..v3::FIRST_PKT + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
    assert_eq!(walk_block(&mut far, 0, &mut |_: &mut [u8], _, _| {}), 0);
    for len in 0..400 {
        walk_block(&mut b[..len], 0, &mut |_: &mut [u8], _, _| {});
    }
    // A frame whose captured length is short of its length is flagged.
    let mut cut = b.clone();
    cut[48 + v3::LEN..48 + v3::LEN + 4].copy_from_slice(&9000u32.to_ne_bytes());
    let mut flags = Vec::new();
    walk_block(&mut cut, 0, &mut |_: &mut [u8], _, c| flags.push(c));
    assert_eq!(flags, [true, false, false]);
}

#[test]
fn a_frame_slot_is_read_and_bad_offsets_skip_it() {
    let mut slot = vec![0u8; 256];
    let data = [9u8; 70];
    let put = |s: &mut Vec<u8>, at: usize, v: &[u8]| s[at..at + v.len()].copy_from_slice(v);
    put(
        &mut slot,
        v2::STATUS,
        &(libc::TP_STATUS_USER | libc::TP_STATUS_VLAN_VALID).to_ne_bytes(),
    );
    put(&mut slot, v2::LEN, &70u32.to_ne_bytes());
    put(&mut slot, v2::SNAPLEN, &70u32.to_ne_bytes());
    put(&mut slot, v2::MAC, &64u16.to_ne_bytes());
    put(&mut slot, v2::VLAN_TCI, &0x2003u16.to_ne_bytes());
    put(&mut slot, 64, &data);
    let mut seen = Vec::new();
    assert_eq!(
        walk_slot(&mut slot, 0, &mut |d: &mut [u8], t, c| seen.push((
            d.to_vec(),
            t,
            c
        ))),
        1
    );
    assert_eq!(seen, [(data.to_vec(), Some(0x2003), false)]);
    // A frame past the slot's end is skipped; so is a truncated header.
    put(&mut slot, v2::MAC, &250u16.to_ne_bytes());
    assert_eq!(walk_slot(&mut slot, 0, &mut |_: &mut [u8], _, _| {}), 0);
    for len in 0..26 {
        assert_eq!(
            walk_slot(&mut slot[..len], 0, &mut |_: &mut [u8], _, _| {}),
            0
        );
    }
}
