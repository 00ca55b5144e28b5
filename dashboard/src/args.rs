//! The command line and environment: where to listen, which database, whether a password guards
//! the pages, whether actions are offered. Parsed without a server, so the refusals are tested alone.

use std::net::{SocketAddr, ToSocketAddrs};

pub const USAGE: &str = "usage: jq-dashboard [--listen ADDR] [--dsn DSN] [--read-only] [--password-file PATH]
                    [--allowed-host NAME]... [--https] [--metrics-all-databases]
  --listen ADDR         address and port to serve on (default 127.0.0.1:8080); any address but a
                        loopback one needs a password
  --dsn DSN             the database, as a libpq connection string or URL (default: DATABASE_URL);
                        the pages show what its role may see
  --read-only           no buttons, and every POST refused
  --password-file PATH  HTTP Basic password (any user name), first line of PATH
                        (or JQ_DASHBOARD_PASSWORD)
  --allowed-host NAME   a host name browsers reach the pages by (with or without its port); an
                        address literal or localhost with the listening port needs none, any
                        other name is refused
  --https               browsers reach the pages over HTTPS, through a proxy in front: cookies
                        are __Host- and Secure, and actions must come from an https page
  --metrics-all-databases
                        /metrics serves every database of the server that has the extension
                        and that the role may connect to, each series with a `database` label
                        (the pages still show the DSN's database)
  -h, --help            this text";

/// The default address: loopback only, so that no password is needed on the machine itself.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub listen: String,
    pub dsn: String,
    pub read_only: bool,
    /// None: no password asked (only allowed on a loopback address).
    pub password: Option<String>,
    pub allowed_hosts: Vec<String>,
    pub https: bool,
    /// `/metrics` reads every database of the server, not only the connection string's.
    pub metrics_all_databases: bool,
}

/// What the command line asked for: to run, or only the usage.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    Run(Options),
    Help,
}

/// Reads the arguments (without the program's name) and the two environment variables, given as
/// functions so that tests pass their own. An error is the message to print before the usage.
pub fn parse(
    args: &[String],
    env: impl Fn(&str) -> Option<String>,
    read_file: impl Fn(&str) -> std::io::Result<String>,
) -> Result<Parsed, String> {
    let (mut listen, mut dsn, mut read_only, mut password_file) = (None, None, false, None);
    let (mut allowed_hosts, mut https, mut metrics_all_databases) = (Vec::new(), false, false);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value =
            |name: &str| inline.clone().or_else(|| args.next().cloned()).ok_or_else(|| format!("{name} needs a value"));
        match flag {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--listen" => listen = Some(value("--listen")?),
            "--dsn" => dsn = Some(value("--dsn")?),
            "--password-file" => password_file = Some(value("--password-file")?),
            "--read-only" if inline.is_none() => read_only = true,
            "--https" if inline.is_none() => https = true,
            "--metrics-all-databases" if inline.is_none() => metrics_all_databases = true,
            "--allowed-host" => {
                let name = value("--allowed-host")?;
                if name.is_empty() || name.contains(['/', ' ', ',']) {
                    return Err(format!("--allowed-host {name}: not a host name"));
                }
                allowed_hosts.push(name);
            }
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    let dsn = dsn
        .or_else(|| env("DATABASE_URL"))
        .filter(|dsn| !dsn.trim().is_empty())
        .ok_or("no database: give --dsn DSN or set DATABASE_URL")?;
    let password = match password_file {
        Some(path) => {
            let text = read_file(&path).map_err(|error| format!("--password-file {path}: {error}"))?;
            let first = text.lines().next().unwrap_or("").to_owned();
            if first.is_empty() {
                return Err(format!("--password-file {path}: the first line is empty"));
            }
            Some(first)
        }
        None => env("JQ_DASHBOARD_PASSWORD").filter(|password| !password.is_empty()),
    };
    let listen = listen.unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let addresses = resolve(&listen)?;
    if password.is_none() && !addresses.iter().all(|address| address.ip().is_loopback()) {
        return Err(format!(
            "--listen {listen} is not a loopback address, so the pages need a password: \
             give --password-file PATH or set JQ_DASHBOARD_PASSWORD"
        ));
    }
    if metrics_all_databases {
        // Every database is reached with these parameters and its own name: refused now, not at
        // the first scrape.
        dsn.parse::<tokio_postgres::Config>().map_err(|error| format!("--dsn: {error}"))?;
    }
    Ok(Parsed::Run(Options { listen, dsn, read_only, password, allowed_hosts, https, metrics_all_databases }))
}

/// The addresses `listen` names (a host name may name several); an error if it names none.
pub fn resolve(listen: &str) -> Result<Vec<SocketAddr>, String> {
    let addresses: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|error| format!("--listen {listen}: not an address and port ({error})"))?
        .collect();
    if addresses.is_empty() {
        return Err(format!("--listen {listen}: names no address"));
    }
    Ok(addresses)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str], env: &[(&str, &str)]) -> Result<Parsed, String> {
        let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        parse(
            &args,
            |name| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
            |path| match path {
                "/pw" => Ok("s3cret\nignored\n".to_owned()),
                "/empty" => Ok("\n".to_owned()),
                _ => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory")),
            },
        )
    }

    fn options(args: &[&str], env: &[(&str, &str)]) -> Options {
        match run(args, env) {
            Ok(Parsed::Run(options)) => options,
            other => panic!("expected options, got {other:?}"),
        }
    }

    #[test]
    fn defaults_to_loopback_without_a_password() {
        let o = options(&["--dsn", "host=/tmp"], &[]);
        assert_eq!(
            o,
            Options {
                listen: DEFAULT_LISTEN.into(),
                dsn: "host=/tmp".into(),
                read_only: false,
                password: None,
                allowed_hosts: Vec::new(),
                https: false,
                metrics_all_databases: false
            }
        );
    }

    #[test]
    fn dsn_from_the_environment_and_flags_in_both_forms() {
        let o = options(&["--listen=127.0.0.1:0", "--read-only"], &[("DATABASE_URL", "postgres://x@/db")]);
        assert_eq!((o.listen.as_str(), o.dsn.as_str(), o.read_only), ("127.0.0.1:0", "postgres://x@/db", true));
        let o = options(&["--dsn", "a=b"], &[("DATABASE_URL", "ignored")]);
        assert_eq!(o.dsn, "a=b");
    }

    #[test]
    fn no_database_is_an_error() {
        assert!(run(&[], &[]).unwrap_err().contains("--dsn"));
        assert!(run(&[], &[("DATABASE_URL", " ")]).unwrap_err().contains("DATABASE_URL"));
    }

    #[test]
    fn a_public_address_needs_a_password() {
        let error = run(&["--dsn", "x", "--listen", "0.0.0.0:8080"], &[]).unwrap_err();
        assert!(error.contains("not a loopback address") && error.contains("JQ_DASHBOARD_PASSWORD"), "{error}");
        let error = run(&["--dsn", "x", "--listen", "[::]:8080"], &[]).unwrap_err();
        assert!(error.contains("password"), "{error}");
        let o = options(&["--dsn", "x", "--listen", "0.0.0.0:8080"], &[("JQ_DASHBOARD_PASSWORD", "pw")]);
        assert_eq!(o.password.as_deref(), Some("pw"));
        let o = options(&["--dsn", "x", "--listen", "0.0.0.0:8080", "--password-file", "/pw"], &[]);
        assert_eq!(o.password.as_deref(), Some("s3cret"), "the first line of the file");
        // An empty variable is no password.
        assert!(run(&["--dsn", "x", "--listen", "0.0.0.0:1"], &[("JQ_DASHBOARD_PASSWORD", "")]).is_err());
    }

    #[test]
    fn loopback_names_need_no_password() {
        for listen in ["127.0.0.1:9", "[::1]:9", "localhost:9"] {
            assert_eq!(options(&["--dsn", "x", "--listen", listen], &[]).password, None, "{listen}");
        }
    }

    #[test]
    fn allowed_hosts_and_https() {
        let o =
            options(&["--dsn", "x", "--allowed-host", "jobs.example.com", "--allowed-host=ops:8443", "--https"], &[]);
        assert_eq!(o.allowed_hosts, ["jobs.example.com", "ops:8443"]);
        assert!(o.https);
        assert!(run(&["--dsn", "x", "--allowed-host", "a/b"], &[]).unwrap_err().contains("not a host name"));
        assert!(run(&["--dsn", "x", "--https=yes"], &[]).is_err());
    }

    #[test]
    fn metrics_of_every_database() {
        let o = options(&["--dsn", "host=/tmp user=prometheus", "--metrics-all-databases"], &[]);
        assert!(o.metrics_all_databases);
        let o = options(&["--metrics-all-databases"], &[("DATABASE_URL", "postgres://prometheus@db/postgres")]);
        assert!(o.metrics_all_databases);
        assert!(run(&["--dsn", "x", "--metrics-all-databases=yes"], &[]).unwrap_err().contains("unknown argument"));
        // A connection string it could not give another database's name to.
        let error = run(&["--dsn", "host=/tmp port=nine", "--metrics-all-databases"], &[]).unwrap_err();
        assert!(error.starts_with("--dsn: "), "{error}");
        assert!(!options(&["--dsn", "host=/tmp port=nine"], &[]).metrics_all_databases);
    }

    #[test]
    fn password_file_errors() {
        assert!(run(&["--dsn", "x", "--password-file", "/missing"], &[]).unwrap_err().contains("/missing"));
        assert!(run(&["--dsn", "x", "--password-file", "/empty"], &[]).unwrap_err().contains("empty"));
    }

    #[test]
    fn bad_arguments() {
        assert!(run(&["--dsn"], &[]).unwrap_err().contains("needs a value"));
        assert!(run(&["--dsn", "x", "--bogus"], &[]).unwrap_err().contains("unknown argument"));
        assert!(run(&["--dsn", "x", "--listen", "nowhere"], &[]).unwrap_err().contains("not an address"));
        assert!(run(&["--dsn", "x", "--read-only=yes"], &[]).is_err());
        assert_eq!(run(&["--help", "--bogus"], &[]), Ok(Parsed::Help));
    }
}
