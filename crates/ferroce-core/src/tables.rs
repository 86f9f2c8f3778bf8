//! The endpoint's tables that a QP's engines (requester, responder,
//! completer) work against besides the QP itself: registered memory, CQs,
//! SRQs and the counters, borrowed together as one context, as smoltcp's
//! `InterfaceInner` is. The endpoint owns the tables and its QPs side by
//! side, so it can lend both at once; the engines see the endpoint only
//! through this.

use rustc_hash::FxHashMap as HashMap;

use crate::cq::Cq;
use crate::mr::MrTable;
use crate::srq::Srq;
use crate::stats::Stats;

/// What one step of a QP's engines may read and change besides the QP.
pub(crate) struct Tables<'a> {
    pub(crate) mrs: &'a mut MrTable,
    pub(crate) cqs: &'a mut HashMap<u32, Cq>,
    pub(crate) srqs: &'a mut HashMap<u32, Srq>,
    pub(crate) stats: &'a mut Stats,
}
