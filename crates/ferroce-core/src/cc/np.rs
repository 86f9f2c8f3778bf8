//! The notification point: which CE-marked packets a QP answers with a CNP.
//! At most one CNP per QP per `min_time_between_cnps` (mlx5's rule; the
//! paper's N): marks inside the interval are counted, not answered.

use core::time::Duration;

use crate::time::Instant;

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Np {
    last_cnp: Option<Instant>,
}

impl Np {
    /// A CE-marked packet arrived at `now`: whether to send a CNP for it
    /// (and if so, the interval starts again).
    pub(crate) fn on_ce(&mut self, now: Instant, interval: Duration) -> bool {
        if self.last_cnp.is_some_and(|t| now.since(t) < interval) {
            return false;
        }
        self.last_cnp = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_cnp_per_interval() {
        let mut np = Np::default();
        let gap = Duration::from_micros(4);
        let at = |us: u64| Instant::from_nanos(us * 1000);
        let sent: Vec<bool> = [0, 1, 3, 4, 5, 9]
            .iter()
            .map(|&t| np.on_ce(at(t), gap))
            .collect();
        assert_eq!(sent, [true, false, false, true, false, true]);
    }
}
