//! REJ reason codes (IBA vol. 1 table 109) that this CM sends or names.
//! The numbers are the wire values; the kernel's `ib_cm_rej_reason` uses the
//! same ones.

/// No QP available.
pub const NO_QP: u16 = 1;
/// The receiver is out of resources; sent here when the pending table is full.
pub const NO_RESOURCES: u16 = 3;
/// The sender gave up waiting for an answer (REQ or REP retries exhausted).
pub const TIMEOUT: u16 = 4;
/// The message named a comm ID the receiver does not know.
pub const INVALID_COMM_ID: u16 = 6;
/// Nothing listens on the REQ's service ID.
pub const INVALID_SERVICE_ID: u16 = 8;
/// The REQ's transport is not RC or UC.
pub const INVALID_TRANSPORT_TYPE: u16 = 9;
/// The REQ or REP names a QP the receiver still holds in another connection.
pub const STALE_CONN: u16 = 10;
/// The path MTU is not supported.
pub const INVALID_MTU: u16 = 26;
/// The consumer (the application) rejected; carries its private data.
pub const CONSUMER_DEFINED: u16 = 28;

/// A short name for a reason, for logs and errors.
pub const fn name(reason: u16) -> &'static str {
    match reason {
        NO_QP => "no QP",
        NO_RESOURCES => "no resources",
        TIMEOUT => "timeout",
        INVALID_COMM_ID => "invalid comm ID",
        INVALID_SERVICE_ID => "invalid service ID (nothing listens)",
        INVALID_TRANSPORT_TYPE => "invalid transport type",
        STALE_CONN => "stale connection",
        INVALID_MTU => "invalid MTU",
        CONSUMER_DEFINED => "consumer reject",
        _ => "other",
    }
}
