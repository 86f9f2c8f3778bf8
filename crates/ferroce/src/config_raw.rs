//! Settings of a device on the raw-Ethernet backend: its VLAN, the 802.1Q
//! priority of its traffic classes, PFC, and the receive ring's size
//! ([`crate::DeviceConfig::raw`]; the UDP backend ignores them).
//!
//! Contract (see README "PFC and priorities"):
//! * `vlan: Some(vid)` tags every frame with that VID and the PCP the
//!   [`PcpMap`] gives the packet's traffic class. Without a VLAN, frames
//!   are untagged unless PFC is on; then they are priority-tagged (VID 0),
//!   as NICs send RoCE in PCP-trust mode.
//! * `pfc: Some(cfg)` turns PFC on (off by default): received PFC frames
//!   hold that priority's frames (nothing dropped; when a priority's queue
//!   of held frames is full, the engine waits, as for a full send ring),
//!   and the device sends XOFF/XON from its receive backlog.
//! * `rx_frames`: slots of the receive ring (one frame each); fewer make a
//!   ring that overflows sooner (the PFC tests use 128).

pub use ferroce_io::raw::pfc::{DEFAULT_LINK_MBPS, PfcConfig, PfcStats};
pub use ferroce_io::raw::qos::{DEFAULT_ROCE_PRIORITY, PcpMap};

/// Raw-backend settings (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawOptions {
    /// The VLAN to tag frames with (VID 1-4094), or none.
    pub vlan: Option<u16>,
    /// Traffic class to 802.1Q priority (default: all on 3).
    pub pcp: PcpMap,
    /// PFC on, with these settings; `None`: off.
    pub pfc: Option<PfcConfig>,
    /// Receive ring slots (a frame, or a super-frame of up to 64 KiB,
    /// each; at least 8).
    pub rx_frames: u32,
    /// Segmentation offload for RoCE v2 (`ferroce_io::raw::RawConfig::gso`):
    /// runs of packets leave as super-frames the kernel cuts, and
    /// super-frames arriving whole are cut here. Off for a peer that
    /// cannot take super-frames whole (a receiver behind a veth without
    /// offload), or to make every packet its own frame.
    pub gso: bool,
    /// Test only: drop one frame in N sent, at random (0: none).
    /// [`Default`] takes it from [`crate::env::RAW_DROP_ONE_IN`].
    pub test_drop_one_in: u32,
    /// Test only: each receive takes at most 8 frames, then sleeps this
    /// long (`None`: not slowed). [`Default`] takes it from
    /// [`crate::env::RAW_SLOW_RX_US`].
    pub test_slow_rx: Option<std::time::Duration>,
}

impl Default for RawOptions {
    /// No VLAN, every class on priority 3, PFC off, 512 receive slots
    /// (of 64 KiB: 32 MiB), segmentation offload on; the test knobs as
    /// the environment sets them ([`crate::env::Env`]).
    fn default() -> Self {
        let env = crate::env::Env::get();
        Self {
            vlan: None,
            pcp: PcpMap::default(),
            pfc: None,
            rx_frames: 512,
            gso: true,
            test_drop_one_in: env.raw_drop_one_in,
            test_slow_rx: env.raw_slow_rx,
        }
    }
}

impl RawOptions {
    /// Checks the settings together; the error names the one to change.
    pub fn check(&self) -> Result<(), String> {
        if let Some(vid) = self.vlan
            && !(1..=4094).contains(&vid)
        {
            return Err(format!(
                "VLAN {vid}: a VID is 1-4094 (0 is the priority tag, sent by itself \
                 when PFC is on without a VLAN; 4095 is reserved)"
            ));
        }
        if self.rx_frames < 8 {
            return Err(format!(
                "a receive ring of {} frames: use at least 8",
                self.rx_frames
            ));
        }
        match &self.pfc {
            Some(pfc) => pfc.check(self.rx_frames),
            None => Ok(()),
        }
    }
}
