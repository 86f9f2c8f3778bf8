//! Arming and watching; the ring shared with concurrent readers.

use super::*;
use crate::EndpointConfig;
use crate::verbs::WcOpcode;

fn wc(status: WcStatus) -> WorkCompletion {
    WorkCompletion {
        status,
        ..WorkCompletion::flushed(7, WcOpcode::Recv, 0x11)
    }
}

/// The endpoint with one CQ, and what `take_cq_events` reports.
fn fired(ep: &mut Endpoint) -> Vec<(u32, CqFired)> {
    let mut out = Vec::new();
    ep.take_cq_events(|h, f| out.push((h, f)));
    out
}

fn push(ep: &mut Endpoint, h: u32, status: WcStatus, solicited: bool) {
    ep.cqs
        .get_mut(&h)
        .unwrap()
        .push_solicited(wc(status), solicited);
}

#[test]
fn an_arm_fires_once_for_the_next_completion() {
    let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
    let h = ep.create_cq(8).unwrap();
    push(&mut ep, h, WcStatus::Success, false);
    ep.req_notify_cq(h, false).unwrap();
    assert!(
        fired(&mut ep).is_empty(),
        "a queued completion fires nothing"
    );
    push(&mut ep, h, WcStatus::Success, false);
    let notify = CqFired {
        notify: true,
        watch: false,
    };
    assert_eq!(fired(&mut ep), [(h, notify)]);
    push(&mut ep, h, WcStatus::Success, false);
    assert!(fired(&mut ep).is_empty(), "once per arm");
    assert!(ep.cq_armed.is_empty());
}

#[test]
fn solicited_only_waits_for_se_or_an_error() {
    let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
    let h = ep.create_cq(8).unwrap();
    ep.req_notify_cq(h, true).unwrap();
    push(&mut ep, h, WcStatus::Success, false);
    assert!(fired(&mut ep).is_empty());
    push(&mut ep, h, WcStatus::Success, true);
    assert_eq!(fired(&mut ep).len(), 1);
    ep.req_notify_cq(h, true).unwrap();
    push(&mut ep, h, WcStatus::WrFlushErr, false);
    assert_eq!(fired(&mut ep).len(), 1);
    // Next wins over Solicited when both are asked.
    ep.req_notify_cq(h, true).unwrap();
    ep.req_notify_cq(h, false).unwrap();
    push(&mut ep, h, WcStatus::Success, false);
    assert_eq!(fired(&mut ep).len(), 1);
}

#[test]
fn a_watch_fires_unless_completions_wait() {
    let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
    let h = ep.create_cq(8).unwrap();
    assert!(!ep.watch_cq(h).unwrap());
    push(&mut ep, h, WcStatus::Success, false);
    let watch = CqFired {
        notify: false,
        watch: true,
    };
    assert_eq!(fired(&mut ep), [(h, watch)]);
    assert!(ep.watch_cq(h).unwrap(), "one is queued");
    assert!(matches!(ep.watch_cq(99), Err(VerbsError::NoSuchCq(99))));
}

/// A successful completion numbered `n` (its `wr_id`).
fn numbered(n: u64) -> WorkCompletion {
    WorkCompletion {
        status: WcStatus::Success,
        ..WorkCompletion::flushed(n, WcOpcode::Recv, 0x11)
    }
}

/// What each of `readers` threads polling `reader` took (in the order it
/// took them) while `produce` ran on this thread; the readers stop once
/// `produce` returned and the CQ is empty.
fn poll_while(reader: &CqReader, readers: usize, produce: impl FnOnce()) -> Vec<Vec<u64>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..readers)
            .map(|i| {
                let (reader, done) = (reader.clone(), &done);
                s.spawn(move || {
                    let mut got = Vec::new();
                    let mut batch = [WorkCompletion::default(); 4];
                    loop {
                        // Half the readers take batches, half one at a time.
                        let n = if i % 2 == 0 {
                            reader.poll_into(&mut batch)
                        } else {
                            usize::from(reader.pop().map(|wc| batch[0] = wc).is_some())
                        };
                        got.extend(batch[..n].iter().map(|wc| wc.wr_id));
                        if n == 0 && done.load(Ordering::Acquire) && reader.is_empty() {
                            return got;
                        }
                        if n == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        produce();
        done.store(true, Ordering::Release);
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// Every reader's completions are in push order, and together they are
/// each completion pushed, once.
fn check_exactly_once(taken: &[Vec<u64>], pushed: &[u64]) {
    for got in taken {
        assert!(got.windows(2).all(|w| w[0] < w[1]), "out of order: {got:?}");
    }
    let mut all: Vec<u64> = taken.iter().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(all, pushed);
}

#[test]
fn concurrent_readers_take_each_completion_once_in_order() {
    const COUNT: u64 = 20_000;
    let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
    let h = ep.create_cq(MAX_CQE).unwrap();
    let reader = ep.cq_reader(h).unwrap();
    let taken = poll_while(&reader, 4, || {
        for n in 0..COUNT {
            ep.cqs.get_mut(&h).unwrap().push(numbered(n));
        }
    });
    check_exactly_once(&taken, &(0..COUNT).collect::<Vec<_>>());
    assert!(!ep.cq_overflowed(h).unwrap());
}

#[test]
fn overflow_under_concurrent_polls_loses_only_what_found_the_cq_full() {
    const COUNT: u64 = 20_000;
    const DEPTH: u32 = 8;
    let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
    let h = ep.create_cq(DEPTH).unwrap();
    let reader = ep.cq_reader(h).unwrap();
    let mut kept = Vec::new();
    let taken = poll_while(&reader, 3, || {
        for n in 0..COUNT {
            let q = ep.cqs.get_mut(&h).unwrap();
            // Readers only take, so room seen here is still there at the
            // push: such a completion is kept.
            let full = q.len() >= DEPTH as usize;
            q.push(numbered(n));
            assert!(
                q.len() <= DEPTH as usize,
                "the ring holds at most its depth"
            );
            if !full {
                kept.push(n);
            }
        }
    });
    // A push that saw the CQ full may still have found room, as a reader
    // took one meanwhile: check what was surely kept against what was
    // taken, not the other way.
    let mut all: Vec<u64> = taken.iter().flatten().copied().collect();
    all.sort_unstable();
    for got in &taken {
        assert!(got.windows(2).all(|w| w[0] < w[1]), "out of order");
    }
    assert!(all.windows(2).all(|w| w[0] < w[1]), "taken twice");
    assert!(kept.iter().all(|n| all.binary_search(n).is_ok()));
    assert_eq!(ep.cq_overflowed(h).unwrap(), all.len() < COUNT as usize);
    assert_eq!(reader.overflowed(), ep.cq_overflowed(h).unwrap());
}

#[test]
fn overflow_drops_the_completion_and_keeps_the_rest() {
    let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
    let h = ep.create_cq(2).unwrap();
    let reader = ep.cq_reader(h).unwrap();
    for n in 0..3 {
        ep.cqs.get_mut(&h).unwrap().push(numbered(n));
    }
    assert!(reader.overflowed() && ep.cq_overflowed(h).unwrap());
    let ids: Vec<u64> = ep.poll_cq(h, 8).unwrap().iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [0, 1]);
    ep.cqs.get_mut(&h).unwrap().push(numbered(3));
    assert_eq!(reader.poll(8)[0].wr_id, 3, "room again once polled");
    assert!(reader.overflowed(), "an overflowed CQ stays so");
}

#[test]
fn resize_under_concurrent_polls_keeps_every_completion_in_order() {
    const COUNT: u64 = 20_000;
    let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
    let h = ep.create_cq(64).unwrap();
    let reader = ep.cq_reader(h).unwrap();
    let taken = poll_while(&reader, 3, || {
        let mut depth = 64;
        for n in 0..COUNT {
            if n % 97 == 0 {
                // Between 4 and 128; a depth below what the CQ holds is
                // refused, and the old one stays.
                let want = 4 + (n as u32 * 7) % 125;
                match ep.resize_cq(h, want) {
                    Ok(()) => depth = want as usize,
                    Err(VerbsError::BadValue { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            // Push only into room, so nothing is lost.
            while ep.cqs[&h].len() >= depth {
                std::thread::yield_now();
            }
            ep.cqs.get_mut(&h).unwrap().push(numbered(n));
        }
    });
    check_exactly_once(&taken, &(0..COUNT).collect::<Vec<_>>());
    assert!(!ep.cq_overflowed(h).unwrap());
    // Whether one was refused above depends on the readers' pace; the
    // rule itself is checked here.
    for n in 0..3 {
        ep.cqs.get_mut(&h).unwrap().push(numbered(n));
    }
    assert!(ep.resize_cq(h, 2).is_err(), "below the completions held");
    ep.resize_cq(h, 3).unwrap();
    let ids: Vec<u64> = reader.poll(8).iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [0, 1, 2], "kept in order across the resize");
}

/// The API's "arm, then poll, then wait for the event" against an engine
/// pushing from another thread: the waiter never sleeps past a completion.
#[test]
fn arm_then_poll_never_misses_a_completion() {
    use std::sync::Mutex;
    use std::sync::mpsc;
    use std::time::Duration;
    const COUNT: u64 = 2_000;
    let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
    let h = ep.create_cq(MAX_CQE).unwrap();
    let reader = ep.cq_reader(h).unwrap();
    let ep = Mutex::new(ep);
    let (events, event) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let (reader, shared) = (&reader, &ep);
        let consumer = s.spawn(move || {
            let mut got = Vec::new();
            while got.len() < COUNT as usize {
                if let Some(wc) = reader.pop() {
                    got.push(wc.wr_id);
                    continue;
                }
                shared.lock().unwrap().req_notify_cq(h, false).unwrap();
                if let Some(wc) = reader.pop() {
                    got.push(wc.wr_id);
                    continue;
                }
                // Empty after the arm: the next push fires it.
                event
                    .recv_timeout(Duration::from_secs(10))
                    .expect("a completion came after the arm and fired nothing");
            }
            got
        });
        for n in 0..COUNT {
            let mut ep = ep.lock().unwrap();
            ep.cqs.get_mut(&h).unwrap().push(numbered(n));
            ep.take_cq_events(|_, fired| {
                if fired.notify {
                    events.send(()).unwrap();
                }
            });
            drop(ep);
            if n % 16 == 0 {
                std::thread::yield_now();
            }
        }
        let got = consumer.join().unwrap();
        assert_eq!(got, (0..COUNT).collect::<Vec<_>>());
    });
}

#[test]
fn a_reader_shares_the_cq_with_poll_cq() {
    let mut ep = Endpoint::new(EndpointConfig { seed: 1 });
    let h = ep.create_cq(8).unwrap();
    let reader = ep.cq_reader(h).unwrap();
    assert_eq!(reader.handle(), h);
    for n in 0..4 {
        ep.cqs.get_mut(&h).unwrap().push(numbered(n));
    }
    assert_eq!(reader.len(), 4);
    assert_eq!(ep.poll_cq(h, 1).unwrap()[0].wr_id, 0);
    assert_eq!(reader.pop().unwrap().wr_id, 1);
    let mut out = [WorkCompletion::default(); 8];
    assert_eq!(ep.poll_cq_into(h, &mut out).unwrap(), 2);
    assert_eq!([out[0].wr_id, out[1].wr_id], [2, 3]);
    assert!(reader.is_empty() && reader.poll(4).is_empty());
    assert!(matches!(ep.cq_reader(99), Err(VerbsError::NoSuchCq(99))));
}
