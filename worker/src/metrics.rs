//! `--metrics ADDRESS`: jq-worker answers a Prometheus scrape of `GET /metrics` with what
//! `jq_metrics()` returns (the text exposition format 0.0.4; guide, "Operating"), so that a
//! Prometheus that scrapes its workers needs no exporter. One thread serves the scrapes one at a
//! time, on a connection of its own, opened at the first scrape and again after an error; the
//! slots' connections are never used for it.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use postgres::{Client, Config, NoTls};

/// How long a scraper may take to send its request; a silent one is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves scrapes on `listener` for the life of the process.
pub fn serve(listener: TcpListener, dsn: Config, log: impl Fn(&str) + Send + 'static) {
    thread::spawn(move || {
        let mut client: Option<Client> = None;
        for stream in listener.incoming() {
            match stream {
                Ok(stream) => answer(stream, &dsn, &mut client, &log),
                Err(error) => log(&format!("metrics: accept failed: {error}")),
            }
        }
    });
}

fn answer(mut stream: TcpStream, dsn: &Config, client: &mut Option<Client>, log: &impl Fn(&str)) {
    let _ = stream.set_read_timeout(Some(REQUEST_TIMEOUT));
    let Some(path) = request_path(&stream) else { return };
    let (status, body) = if path != "/metrics" {
        ("404 Not Found", format!("jq-worker serves /metrics only, not {path}\n"))
    } else {
        match scrape(dsn, client) {
            Ok(text) => ("200 OK", text),
            Err(error) => {
                // The next scrape connects again.
                *client = None;
                log(&format!("metrics: jq_metrics() failed: {error}"));
                ("503 Service Unavailable", format!("jq_metrics() failed: {error}\n"))
            }
        }
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// The path of a `GET` request (its headers are read and ignored), or None for anything else.
fn request_path(stream: &TcpStream) -> Option<String> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut words = line.split_whitespace();
    let (method, target) = (words.next()?, words.next()?);
    // The headers, up to the empty line, so that the client is not reset before it reads.
    let mut header = String::new();
    while reader.read_line(&mut header).ok()? > 2 {
        header.clear();
    }
    (method == "GET").then(|| target.split('?').next().unwrap_or("").to_owned())
}

fn scrape(dsn: &Config, client: &mut Option<Client>) -> Result<String, postgres::Error> {
    if client.is_none() {
        *client = Some(dsn.connect(NoTls)?);
    }
    let row = client.as_mut().unwrap().query_one("SELECT jq_metrics()", &[])?;
    Ok(row.get(0))
}
