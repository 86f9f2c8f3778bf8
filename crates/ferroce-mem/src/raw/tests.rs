use std::sync::Arc;

use super::*;

#[test]
fn owned_round_trip() {
    let b = Backing::from(vec![1u8, 2, 3]);
    b.write(1, &[9]).unwrap();
    let mut out = [0u8; 3];
    b.read(0, &mut out).unwrap();
    assert_eq!(out, [1, 9, 3]);
    assert_eq!(&*b.into_box().unwrap(), &[1, 9, 3]);
}

#[test]
fn ranges_past_the_end_are_refused() {
    let b = Backing::from(vec![0u8; 16]);
    assert_eq!(b.write(15, &[1, 2]), Err(Fault::OutOfRange));
    assert_eq!(b.read(usize::MAX, &mut [0]), Err(Fault::OutOfRange));
    assert_eq!(b.fetch_add(9, 1), Err(Fault::OutOfRange));
    assert!(b.slice(16, 0).is_ok());
    assert!(b.slice(8, 9).is_err());
}

#[test]
fn raw_writes_land_in_the_lent_memory() {
    let p = Box::into_raw(vec![0u8; 4].into_boxed_slice()).cast::<u8>();
    // SAFETY: a leaked box of 4 bytes, touched only through `b` until
    // `into_raw` returns it.
    let b = unsafe { Backing::from_raw(p, 4) }.unwrap();
    b.write(0, &[5, 6, 7, 8]).unwrap();
    assert!(b.is_raw());
    let b = b.into_box().unwrap_err();
    let (p, len) = b.into_raw().unwrap();
    // SAFETY: the same allocation, no longer lent.
    let back = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) };
    assert_eq!(&*back, &[5, 6, 7, 8]);
}

#[test]
fn null_is_refused() {
    // SAFETY: refused before any use.
    assert!(unsafe { Backing::from_raw(std::ptr::null_mut(), 0) }.is_none());
}

/// An owned backing whose byte 0 is 8-byte aligned (the allocator gives
/// no promise for `u8` boxes, so the test finds an aligned offset).
fn aligned_base(b: &Backing) -> usize {
    let addr = b.volatile().ptr_guard().as_ptr() as usize;
    (8 - addr % 8) % 8
}

#[test]
fn atomics_act_on_the_host_order_word() {
    let b = Backing::from(vec![0u8; 32]);
    let at = aligned_base(&b);
    b.write(at, &5u64.to_ne_bytes()).unwrap();
    assert_eq!(b.fetch_add(at, 3), Ok(5));
    assert_eq!(b.compare_swap(at, 7, 1), Ok(8), "no swap: 8 is not 7");
    assert_eq!(b.compare_swap(at, 8, 1), Ok(8));
    assert_eq!(b.load_u64(at), Ok(1));
    b.store_u64(at, u64::MAX).unwrap();
    assert_eq!(b.fetch_add(at, 2), Ok(u64::MAX), "wraps");
    let mut word = [0u8; 8];
    b.read(at, &mut word).unwrap();
    assert_eq!(u64::from_ne_bytes(word), 1);
    assert_eq!(b.fetch_add(at + 4, 1), Err(Fault::Misaligned));
    assert_eq!(b.compare_swap(at + 1, 0, 0), Err(Fault::Misaligned));
}

#[test]
fn fetch_add_from_two_threads_loses_no_addition() {
    const EACH: u64 = 20_000;
    let b = Arc::new(Backing::from(vec![0u8; 16]));
    let at = aligned_base(&b);
    let adders: Vec<_> = (0..2)
        .map(|_| {
            let b = b.clone();
            std::thread::spawn(move || {
                for _ in 0..EACH {
                    b.fetch_add(at, 1).unwrap();
                }
            })
        })
        .collect();
    for a in adders {
        a.join().unwrap();
    }
    assert_eq!(b.load_u64(at), Ok(2 * EACH));
}

#[test]
fn a_reader_and_a_writer_share_the_bytes_without_a_lock() {
    // One thread copies whole blocks in while another copies out: neither
    // waits for the other (which bytes a racing read sees is the
    // application's business), and the last write is what stays.
    let b = Arc::new(Backing::from(vec![0u8; 4096]));
    let writer = {
        let b = b.clone();
        std::thread::spawn(move || {
            for i in 1..=200u8 {
                b.write(0, &[i; 4096]).unwrap();
            }
        })
    };
    let mut seen = [0u8; 4096];
    for _ in 0..200 {
        b.read(0, &mut seen).unwrap();
    }
    writer.join().unwrap();
    b.read(0, &mut seen).unwrap();
    assert!(seen.iter().all(|&x| x == 200));
}
