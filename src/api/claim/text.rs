//! How the claim statements are made from their files: sections left out for a queue that does
//! not need them, and the one ordering-key check taken in where a statement asks for it (as
//! `claim.sql`'s header describes).

pub(crate) const ORDERING_KEY_CHECK: &str = include_str!("../../../sql/queries/parts/ordering_key_check.sql");

/// `sql` with each `-- ordering key check` line replaced by the ordering-key check (`ordered`), or
/// by a condition that takes no job with an ordering key, at the line's indentation.
pub(crate) fn ordering_keys(sql: &str, ordered: bool) -> String {
    let check: Vec<&str> = if ordered {
        ORDERING_KEY_CHECK.lines().filter(|line| !line.starts_with("--")).collect()
    } else {
        vec!["AND j.ordering_key IS NULL"]
    };
    let mut out = String::with_capacity(sql.len() + 2048);
    for line in sql.lines() {
        if line.trim() == "-- ordering key check" {
            let indent = &line[..line.len() - line.trim_start().len()];
            for part in &check {
                out.push_str(indent);
                out.push_str(part);
                out.push('\n');
            }
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// `sql` without its lines from each `-- <name>: begin` to the next `-- <name>: end`, and with the
/// text of each `-- without <name>: ` line instead.
pub(super) fn without_sections(sql: &str, name: &str) -> String {
    let (begin, end, instead) =
        (format!("-- {name}: begin"), format!("-- {name}: end"), format!("-- without {name}: "));
    let mut lean = String::with_capacity(sql.len());
    let mut skipping = false;
    for line in sql.lines() {
        match line.trim() {
            marker if marker == begin => skipping = true,
            marker if marker == end => skipping = false,
            _ if skipping => {}
            _ => {
                lean.push_str(line.strip_prefix(instead.as_str()).unwrap_or(line));
                lean.push('\n');
            }
        }
    }
    assert!(!skipping, "a {name} section of a claim statement has no end");
    lean
}
