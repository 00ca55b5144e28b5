//! The HTML of every page, with maud (which escapes whatever it prints). No script: the overview
//! reloads itself with a refresh header, and every action is a plain form.

use maud::{html, Markup, DOCTYPE};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};

use crate::guard::Flash;

/// What every page needs besides its data.
pub struct Ctx {
    /// The CSRF token the forms carry (the value of the cookie).
    pub token: String,
    pub flash: Option<Flash>,
    pub read_only: bool,
    /// The role the pages are shown as; empty when the database could not be asked.
    pub role: String,
}

/// A path segment, percent-encoded (a queue or schedule name may hold `:`).
pub fn segment(name: &str) -> String {
    utf8_percent_encode(name, NON_ALPHANUMERIC).to_string()
}

pub fn layout(ctx: &Ctx, page: &str, title: &str, refresh: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                @if refresh { meta http-equiv="refresh" content="5"; }
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · jq-dashboard" }
                link rel="stylesheet" href="/style.css";
            }
            body data-page=(page) {
                header {
                    nav {
                        a href="/" { "Queues" }
                        a href="/dead" { "Dead jobs" }
                        a href="/schedules" { "Schedules" }
                        a href="/metrics" { "Metrics" }
                    }
                    span.who {
                        @if !ctx.role.is_empty() { "as " strong { (ctx.role) } }
                        @if ctx.read_only { " · read-only" }
                    }
                }
                main {
                    @if let Some(flash) = &ctx.flash {
                        div #flash class=(if flash.ok { "ok" } else { "error" }) data-sqlstate=[flash.sqlstate.as_deref()] {
                            (flash.message)
                            @if let Some(code) = &flash.sqlstate { " (SQLSTATE " (code) ")" }
                        }
                    }
                    (body)
                }
            }
        }
    }
}

/// A form with one button, posting the CSRF token and the hidden fields given; nothing at all in
/// read-only mode.
pub fn action(ctx: &Ctx, path: &str, action: &str, label: &str, fields: &[(&str, &str)]) -> Markup {
    if ctx.read_only {
        return html! {};
    }
    html! {
        form.action method="post" action=(path) {
            input type="hidden" name="csrf" value=(ctx.token);
            @for (name, value) in fields { input type="hidden" name=(name) value=(value); }
            button type="submit" data-action=(action) { (label) }
        }
    }
}

pub fn error_page(ctx: &Ctx, title: &str, message: &str) -> Markup {
    layout(
        ctx,
        "error",
        title,
        false,
        html! {
            h1 { (title) }
            p.message { (message) }
            p { a href="/" { "Back to the queues" } }
        },
    )
}

/// A note where the role may not see something: says what, and which right would show it.
pub fn note(text: &str) -> Markup {
    html! { p.note { (text) } }
}

/// A duration in seconds, in its two largest units.
pub fn age(seconds: Option<f64>) -> String {
    let Some(seconds) = seconds else { return "–".into() };
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        3600..=86_399 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

pub fn decimal(value: Option<f64>) -> String {
    match value {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => "–".into(),
    }
}

pub fn count(value: Option<i64>) -> String {
    value.map(|v| v.to_string()).unwrap_or_else(|| "–".into())
}

pub fn text(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("")
}

pub const STYLE: &str = include_str!("style.css");

/// A small preformatted block (payloads, results), escaped.
pub fn pre(value: &Option<String>) -> Markup {
    match value {
        Some(text) => html! { pre { (text) } },
        None => html! { span.none { "–" } },
    }
}
