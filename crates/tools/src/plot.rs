//! SVG plots of benchmark figures against message size: one panel per measurement (latency,
//! bandwidth, ...), a log-2 x axis of sizes in bytes, a log-10 y axis, one line per run and a
//! legend. Written by hand (a few hundred lines of SVG text) so the tools pull in no plotting
//! stack; the output is plain SVG 1.1 that browsers and Markdown renderers show as is.
//!
//! [`from_osu_tables`] builds a [`Figure`] from tables in the OSU Micro-Benchmarks' output
//! format (what `nicemu osu` prints, and what the public OSU programs print), grouping the
//! tables by their title line: `nicemu osu --svg` and `nicemu plot` use it.

use std::fmt::Write as _;

/// One line of a panel: a run's figures, `(size in bytes, value)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The legend entry.
    pub label: String,
    /// Points in size order; values that a log axis cannot show (zero, negative, NaN) are
    /// left out of the drawing.
    pub points: Vec<(f64, f64)>,
}

/// One plot: a title, the y axis' label and its lines.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// Shown above the plot area.
    pub title: String,
    /// The y axis' label, with its unit (`latency (µs)`).
    pub y_label: String,
    /// The lines, drawn in this order with the colours of [`PALETTE`].
    pub series: Vec<Series>,
}

/// Panels side by side under one title, at most [`PANELS_PER_ROW`] in a row.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// Shown at the top.
    pub title: String,
    /// Left to right.
    pub panels: Vec<Panel>,
}

/// Line colours, in series order (repeated past the end); distinguishable for the common
/// forms of colour blindness (the Okabe-Ito set).
pub const PALETTE: [&str; 7] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000",
];

/// The x axis' label.
pub const X_LABEL: &str = "message size (bytes)";

/// Panels in one row of a figure; more go on the rows below.
pub const PANELS_PER_ROW: usize = 3;

const PANEL_W: f64 = 460.0;
const PLOT_H: f64 = 260.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 56.0;
const LEGEND_LINE: f64 = 18.0;

/// Escape text for an SVG text node or attribute value.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// `1024` -> `1K`, `4194304` -> `4M`: the labels of a power-of-two axis.
pub fn size_label(bytes: f64) -> String {
    const UNITS: [(f64, &str); 3] = [
        ((1u64 << 30) as f64, "G"),
        ((1u64 << 20) as f64, "M"),
        (1024.0, "K"),
    ];
    for (u, name) in UNITS {
        if bytes >= u && (bytes / u).fract() == 0.0 {
            return format!("{}{name}", bytes / u);
        }
    }
    format!("{bytes}")
}

/// `0.01`, `1`, `10k`, `1M`: the labels of a power-of-ten axis.
fn decade_label(exp: i32) -> String {
    match exp {
        e if e < 0 => format!("{:.*}", (-e) as usize, 10f64.powi(e)),
        0..=2 => format!("{}", 10i64.pow(exp as u32)),
        3..=5 => format!("{}k", 10i64.pow(exp as u32 - 3)),
        6..=8 => format!("{}M", 10i64.pow(exp as u32 - 6)),
        e => format!("{}G", 10i64.pow((e - 9).clamp(0, 18) as u32)),
    }
}

fn drawable(p: &(f64, f64)) -> bool {
    p.0.is_finite() && p.0 > 0.0 && p.1.is_finite() && p.1 > 0.0
}

/// The ranges of a panel's axes as exponents: x in powers of two, y in powers of ten.
fn ranges(panel: &Panel) -> Option<((i32, i32), (i32, i32))> {
    let pts = || {
        panel
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| drawable(p))
    };
    let fold = |f: fn(&(f64, f64)) -> f64| {
        pts()
            .map(f)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            })
    };
    let (xlo, xhi) = fold(|p| p.0);
    let (ylo, yhi) = fold(|p| p.1);
    if !xlo.is_finite() {
        return None;
    }
    let clamp = |v: f64| v.clamp(-60.0, 60.0) as i32;
    let mut x = (clamp(xlo.log2().floor()), clamp(xhi.log2().ceil()));
    if x.0 == x.1 {
        x = (x.0 - 1, x.1 + 1);
    }
    let mut y = (clamp(ylo.log10().floor()), clamp(yhi.log10().ceil()));
    if y.0 == y.1 {
        y.1 += 1;
    }
    Some((x, y))
}

impl Figure {
    /// The figure as an SVG document.
    pub fn svg(&self) -> String {
        let legend_rows = self
            .panels
            .iter()
            .map(|p| p.series.len())
            .max()
            .unwrap_or(0);
        let n = self.panels.len().max(1);
        let cols = n.min(PANELS_PER_ROW);
        let rows = n.div_ceil(PANELS_PER_ROW);
        let row_h = PLOT_H + 50.0 + LEGEND_LINE * legend_rows as f64 + 10.0 + TOP - 30.0;
        let width = PANEL_W * cols as f64;
        let height = 30.0 + row_h * rows as f64;
        let mut o = String::new();
        let _ = writeln!(
            o,
            r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">
<title>{}</title>
<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>
<text class="figure-title" x="{}" y="20" text-anchor="middle" font-size="15">{}</text>"#,
            esc(&self.title),
            width / 2.0,
            esc(&self.title)
        );
        for (i, panel) in self.panels.iter().enumerate() {
            let (col, row) = (i % PANELS_PER_ROW, i / PANELS_PER_ROW);
            panel_svg(
                &mut o,
                panel,
                PANEL_W * col as f64,
                TOP + row_h * row as f64,
            );
        }
        o.push_str("</svg>\n");
        o
    }
}

/// One panel whose plot area starts `x0` from the left and at `py` from the top.
fn panel_svg(o: &mut String, panel: &Panel, x0: f64, py: f64) {
    let pw = PANEL_W - LEFT - RIGHT;
    let px = x0 + LEFT;
    let _ = writeln!(
        o,
        r##"<g class="panel" data-title="{t}">
<text class="panel-title" x="{}" y="{}" text-anchor="middle" font-size="13">{t}</text>
<rect x="{px}" y="{py}" width="{pw}" height="{PLOT_H}" fill="none" stroke="#444"/>"##,
        px + pw / 2.0,
        py - 10.0,
        t = esc(&panel.title)
    );
    let Some(((x_lo, x_hi), (y_lo, y_hi))) = ranges(panel) else {
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}" text-anchor="middle">no data</text>
</g>"#,
            px + pw / 2.0,
            py + PLOT_H / 2.0
        );
        return;
    };
    let sx = move |v: f64| px + (v.log2() - f64::from(x_lo)) / f64::from(x_hi - x_lo) * pw;
    let sy =
        move |v: f64| py + PLOT_H - (v.log10() - f64::from(y_lo)) / f64::from(y_hi - y_lo) * PLOT_H;
    // x ticks: every power of two, labelled so that at most about 12 labels show.
    let step = ((x_hi - x_lo) / 12 + 1).max(1);
    for e in x_lo..=x_hi {
        let x = sx(2f64.powi(e));
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{py}" x2="{x:.1}" y2="{}" stroke="#ddd"/>"##,
            py + PLOT_H
        );
        if (e - x_lo) % step == 0 {
            let _ = writeln!(
                o,
                r#"<text class="x-tick" x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
                py + PLOT_H + 16.0,
                size_label(2f64.powi(e))
            );
        }
    }
    for e in y_lo..=y_hi {
        let y = sy(10f64.powi(e));
        let _ = writeln!(
            o,
            r##"<line x1="{px}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/>
<text class="y-tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            px + pw,
            px - 6.0,
            y + 4.0,
            decade_label(e)
        );
    }
    let _ = writeln!(
        o,
        r#"<text class="x-label" x="{}" y="{}" text-anchor="middle">{X_LABEL}</text>
<text class="y-label" x="{}" y="{}" text-anchor="middle" transform="rotate(-90 {} {})">{}</text>"#,
        px + pw / 2.0,
        py + PLOT_H + 34.0,
        x0 + 16.0,
        py + PLOT_H / 2.0,
        x0 + 16.0,
        py + PLOT_H / 2.0,
        esc(&panel.y_label)
    );
    for (i, s) in panel.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| drawable(p))
            .map(|&(x, y)| (sx(x), sy(y)))
            .collect();
        let _ = writeln!(
            o,
            r#"<g class="series" data-label="{}" data-points="{}" stroke="{colour}" fill="{colour}">"#,
            esc(&s.label),
            pts.len()
        );
        if pts.len() > 1 {
            let line: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = writeln!(
                o,
                r#"<polyline fill="none" stroke-width="2" points="{}"/>"#,
                line.join(" ")
            );
        }
        for (x, y) in &pts {
            let _ = writeln!(o, r#"<circle cx="{x:.1}" cy="{y:.1}" r="3"/>"#);
        }
        o.push_str("</g>\n");
        let ly = py + PLOT_H + 52.0 + LEGEND_LINE * i as f64;
        let _ = writeln!(
            o,
            r#"<g class="legend-entry"><line x1="{px}" y1="{ly}" x2="{}" y2="{ly}" stroke="{colour}" stroke-width="2"/><circle cx="{}" cy="{ly}" r="3" fill="{colour}"/><text x="{}" y="{}">{}</text></g>"#,
            px + 24.0,
            px + 12.0,
            px + 30.0,
            ly + 4.0,
            esc(&s.label)
        );
    }
    o.push_str("</g>\n");
}

/// The rows of an OSU-format table: `(size, value in column `col`)` for every line that is
/// not a comment and starts with a size (`col` 1 is the first figure after the size).
pub fn osu_rows(table: &str, col: usize) -> Vec<(f64, f64)> {
    table
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let size: u64 = f.next()?.parse().ok()?;
            let v: f64 = f.nth(col.checked_sub(1)?)?.parse().ok()?;
            Some((size as f64, v))
        })
        .collect()
}

/// The title of an OSU table (its first comment line, without the version:
/// `# OSU MPI Latency Test v7.4` -> `OSU MPI Latency Test`).
pub fn osu_title(table: &str) -> Option<String> {
    let line = table.lines().find(|l| l.starts_with('#'))?;
    let t = line.trim_start_matches('#').trim();
    let t = match t.rsplit_once(' ') {
        Some((head, v))
            if v.starts_with('v') && v[1..].starts_with(|c: char| c.is_ascii_digit()) =>
        {
            head
        }
        _ => t,
    };
    Some(t.to_string())
}

/// The y label for an OSU table, from its column heading: latency or bandwidth.
fn osu_y_label(table: &str) -> String {
    let heading = table
        .lines()
        .filter(|l| l.starts_with('#'))
        .find(|l| l.contains("Size"))
        .unwrap_or("");
    if heading.contains("MB/s") {
        "bandwidth (MB/s)".into()
    } else if heading.contains("Latency") {
        "latency (µs)".into()
    } else {
        "value".into()
    }
}

/// A figure from OSU-format tables, each `(legend label, table text)`: one panel per table
/// title, in order of first appearance, one series per table. Tables without a sized row
/// (`osu_barrier`) are left out.
pub fn from_osu_tables(title: &str, runs: &[(String, String)]) -> Figure {
    let mut panels: Vec<Panel> = Vec::new();
    for (label, table) in runs {
        let points = osu_rows(table, 1);
        if points.is_empty() {
            continue;
        }
        let name = osu_title(table).unwrap_or_else(|| "benchmark".into());
        let series = Series {
            label: label.clone(),
            points,
        };
        match panels.iter_mut().find(|p| p.title == name) {
            Some(p) => p.series.push(series),
            None => panels.push(Panel {
                title: name,
                y_label: osu_y_label(table),
                series: vec![series],
            }),
        }
    }
    Figure {
        title: title.to_string(),
        panels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAT: &str = "# OSU MPI Latency Test v7.4\n# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n1                       5.10\n2                       5.20\n4                       5.30\n";
    const BW: &str = "# OSU MPI Bandwidth Test v7.4\n# Datatype: MPI_CHAR.\n# Size      Bandwidth (MB/s)\n1                       0.50\n1024                  400.00\n4194304              9000.00\n";

    fn parse(svg: &str) -> roxmltree::Document<'_> {
        roxmltree::Document::parse(svg).expect("well-formed XML")
    }

    fn series<'a>(doc: &'a roxmltree::Document<'a>) -> Vec<(String, usize, usize)> {
        doc.descendants()
            .filter(|n| n.attribute("class") == Some("series"))
            .map(|n| {
                (
                    n.attribute("data-label").unwrap_or_default().to_string(),
                    n.attribute("data-points")
                        .unwrap_or("0")
                        .parse()
                        .unwrap_or(0),
                    n.children().filter(|c| c.has_tag_name("circle")).count(),
                )
            })
            .collect()
    }

    fn texts<'a>(doc: &'a roxmltree::Document<'a>, class: &str) -> Vec<&'a str> {
        doc.descendants()
            .filter(|n| n.attribute("class") == Some(class))
            .filter_map(|n| n.text())
            .collect()
    }

    #[test]
    fn osu_tables_become_one_panel_per_title_and_one_series_per_run() {
        let runs = vec![
            ("MPICH shm".to_string(), LAT.to_string()),
            ("nicemu cxi".to_string(), LAT.replace("5.", "9.")),
            ("MPICH shm".to_string(), BW.to_string()),
            (
                "barrier".to_string(),
                "# OSU MPI Barrier Latency Test v7.4\n# Avg Latency(us)\n       3.00\n".to_string(),
            ),
        ];
        let fig = from_osu_tables("nicemu <vs> MPICH & co", &runs);
        assert_eq!(fig.panels.len(), 2, "{fig:?}");
        assert_eq!(fig.panels[0].title, "OSU MPI Latency Test");
        assert_eq!(fig.panels[0].y_label, "latency (µs)");
        assert_eq!(fig.panels[1].y_label, "bandwidth (MB/s)");
        assert_eq!(
            fig.panels[0].series[1].points,
            vec![(1.0, 9.1), (2.0, 9.2), (4.0, 9.3)]
        );

        let svg = fig.svg();
        let doc = parse(&svg);
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        assert_eq!(
            series(&doc),
            vec![
                ("MPICH shm".to_string(), 3, 3),
                ("nicemu cxi".to_string(), 3, 3),
                ("MPICH shm".to_string(), 3, 3),
            ]
        );
        assert_eq!(texts(&doc, "figure-title"), vec!["nicemu <vs> MPICH & co"]);
        assert_eq!(
            texts(&doc, "panel-title"),
            vec!["OSU MPI Latency Test", "OSU MPI Bandwidth Test"]
        );
        assert_eq!(
            texts(&doc, "y-label"),
            vec!["latency (µs)", "bandwidth (MB/s)"]
        );
        assert_eq!(texts(&doc, "x-label"), vec![X_LABEL, X_LABEL]);
        // The bandwidth axis spans 1 B to 4 MiB and 0.1 to 10k MB/s.
        let x_ticks = texts(&doc, "x-tick");
        for want in ["1", "4M"] {
            assert!(x_ticks.contains(&want), "{want} not in {x_ticks:?}");
        }
        let y_ticks = texts(&doc, "y-tick");
        for want in ["0.1", "10k"] {
            assert!(y_ticks.contains(&want), "{want} not in {y_ticks:?}");
        }
        // Three legend entries, one per series, with the labels.
        let legend: Vec<&str> = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("legend-entry"))
            .filter_map(|n| n.children().find(|c| c.has_tag_name("text"))?.text())
            .collect();
        assert_eq!(legend, vec!["MPICH shm", "nicemu cxi", "MPICH shm"]);
    }

    #[test]
    fn points_a_log_axis_cannot_show_are_left_out_and_an_empty_panel_says_so() {
        let fig = Figure {
            title: "t".into(),
            panels: vec![
                Panel {
                    title: "p".into(),
                    y_label: "y".into(),
                    series: vec![Series {
                        label: "s".into(),
                        points: vec![(8.0, 0.0), (16.0, f64::NAN), (32.0, 2.0), (64.0, -1.0)],
                    }],
                },
                Panel {
                    title: "empty".into(),
                    y_label: "y".into(),
                    series: vec![],
                },
            ],
        };
        let svg = fig.svg();
        let doc = parse(&svg);
        assert_eq!(series(&doc), vec![("s".to_string(), 1, 1)]);
        assert!(svg.contains(">no data<"), "{svg}");
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    }

    #[test]
    fn panels_past_a_row_go_on_the_next_row() {
        let panel = |t: &str| Panel {
            title: t.into(),
            y_label: "y".into(),
            series: vec![Series {
                label: "s".into(),
                points: vec![(1.0, 1.0), (2.0, 3.0)],
            }],
        };
        let fig = Figure {
            title: "t".into(),
            panels: ["a", "b", "c", "d"].into_iter().map(panel).collect(),
        };
        let svg = fig.svg();
        let doc = parse(&svg);
        let root = doc.root_element();
        assert_eq!(root.attribute("width"), Some("1380"));
        // The plot areas: three on the first row, the fourth below the first.
        let areas: Vec<(f64, f64)> = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("panel"))
            .map(|p| {
                let r = p.children().find(|c| c.has_tag_name("rect")).unwrap();
                let v = |a| r.attribute(a).unwrap().parse::<f64>().unwrap();
                (v("x"), v("y"))
            })
            .collect();
        assert_eq!(areas.len(), 4);
        assert!(areas[0].1 == areas[1].1 && areas[1].1 == areas[2].1);
        assert!(areas[0].0 < areas[1].0 && areas[1].0 < areas[2].0);
        assert_eq!(areas[3].0, areas[0].0);
        assert!(areas[3].1 > areas[0].1 + PLOT_H);
        let height: f64 = root.attribute("height").unwrap().parse().unwrap();
        assert!(height > areas[3].1 + PLOT_H);
    }

    #[test]
    fn osu_rows_read_the_chosen_column_and_skip_comments() {
        let mr = "# OSU MPI Multiple Bandwidth / Message Rate Test v7.4\n# Size                  MB/s        Messages/s\n8                       1.50         187500.00\n16                      3.00         187500.00\n";
        assert_eq!(osu_rows(mr, 1), vec![(8.0, 1.5), (16.0, 3.0)]);
        assert_eq!(osu_rows(mr, 2), vec![(8.0, 187500.0), (16.0, 187500.0)]);
        assert_eq!(osu_rows(mr, 3), vec![]);
        assert_eq!(
            osu_title(mr).as_deref(),
            Some("OSU MPI Multiple Bandwidth / Message Rate Test")
        );
    }

    #[test]
    fn axis_labels() {
        assert_eq!(size_label(1.0), "1");
        assert_eq!(size_label(512.0), "512");
        assert_eq!(size_label(2048.0), "2K");
        assert_eq!(size_label(4194304.0), "4M");
        assert_eq!(size_label(1073741824.0), "1G");
        assert_eq!(decade_label(-2), "0.01");
        assert_eq!(decade_label(0), "1");
        assert_eq!(decade_label(4), "10k");
        assert_eq!(decade_label(7), "10M");
    }
}
