//! Statements made from their files for what a call needs: the lines of a section only some calls
//! need are marked `-- <name>: begin` / `-- <name>: end`, and a line `-- without <name>: <text>`
//! gives the text that stands in for them. Each file's header says which sections it has.

/// `sql` without its lines from each `-- <name>: begin` to the next `-- <name>: end`, and with the
/// text of each `-- without <name>: ` line instead.
pub fn without_sections(sql: &str, name: &str) -> String {
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
    assert!(!skipping, "a {name} section of a statement has no end");
    lean
}

#[cfg(test)]
mod unit {
    use super::without_sections;

    #[test]
    fn a_section_is_left_out_and_its_stand_in_taken() {
        let sql = "SELECT 1\n-- extra: begin\n, 2\n-- extra: end\n-- without extra: , 3\nFROM t\n";
        assert_eq!(without_sections(sql, "extra"), "SELECT 1\n, 3\nFROM t\n");
        assert_eq!(without_sections(sql, "other"), sql, "another section's markers are kept as they are");
    }

    #[test]
    #[should_panic(expected = "has no end")]
    fn an_unended_section_is_refused() {
        without_sections("SELECT 1\n-- fairness: begin\n, 2\n", "fairness");
    }
}
