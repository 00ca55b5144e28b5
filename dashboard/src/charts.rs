//! Line charts as inline SVG, drawn by the server: the last hour, newest on the right.

use maud::{html, Markup};

use crate::samples::{Point, Series, SPAN};

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 160.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 8.0;
const BOTTOM: f64 = 22.0;

/// One line: its legend, its CSS class (the colour, in style.css) and its points.
pub struct Line<'a> {
    pub label: &'a str,
    pub class: &'a str,
    pub points: &'a [Point],
}

pub fn throughput(series: &Series) -> Markup {
    chart(
        "chart-throughput",
        "Claims and completions per second, last hour",
        "/s",
        &[
            Line { label: "claims/s", class: "l1", points: &series.claims },
            Line { label: "completions/s", class: "l2", points: &series.completions },
        ],
    )
}

pub fn backlog(series: &Series) -> Markup {
    chart(
        "chart-backlog",
        "Backlog (pending and scheduled), running and dead jobs, last hour",
        "",
        &[
            Line { label: "backlog", class: "l1", points: &series.backlog },
            Line { label: "running", class: "l2", points: &series.running },
            Line { label: "dead", class: "l3", points: &series.dead },
        ],
    )
}

pub fn chart(id: &str, title: &str, unit: &str, lines: &[Line]) -> Markup {
    let top = lines.iter().flat_map(|line| line.points.iter().map(|(_, v)| *v)).fold(0.0f64, f64::max);
    let scale = nice_ceiling(top);
    let x = |ago: f64| LEFT + (WIDTH - LEFT - RIGHT) * (1.0 - (ago / SPAN).clamp(0.0, 1.0));
    let y = |value: f64| TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - value / scale);
    let empty = lines.iter().all(|line| line.points.len() < 2);
    html! {
        figure.chart {
            svg id=(id) xmlns="http://www.w3.org/2000/svg" viewBox={"0 0 " (WIDTH) " " (HEIGHT)} role="img"
                aria-label=(title) {
                title { (title) }
                line.axis x1=(LEFT) y1=(y(0.0)) x2=(WIDTH - RIGHT) y2=(y(0.0)) {}
                line.grid x1=(LEFT) y1=(y(scale)) x2=(WIDTH - RIGHT) y2=(y(scale)) {}
                line.grid x1=(LEFT) y1=(y(scale / 2.0)) x2=(WIDTH - RIGHT) y2=(y(scale / 2.0)) {}
                text.label x=(LEFT - 4.0) y=(y(scale) + 4.0) text-anchor="end" { (number(scale)) (unit) }
                text.label x=(LEFT - 4.0) y=(y(scale / 2.0) + 4.0) text-anchor="end" { (number(scale / 2.0)) (unit) }
                text.label x=(LEFT - 4.0) y=(y(0.0) + 4.0) text-anchor="end" { "0" }
                text.label x=(LEFT) y=(HEIGHT - 6.0) { "60 min ago" }
                text.label x=(x(SPAN / 2.0)) y=(HEIGHT - 6.0) text-anchor="middle" { "30 min" }
                text.label x=(WIDTH - RIGHT) y=(HEIGHT - 6.0) text-anchor="end" { "now" }
                @if empty {
                    text.label x=(x(SPAN / 2.0)) y=(y(scale / 2.0)) text-anchor="middle" { "collecting samples" }
                }
                @for line in lines {
                    @if line.points.len() >= 2 {
                        polyline class=(line.class) fill="none" points=(points(line.points, x, y)) {}
                    }
                }
            }
            figcaption {
                @for line in lines {
                    span class={"key " (line.class)} { (line.label) }
                    " "
                }
            }
        }
    }
}

fn points(points: &[Point], x: impl Fn(f64) -> f64, y: impl Fn(f64) -> f64) -> String {
    points.iter().map(|(ago, value)| format!("{:.1},{:.1}", x(*ago), y(*value))).collect::<Vec<_>>().join(" ")
}

/// The chart's top: 1, 2 or 5 times a power of ten, at least the largest value (1 when all are 0).
pub fn nice_ceiling(value: f64) -> f64 {
    if value <= 0.0 || !value.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|step| step * power).find(|top| *top >= value).unwrap_or(10.0 * power)
}

fn number(value: f64) -> String {
    if value >= 1000.0 {
        format!("{:.0}k", value / 1000.0)
    } else if value >= 1.0 || value == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(10.0), 10.0);
        assert_eq!(nice_ceiling(11.0), 20.0);
        assert_eq!(nice_ceiling(0.3), 0.5);
        assert_eq!(nice_ceiling(4100.0), 5000.0);
    }

    #[test]
    fn draws_each_line_with_two_points_or_more() {
        let series =
            Series { claims: vec![(3600.0, 0.0), (0.0, 5.0)], completions: vec![(0.0, 1.0)], ..Series::default() };
        let svg = throughput(&series).into_string();
        assert!(svg.contains("id=\"chart-throughput\""));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains("points=\"56.0,138.0 632.0,8.0\""), "{svg}");
        assert!(backlog(&Series::default()).into_string().contains("collecting samples"));
    }
}
