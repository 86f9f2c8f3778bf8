//! Plots of a run's time series, as PNG and SVG, drawn with `plotters`:
//! rates.{png,svg} (per-flow rate), queues.{png,svg} (the deepest egress
//! queues) and pause.{png,svg} (cumulative PFC pause time of the ports
//! paused longest).
//!
//! Text needs a TrueType font: the first found of `FERROCE_SIM_FONT` and
//! DejaVu Sans where Debian's fonts-dejavu-core puts it. Without one, no
//! plot is drawn and the error says how to get one (the CSV files are
//! written regardless).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::report::{Report, percentile};

/// Series drawn at most per plot (the largest ones), so that a 64-flow
/// incast's queue plot stays readable; every flow's rate is drawn.
const MAX_LINES: usize = 8;

const SIZE: (u32, u32) = (960, 540);

/// The rate plot averages over 1/SMOOTHING of the run.
const SMOOTHING: usize = 50;

/// The mean of each value and the `window - 1` before it.
fn trailing_mean(v: &[f64], window: usize) -> Vec<f64> {
    let mut sum = 0.0;
    (0..v.len())
        .map(|i| {
            sum += v[i];
            if i >= window {
                sum -= v[i - window];
            }
            sum / (i + 1).min(window) as f64
        })
        .collect()
}

/// Where a font may be.
const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Registers a font with plotters once.
fn font() -> Result<(), String> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let candidates = std::env::var_os("FERROCE_SIM_FONT")
            .map(PathBuf::from)
            .into_iter()
            .chain(FONT_PATHS.iter().map(PathBuf::from));
        for path in candidates {
            if let Ok(bytes) = std::fs::read(&path) {
                // plotters keeps fonts for the life of the process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                return plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                    .map_err(|_| format!("{} is not a TrueType font: set FERROCE_SIM_FONT to one", path.display()));
            }
        }
        Err("no font for the plots: install fonts-dejavu-core or set FERROCE_SIM_FONT to a .ttf file".into())
    })
    .clone()
}

struct Chart<'a> {
    title: &'a str,
    y_label: &'a str,
    lines: Vec<(String, Vec<f64>)>,
}

/// Writes the plots of `r` into `dir`.
pub fn write(r: &Report, dir: &Path) -> Result<(), String> {
    font()?;
    let s = &r.series;
    // Rates swing at the sample interval (PFC turns senders on and off);
    // the plot shows their trailing mean over 1/SMOOTHING of the run, the
    // CSV the samples themselves.
    let window = (s.times_us.len() / SMOOTHING).max(1);
    let step_us = s.times_us.first().copied().unwrap_or(0.0);
    let title = format!(
        "per-flow rate (mean over {:.0} us)",
        window as f64 * step_us
    );
    let rates = Chart {
        title: &title,
        y_label: "Gb/s",
        lines: s
            .flow_gbps
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("flow {i}"), trailing_mean(v, window)))
            .collect(),
    };
    let mut queues: Vec<(u64, String, Vec<f64>)> = s
        .queue_bytes
        .iter()
        .zip(&s.queue_labels)
        .filter(|(q, _)| q.iter().any(|&b| b > 0))
        .map(|(q, l)| {
            (
                percentile(q, 99.0),
                l.clone(),
                q.iter().map(|&b| b as f64 / 1024.0).collect(),
            )
        })
        .collect();
    queues.sort_by_key(|q| std::cmp::Reverse(q.0));
    let queues = Chart {
        title: "egress queue depth (deepest queues)",
        y_label: "KiB",
        lines: queues
            .into_iter()
            .take(MAX_LINES)
            .map(|(_, l, v)| (l, v))
            .collect(),
    };
    let mut pauses: Vec<(String, Vec<f64>)> = s
        .pause_us
        .iter()
        .zip(&s.pause_labels)
        .filter(|(p, _)| p.last().is_some_and(|&t| t > 0.0))
        .map(|(p, l)| (l.clone(), p.clone()))
        .collect();
    pauses.sort_by(|a, b| {
        b.1.last()
            .partial_cmp(&a.1.last())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    pauses.truncate(MAX_LINES);
    let pause = Chart {
        title: "PFC pause time so far (ports paused longest)",
        y_label: "us paused",
        lines: pauses,
    };
    let dcqcn = Chart {
        title: "DCQCN current rate at each sender",
        y_label: "Gb/s",
        lines: s
            .dcqcn_rate_gbps
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("flow {i}"), v.clone()))
            .collect(),
    };
    let charts = [
        ("rates", rates),
        ("queues", queues),
        ("pause", pause),
        ("dcqcn", dcqcn),
    ];
    for (name, chart) in charts {
        let png = dir.join(format!("{name}.png"));
        let svg = dir.join(format!("{name}.svg"));
        draw(
            BitMapBackend::new(&png, SIZE).into_drawing_area(),
            &chart,
            &s.times_us,
        )
        .map_err(|e| format!("drawing {}: {e}", png.display()))?;
        draw(
            SVGBackend::new(&svg, SIZE).into_drawing_area(),
            &chart,
            &s.times_us,
        )
        .map_err(|e| format!("drawing {}: {e}", svg.display()))?;
    }
    Ok(())
}

fn draw<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    c: &Chart<'_>,
    t: &[f64],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    area.fill(&WHITE).map_err(err)?;
    let x_max = t.last().copied().unwrap_or(1.0).max(1e-3);
    let y_max = c
        .lines
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0_f64, f64::max)
        .max(1e-3)
        * 1.05;
    let mut chart = ChartBuilder::on(&area)
        .caption(c.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time (us)")
        .y_desc(c.y_label)
        .draw()
        .map_err(err)?;
    let labelled = c.lines.len() <= MAX_LINES;
    for (i, (label, v)) in c.lines.iter().enumerate() {
        let color = Palette99::pick(i).stroke_width(2);
        let series = chart
            .draw_series(LineSeries::new(
                t.iter().copied().zip(v.iter().copied()),
                color,
            ))
            .map_err(err)?;
        if labelled {
            series
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        }
    }
    if labelled && !c.lines.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    area.present().map_err(err)?;
    Ok(())
}
