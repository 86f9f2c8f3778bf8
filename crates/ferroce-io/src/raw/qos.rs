//! Which 802.1Q priority (PCP) a RoCE frame travels on, and whether it
//! carries a tag at all.
//!
//! Contract:
//! * The priority comes from the packet's traffic class (IPv4 ToS, IPv6
//!   or GRH traffic class) through a [`PcpMap`]: eight entries indexed by
//!   the DSCP's top three bits (the IP precedence, `tos >> 5`). The
//!   default puts every class on priority 3, the usual lossless-RoCE
//!   setup of NICs and switches (rdma_cm's `default_roce_tos` 106 is DSCP
//!   26, which mlx5's default DSCP-to-priority table, DSCP / 8, also
//!   puts on 3). [`PcpMap::precedence`] is that mlx5 table (priority =
//!   precedence).
//! * [`tag_for`]: with a VLAN configured, every frame is tagged with that
//!   VID and the mapped PCP. Without one, frames go untagged, except when
//!   PFC is on: then they are priority-tagged (VID 0), as NICs send RoCE
//!   in PCP-trust mode, since a receiver can only tell a frame's priority
//!   by its tag.
//! * On receive, an untagged frame is priority 0 ([`priority_of`]), as a
//!   PCP-trusting port treats it.

use ferroce_wire::ethernet::VlanTag;

/// The priority RoCE traffic is on unless configured otherwise.
pub const DEFAULT_ROCE_PRIORITY: u8 = 3;

/// Traffic class (by IP precedence) to 802.1Q priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcpMap(pub [u8; 8]);

impl Default for PcpMap {
    /// Every class on [`DEFAULT_ROCE_PRIORITY`].
    fn default() -> Self {
        Self::all(DEFAULT_ROCE_PRIORITY)
    }
}

impl PcpMap {
    /// Every class on `pcp` (0-7; higher bits are dropped).
    pub fn all(pcp: u8) -> Self {
        Self([pcp & 7; 8])
    }

    /// Priority = IP precedence (DSCP / 8), mlx5's default DSCP table.
    pub fn precedence() -> Self {
        Self(std::array::from_fn(|p| p as u8))
    }

    /// The priority of a packet with traffic class `tos` (DSCP and ECN).
    pub fn pcp(&self, tos: u8) -> u8 {
        self.0[usize::from(tos >> 5)] & 7
    }

    /// Parses eight comma-separated priorities (`3,3,3,3,3,3,3,3`), the
    /// first for precedence 0; the error says what is wrong.
    pub fn parse(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        if parts.len() != 8 {
            return Err(format!(
                "a PCP map has 8 priorities (one per IP precedence, 0 first), \
                 comma-separated; got {}",
                parts.len()
            ));
        }
        let mut map = [0; 8];
        for (slot, part) in map.iter_mut().zip(parts) {
            *slot = match part.parse::<u8>() {
                Ok(p) if p < 8 => p,
                _ => return Err(format!("{part:?} is not a priority (0-7)")),
            };
        }
        Ok(Self(map))
    }
}

/// The tag of a frame with traffic class `tos` (see the module docs):
/// `vlan` is the configured VID, `pfc` whether PFC is on.
pub fn tag_for(map: &PcpMap, vlan: Option<u16>, pfc: bool, tos: u8) -> Option<VlanTag> {
    priority_tag(vlan, pfc, map.pcp(tos))
}

/// The tag of a frame on priority `pcp` (see [`tag_for`]).
pub fn priority_tag(vlan: Option<u16>, pfc: bool, pcp: u8) -> Option<VlanTag> {
    let vid = match (vlan, pfc) {
        (Some(vid), _) => vid & 0x0fff,
        (None, true) => 0,
        (None, false) => return None,
    };
    Some(VlanTag {
        pcp,
        dei: false,
        vid,
    })
}

/// The priority of a received frame: its tag's PCP, 0 when untagged.
pub fn priority_of(tci: Option<u16>) -> u8 {
    tci.map_or(0, |t| VlanTag::from_tci(t).pcp & 7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_map_puts_every_class_on_priority_3() {
        let map = PcpMap::default();
        for tos in [0, 106, 0xb8, 0xff] {
            assert_eq!(map.pcp(tos), 3, "tos {tos}");
        }
        // DSCP 26 (tos 106) is precedence 3 in mlx5's table as well.
        assert_eq!(PcpMap::precedence().pcp(106), 3);
        assert_eq!(PcpMap::precedence().pcp(0xe0), 7);
    }

    #[test]
    fn tags_follow_vlan_and_pfc() {
        let map = PcpMap::precedence();
        assert_eq!(tag_for(&map, None, false, 0xa0), None);
        let prio_tag = tag_for(&map, None, true, 0xa0).unwrap();
        assert_eq!((prio_tag.vid, prio_tag.pcp), (0, 5));
        let tagged = tag_for(&map, Some(0x1234), false, 0x20).unwrap();
        assert_eq!((tagged.vid, tagged.pcp), (0x234, 1));
        assert_eq!(priority_of(Some(tagged.tci())), 1);
        assert_eq!(priority_of(None), 0);
    }

    #[test]
    fn parse_checks_count_and_range() {
        assert_eq!(PcpMap::parse("0,1,2,3,4,5,6,7"), Ok(PcpMap::precedence()));
        assert!(PcpMap::parse("3,3").unwrap_err().contains("8 priorities"));
        assert!(
            PcpMap::parse("0,1,2,3,4,5,6,8")
                .unwrap_err()
                .contains("\"8\"")
        );
    }
}
