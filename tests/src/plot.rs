//! PNG line charts of the lab's results, next to its Markdown tables in
//! `benches/results/`: each flow's goodput over time, Jain's index
//! against the number of flows, download speeds against delay and size, and
//! grouped bars (the ablation's gains). They take plain data, so the simulated and
//! the testbed experiments draw the same charts.
//!
//! Text is drawn with plotters' `ab_glyph` backend from a TrueType font read
//! at run time: DejaVu Sans from Debian's `fonts-dejavu-core` (which
//! `cargo xtask lab` installs). That avoids building against fontconfig and
//! freetype, and no font lives in the repository.

use std::error::Error;
use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, register_font};

/// One line of a chart: its legend label and its points, in x order.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The legend's text, e.g. "4 ms" or "equal-rate".
    pub label: String,
    /// `(x, y)`; points that are not finite are left out.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series called `label`.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { label: label.into(), points }
    }
}

/// One chart of a figure with several, under its own title.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// Shown above the chart, e.g. "20 Mbit/s, uploads, cubic".
    pub title: String,
    /// Its lines. A label means the same colour in every panel.
    pub series: Vec<Series>,
}

/// The Debian package that holds [`FONT_PATHS`]' first entry.
pub const FONT_PACKAGE: &str = "fonts-dejavu-core";

/// Where the font is looked for, in order: Debian and Ubuntu, Fedora, Arch.
pub const FONT_PATHS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// The family every text style names; the font is registered under it.
const FAMILY: &str = "sans-serif";

/// A figure of one chart, in pixels.
const SINGLE: (u32, u32) = (1100, 620);
/// A panel of a figure with several, in pixels; the legend adds a column.
const PANEL: (u32, u32) = (400, 330);
/// Panels side by side before a new row starts.
const COLUMNS: usize = 4;
/// Pixels the title takes above the panels.
const TITLE_HEIGHT: u32 = 50;

/// Line colours, by the order labels first appear in a figure.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Each flow's goodput over time, one line per flow: `series` holds
/// `(seconds, Mbit/s)` points. Writes a 1100×620 PNG to `path`.
pub fn goodput_over_time(path: &Path, title: &str, series: &[Series]) -> Result<(), String> {
    let (xs, ys) = extent(&[("", series)]).ok_or_else(|| format!("plot {}: no finite points", path.display()))?;
    let axes = Axes {
        x_desc: "time, s",
        y_desc: "goodput, Mbit/s",
        x: 0.0_f64.min(xs.start)..xs.end.max(xs.start + 1.0),
        y: 0.0..(ys.end * 1.08).max(0.1),
        whole_x: false,
        markers: false,
    };
    draw(path, title, &[("", series)], &axes)
}

/// Download speed against `x_desc` (the added delay, or the size), one
/// line with markers per series (e.g. per size): `series` holds `(x,
/// Mbit/s)` points, `x` already on the scale the axis shows (a size as its
/// logarithm, say). Panels (e.g. one per server) in rows of four on the
/// same axes, with one legend.
pub fn speed_panels(path: &Path, title: &str, x_desc: &'static str, panels: &[Panel]) -> Result<(), String> {
    let panels: Vec<(&str, &[Series])> = panels.iter().map(|p| (p.title.as_str(), p.series.as_slice())).collect();
    let (xs, ys) = extent(&panels).ok_or_else(|| format!("plot {}: no finite points", path.display()))?;
    let pad = ((xs.end - xs.start) * 0.03).max(0.05);
    let axes = Axes {
        x_desc,
        y_desc: "download speed, Mbit/s",
        x: (xs.start - pad)..(xs.end + pad),
        y: 0.0..(ys.end * 1.08).max(0.1),
        whole_x: false,
        markers: true,
    };
    draw(path, title, &panels, &axes)
}

/// Jain's index against the number of flows, one line with markers per
/// series (e.g. per policy): `series` holds `(N, J)` points. Writes a
/// 1100×620 PNG to `path`.
pub fn jain_against_n(path: &Path, title: &str, series: &[Series]) -> Result<(), String> {
    jain_figure(path, title, &[("", series)])
}

/// [`jain_against_n`] for several panels (e.g. one per bandwidth, direction
/// and sender) in rows of four on the same axes, with one legend. Each
/// panel is 400×330 pixels.
pub fn jain_against_n_panels(path: &Path, title: &str, panels: &[Panel]) -> Result<(), String> {
    let panels: Vec<(&str, &[Series])> = panels.iter().map(|p| (p.title.as_str(), p.series.as_slice())).collect();
    jain_figure(path, title, &panels)
}

fn jain_figure(path: &Path, title: &str, panels: &[(&str, &[Series])]) -> Result<(), String> {
    let (ns, js) = extent(panels).ok_or_else(|| format!("plot {}: no finite points", path.display()))?;
    // 0.4 to 1 shows the differences that matter; a worse index widens it.
    let low = if js.start >= 0.4 { 0.4 } else { 0.0 };
    let axes = Axes {
        x_desc: "N (flows)",
        y_desc: "Jain's index J",
        x: (ns.start - 0.5)..(ns.end + 0.5),
        // Above 1 so that J = 1 is not hidden by the frame.
        y: low..1.03,
        whole_x: true,
        markers: true,
    };
    draw(path, title, panels, &axes)
}

/// Grouped bars: for each of `categories` (e.g. a technique switched
/// off), one bar per series (e.g. a measure), `series[i].1[c]` its height
/// in category `c` (a missing or non-finite value draws no bar). The y
/// axis spans zero and every value, so negative bars point down. Writes a
/// 1100×620 PNG to `path`.
pub fn grouped_bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<(), String> {
    load_font()?;
    draw_bars(path, title, y_desc, categories, series).map_err(|e| format!("plot {}: {e}", path.display()))
}

fn draw_bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<(), Box<dyn Error>> {
    let values = series.iter().flat_map(|(_, v)| v.iter().copied()).filter(|v| v.is_finite());
    let (low, high) = values.fold((0.0_f64, 0.0_f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let pad = ((high - low) * 0.08).max(1.0);
    let root = BitMapBackend::new(path, SINGLE).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root.titled(title, (FAMILY, 24))?;
    let legend_font = TextStyle::from((FAMILY, 16));
    let mut legend_width = 0;
    for (label, _) in series {
        legend_width = legend_width.max(root.estimate_text_size(label, &legend_font)?.0);
    }
    let (chart_area, legend) = body.split_horizontally(SINGLE.0 as i32 - (legend_width as i32 + 70));
    let n = categories.len().max(1);
    let mut chart = ChartBuilder::on(&chart_area)
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n as f64, (low - pad)..(high + pad))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(y_desc)
        .label_style((FAMILY, 15))
        .axis_desc_style((FAMILY, 16))
        .draw()?;
    chart.draw_series(std::iter::once(PathElement::new(vec![(0.0, 0.0), (n as f64, 0.0)], BLACK)))?;
    let width = 0.8 / series.len().max(1) as f64;
    for (i, (_, values)) in series.iter().enumerate() {
        let bars = values.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(c, &v)| {
            let x0 = c as f64 + 0.1 + i as f64 * width;
            Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], ShapeStyle::from(colour(i)).filled())
        });
        chart.draw_series(bars)?;
    }
    let label_font = TextStyle::from((FAMILY, 15)).pos(Pos::new(HPos::Center, VPos::Top));
    let plot_area = chart.plotting_area();
    for (c, name) in categories.iter().enumerate() {
        // In the figure's pixels: just below the plotting area.
        let (x, y) = plot_area.map_coordinate(&(c as f64 + 0.5, low - pad));
        root.draw(&Text::new(name.clone(), (x, y + 8), label_font.clone()))?;
    }
    for (i, (label, _)) in series.iter().enumerate() {
        let y = 40 + 26 * i as i32;
        legend.draw(&Rectangle::new([(10, y - 6), (40, y + 6)], ShapeStyle::from(colour(i)).filled()))?;
        legend.draw(&Text::new(label.clone(), (50, y - 8), legend_font.clone()))?;
    }
    root.present()?;
    Ok(())
}

/// What differs between the two kinds of chart.
struct Axes {
    x_desc: &'static str,
    y_desc: &'static str,
    x: Range<f64>,
    y: Range<f64>,
    /// Ticks only at whole numbers (N).
    whole_x: bool,
    /// A marker at every point, shaped by the series' label.
    markers: bool,
}

/// The smallest and largest finite x and y over every series.
fn extent(panels: &[(&str, &[Series])]) -> Option<(Range<f64>, Range<f64>)> {
    let points = panels.iter().flat_map(|(_, s)| s.iter()).flat_map(|s| finite(&s.points));
    points.fold(None, |acc, (x, y)| {
        Some(match acc {
            None => (x..x, y..y),
            Some((xs, ys)) => (xs.start.min(x)..xs.end.max(x), ys.start.min(y)..ys.end.max(y)),
        })
    })
}

fn finite(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite())
}

/// The figure's pixel size for `panels` charts.
fn figure_size(panels: usize) -> (u32, u32) {
    if panels <= 1 {
        return SINGLE;
    }
    let columns = panels.min(COLUMNS);
    let rows = panels.div_ceil(COLUMNS);
    (columns as u32 * PANEL.0 + 220, rows as u32 * PANEL.1 + TITLE_HEIGHT)
}

/// The labels of every series, each once, in the order they first appear:
/// index `i` is drawn in `PALETTE[i]`.
fn labels<'a>(panels: &[(&str, &'a [Series])]) -> Vec<&'a str> {
    let mut labels: Vec<&str> = Vec::new();
    for series in panels.iter().flat_map(|(_, s)| s.iter()) {
        if !labels.contains(&series.label.as_str()) {
            labels.push(&series.label);
        }
    }
    labels
}

fn is_whole(v: f64) -> bool {
    (v - v.round()).abs() < 1e-9
}

fn colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

fn draw(path: &Path, title: &str, panels: &[(&str, &[Series])], axes: &Axes) -> Result<(), String> {
    load_font()?;
    draw_figure(path, title, panels, axes).map_err(|e| format!("plot {}: {e}", path.display()))
}

fn draw_figure(path: &Path, title: &str, panels: &[(&str, &[Series])], axes: &Axes) -> Result<(), Box<dyn Error>> {
    let size = figure_size(panels.len());
    let labels = labels(panels);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root.titled(title, (FAMILY, 24))?;
    let legend_font = TextStyle::from((FAMILY, 16));
    let mut legend_width = 0;
    for label in &labels {
        legend_width = legend_width.max(root.estimate_text_size(label, &legend_font)?.0);
    }
    let (charts, legend) = body.split_horizontally(size.0 as i32 - (legend_width as i32 + 70));
    let columns = panels.len().clamp(1, COLUMNS);
    let rows = panels.len().div_ceil(COLUMNS).max(1);
    for (area, &(panel_title, series)) in charts.split_evenly((rows, columns)).iter().zip(panels) {
        draw_panel(area, panel_title, series, &labels, axes)?;
    }
    draw_legend(&legend, &labels, axes.markers)?;
    root.present()?;
    Ok(())
}

fn draw_panel(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    title: &str,
    series: &[Series],
    labels: &[&str],
    axes: &Axes,
) -> Result<(), Box<dyn Error>> {
    let mut builder = ChartBuilder::on(area);
    builder.margin(12).x_label_area_size(42).y_label_area_size(58);
    if !title.is_empty() {
        builder.caption(title, (FAMILY, 17));
    }
    let mut chart = builder.build_cartesian_2d(axes.x.clone(), axes.y.clone())?;
    let whole = |x: &f64| if is_whole(*x) { format!("{x:.0}") } else { String::new() };
    let short = |v: &f64| if is_whole(*v) { format!("{v:.0}") } else { format!("{v:.1}") };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(axes.x_desc)
        .y_desc(axes.y_desc)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .bold_line_style(RGBColor(210, 210, 210))
        .light_line_style(RGBColor(238, 238, 238))
        .max_light_lines(2);
    if axes.whole_x {
        mesh.x_labels((axes.x.end - axes.x.start).round() as usize + 1).x_label_formatter(&whole);
    } else {
        mesh.x_label_formatter(&short).y_label_formatter(&short);
    }
    mesh.draw()?;
    for s in series {
        let index = labels.iter().position(|l| *l == s.label).unwrap_or(0);
        let style = ShapeStyle::from(colour(index)).stroke_width(2);
        chart.draw_series(LineSeries::new(finite(&s.points), style))?;
        if axes.markers {
            for p in finite(&s.points) {
                draw_marker(&mut chart, index, p)?;
            }
        }
    }
    Ok(())
}

type Chart<'a, 'b> = ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A circle, triangle or square by `index`, so that lines of similar
/// colour still differ.
fn draw_marker(chart: &mut Chart<'_, '_>, index: usize, at: (f64, f64)) -> Result<(), Box<dyn Error>> {
    let style = ShapeStyle::from(colour(index)).filled();
    let area = chart.plotting_area();
    match index % 3 {
        0 => area.draw(&Circle::new(at, 4, style))?,
        1 => area.draw(&TriangleMarker::new(at, 6, style))?,
        _ => area.draw(&(EmptyElement::at(at) + Rectangle::new([(-4, -4), (4, 4)], style)))?,
    }
    Ok(())
}

/// One row per label: a stroke of its colour (and its marker), then the text.
fn draw_legend(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    labels: &[&str],
    markers: bool,
) -> Result<(), Box<dyn Error>> {
    let font = TextStyle::from((FAMILY, 16)).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, label) in labels.iter().enumerate() {
        let y = 40 + 26 * i as i32;
        let style = ShapeStyle::from(colour(i)).stroke_width(3);
        area.draw(&PathElement::new(vec![(10, y), (44, y)], style))?;
        if markers {
            let fill = ShapeStyle::from(colour(i)).filled();
            match i % 3 {
                0 => area.draw(&Circle::new((27, y), 4, fill))?,
                1 => area.draw(&TriangleMarker::new((27, y), 6, fill))?,
                _ => area.draw(&Rectangle::new([(23, y - 4), (31, y + 4)], fill))?,
            }
        }
        area.draw(&Text::new(label.to_string(), (54, y), font.clone()))?;
    }
    Ok(())
}

/// Whether text can be drawn: the font is found and loads. Call it before
/// a long experiment, so that a missing font stops it at once.
pub fn check_font() -> Result<(), String> {
    load_font()
}

/// Reads the font and registers it, once per process.
fn load_font() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let (path, bytes) = read_font(&FONT_PATHS)?;
            // plotters keeps fonts for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            register_font(FAMILY, FontStyle::Normal, bytes)
                .map_err(|_| format!("plot: {path} is not a TrueType font (reinstall {FONT_PACKAGE})"))
        })
        .clone()
}

/// The first of `candidates` that can be read, and its bytes.
fn read_font<'a>(candidates: &[&'a str]) -> Result<(&'a str, Vec<u8>), String> {
    for path in candidates {
        if let Ok(bytes) = std::fs::read(path) {
            return Ok((path, bytes));
        }
    }
    Err(format!(
        "plot: no font for the charts' text (looked for {}): install the Debian package {FONT_PACKAGE}",
        candidates.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fresh directory of this test's own.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fairway-plot-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a scratch directory");
        dir
    }

    /// Decodes the PNG at `path`: (width, height, RGB pixels).
    #[track_caller]
    fn decode(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
        let file = std::fs::File::open(path).expect("open the PNG");
        let mut reader = png::Decoder::new(file).read_info().expect("a PNG header");
        let mut buf = vec![0; reader.output_buffer_size()];
        let frame = reader.next_frame(&mut buf).expect("PNG image data");
        assert_eq!((frame.color_type, frame.bit_depth), (png::ColorType::Rgb, png::BitDepth::Eight));
        let pixels = buf[..frame.buffer_size()].chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect();
        (frame.width, frame.height, pixels)
    }

    fn count(pixels: &[[u8; 3]], c: RGBColor) -> usize {
        pixels.iter().filter(|p| **p == [c.0, c.1, c.2]).count()
    }

    #[test]
    fn grouped_bars_draw_a_bar_per_series_and_category_up_or_down() {
        let dir = scratch("bars");
        let path = dir.join("bars.png");
        let categories = ["handles off", "events off", "all off"].map(str::to_owned).to_vec();
        let series = vec![("ours".to_owned(), vec![3.0, -2.0, 30.0]), ("study".to_owned(), vec![7.0, 6.0, f64::NAN])];
        grouped_bars(&path, "gain, %", "gain over all on, %", &categories, &series).expect("draw");
        let (width, height, pixels) = decode(&path);
        assert_eq!((width, height), SINGLE);
        // The bars are filled in their colours; the tallest dominates.
        assert!(count(&pixels, PALETTE[0]) > 5_000, "ours: {}", count(&pixels, PALETTE[0]));
        assert!(count(&pixels, PALETTE[1]) > 500, "study: {}", count(&pixels, PALETTE[1]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn goodput_chart_is_a_png_with_a_line_per_flow() {
        let dir = scratch("goodput");
        let path = dir.join("goodput.png");
        let steady: Vec<(f64, f64)> = (0..=40).map(|i| (i as f64 * 0.5, 12.0)).collect();
        let late: Vec<(f64, f64)> = (6..=40).map(|i| (i as f64 * 0.5, 4.0 + i as f64 * 0.1)).collect();
        let series = [Series::new("4 ms", steady), Series::new("256 ms", late)];
        goodput_over_time(&path, "goodput, 2 flows", &series).expect("draw");

        let (width, height, pixels) = decode(&path);
        assert_eq!((width, height), SINGLE);
        // Both lines are drawn, each in its own colour, across much of the
        // plotting area's width.
        assert!(count(&pixels, PALETTE[0]) > 500, "first line: {}", count(&pixels, PALETTE[0]));
        assert!(count(&pixels, PALETTE[1]) > 500, "second line: {}", count(&pixels, PALETTE[1]));
        // The title is text in the strip above the chart.
        let title_strip = &pixels[..(width * 40) as usize];
        assert!(title_strip.iter().any(|p| p.iter().all(|&c| c < 128)), "no dark pixel in the title strip");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn jain_panels_share_colours_and_size_with_the_grid() {
        let dir = scratch("jain");
        let path = dir.join("jain.png");
        let panel = |title: &str, off: f64| Panel {
            title: title.into(),
            series: vec![
                Series::new("off", (1..=10).map(|n| (n as f64, 1.0 - off * (n > 1) as u8 as f64)).collect()),
                Series::new("equal-rate", (1..=10).map(|n| (n as f64, 1.0)).collect()),
            ],
        };
        let panels = [panel("20 Mbit/s up", 0.3), panel("20 Mbit/s down", 0.2), panel("100 Mbit/s up", 0.1)];
        jain_against_n_panels(&path, "J against N", &panels).expect("draw");

        let (width, height, pixels) = decode(&path);
        assert_eq!((width, height), figure_size(3));
        assert_eq!((width, height), (3 * PANEL.0 + 220, PANEL.1 + TITLE_HEIGHT));
        // "off" is the first label in every panel, so it has one colour.
        assert!(count(&pixels, PALETTE[0]) > 3 * 200);
        assert!(count(&pixels, PALETTE[1]) > 3 * 200);
        assert_eq!(count(&pixels, PALETTE[2]), 0, "a third colour for two labels");

        let single = dir.join("single.png");
        jain_against_n(&single, "one panel", &panels[0].series).expect("draw");
        assert_eq!(decode(&single).0, SINGLE.0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_rows_of_four_grid() {
        assert_eq!(figure_size(1), SINGLE);
        assert_eq!(figure_size(4), (4 * PANEL.0 + 220, PANEL.1 + TITLE_HEIGHT));
        assert_eq!(figure_size(8), (4 * PANEL.0 + 220, 2 * PANEL.1 + TITLE_HEIGHT));
        assert_eq!(figure_size(5), (4 * PANEL.0 + 220, 2 * PANEL.1 + TITLE_HEIGHT));
    }

    #[test]
    fn no_points_is_an_error_not_an_empty_file() {
        let dir = scratch("empty");
        let path = dir.join("empty.png");
        let nan = [Series::new("x", vec![(f64::NAN, 1.0)])];
        let err = goodput_over_time(&path, "t", &nan).expect_err("nothing to draw");
        assert!(err.contains("no finite points"), "{err}");
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_font_names_the_package() {
        let err = read_font(&["/nonexistent/fairway/DejaVuSans.ttf"]).expect_err("no such file");
        assert!(err.contains(FONT_PACKAGE), "{err}");
        assert!(err.contains("/nonexistent/fairway/DejaVuSans.ttf"), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
}
