use super::*;

fn pfc_sample() -> MacControlRepr {
    MacControlRepr::Pfc {
        enabled: 0b0000_1001,
        quanta: [0xffff, 0, 0, 0x1234, 0, 0, 0, 7],
    }
}

#[test]
fn pfc_round_trips_through_a_whole_frame() {
    let src = [0x02, 0, 0, 0, 0, 0x0a];
    let f = frame(src, &pfc_sample());
    assert_eq!(f.len(), MIN_FRAME_LEN);
    assert_eq!(&f[..6], &DST_MAC_CONTROL);
    assert_eq!(&f[12..16], &[0x88, 0x08, 0x01, 0x01]);
    // Vector: reserved high byte zero, then priorities 0 and 3.
    assert_eq!(&f[16..18], &[0x00, 0x09]);
    assert_eq!(&f[18..20], &[0xff, 0xff]);
    assert_eq!(&f[24..26], &[0x12, 0x34]);
    let (eth, repr) = parse_frame(&f).unwrap().unwrap();
    assert_eq!(eth.src, src);
    assert_eq!(repr, pfc_sample());
    // The quanta of disabled priorities are carried but not listed.
    assert_eq!(repr.entries(), vec![(Some(0), 0xffff), (Some(3), 0x1234)]);
}

#[test]
fn pause_is_decoded_as_pause() {
    let f = frame(
        [2, 0, 0, 0, 0, 1],
        &MacControlRepr::Pause { quanta: 0x00ff },
    );
    assert_eq!(&f[14..18], &[0x00, 0x01, 0x00, 0xff]);
    let (_, repr) = parse_frame(&f).unwrap().unwrap();
    assert_eq!(repr, MacControlRepr::Pause { quanta: 0xff });
    assert_eq!(repr.entries(), vec![(None, 0xff)]);
}

#[test]
fn reserved_vector_bits_are_ignored_on_receive() {
    let mut f = frame([2, 0, 0, 0, 0, 1], &pfc_sample());
    f[16] = 0xff;
    let (_, repr) = parse_frame(&f).unwrap().unwrap();
    assert_eq!(repr, pfc_sample());
}

#[test]
fn other_opcodes_and_ethertypes_are_not_pfc() {
    let mut f = frame([2, 0, 0, 0, 0, 1], &pfc_sample());
    f[14..16].copy_from_slice(&[0x00, 0x02]);
    assert_eq!(
        parse_frame(&f).unwrap().unwrap().1,
        MacControlRepr::Other { opcode: 2 }
    );
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    assert_eq!(parse_frame(&f).unwrap(), None);
}

#[test]
fn truncated_bodies_are_errors_at_every_length() {
    let f = frame([2, 0, 0, 0, 0, 1], &pfc_sample());
    let body_end = ethernet::HEADER_LEN + PFC_LEN;
    for len in 0..body_end {
        assert!(
            parse_frame(&f[..len]).is_err(),
            "{len} bytes parsed as a whole PFC frame"
        );
    }
    assert!(parse_frame(&f[..body_end]).is_ok());
    let p = frame([2, 0, 0, 0, 0, 1], &MacControlRepr::Pause { quanta: 1 });
    assert!(parse_frame(&p[..17]).is_err());
    assert!(parse_frame(&p[..18]).is_ok());
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A small deterministic generator: every length up to 80 with varied
    // contents, the ethertype forced to MAC control half the time.
    let mut x: u32 = 0x1234_5678;
    for len in 0..80 {
        for round in 0..64 {
            let mut b: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            if round % 2 == 0 && len >= 14 {
                b[12..14].copy_from_slice(&ETHERTYPE_MAC_CONTROL.to_be_bytes());
            }
            if let Ok(Some((_, r))) = parse_frame(&b) {
                let _ = r.entries();
            }
        }
    }
}

#[test]
fn emit_refuses_a_short_buffer() {
    let mut b = [0u8; PFC_LEN - 1];
    assert!(matches!(
        pfc_sample().emit(&mut b),
        Err(Error::BufferTooSmall {
            needed: PFC_LEN,
            ..
        })
    ));
}

#[test]
fn quanta_convert_at_the_link_speed() {
    // 1 Gbit/s: 512 ns a quantum; 100 Gbit/s: 5.12 ns.
    assert_eq!(quanta_to_micros(1000, 1000), Some(512.0));
    assert_eq!(quanta_to_micros(0xffff, 100_000), Some(335.5392));
    assert_eq!(quanta_to_micros(5, 0), None);
}
