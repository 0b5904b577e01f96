//! A small SVG plot: linear and log axes with round ticks, lines, bars, bands and marks.
//!
//! In: data in the chart's own units (ns, bytes, requests/s, seconds from the run's start).
//! Out: one `<svg class="chart">` string. Every drawn series sits in a `<g class="series">`
//! named by `data-series` (the page's legend toggles it); every drawn datum carries the class
//! `mark` (the browser test counts them); lines carry their decimated values in `data-v` so the
//! page's script can show the value under the pointer without a library.
//!
//! Why our own renderer rather than `plotters`' SVG backend: the page needs per-series groups,
//! classes and data attributes (toggling, hover, the DOM checks), the same x scale shared by
//! panels stacked in one figure, and output small enough for a 10 M-sample run; the plotters
//! backend writes anonymous elements with inline styles, so each of those would have been a
//! post-processing pass over its output.

use std::fmt::Write;

use super::format::{fmt_value, Fmt};

/// Colours of series, in order (readable on white, distinguishable in print).
pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// The colour of the `i`-th series.
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Linear or logarithmic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Equal steps for equal differences.
    Linear,
    /// Equal steps for equal ratios (values must be > 0; smaller ones are drawn at the floor).
    Log,
}

/// A map from data values to pixels along one axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// Linear or log.
    pub kind: Kind,
    /// Smallest value shown.
    pub lo: f64,
    /// Largest value shown.
    pub hi: f64,
    px0: f64,
    px1: f64,
}

impl Scale {
    /// A scale over `[lo, hi]`, widened where it is empty or inverted, and for log axes to whole
    /// decades when the range spans less than one (so there are ticks to read).
    pub fn new(kind: Kind, lo: f64, hi: f64) -> Scale {
        let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
            (lo.min(hi), lo.max(hi))
        } else {
            (0.0, 1.0)
        };
        match kind {
            Kind::Linear => {
                if hi - lo <= 0.0 {
                    let pad = if hi == 0.0 { 1.0 } else { hi.abs() * 0.1 };
                    lo -= pad;
                    hi += pad;
                }
            }
            Kind::Log => {
                lo = lo.max(1e-9);
                hi = hi.max(lo * 1.0001);
                if hi / lo < 10.0 {
                    lo = 10f64.powf(lo.log10().floor());
                    hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
                }
            }
        }
        Scale {
            kind,
            lo,
            hi,
            px0: 0.0,
            px1: 1.0,
        }
    }

    /// A linear scale from 0 to at least `hi` with a little headroom.
    pub fn from_zero(hi: f64) -> Scale {
        Scale::new(Kind::Linear, 0.0, if hi > 0.0 { hi * 1.05 } else { 1.0 })
    }

    fn placed(mut self, px0: f64, px1: f64) -> Scale {
        self.px0 = px0;
        self.px1 = px1;
        self
    }

    fn unit(&self, v: f64) -> f64 {
        match self.kind {
            Kind::Linear => (v - self.lo) / (self.hi - self.lo),
            Kind::Log => {
                (v.max(self.lo * 1e-3).log10() - self.lo.log10()) / (self.hi / self.lo).log10()
            }
        }
    }

    /// The pixel of `v` (values outside the range are drawn just outside the plot area).
    pub fn px(&self, v: f64) -> f64 {
        let u = self.unit(v).clamp(-0.02, 1.02);
        self.px0 + u * (self.px1 - self.px0)
    }

    /// Round tick values inside the range: 1-2-5 steps on linear axes, decades (with 2 and 5
    /// when there are few) on log axes.
    pub fn ticks(&self) -> Vec<f64> {
        self.ticks_in(false)
    }

    /// Ticks; `binary` steps linear axes by powers of two (bytes read as 4KiB, 8KiB, 16KiB).
    pub fn ticks_in(&self, binary: bool) -> Vec<f64> {
        match self.kind {
            Kind::Linear => {
                let raw = (self.hi - self.lo) / 6.0;
                let step = if binary && raw >= 1.0 {
                    2f64.powf(raw.log2().ceil())
                } else {
                    let mag = 10f64.powf(raw.log10().floor());
                    [1.0, 2.0, 5.0, 10.0]
                        .iter()
                        .map(|m| m * mag)
                        .find(|s| *s >= raw)
                        .unwrap_or(10.0 * mag)
                };
                let mut t = (self.lo / step).ceil() * step;
                let mut out = Vec::new();
                while t <= self.hi + step * 1e-9 && out.len() < 20 {
                    out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
                    t += step;
                }
                out
            }
            Kind::Log => {
                let (a, b) = (
                    self.lo.log10().floor() as i32,
                    self.hi.log10().ceil() as i32,
                );
                let mults: &[f64] = if b - a <= 3 { &[1.0, 2.0, 5.0] } else { &[1.0] };
                let every = ((b - a) / 8).max(1);
                let mut out = Vec::new();
                for d in (a..=b).filter(|d| (d - a) % every == 0) {
                    for m in mults {
                        let v = m * 10f64.powi(d);
                        if v >= self.lo * 0.999 && v <= self.hi * 1.001 {
                            out.push(v);
                        }
                    }
                }
                out
            }
        }
    }
}

/// One axis: its scale, how its values read, and its title.
#[derive(Debug, Clone)]
pub struct Axis {
    /// The scale (placed in pixels by the plot).
    pub scale: Scale,
    /// How tick labels and hover values are written.
    pub fmt: Fmt,
    /// Axis title.
    pub title: String,
}

impl Axis {
    /// An axis.
    pub fn new(scale: Scale, fmt: Fmt, title: impl Into<String>) -> Axis {
        Axis {
            scale,
            fmt,
            title: title.into(),
        }
    }
}

/// Escapes text for HTML and SVG (content and attribute values).
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A number for SVG coordinates: one decimal is below what a screen shows.
fn n(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// A data value for `data-v`: four significant digits.
fn d(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Plot size in pixels.
pub const WIDTH: f64 = 960.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 44.0;
const LEGEND_ROW: f64 = 16.0;

/// One plot area with its axes; marks are added, then [`Plot::finish`] writes the SVG.
#[derive(Debug)]
pub struct Plot {
    height: f64,
    x: Axis,
    y: Axis,
    body: String,
    legend: Vec<(String, &'static str)>,
    open_series: bool,
    y_ticks: bool,
    x_labels: Vec<(f64, String)>,
}

impl Plot {
    /// A plot `height` pixels tall (the width is [`WIDTH`]).
    pub fn new(height: f64, x: Axis, y: Axis) -> Plot {
        let mut x = x;
        let mut y = y;
        x.scale = x.scale.placed(LEFT, WIDTH - RIGHT);
        y.scale = y.scale.placed(height - BOTTOM, TOP);
        Plot {
            height,
            x,
            y,
            body: String::new(),
            legend: Vec::new(),
            open_series: false,
            y_ticks: true,
            x_labels: Vec::new(),
        }
    }

    /// Leaves the y axis without ticks (rows of bars, not values).
    pub fn hide_y_ticks(&mut self) {
        self.y_ticks = false;
    }

    /// Names the x positions instead of numbering the axis (categories: `by-name median`).
    pub fn x_categories(&mut self, labels: Vec<(f64, String)>) {
        self.x_labels = labels;
    }

    /// The x scale (placed).
    pub fn x(&self) -> &Scale {
        &self.x.scale
    }

    /// The y scale (placed).
    pub fn y(&self) -> &Scale {
        &self.y.scale
    }

    /// Starts a named series: what follows until the next `series` belongs to it, and the
    /// legend gets an entry that toggles it.
    pub fn series(&mut self, name: &str, colour: &'static str) {
        self.close_series();
        let _ = write!(
            self.body,
            r#"<g class="series" data-series="{}" style="color:{colour}">"#,
            esc(name)
        );
        if !self.legend.iter().any(|(n, _)| n == name) {
            self.legend.push((name.to_string(), colour));
        }
        self.open_series = true;
    }

    fn close_series(&mut self) {
        if self.open_series {
            self.body.push_str("</g>");
            self.open_series = false;
        }
    }

    /// A line through `pts` (x, y), in the current series' colour; `data-v` keeps the values
    /// for hover.
    pub fn line(&mut self, pts: &[(f64, f64)], dashed: bool) {
        if pts.is_empty() {
            return;
        }
        let mut path = String::with_capacity(pts.len() * 12);
        let mut data = String::with_capacity(pts.len() * 12);
        for (i, (x, y)) in pts.iter().enumerate() {
            let _ = write!(
                path,
                "{}{},{}",
                if i == 0 { "M" } else { "L" },
                n(self.x.scale.px(*x)),
                n(self.y.scale.px(*y))
            );
            let _ = write!(data, "{}{},{}", if i == 0 { "" } else { " " }, d(*x), d(*y));
        }
        let dash = if dashed {
            r#" stroke-dasharray="5,3""#
        } else {
            ""
        };
        let _ = write!(
            self.body,
            r#"<path class="mark line" d="{path}" fill="none" stroke="currentColor" stroke-width="1.5"{dash} data-v="{data}"/>"#
        );
    }

    /// Dots at `pts`, each with a hover title.
    pub fn dots(&mut self, pts: &[(f64, f64)], r: f64) {
        for (x, y) in pts {
            let _ = write!(
                self.body,
                r#"<circle class="mark" cx="{}" cy="{}" r="{r}" fill="currentColor" fill-opacity="0.6"><title>{} at {}</title></circle>"#,
                n(self.x.scale.px(*x)),
                n(self.y.scale.px(*y)),
                esc(&fmt_value(self.y.fmt, *y)),
                esc(&fmt_value(self.x.fmt, *x)),
            );
        }
    }

    /// A bar from `x0` to `x1` and from the axis floor (or `y0`) up to `y`, with a hover title.
    pub fn bar(&mut self, x0: f64, x1: f64, y0: Option<f64>, y: f64, title: &str) {
        let (px0, px1) = (self.x.scale.px(x0), self.x.scale.px(x1));
        let base = y0.map_or(self.height - BOTTOM, |v| self.y.scale.px(v));
        let top = self.y.scale.px(y);
        let _ = write!(
            self.body,
            r#"<rect class="mark" x="{}" y="{}" width="{}" height="{}" fill="currentColor" fill-opacity="0.75"><title>{}</title></rect>"#,
            n(px0.min(px1)),
            n(top.min(base)),
            n((px1 - px0).abs().max(0.8)),
            n((base - top).abs()),
            esc(title)
        );
    }

    /// A point with a vertical error bar from `lo` to `hi`.
    pub fn error_bar(&mut self, x: f64, y: f64, lo: f64, hi: f64, title: &str) {
        let px = self.x.scale.px(x);
        let (py, plo, phi) = (self.y.scale.px(y), self.y.scale.px(lo), self.y.scale.px(hi));
        let _ = write!(
            self.body,
            r#"<g class="mark"><title>{}</title><line x1="{x}" x2="{x}" y1="{lo}" y2="{hi}" stroke="currentColor"/><line x1="{a}" x2="{b}" y1="{lo}" y2="{lo}" stroke="currentColor"/><line x1="{a}" x2="{b}" y1="{hi}" y2="{hi}" stroke="currentColor"/><circle cx="{x}" cy="{y}" r="3.5" fill="currentColor"/></g>"#,
            esc(title),
            x = n(px),
            y = n(py),
            lo = n(plo),
            hi = n(phi),
            a = n(px - 4.0),
            b = n(px + 4.0),
        );
    }

    /// A shaded vertical band from `x0` to `x1` (a burst, a mode, a throttled period) with a
    /// label at its top and a hover title. Bands are drawn under the series.
    pub fn band(&mut self, x0: f64, x1: f64, class: &str, label: &str, title: &str) {
        let (a, b) = (self.x.scale.px(x0), self.x.scale.px(x1));
        let _ = write!(
            self.body,
            r#"<g class="band {class}"><rect x="{}" y="{TOP}" width="{}" height="{}"><title>{}</title></rect>"#,
            n(a.min(b)),
            n((b - a).abs().max(1.0)),
            n(self.height - TOP - BOTTOM),
            esc(title)
        );
        if !label.is_empty() {
            let _ = write!(
                self.body,
                r#"<text x="{}" y="{}" class="band-label">{}</text>"#,
                n((a + b) / 2.0),
                n(TOP + 11.0),
                esc(label)
            );
        }
        self.body.push_str("</g>");
    }

    /// A vertical rule at `x` labelled `label` (a percentile, a gap warning).
    pub fn vrule(&mut self, x: f64, class: &str, label: &str, row: usize) {
        let at = self.x.scale.px(x);
        let px = n(at);
        // A label reads rightwards where it fits, else leftwards (so it stays inside the plot).
        let width = 6.6 * label.chars().count() as f64;
        let anchor = if at + width > WIDTH - RIGHT && at - width >= LEFT {
            r#" dx="-3" text-anchor="end""#
        } else {
            r#" dx="3""#
        };
        let _ = write!(
            self.body,
            r#"<g class="rule {class}"><line x1="{px}" x2="{px}" y1="{TOP}" y2="{}"/><text x="{px}" y="{}"{anchor}>{}</text></g>"#,
            n(self.height - BOTTOM),
            n(TOP + 24.0 + 12.0 * row as f64),
            esc(label)
        );
    }

    /// A horizontal rule at `y` labelled `label` (the link rate, a floor).
    pub fn hrule(&mut self, y: f64, class: &str, label: &str) {
        let py = n(self.y.scale.px(y));
        let _ = write!(
            self.body,
            r#"<g class="rule {class}"><line x1="{LEFT}" x2="{}" y1="{py}" y2="{py}"/><text x="{}" y="{py}" dy="-3" text-anchor="end">{}</text></g>"#,
            n(WIDTH - RIGHT),
            n(WIDTH - RIGHT - 4.0),
            esc(label)
        );
    }

    /// A heatmap cell spanning `[x0, x1] x [y0, y1]` with opacity `alpha` (0..=1).
    pub fn cell(&mut self, x: (f64, f64), y: (f64, f64), alpha: f64, title: &str) {
        let (a, b) = (self.x.scale.px(x.0), self.x.scale.px(x.1));
        let (c, e) = (self.y.scale.px(y.0), self.y.scale.px(y.1));
        let _ = write!(
            self.body,
            r#"<rect class="mark" x="{}" y="{}" width="{}" height="{}" fill="currentColor" fill-opacity="{:.2}"><title>{}</title></rect>"#,
            n(a.min(b)),
            n(c.min(e)),
            n((b - a).abs().max(0.5)),
            n((e - c).abs().max(0.5)),
            alpha.clamp(0.05, 1.0),
            esc(title)
        );
    }

    /// Free text at data coordinates.
    pub fn note(&mut self, x: f64, y: f64, text: &str) {
        let _ = write!(
            self.body,
            r#"<text class="note" x="{}" y="{}">{}</text>"#,
            n(self.x.scale.px(x)),
            n(self.y.scale.px(y)),
            esc(text)
        );
    }

    /// The SVG: grid, ticks, axis titles, the marks, and the legend (when there is more than
    /// one series). `id` names the panel (`data-plot`); the figure around it carries the id.
    pub fn finish(mut self, id: &str) -> String {
        self.close_series();
        let h = self.height;
        let mut s = String::with_capacity(self.body.len() + 4096);
        let xs = &self.x.scale;
        let ys = &self.y.scale;
        let _ = write!(
            s,
            r#"<svg class="chart" data-plot="{id}" viewBox="0 0 {w} {h}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg" data-x="{xk},{xlo},{xhi},{xp0},{xp1},{xf}" data-y="{yf}">"#,
            w = n(WIDTH),
            h = n(h),
            xk = if xs.kind == Kind::Log { "log" } else { "lin" },
            xlo = d(xs.lo),
            xhi = d(xs.hi),
            xp0 = LEFT,
            xp1 = n(WIDTH - RIGHT),
            xf = self.x.fmt.name(),
            yf = self.y.fmt.name(),
        );
        s.push_str(r#"<g class="grid">"#);
        let x_ticks: Vec<(f64, String)> = if self.x_labels.is_empty() {
            xs.ticks()
                .into_iter()
                .map(|t| (t, fmt_value(self.x.fmt, t)))
                .collect()
        } else {
            self.x_labels.clone()
        };
        for (t, label) in x_ticks {
            let px = n(xs.px(t));
            let _ = write!(
                s,
                r#"<line x1="{px}" x2="{px}" y1="{TOP}" y2="{b}"/><text x="{px}" y="{ty}" text-anchor="middle">{}</text>"#,
                esc(&label),
                b = n(h - BOTTOM),
                ty = n(h - BOTTOM + 15.0),
            );
        }
        let binary = self.y.fmt == Fmt::Bytes;
        for t in ys.ticks_in(binary).into_iter().filter(|_| self.y_ticks) {
            let py = n(ys.px(t));
            let _ = write!(
                s,
                r#"<line x1="{LEFT}" x2="{r}" y1="{py}" y2="{py}"/><text x="{tx}" y="{py}" dy="4" text-anchor="end">{}</text>"#,
                esc(&fmt_value(self.y.fmt, t)),
                r = n(WIDTH - RIGHT),
                tx = n(LEFT - 6.0),
            );
        }
        s.push_str("</g>");
        let _ = write!(
            s,
            r#"<rect class="frame" x="{LEFT}" y="{TOP}" width="{}" height="{}"/>"#,
            n(WIDTH - LEFT - RIGHT),
            n(h - TOP - BOTTOM)
        );
        let _ = write!(
            s,
            r#"<text class="axis-title" x="{}" y="{}" text-anchor="middle">{}</text><text class="axis-title" transform="translate(14,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
            n((LEFT + WIDTH - RIGHT) / 2.0),
            n(h - 6.0),
            esc(&self.x.title),
            n((TOP + h - BOTTOM) / 2.0),
            esc(&self.y.title)
        );
        s.push_str(&self.body);
        if self.legend.len() > 1 {
            // Below the axis title, wrapped into rows: the plot area stays clear.
            s.push_str(r#"<g class="legend">"#);
            let (mut x, mut y) = (LEFT, h + 4.0);
            for (name, colour) in &self.legend {
                let w = 24.0 + 6.5 * name.chars().count() as f64;
                if x + w > WIDTH - RIGHT && x > LEFT {
                    x = LEFT;
                    y += LEGEND_ROW;
                }
                let _ = write!(
                    s,
                    r#"<g class="legend-item" data-series="{}" style="color:{colour}"><rect x="{}" y="{}" width="10" height="10" fill="currentColor"/><text x="{}" y="{}">{}</text></g>"#,
                    esc(name),
                    n(x),
                    n(y),
                    n(x + 14.0),
                    n(y + 9.0),
                    esc(name)
                );
                x += w;
            }
            s.push_str("</g>");
            let total = y + LEGEND_ROW;
            // The legend made the picture taller than the header said: fix the header.
            let head = format!(
                r#"viewBox="0 0 {w} {h}" width="{w}" height="{h}""#,
                w = n(WIDTH),
                h = n(h)
            );
            let grown = format!(
                r#"viewBox="0 0 {w} {t}" width="{w}" height="{t}""#,
                w = n(WIDTH),
                t = n(total)
            );
            s = s.replacen(&head, &grown, 1);
        }
        s.push_str("</svg>");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_are_decades_and_linear_ticks_are_round() {
        let s = Scale::new(Kind::Log, 1_000.0, 1e9);
        assert_eq!(s.ticks(), vec![1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9]);
        let s = Scale::new(Kind::Log, 30_000.0, 2e6);
        assert!(s.ticks().contains(&50_000.0), "{:?}", s.ticks());
        let s = Scale::new(Kind::Linear, 0.0, 97.0);
        assert_eq!(s.ticks(), vec![0.0, 20.0, 40.0, 60.0, 80.0]);
        let s = Scale::new(Kind::Linear, 0.0, 600.0 * 1024.0);
        assert_eq!(s.ticks_in(true)[1], 128.0 * 1024.0);
    }

    #[test]
    fn values_map_inside_the_plot_and_outliers_stay_near_it() {
        let s = Scale::new(Kind::Log, 1e3, 1e6).placed(0.0, 300.0);
        assert_eq!(s.px(1e3), 0.0);
        assert!((s.px(1e6) - 300.0).abs() < 1e-9);
        assert!((s.px(1e4) - 100.0).abs() < 1e-9);
        assert!(s.px(1e12) <= 306.0 && s.px(0.0) >= -6.0);
    }

    #[test]
    fn an_empty_range_is_widened_and_text_is_escaped() {
        let s = Scale::new(Kind::Linear, 5.0, 5.0);
        assert!(s.lo < 5.0 && s.hi > 5.0);
        let s = Scale::new(Kind::Log, 7.0, 7.0);
        assert!(s.lo <= 1.0 && s.hi >= 10.0);
        assert_eq!(esc(r#"<a href="x">&"#), "&lt;a href=&quot;x&quot;&gt;&amp;");
    }

    #[test]
    fn a_plot_groups_marks_by_series_and_keeps_values_for_hover() {
        let mut p = Plot::new(
            200.0,
            Axis::new(Scale::new(Kind::Linear, 0.0, 10.0), Fmt::Seconds, "time"),
            Axis::new(Scale::new(Kind::Log, 1e3, 1e6), Fmt::Duration, "latency"),
        );
        p.series("p99", colour(0));
        p.line(&[(0.0, 2e3), (10.0, 5e5)], false);
        p.series("p50", colour(1));
        p.dots(&[(1.0, 1e4)], 2.0);
        let svg = p.finish("c1");
        assert!(svg.starts_with(r#"<svg class="chart" data-plot="c1""#));
        assert_eq!(svg.matches(r#"class="series""#).count(), 2);
        assert!(svg.contains(r#"data-v="0,2000 10,500000""#), "{svg}");
        assert!(svg.contains("legend-item"));
        assert_eq!(svg.matches("<g").count(), svg.matches("</g>").count());
    }
}
