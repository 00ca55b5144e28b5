//! The one ordering-key check, taken in where a claim statement asks for it (as `claim.sql`'s
//! header describes); the sections a queue does not need are left out by `db::text`.

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
