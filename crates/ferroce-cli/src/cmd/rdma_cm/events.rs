//! Waiting for rdma_cm events: the next one on a channel (or the next
//! about one ID, others dropped), within a time or without a limit, and
//! the next connect request to a listener.

use std::time::{Duration, Instant};

use ferroce::cm::{CmEvent, CmId, CmIdError, EventChannel};

use crate::error::Error;

/// The longest single wait while a server waits for its client without a
/// limit: the wait is taken again after it.
const FOREVER_SLICE: Duration = Duration::from_secs(3600);

/// The next event on `ch`, about `id` if given (events about other IDs
/// are dropped), within `timeout` (`None`: without a limit). `Ok(None)`
/// when the time ran out.
pub(crate) fn wait_event(
    ch: &EventChannel,
    id: Option<&CmId>,
    timeout: Option<Duration>,
) -> Result<Option<CmEvent>, ferroce::Error> {
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        let event = match deadline {
            None => ch.get_event()?,
            Some(d) => match ch.get_event_timeout(d.saturating_duration_since(Instant::now()))? {
                Some(e) => e,
                None => return Ok(None),
            },
        };
        if id.is_none_or(|id| event.id == *id) {
            return Ok(Some(event));
        }
    }
}

/// [`wait_event`] within `timeout`, whose running out is the error.
pub(crate) fn next_event(
    ch: &EventChannel,
    id: Option<&CmId>,
    timeout: Duration,
) -> Result<CmEvent, Error> {
    wait_event(ch, id, Some(timeout))?
        .ok_or_else(|| format!("no rdma_cm event within {} s", timeout.as_secs()).into())
}

/// The next connect request to `listen`, within `timeout` (`None`: without
/// a limit, as a server waits for its client).
pub(crate) fn wait_request(
    listen: &CmId,
    timeout: Option<Duration>,
) -> Result<CmEvent, ferroce::Error> {
    loop {
        match listen.get_request(timeout.unwrap_or(FOREVER_SLICE)) {
            Err(ferroce::Error::Cm(CmIdError::TimedOut(_))) if timeout.is_none() => {}
            got => return got,
        }
    }
}
