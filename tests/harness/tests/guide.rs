//! What the guide states about the extension's objects and the repository's programs, read from the
//! chapters and compared with the catalog of a server and with the workspace: which functions are
//! SECURITY DEFINER (guide, "Security"), which views `jq_grant` gives SELECT on (guide, "Security"
//! and "Functions"), the workers that come with pg_jobqueue (guide, "Workers"), and the server
//! versions the introduction names.

use std::path::{Path, PathBuf};

use jq_harness::{text_rows, Cluster};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file of the repository, its lines joined by single spaces (a sentence may be wrapped).
fn prose(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap().split_whitespace().collect::<Vec<_>>().join(" ")
}

fn number(word: &str) -> usize {
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
        .iter()
        .position(|w| w.eq_ignore_ascii_case(word))
        .unwrap_or_else(|| panic!("not a number word: {word}"))
}

/// The text of `text` right after `before`, up to the first of `until`.
fn after<'a>(text: &'a str, before: &str, until: &str) -> &'a str {
    let start = text.find(before).unwrap_or_else(|| panic!("the guide no longer says \"{before}\"")) + before.len();
    let rest = &text[start..];
    &rest[..rest.find(until).unwrap_or(rest.len())]
}

/// The `backticked` names of a list such as "`a`, `b` and `c`", sorted.
fn names(list: &str) -> Vec<String> {
    let mut names: Vec<String> = list.split('`').skip(1).step_by(2).map(str::to_owned).collect();
    names.sort();
    names
}

/// The functions of the extension that are SECURITY DEFINER are those the Security chapter names,
/// as many as it says.
#[test]
fn the_security_definer_functions_are_the_ones_the_guide_names() {
    let security = prose("docs/src/security.md");
    const NAMED: &str = " SECURITY DEFINER functions are ";
    let count = security[..security.find(NAMED).expect("the sentence naming the definers")].rsplit(' ').next().unwrap();
    let stated = names(after(&security, NAMED, ":"));
    assert_eq!(number(count), stated.len(), "the Security chapter's count of definers");

    let cluster = Cluster::start();
    let definers = text_rows(
        &mut cluster.connect(),
        "SELECT p.proname::text FROM pg_proc p
         JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
         JOIN pg_extension e ON d.refobjid = e.oid AND e.extname = 'pg_jobqueue'
         WHERE p.prosecdef ORDER BY 1",
    );
    assert_eq!(definers, stated, "the SECURITY DEFINER functions of the catalog against the Security chapter");
}

/// After `jq_grant` of `consume`, a role may SELECT exactly the figures views the guide names, and
/// after `manage` also the views it names for managers; the Security and the Functions chapter say
/// the same.
#[test]
fn jq_grant_gives_select_on_the_views_the_guide_names() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let granted = |client: &mut postgres::Client, role: &str| {
        text_rows(
            client,
            &format!(
                "SELECT c.relname::text FROM pg_class c, aclexplode(c.relacl) a
                 WHERE a.grantee = '{role}'::regrole AND a.privilege_type = 'SELECT' ORDER BY 1"
            ),
        )
    };
    client
        .batch_execute(
            "CREATE ROLE consumer; CREATE ROLE manager;
             SELECT jq_grant('consumer', 'q', 'consume'); SELECT jq_grant('manager', 'q', 'manage')",
        )
        .unwrap();
    for chapter in ["docs/src/security.md", "docs/src/functions.md"] {
        let text = prose(chapter);
        let figures = after(&text, "SELECT on the ", ", with `manage`");
        let (count, list) = figures.split_once(" figures views ").expect("the figures views");
        let figures = names(list);
        assert_eq!(number(count), figures.len(), "{chapter}: the count of the figures views");
        let managed = names(after(&text, ", with `manage` also on the views ", ", and USAGE"));
        assert_eq!(granted(&mut client, "consumer"), figures, "{chapter}: SELECT after jq_grant of consume");
        let mut both = [figures, managed].concat();
        both.sort();
        assert_eq!(granted(&mut client, "manager"), both, "{chapter}: SELECT after jq_grant of manage");
    }
}

/// The Workers chapter says how many workers come with pg_jobqueue and describes that many, one
/// section each before "Any other language"; a section named for a program names a program the
/// workspace builds, and each program the workspace builds is named in the chapter.
#[test]
fn the_workers_chapter_describes_the_workers_and_programs_that_come_with_it() {
    let text = std::fs::read_to_string(root().join("docs/src/workers.md")).unwrap();
    let count = number(after(&prose("docs/src/workers.md"), "worker-sql.md). ", " come with pg_jobqueue"));
    let sections: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .take_while(|heading| *heading != "Any other language")
        .collect();
    assert_eq!(sections.len(), count, "the workers the chapter counts against its sections: {sections:?}");

    let workspace = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let members = after(&workspace, "members = [", "]");
    let mut programs = Vec::new();
    for member in names(&members.replace('"', "`")) {
        let manifest = std::fs::read_to_string(root().join(&member).join("Cargo.toml")).unwrap();
        for bin in manifest.split("[[bin]]").skip(1) {
            programs.push(after(bin, "name = \"", "\"").to_owned());
        }
    }
    programs.sort();
    assert!(!programs.is_empty(), "the workspace builds no program");
    for section in &sections {
        if section.starts_with("jq-") {
            assert!(programs.contains(&section.to_string()), "the section {section} names no program of the workspace");
        }
    }
    for program in &programs {
        assert!(text.contains(&format!("`{program}`")), "the Workers chapter does not name {program}");
    }
}

/// The introduction names every server version the build supports (scripts/pgversion.sh).
#[test]
fn the_introduction_names_the_supported_server_versions() {
    let script = std::fs::read_to_string(root().join("scripts/pgversion.sh")).unwrap();
    let versions = after(&script, "case \"$PG\" in\n", ")").trim().to_owned();
    let first = prose("docs/src/introduction.md");
    let first = after(&first, "# Introduction ", ":");
    for version in versions.split('|') {
        assert!(
            first.contains(version),
            "the introduction's first sentence does not name PostgreSQL {version}: {first}"
        );
    }
}
