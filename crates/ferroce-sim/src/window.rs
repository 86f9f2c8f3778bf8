//! Figures over a window of a run's time series, for judging a run after
//! it has settled (the DCQCN experiments): each flow's mean rate, Jain's
//! index of those, the 99th-percentile queue, and when the flows became
//! fair and stayed so.

use crate::report::{Report, jain, percentile};

impl Report {
    /// Indices of the samples taken in (`from_us`, `to_us`].
    fn samples(&self, from_us: f64, to_us: f64) -> std::ops::Range<usize> {
        let t = &self.series.times_us;
        let a = t.partition_point(|&x| x <= from_us);
        let b = t.partition_point(|&x| x <= to_us);
        a..b.max(a)
    }

    /// Each flow's mean wire rate over the window, Gb/s.
    pub fn rates_between(&self, from_us: f64, to_us: f64) -> Vec<f64> {
        let r = self.samples(from_us, to_us);
        let n = r.len().max(1) as f64;
        self.series
            .flow_gbps
            .iter()
            .map(|v| v[r.clone()].iter().sum::<f64>() / n)
            .collect()
    }

    /// Jain's index of the flows' mean rates over the window.
    pub fn jain_between(&self, from_us: f64, to_us: f64) -> f64 {
        jain(&self.rates_between(from_us, to_us))
    }

    /// The deepest egress queue's 99th-percentile depth over the window,
    /// bytes.
    pub fn queue_p99_between(&self, from_us: f64, to_us: f64) -> u64 {
        let r = self.samples(from_us, to_us);
        self.series
            .queue_bytes
            .iter()
            .map(|q| percentile(&q[r.clone()], 99.0))
            .max()
            .unwrap_or(0)
    }

    /// The first sample time from which Jain's index of the flows' rates,
    /// each averaged over the trailing `window_us`, stays at or above
    /// `threshold` to the end of the run; `None` if it never settles.
    pub fn fair_from(&self, threshold: f64, window_us: f64) -> Option<f64> {
        let t = &self.series.times_us;
        let mut since = None;
        for &now in t {
            if now < window_us {
                continue;
            }
            if self.jain_between(now - window_us, now) >= threshold {
                since.get_or_insert(now);
            } else {
                since = None;
            }
        }
        since
    }
}
