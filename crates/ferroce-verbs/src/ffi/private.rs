//! rdma-core's provider interface (`IBVERBS_PRIVATE_34`): what the
//! provider libraries perftest links directly (libmlx5.so.1, libefa.so.1)
//! import. Those libraries are bound at load time (BIND_NOW), so every
//! name must exist, but their code runs only for their own hardware, which
//! never appears in a ferroce device list. The one call that does happen
//! is each provider registering itself from its constructor
//! (`verbs_register_driver_34`), which is ignored: the providers here are
//! ferroce's devices.

use std::ffi::c_int;

/// The `ibv_cmd_*` kernel commands, `execute_ioctl` and
/// `ibv_resolve_eth_l2_from_gid`: there is no kernel device to command.
pub(super) unsafe extern "C" fn no_kernel() -> c_int {
    libc::EOPNOTSUPP
}

/// The provider calls that return nothing or an object:
/// `verbs_register_driver_34` (ignored), and the context and CQ set-up of
/// a provider's own devices (`_verbs_init_and_alloc_context`,
/// `verbs_open_device`: NULL).
pub(super) unsafe extern "C" fn no_provider() -> usize {
    0
}

// `verbs_allow_disassociate_destroy`: a bool the providers read, false.
core::arch::global_asm!(
    ".pushsection .data.verbs_allow_disassociate_destroy,\"aw\",@progbits",
    ".globl verbs_allow_disassociate_destroy_ferroce",
    ".type verbs_allow_disassociate_destroy_ferroce,@object",
    ".size verbs_allow_disassociate_destroy_ferroce, 1",
    "verbs_allow_disassociate_destroy_ferroce:",
    ".byte 0",
    ".popsection",
    ".symver verbs_allow_disassociate_destroy_ferroce, verbs_allow_disassociate_destroy@@IBVERBS_PRIVATE_34",
);
