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

/// Most bytes of one JSON value a page shows; the rest is cut, and the page says so.
pub const MOST_JSON_BYTES: usize = 64 * 1024;
/// Deeper than this, a value is shown on one line: indentation would grow with the square of the
/// depth (jsonb_pretty's of a value nested ten thousand deep is hundreds of megabytes).
const MOST_JSON_DEPTH: usize = 16;

/// A JSON value given as compact text (perhaps only its start, of `length` characters in all),
/// indented as jsonb_pretty does, within `MOST_JSON_BYTES` and `MOST_JSON_DEPTH`.
pub fn json(text: &Option<String>, length: Option<i32>, most: usize) -> Markup {
    let Some(text) = text else {
        return html! { span.none { "–" } };
    };
    let (shown, cut_here) = indent_json(text, most);
    let given = text.chars().count();
    let whole = length.map_or(given, |length| usize::try_from(length).unwrap_or(given));
    html! {
        pre { (shown) @if cut_here || whole > given { "\n…" } }
        @if cut_here || whole > given {
            (note(&format!("Cut: the value has {whole} characters as compact JSON; jq_jobs has all of it.")))
        }
    }
}

/// Compact JSON text indented by four spaces a level, as jsonb_pretty indents it, to at most
/// `most` bytes (then true: the text was cut). Levels deeper than `MOST_JSON_DEPTH` stay on one line.
/// Text that is not JSON (or only the start of it) is shown as it comes, indented where it can be.
pub fn indent_json(text: &str, most: usize) -> (String, bool) {
    let mut out = String::with_capacity(text.len().min(most) + 64);
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        (0..depth).for_each(|_| out.push_str("    "));
    };
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if out.len() >= most {
            return (out, true);
        }
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                while chars.peek().is_some_and(|next| next.is_whitespace()) {
                    chars.next();
                }
                let close = if c == '{' { '}' } else { ']' };
                if chars.peek() == Some(&close) {
                    chars.next();
                    out.push(c);
                    out.push(close);
                    continue;
                }
                out.push(c);
                depth += 1;
                if depth <= MOST_JSON_DEPTH {
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                if depth <= MOST_JSON_DEPTH && depth > 0 {
                    newline(&mut out, depth - 1);
                }
                depth = depth.saturating_sub(1);
                out.push(c);
            }
            ',' => {
                out.push(',');
                if depth <= MOST_JSON_DEPTH {
                    newline(&mut out, depth);
                } else {
                    out.push(' ');
                }
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    (out, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_indented_as_jsonb_pretty_indents_it() {
        let (shown, cut) =
            indent_json(r#"{"a": 1, "b": [1, "x, y: [z]"], "c": {}, "d": [], "e": {"f": "\"}"}}"#, 1 << 20);
        assert!(!cut);
        assert_eq!(
            shown,
            "{\n    \"a\": 1,\n    \"b\": [\n        1,\n        \"x, y: [z]\"\n    ],\n    \"c\": {},\n    \"d\": [],\n    \"e\": {\n        \"f\": \"\\\"}\"\n    }\n}"
        );
        assert_eq!(indent_json("42", 100), ("42".to_owned(), false));
    }

    #[test]
    fn deep_and_huge_values_are_bounded() {
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let (shown, cut) = indent_json(&deep, MOST_JSON_BYTES);
        assert!(!cut && shown.len() < 30_000, "deep: {} bytes", shown.len());
        let huge = format!("[{}]", vec!["1"; 500_000].join(", "));
        let (shown, cut) = indent_json(&huge, MOST_JSON_BYTES);
        assert!(cut && shown.len() <= MOST_JSON_BYTES + 64, "huge: {} bytes", shown.len());
    }
}
