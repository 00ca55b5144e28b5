//! jq-schema: the install script of pg_jobqueue, from the library alone.
//!
//!     jq-schema LIBRARY CONTROL VERSION > pg_jobqueue--VERSION.sql
//!
//! pgrx records every SQL object of the extension (functions, types, the `extension_sql!` files)
//! in a section of the library it builds, `.pgrxsc`; `cargo pgrx package` reads that section and
//! orders the objects into the install script. This does the same with pgrx's own library for it,
//! so that building and installing the extension (scripts/stage.sh) needs cargo and the PostgreSQL
//! headers only: cargo-pgrx, which takes 10 to 17 minutes to build on a two-core machine, is then
//! needed by the unit test layer alone (`cargo pgrx test`), and `make demo` runs without it.
use object::{Object, ObjectSection};
use pgrx_sql_entity_graph::{section, ControlFile, PgrxSql, SqlGraphEntity};
use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

/// The name the library is loaded by; the control file's module_pathname names it, so the script
/// says MODULE_PATHNAME rather than a versioned file name.
const LIBRARY_NAME: &str = "pg_jobqueue";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [library, control, version] = args.as_slice() else {
        eprintln!("usage: jq-schema LIBRARY CONTROL VERSION > pg_jobqueue--VERSION.sql");
        return ExitCode::from(2);
    };
    match install_script(library, control, version) {
        Ok(sql) => match std::io::stdout().write_all(sql.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("jq-schema: writing the script: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("jq-schema: {library}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn install_script(library: &str, control: &str, version: &str) -> Result<String, Box<dyn Error>> {
    let data = std::fs::read(library)?;
    let file = object::File::parse(&*data)?;
    let bytes = file
        .section_by_name(section::ELF_SECTION_NAME)
        .ok_or("no .pgrxsc section: build the library with -Wl,--no-gc-sections (scripts/stage.sh)")?
        .data()?;
    let mut entities =
        vec![SqlGraphEntity::ExtensionRoot(ControlFile::from_path_with_cargo_version(control, version)?)];
    entities.extend(section::decode_entities(bytes).map_err(|e| e.to_string())?);
    let sql = PgrxSql::build(entities.into_iter(), LIBRARY_NAME.to_string(), false).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    sql.write(&mut out).map_err(|e| e.to_string())?;
    Ok(String::from_utf8(out)?)
}
