//! The send queue's local operations, BIND_MW and LOCAL_INV: carried out by
//! the QP itself when the requester reaches them, in order with the
//! requests around them, without a packet or a PSN (as rxe's requester
//! does). Each is then done at once; the completer reports it in order,
//! after the requests posted before it (`completer::complete_done`). A
//! failed one stops the requester there, as a local protection error does
//! (`requester::local_fault`), and moves the QP to the error state when it
//! is reported.

use super::Qp;
use super::requester::may_start;
use crate::mr::MrTable;
use crate::verbs::{QpState, SendOp, WcStatus};

/// Carries out the local operations at the requester's position, and steps
/// over those already done (met again after going back to retransmit).
pub(crate) fn run(qp: &mut Qp, mrs: &mut MrTable) {
    loop {
        let idx = qp.req.wqe;
        let Some(w) = qp.sq.get(idx) else { return };
        if !w.wr.op.is_local() {
            return;
        }
        if w.done {
            if w.status != WcStatus::Success {
                return; // the requester stops at a failed one
            }
            qp.req.wqe += 1;
            continue;
        }
        // SQD begins nothing new; a fence waits as for any request.
        if qp.state != QpState::Rts || !may_start(qp, idx) {
            return;
        }
        let result = execute(qp, idx, mrs);
        let next_psn = qp.req.next_psn;
        let w = &mut qp.sq[idx];
        w.started = true;
        w.done = true;
        // No PSN of its own: its "last PSN" is the one before the next, as
        // for a request that failed before it started.
        w.first_psn = next_psn - 1;
        w.npkts = 0;
        match result {
            Ok(()) => {
                w.status = WcStatus::Success;
                qp.req.wqe = idx + 1;
            }
            Err((status, why)) => {
                tracing::debug!(
                    qpn = %crate::log::Qpn(qp.qpn),
                    wr_id = w.wr.wr_id,
                    reason = why,
                    "local operation fails"
                );
                w.status = status;
                return;
            }
        }
    }
}

/// The operation itself: `Err` holds the completion status and why.
fn execute(qp: &Qp, idx: usize, mrs: &mut MrTable) -> Result<(), (WcStatus, &'static str)> {
    match qp.sq[idx].wr.op {
        SendOp::BindMw { mw, rkey, bind } => mrs
            .bind_mw(qp.init.pd, qp.qpn, mw, rkey, &bind)
            .map(|_| ())
            .map_err(|why| (WcStatus::MwBindErr, why)),
        // rxe reports a failed LOCAL_INV as LOC_QP_OP_ERR.
        SendOp::LocalInv(rkey) => mrs
            .invalidate(qp.init.pd, rkey, None)
            .map_err(|why| (WcStatus::LocQpOpErr, why)),
        _ => Ok(()),
    }
}
