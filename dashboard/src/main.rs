//! jq-dashboard: the queues of pg_jobqueue in a browser, as the role of its connection string may
//! see them. One binary: pages rendered by the server, charts drawn as SVG, no script. See
//! dashboard/man/jq-dashboard.1 and the guide's chapter "Dashboard".

mod args;
mod charts;
mod cluster;
mod db;
mod guard;
mod pages;
mod samples;
mod web;

use std::sync::{Arc, Mutex};

use args::Parsed;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match args::parse(&args, |name| std::env::var(name).ok(), |path| std::fs::read_to_string(path)) {
        Ok(Parsed::Run(options)) => options,
        Ok(Parsed::Help) => {
            println!("{}", args::USAGE);
            return;
        }
        Err(message) => {
            eprintln!("jq-dashboard: {message}\n{}", args::USAGE);
            std::process::exit(2);
        }
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("start the runtime");
    std::process::exit(runtime.block_on(serve(options)));
}

async fn serve(options: args::Options) -> i32 {
    let listener = match tokio::net::TcpListener::bind(&options.listen).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("jq-dashboard: --listen {}: {error}", options.listen);
            return 2;
        }
    };
    let cluster = match options.metrics_all_databases.then(|| cluster::Cluster::new(&options.dsn)).transpose() {
        Ok(cluster) => cluster.map(Arc::new),
        Err(message) => {
            eprintln!("jq-dashboard: {message}");
            return 2;
        }
    };
    let pool = db::Pool::new(&options.dsn);
    // A database that is down now may be up by the first page: said, not fatal.
    if let Err(error) = pool.get().await {
        eprintln!("jq-dashboard: warning: {error}");
    }
    let store = Arc::new(Mutex::new(samples::Store::default()));
    tokio::spawn(samples::run(pool.clone(), store.clone()));
    let local = listener.local_addr().ok();
    let app = web::App {
        pool,
        store,
        read_only: options.read_only,
        password: options.password.clone().map(Arc::new),
        secret: Arc::new(guard::Secret::new()),
        https: options.https,
        port: local.map_or(0, |address| address.port()),
        allowed_hosts: Arc::new(options.allowed_hosts.clone()),
        cluster,
    };
    let address = local.map(|a| a.to_string()).unwrap_or_else(|| options.listen.clone());
    println!(
        "jq-dashboard listening on http://{address}{}{}",
        if options.password.is_some() { " (password required)" } else { "" },
        if options.read_only { " (read-only)" } else { "" }
    );
    let served = axum::serve(listener, web::router(app)).with_graceful_shutdown(stop_signal()).await;
    match served {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("jq-dashboard: {error}");
            1
        }
    }
}

/// SIGTERM or SIGINT.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("install the SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install the SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
