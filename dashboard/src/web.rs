//! The routes: a page per GET, an action per POST (each redirecting back with its outcome), and
//! the guard every request passes first (the password, the CSRF cookie, the flash message).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use maud::{html, Markup};
use tokio_postgres::Row;

use crate::charts;
use crate::cluster::Cluster;
use crate::db::{self, sql, Access, Conn, DbError, Pool};
use crate::guard::{self, Flash};
use crate::pages::{self, action, age, count, decimal, json, layout, note, segment, text, Ctx};
use crate::samples::{self, Store};

/// Jobs per page of a queue's job list.
const PAGE_SIZE: i64 = 50;
/// At most this many dead or cancelled jobs are considered for a list, the newest first.
const FINISHED_LIMIT: i64 = 5000;

#[derive(Clone)]
pub struct App {
    pub pool: Arc<Pool>,
    pub store: Arc<Mutex<Store>>,
    pub read_only: bool,
    pub password: Option<Arc<String>>,
    /// What the CSRF tokens are signed with.
    pub secret: Arc<guard::Secret>,
    /// The pages reach browsers over HTTPS (a proxy in front): `__Host-` cookies, https origins.
    pub https: bool,
    /// The port it listens on, and the host names it answers to besides address literals.
    pub port: u16,
    pub allowed_hosts: Arc<Vec<String>>,
    /// `--metrics-all-databases`: `/metrics` reads every database of the server.
    pub cluster: Option<Arc<Cluster>>,
}

/// The largest request body read: an action's form is a few fields.
const MOST_BODY_BYTES: usize = 16 * 1024;

/// What the guard learnt of a request: the CSRF token of its cookie (or a fresh one) and the
/// flash message it carries.
#[derive(Clone)]
struct Visit {
    token: String,
    cookie_token: Option<String>,
    flash: Option<Flash>,
}

pub fn router(app: App) -> Router {
    Router::new()
        .route("/", get(overview))
        .route("/queues/{name}", get(queue))
        .route("/queues/{name}/pause", post(queue_pause))
        .route("/queues/{name}/resume", post(queue_resume))
        .route("/jobs/{id}", get(job))
        .route("/jobs/{id}/retry", post(job_retry))
        .route("/jobs/{id}/cancel", post(job_cancel))
        .route("/jobs/{id}/purge", post(job_purge))
        .route("/dead", get(dead))
        .route("/dead/retry", post(dead_retry))
        .route("/dead/purge", post(dead_purge))
        .route("/schedules", get(schedules))
        .route("/schedules/{name}/pause", post(schedule_pause))
        .route("/schedules/{name}/resume", post(schedule_resume))
        .route("/metrics", get(metrics))
        .route("/style.css", get(style))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard_layer))
        .layer(DefaultBodyLimit::max(MOST_BODY_BYTES))
        .with_state(app)
}

async fn guard_layer(State(app): State<App>, request: Request, next: Next) -> Response {
    let mut response = guarded(app, request, next).await;
    let headers = response.headers_mut();
    for (name, value) in guard::SECURITY_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// What every request passes before its route: the host it names, the password, the origin of an
/// action; then the CSRF cookie and the flash message for the page.
async fn guarded(app: App, mut request: Request, next: Next) -> Response {
    let (host, authorization, cookies, origin, fetch_site) = {
        let text = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        (text("host"), text("authorization"), text("cookie"), text("origin"), text("sec-fetch-site"))
    };
    let is_get = request.method() == Method::GET || request.method() == Method::HEAD;
    if !guard::host_ok(host.as_deref(), app.port, &app.allowed_hosts) {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "jq-dashboard does not answer to this host name (see --allowed-host)\n",
        )
            .into_response();
    }
    if let Some(password) = &app.password {
        if !guard::basic_auth_ok(authorization.as_deref(), password) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Basic realm=\"jq-dashboard\", charset=\"UTF-8\"")],
                "jq-dashboard needs the password\n",
            )
                .into_response();
        }
    }
    let csrf_cookie = guard::cookie_name(guard::CSRF_COOKIE, app.https);
    let cookie_token = guard::cookie(cookies.as_deref(), &csrf_cookie)
        .filter(|t| guard::valid_token(&app.secret, t))
        .map(str::to_owned);
    let flash =
        guard::cookie(cookies.as_deref(), &guard::cookie_name(guard::FLASH_COOKIE, app.https)).and_then(Flash::decode);
    let had_flash = flash.is_some();
    let token = cookie_token.clone().unwrap_or_else(|| guard::new_token(&app.secret));
    let visit = Visit { token: token.clone(), cookie_token: cookie_token.clone(), flash };
    if !is_get && !guard::origin_ok(origin.as_deref(), fetch_site.as_deref(), host.as_deref(), app.https) {
        let ctx = ctx(&app, &visit, None);
        return html(
            StatusCode::FORBIDDEN,
            pages::error_page(&ctx, "Refused", "The action came from a page of another origin: nothing was done."),
        );
    }
    request.extensions_mut().insert(visit);
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if cookie_token.is_none() {
        let value = guard::csrf_set_cookie(&token, app.https);
        headers.append(header::SET_COOKIE, HeaderValue::from_str(&value).expect("ascii"));
    }
    if is_get && had_flash {
        headers
            .append(header::SET_COOKIE, HeaderValue::from_str(&guard::clear_flash_cookie(app.https)).expect("ascii"));
    }
    response
}

/// Why a page is not shown.
enum Failure {
    NotFound(String),
    Db(DbError),
}

impl From<DbError> for Failure {
    fn from(error: DbError) -> Failure {
        Failure::Db(error)
    }
}

impl From<tokio_postgres::Error> for Failure {
    fn from(error: tokio_postgres::Error) -> Failure {
        Failure::Db(error.into())
    }
}

fn ctx(app: &App, visit: &Visit, access: Option<&Access>) -> Ctx {
    Ctx {
        token: visit.token.clone(),
        flash: visit.flash.clone(),
        read_only: app.read_only,
        role: access.map(|a| a.role.clone()).unwrap_or_default(),
    }
}

fn html(status: StatusCode, markup: Markup) -> Response {
    (status, Html(markup.into_string())).into_response()
}

fn failure(app: &App, visit: &Visit, failure: Failure) -> Response {
    let ctx = ctx(app, visit, None);
    match failure {
        Failure::NotFound(message) => html(StatusCode::NOT_FOUND, pages::error_page(&ctx, "Not found", &message)),
        Failure::Db(error @ DbError::Unavailable(_)) => {
            html(StatusCode::SERVICE_UNAVAILABLE, pages::error_page(&ctx, "Database unavailable", &error.to_string()))
        }
        Failure::Db(error) => {
            html(StatusCode::INTERNAL_SERVER_ERROR, pages::error_page(&ctx, "The database refused", &error.to_string()))
        }
    }
}

fn done(app: &App, visit: &Visit, result: Result<Response, Failure>) -> Response {
    result.unwrap_or_else(|f| failure(app, visit, f))
}

async fn not_found(State(app): State<App>, Extension(visit): Extension<Visit>) -> Response {
    failure(&app, &visit, Failure::NotFound("There is no such page.".into()))
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], pages::STYLE).into_response()
}

async fn metrics(State(app): State<App>, Extension(visit): Extension<Visit>) -> Response {
    let result = async {
        let text: String = match &app.cluster {
            Some(cluster) => cluster.scrape().await?,
            None => app.pool.get().await?.query_one(sql::METRICS, &[]).await?.get(0),
        };
        Ok([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")].into_response().map(|_| text.into()))
    }
    .await;
    done(&app, &visit, result)
}

// ---------------------------------------------------------------------------------------------
// The overview

struct QueueRow {
    name: String,
    counts: [i64; 5],
    oldest_claimable: Option<f64>,
    held: [i64; 4],
    flags: Vec<&'static str>,
}

fn queue_row(row: &Row) -> QueueRow {
    let flag = |i: usize, name: &'static str| row.get::<_, bool>(i).then_some(name);
    QueueRow {
        name: row.get(0),
        counts: [row.get(1), row.get(2), row.get(3), row.get(4), row.get(5)],
        oldest_claimable: row.get(6),
        held: [row.get(7), row.get(8), row.get(9), row.get(10)],
        flags: [
            flag(14, "paused"),
            flag(11, "claimable-age"),
            flag(12, "expiring-leases"),
            flag(13, "dead-age"),
            flag(15, "maintenance-stale"),
        ]
        .into_iter()
        .flatten()
        .collect(),
    }
}

/// A queue's counters as read now: claims, completions, p50 and p99 of the claim wait (seconds).
type Counters = HashMap<String, (i64, i64, Option<f64>, Option<f64>)>;

async fn read_counters(client: &Conn, access: &Access) -> Counters {
    if !access.counters {
        return Counters::new();
    }
    // Counters are an addition to the page: a failure leaves their cells empty.
    client
        .query(sql::COUNTERS, &[])
        .await
        .map(|rows| rows.iter().map(|r| (r.get(0), (r.get(1), r.get(2), r.get(3), r.get(4)))).collect())
        .unwrap_or_default()
}

async fn overview(State(app): State<App>, Extension(visit): Extension<Visit>) -> Response {
    let result = async {
        let client = app.pool.get().await?;
        let access = db::access(&client).await?;
        let rows: Vec<QueueRow> = client.query(sql::OVERVIEW, &[]).await?.iter().map(queue_row).collect();
        let counters = read_counters(&client, &access).await;
        drop(client);
        let now = samples::unix_now();
        let store = app.store.lock().unwrap();
        let series = store.series(None, now);
        let totals: [i64; 5] = rows.iter().fold([0; 5], |mut sum, row| {
            sum.iter_mut().zip(row.counts).for_each(|(s, c)| *s += c);
            sum
        });
        let body = html! {
            h1 { "Queues" }
            p.summary {
                (rows.len()) " queues visible · " (totals[0]) " pending · " (totals[1]) " scheduled · "
                (totals[2]) " running · " (totals[3]) " dead"
            }
            div.charts { (charts::throughput(&series)) (charts::backlog(&series)) }
            @if rows.is_empty() {
                (note("No queue is visible to this role: it holds no right on any queue (guide, \"Security\")."))
            }
            table #queues {
                thead { tr {
                    th { "queue" } th.n { "pending" } th.n { "scheduled" } th.n { "running" } th.n { "dead" }
                    th.n title="completions counted over the last hour" { "succeeded 1 h" }
                    th.n { "claims/s" } th.n { "completions/s" }
                    th.n title="wait from available to claimed, last 5 minutes" { "claim p50 ms" }
                    th.n { "claim p99 ms" } th.n { "oldest claimable" }
                    th.n { "held: pause" } th.n { "held: limits" } th.n { "held: rate" } th.n { "held: dependency" }
                    th { "flags" }
                } }
                tbody {
                    @for row in &rows {
                        @let c = counters.get(&row.name);
                        @let rates = c.and_then(|c| store.rates(&row.name, now, c.0, c.1));
                        @let recent = c.and_then(|c| store.completions_in_span(&row.name, c.1));
                        tr data-queue=(row.name) {
                            td data-field="name" { a href={"/queues/" (segment(&row.name))} { (row.name) } }
                            td.n data-field="pending" { (row.counts[0]) }
                            td.n data-field="scheduled" { (row.counts[1]) }
                            td.n data-field="running" { (row.counts[2]) }
                            td.n data-field="dead" { (row.counts[3]) }
                            td.n data-field="succeeded_recent" { (count(recent)) }
                            td.n data-field="claims_per_s" { (decimal(rates.map(|r| r.0))) }
                            td.n data-field="completions_per_s" { (decimal(rates.map(|r| r.1))) }
                            td.n data-field="claim_p50_ms" { (decimal(c.and_then(|c| c.2).map(|s| s * 1000.0))) }
                            td.n data-field="claim_p99_ms" { (decimal(c.and_then(|c| c.3).map(|s| s * 1000.0))) }
                            td.n data-field="oldest_claimable_age" { (age(row.oldest_claimable)) }
                            td.n data-field="held_by_pause" { (row.held[0]) }
                            td.n data-field="held_by_limits" { (row.held[1]) }
                            td.n data-field="held_by_rate" { (row.held[2]) }
                            td.n data-field="held_by_dependency" { (row.held[3]) }
                            td.flags data-field="flags" { @for flag in &row.flags { span class=(flag) { (flag) } " " } }
                        }
                    }
                }
            }
            @if counters.is_empty() && !rows.is_empty() {
                (note("Rates, recent successes and claim latency come from the extension's counters, which need the library preloaded (guide, \"Operating\")."))
            }
        };
        let ctx = ctx(&app, &visit, Some(&access));
        Ok(html(StatusCode::OK, layout(&ctx, "overview", "Queues", true, body)))
    }
    .await;
    done(&app, &visit, result)
}

// ---------------------------------------------------------------------------------------------
// A queue

/// The job list's filters, as the form sends them (an empty field is no filter).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Filters {
    pub status: Option<String>,
    pub key: Option<String>,
    pub error_code: Option<String>,
    pub older_than: Option<String>,
    pub page: i64,
}

impl Filters {
    pub fn from_query(query: &HashMap<String, String>) -> Filters {
        let field = |name: &str| query.get(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let page = field("page").and_then(|p| p.parse::<i64>().ok()).filter(|p| *p >= 1).unwrap_or(1);
        Filters {
            status: field("status"),
            key: field("key"),
            error_code: field("error_code"),
            older_than: field("older_than"),
            page,
        }
    }

    /// The query string of this list at another page.
    pub fn query_at(&self, page: i64) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in [
            ("status", &self.status),
            ("key", &self.key),
            ("error_code", &self.error_code),
            ("older_than", &self.older_than),
        ] {
            if let Some(value) = value {
                query.append_pair(name, value);
            }
        }
        query.append_pair("page", &page.to_string());
        query.finish()
    }

    /// The status to list: the one asked for, or None for every live one. Err: no such status.
    pub fn status(&self) -> Result<Option<&'static str>, String> {
        const STATUSES: [&str; 5] = ["pending", "running", "dead", "cancelled", "succeeded"];
        match self.status.as_deref() {
            None => Ok(None),
            Some(status) => match STATUSES.iter().find(|s| **s == status) {
                Some(status) => Ok(Some(status)),
                None => Err(format!("There is no status {status:?}.")),
            },
        }
    }
}

struct JobRow {
    id: i64,
    status: String,
    priority: i32,
    attempts: i32,
    max_attempts: i32,
    created_at: Option<String>,
    available_at: Option<String>,
    finished_at: Option<String>,
    error_code: Option<String>,
    key: Option<String>,
}

fn job_row(row: &Row) -> JobRow {
    JobRow {
        id: row.get(0),
        status: row.get(1),
        priority: row.get(2),
        attempts: row.get(3),
        max_attempts: row.get(4),
        created_at: row.get(5),
        available_at: row.get(6),
        finished_at: row.get(7),
        error_code: row.get(8),
        key: row.get(9),
    }
}

/// Ids of the newest dead or cancelled jobs of the queues given (None: every queue managed).
async fn finished_ids(client: &Conn, queues: Option<Vec<String>>) -> Result<Vec<i64>, DbError> {
    let rows = client.query(sql::FINISHED_IDS, &[&queues, &FINISHED_LIMIT]).await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

async fn queue(
    State(app): State<App>,
    Extension(visit): Extension<Visit>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let result = async {
        let mut client = app.pool.get().await?;
        let access = db::access(&client).await?;
        let Some(figures) = client.query_opt(sql::QUEUE_FIGURES, &[&name]).await? else {
            return Err(Failure::NotFound(format!("There is no queue {name:?} that this role may see.")));
        };
        let manage = db::may_manage(&client, &access, &name).await?;
        let paused: bool = figures.get(12);
        let mut settings: Vec<(String, String)> = Vec::new();
        if manage {
            // jq_configure reads them only after writing the queue's row, so this is undone.
            let transaction = client.transaction().await?;
            if let Ok(rows) = transaction.query(sql::QUEUE_SETTINGS, &[&name]).await {
                settings = rows.iter().map(|r| (r.get(0), r.get::<_, Option<String>>(1).unwrap_or_default())).collect();
            }
            transaction.rollback().await?;
        }
        if settings.is_empty() {
            settings = vec![
                ("paused".into(), paused.to_string()),
                ("warn_claimable_age".into(), figures.get::<_, Option<String>>(13).unwrap_or_default()),
                (
                    "warn_expiring_leases".into(),
                    figures.get::<_, Option<i32>>(14).map(|v| v.to_string()).unwrap_or_default(),
                ),
                ("warn_dead_age".into(), figures.get::<_, Option<String>>(15).unwrap_or_default()),
            ];
        }
        let filters = Filters::from_query(&query);
        let mut message = None;
        let mut jobs: Vec<JobRow> = Vec::new();
        let mut held_keys: Vec<(String, i64, i64)> = Vec::new();
        let mut has_next = false;
        if access.jobs {
            for row in client.query(sql::HELD_KEYS, &[&name]).await? {
                held_keys.push((row.get(0), row.get(1), row.get(2)));
            }
        }
        // jq_list_jobs reads the queue's jobs through its indexes; it needs manage on the queue.
        if manage {
            match filters.status() {
                Err(text) => message = Some(text),
                Ok(status) => {
                    // One row past the page says whether there is a next one.
                    let skip = (filters.page - 1) * PAGE_SIZE;
                    let listed = client
                        .query(
                            sql::QUEUE_JOBS,
                            &[&name, &status, &filters.key, &filters.error_code, &filters.older_than, &(PAGE_SIZE + 1), &skip],
                        )
                        .await;
                    match listed {
                        Ok(rows) => {
                            has_next = rows.len() as i64 > PAGE_SIZE;
                            jobs = rows.iter().take(PAGE_SIZE as usize).map(job_row).collect();
                        }
                        // A filter the database refuses (an interval it cannot read, a negative
                        // age, a key too long) is said.
                        Err(error) => message = Some(error.to_string()),
                    }
                }
            }
        }
        let series = app.store.lock().unwrap().series(Some(&name), samples::unix_now());
        let ctx = ctx(&app, &visit, Some(&access));
        let count_at = |i: usize| figures.get::<_, i64>(i);
        let path = format!("/queues/{}", segment(&name));
        let body = html! {
            h1 { (name) }
            p.actions {
                @if manage {
                    @if paused { (action(&ctx, &format!("{path}/resume"), "resume", "Resume", &[])) }
                    @else { (action(&ctx, &format!("{path}/pause"), "pause", "Pause", &[])) }
                }
            }
            table #figures {
                tr { th { "pending" } th { "scheduled" } th { "running" } th { "dead" } th { "cancelled" } th { "oldest claimable" }
                     th { "held: pause" } th { "held: queue limit" } th { "held: key limit" } th { "held: rate" } th { "held: key rate" } th { "held: dependency" } }
                tr {
                    td.n data-field="pending" { (count_at(0)) } td.n data-field="scheduled" { (count_at(1)) }
                    td.n data-field="running" { (count_at(2)) } td.n data-field="dead" { (count_at(3)) }
                    td.n data-field="cancelled" { (count_at(4)) }
                    td.n data-field="oldest_claimable_age" { (age(figures.get(5))) }
                    td.n data-field="held_by_pause" { (count_at(6)) } td.n data-field="held_by_concurrency_limit" { (count_at(7)) }
                    td.n data-field="held_by_key_limit" { (count_at(8)) } td.n data-field="held_by_rate_limit" { (count_at(9)) }
                    td.n data-field="held_by_key_rate_limit" { (count_at(10)) } td.n data-field="held_by_dependency" { (count_at(11)) }
                }
            }
            div.charts { (charts::throughput(&series)) (charts::backlog(&series)) }
            h2 { "Settings" }
            table #settings {
                @for (key, value) in &settings {
                    tr data-setting=(key) { th { (key) } td { (value) } }
                }
            }
            @if !manage { (note("All settings are shown to roles with manage on the queue; these come from jq_queue_health.")) }
            h2 { "Concurrency keys" }
            table #held-keys {
                thead { tr { th { "key" } th.n { "claimable" } th.n { "running" } } }
                tbody {
                    @for (key, due, running) in &held_keys {
                        tr data-key=(key) {
                            td data-field="key" { (key) } td.n data-field="due" { (due) } td.n data-field="running" { (running) }
                        }
                    }
                }
            }
            h2 { "Jobs" }
            @if manage {
                form #filters method="get" action=(path) {
                    label { "status " select name="status" {
                        option value="" selected[filters.status.is_none()] { "pending, running, dead, cancelled" }
                        @for s in ["pending", "running", "dead", "cancelled", "succeeded"] {
                            option value=(s) selected[filters.status.as_deref() == Some(s)] { (s) }
                        }
                    } }
                    label { "key " input type="text" name="key" value=(text(&filters.key)); }
                    label { "error code " input type="text" name="error_code" value=(text(&filters.error_code)); }
                    label { "older than " input type="text" name="older_than" placeholder="1 hour" value=(text(&filters.older_than)); }
                    button type="submit" { "Filter" }
                }
                @if let Some(message) = &message { p.note #list-message { (message) } }
                (jobs_table(&jobs))
                p.paging {
                    @if filters.page > 1 { a rel="prev" href={(path) "?" (filters.query_at(filters.page - 1))} { "← newer" } }
                    @if has_next { a rel="next" href={(path) "?" (filters.query_at(filters.page + 1))} { "older →" } }
                }
                (note("Jobs are listed newest first; succeeded jobs, listed when that status is chosen, the latest finished first."))
            } @else {
                (note("Jobs are shown to roles with manage on the queue (jq_list_jobs); this role sees the queue's figures only."))
            }
        };
        Ok(html(StatusCode::OK, layout(&ctx, "queue", &name, false, body)))
    }
    .await;
    done(&app, &visit, result)
}

fn jobs_table(jobs: &[JobRow]) -> Markup {
    html! {
        table #jobs {
            thead { tr {
                th { "id" } th { "status" } th.n { "priority" } th.n { "attempts" } th { "created" }
                th { "available" } th { "finished" } th { "error code" } th { "key" }
            } }
            tbody {
                @for job in jobs {
                    tr data-job=(job.id) {
                        td data-field="id" { a href={"/jobs/" (job.id)} { (job.id) } }
                        td data-field="status" { (job.status) }
                        td.n data-field="priority" { (job.priority) }
                        td.n data-field="attempts" { (job.attempts) "/" (job.max_attempts) }
                        td data-field="created_at" { (text(&job.created_at)) }
                        td data-field="available_at" { (text(&job.available_at)) }
                        td data-field="finished_at" { (text(&job.finished_at)) }
                        td data-field="last_error_code" { (text(&job.error_code)) }
                        td data-field="concurrency_key" { (text(&job.key)) }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A job

fn parse_id(id: &str) -> Result<i64, Failure> {
    id.parse::<i64>().map_err(|_| Failure::NotFound(format!("{id:?} is not a job id.")))
}

async fn job(State(app): State<App>, Extension(visit): Extension<Visit>, Path(id): Path<String>) -> Response {
    let result = async {
        let id = parse_id(&id)?;
        let client = app.pool.get().await?;
        let access = db::access(&client).await?;
        let hidden = || Failure::NotFound(format!("There is no job {id} that this role may see (jobs are shown to roles with manage on their queue)."));
        if !access.jobs {
            return Err(hidden());
        }
        let Some(row) = client.query_opt(sql::JOB, &[&id]).await? else {
            return Err(hidden());
        };
        let queue: String = row.get(1);
        let status: String = row.get(2);
        let events = if access.events { client.query(sql::JOB_EVENTS, &[&id]).await? } else { Vec::new() };
        let parents = if access.parent_results { client.query(sql::JOB_PARENTS, &[&id]).await.unwrap_or_default() } else { Vec::new() };
        let manage = db::may_manage(&client, &access, &queue).await?;
        let ctx = ctx(&app, &visit, Some(&access));
        let s = |i: usize| row.get::<_, Option<String>>(i);
        let field = |name: &str, value: Markup| html! { dt { (name) } dd data-field=(name) { (value) } };
        let plain = |v: Option<String>| html! { (v.unwrap_or_default()) };
        let path = format!("/jobs/{id}");
        let body = html! {
            h1 { "Job " (id) }
            p.actions {
                @if manage && matches!(status.as_str(), "dead" | "cancelled") { (action(&ctx, &format!("{path}/retry"), "retry", "Retry", &[])) }
                @if manage && matches!(status.as_str(), "pending" | "running") { (action(&ctx, &format!("{path}/cancel"), "cancel", "Cancel", &[])) }
            }
            dl #job {
                (field("status", html! { (status) }))
                (field("queue", html! { a href={"/queues/" (segment(&queue))} { (queue) } }))
                (field("attempts", html! { (row.get::<_, i32>(3)) }))
                (field("max_attempts", html! { (row.get::<_, i32>(4)) }))
                (field("priority", html! { (row.get::<_, i32>(5)) }))
                (field("payload", json(&s(6), row.get(25), pages::MOST_JSON_BYTES)))
                (field("result", json(&s(7), row.get(26), pages::MOST_JSON_BYTES)))
                (field("progress", json(&s(8), row.get(27), pages::MOST_JSON_BYTES)))
                (field("lease_owner", plain(s(9))))
                (field("lease_token", html! { (row.get::<_, i64>(10)) }))
                (field("lease_expires_at", plain(s(11))))
                (field("deadline", plain(s(12))))
                (field("run_deadline", plain(s(13))))
                (field("last_error_code", plain(s(14))))
                (field("last_error_message", plain(s(15))))
                (field("depends_on", plain(s(16))))
                (field("awaiting", html! { (row.get::<_, i32>(17)) }))
                (field("created_at", plain(s(18))))
                (field("available_at", plain(s(19))))
                (field("claimed_at", plain(s(20))))
                (field("finished_at", plain(s(21))))
                (field("dedup_key", plain(s(22))))
                (field("ordering_key", plain(s(23))))
                (field("concurrency_key", plain(s(24))))
            }
            h2 { "Events" }
            table #events {
                thead { tr { th { "event" } th { "status" } th { "at" } th.n { "attempt" } th { "worker" } th.n { "token" } th { "error code" } th { "error message" } } }
                tbody {
                    @for e in &events {
                        tr data-event=(e.get::<_, String>(0)) {
                            td data-field="event" { (e.get::<_, String>(0)) }
                            td data-field="status" { (e.get::<_, String>(1)) }
                            td data-field="at" { (e.get::<_, String>(2)) }
                            td.n data-field="attempt" { (e.get::<_, i32>(3)) }
                            td data-field="worker" { (e.get::<_, Option<String>>(4).unwrap_or_default()) }
                            td.n data-field="token" { (e.get::<_, i64>(5)) }
                            td data-field="error_code" { (e.get::<_, Option<String>>(6).unwrap_or_default()) }
                            td data-field="error_message" { (e.get::<_, Option<String>>(7).unwrap_or_default()) }
                        }
                    }
                }
            }
            @if events.is_empty() { (note("No events: claims, heartbeats and completions write none; failures, expiries, re-drives, cancellations and snoozes do.")) }
            h2 { "Dependencies" }
            table #dependencies {
                thead { tr { th { "job" } th { "status" } th { "result" } } }
                tbody {
                    @for p in &parents {
                        @let parent: i64 = p.get(0);
                        tr data-job=(parent) {
                            td data-field="id" { a href={"/jobs/" (parent)} { (parent) } }
                            td data-field="status" { (p.get::<_, String>(1)) }
                            td data-field="result" { (json(&p.get(2), p.get(3), 4096)) }
                        }
                    }
                }
            }
        };
        Ok(html(StatusCode::OK, layout(&ctx, "job", &format!("Job {id}"), false, body)))
    }
    .await;
    done(&app, &visit, result)
}

// ---------------------------------------------------------------------------------------------
// Dead jobs

struct DeadJob {
    id: i64,
    attempts: i32,
    finished_at: Option<String>,
    queue: String,
    message: Option<String>,
    finished_epoch: Option<f64>,
}

async fn dead(State(app): State<App>, Extension(visit): Extension<Visit>) -> Response {
    let result = async {
        let client = app.pool.get().await?;
        let access = db::access(&client).await?;
        let per_queue: Vec<(String, i64)> = client
            .query(sql::BACKLOG, &[])
            .await?
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(4)))
            .filter(|(_, dead)| *dead > 0)
            .collect();
        let failures = if access.failure_counts { client.query(sql::FAILURE_COUNTS, &[]).await.unwrap_or_default() } else { Vec::new() };
        // By error code, then queue: the jobs, the longest-dead first.
        let mut groups: BTreeMap<Option<String>, BTreeMap<String, Vec<DeadJob>>> = BTreeMap::new();
        let mut complete = true;
        if access.jobs && access.events {
            let ids = finished_ids(&client, None).await?;
            complete = (ids.len() as i64) < FINISHED_LIMIT;
            let no_filter: Option<String> = None;
            let rows = client
                .query(sql::FINISHED_JOBS, &[&ids, &vec!["dead"], &no_filter, &no_filter, &no_filter])
                .await?;
            for r in &rows {
                let job = DeadJob {
                    id: r.get(0),
                    attempts: r.get(3),
                    finished_at: r.get(7),
                    queue: r.get(10),
                    message: r.get(11),
                    finished_epoch: r.get(12),
                };
                groups.entry(r.get(8)).or_default().entry(job.queue.clone()).or_default().push(job);
            }
        }
        for queues in groups.values_mut() {
            for jobs in queues.values_mut() {
                jobs.sort_by(|a, b| a.finished_epoch.partial_cmp(&b.finished_epoch).unwrap_or(std::cmp::Ordering::Equal).then(a.id.cmp(&b.id)));
            }
        }
        let mut manage: HashMap<String, bool> = HashMap::new();
        for queue in groups.values().flat_map(|queues| queues.keys()) {
            if !manage.contains_key(queue) {
                let may = db::may_manage(&client, &access, queue).await?;
                manage.insert(queue.clone(), may);
            }
        }
        let ctx = ctx(&app, &visit, Some(&access));
        let body = html! {
            h1 { "Dead jobs" }
            table #dead-counts {
                thead { tr { th { "queue" } th.n { "dead" } } }
                tbody { @for (queue, n) in &per_queue {
                    tr data-queue=(queue) { td { a href={"/queues/" (segment(queue))} { (queue) } } td.n data-field="dead" { (n) } }
                } }
            }
            @if !(access.jobs && access.events) {
                (note("Dead jobs are listed to roles with manage on their queue (jq_managed_jobs); this role sees their counts only."))
            }
            @if !complete { (note(&format!("Only the dead jobs among the newest {FINISHED_LIMIT} dead or cancelled jobs are listed."))) }
            @for (code, queues) in &groups {
                @let code_text = code.as_deref().unwrap_or("none");
                section.group data-error-code=(code_text) {
                    h2 { "Error code " (code_text) }
                    @for (queue, jobs) in queues {
                        @let may = manage.get(queue).copied().unwrap_or(false);
                        h3 { a href={"/queues/" (segment(queue))} { (queue) } " · " (jobs.len()) " dead"
                            @if may {
                                @if let Some(code) = code {
                                    " " (action(&ctx, "/dead/retry", "retry-all", "Retry all", &[("queue", queue), ("error_code", code)]))
                                    (action(&ctx, "/dead/purge", "purge-all", "Purge all", &[("queue", queue), ("error_code", code)]))
                                }
                            }
                        }
                        table.dead {
                            thead { tr { th { "job" } th.n { "attempts" } th { "died" } th { "last error" } th {} } }
                            tbody {
                                @for job in jobs {
                                    tr data-job=(job.id) {
                                        td data-field="id" { a href={"/jobs/" (job.id)} { (job.id) } }
                                        td.n data-field="attempts" { (job.attempts) }
                                        td data-field="finished_at" { (text(&job.finished_at)) }
                                        td data-field="error_message" { (text(&job.message)) }
                                        td {
                                            @if may {
                                                (action(&ctx, &format!("/jobs/{}/retry", job.id), "retry", "Retry", &[]))
                                                (action(&ctx, &format!("/jobs/{}/purge", job.id), "purge", "Purge", &[]))
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if !failures.is_empty() {
                h2 { "Failures by error code" }
                table #failure-counts {
                    thead { tr { th { "error code" } th { "queue" } th.n { "failures" } } }
                    tbody { @for f in &failures {
                        tr { td { (f.get::<_, Option<String>>(1).unwrap_or_default()) } td { (f.get::<_, String>(0)) } td.n { (f.get::<_, i64>(2)) } }
                    } }
                }
                (note("Failures counted since the counters' last reset, whether or not the job died."))
            }
        };
        Ok(html(StatusCode::OK, layout(&ctx, "dead", "Dead jobs", false, body)))
    }
    .await;
    done(&app, &visit, result)
}

// ---------------------------------------------------------------------------------------------
// Schedules

async fn schedules(State(app): State<App>, Extension(visit): Extension<Visit>) -> Response {
    let result = async {
        let client = app.pool.get().await?;
        let access = db::access(&client).await?;
        let rows = if access.schedules { client.query(sql::SCHEDULES, &[]).await? } else { Vec::new() };
        let mut manage: HashMap<String, bool> = HashMap::new();
        for row in &rows {
            let queue: String = row.get(3);
            if let std::collections::hash_map::Entry::Vacant(slot) = manage.entry(queue.clone()) {
                slot.insert(db::may_manage(&client, &access, &queue).await?);
            }
        }
        let ctx = ctx(&app, &visit, Some(&access));
        let body = html! {
            h1 { "Schedules" }
            @if !access.schedules {
                (note("Schedules are shown to roles with manage on their queue (jq_schedules); this role has it on none."))
            }
            table #schedules {
                thead { tr { th { "name" } th { "cron" } th { "time zone" } th { "queue" } th { "last run" } th { "next run" } th { "last job" } th { "paused" } th {} } }
                tbody {
                    @for row in &rows {
                        @let name: String = row.get(0);
                        @let queue: String = row.get(3);
                        @let paused: bool = row.get(8);
                        @let last_job: Option<i64> = row.get(6);
                        tr data-schedule=(name) {
                            td data-field="name" { (name) }
                            td data-field="cron" { code { (row.get::<_, String>(1)) } }
                            td data-field="time_zone" { (row.get::<_, String>(2)) }
                            td data-field="queue" { a href={"/queues/" (segment(&queue))} { (queue) } }
                            td data-field="last_run" { (row.get::<_, Option<String>>(4).unwrap_or_default()) }
                            td data-field="next_run" { (row.get::<_, Option<String>>(5).unwrap_or_default()) }
                            td data-field="last_job_status" {
                                @if let Some(job) = last_job { a href={"/jobs/" (job)} { (row.get::<_, Option<String>>(7).unwrap_or_else(|| "gone".into())) } }
                            }
                            td data-field="paused" { (paused) }
                            td {
                                @if manage.get(&queue).copied().unwrap_or(false) {
                                    @let path = format!("/schedules/{}", segment(&name));
                                    @if paused { (action(&ctx, &format!("{path}/resume"), "resume", "Resume", &[])) }
                                    @else { (action(&ctx, &format!("{path}/pause"), "pause", "Pause", &[])) }
                                }
                            }
                        }
                    }
                }
            }
        };
        Ok(html(StatusCode::OK, layout(&ctx, "schedules", "Schedules", false, body)))
    }
    .await;
    done(&app, &visit, result)
}

// ---------------------------------------------------------------------------------------------
// Actions

/// The gate of every action: not in read-only mode, and the form's CSRF token equals the cookie's.
/// Ok: the form's fields.
fn admit(app: &App, visit: &Visit, body: &Bytes) -> Result<HashMap<String, String>, Response> {
    let refuse = |title: &str, message: &str| {
        let ctx = ctx(app, visit, None);
        Err(html(StatusCode::FORBIDDEN, pages::error_page(&ctx, title, message)))
    };
    if app.read_only {
        return refuse("Read-only", "This dashboard runs with --read-only: it takes no action.");
    }
    let form: HashMap<String, String> = form_urlencoded::parse(body).into_owned().collect();
    if !guard::csrf_ok(&app.secret, visit.cookie_token.as_deref(), form.get("csrf").map(String::as_str)) {
        return refuse(
            "Refused",
            "The form did not carry this browser's token (a form from another site, or an old page): nothing was done. Reload the page and try again.",
        );
    }
    Ok(form)
}

/// 303 to `to`, with the outcome for the page there.
fn redirect(https: bool, to: &str, flash: Flash) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, to.to_owned()), (header::SET_COOKIE, flash.set_cookie(https))])
        .into_response()
}

fn refused(error: &DbError) -> Flash {
    Flash::error(error.sqlstate().map(str::to_owned), error.message())
}

async fn queue_pause(state: State<App>, visit: Extension<Visit>, name: Path<String>, body: Bytes) -> Response {
    set_paused(state, visit, name, body, true).await
}

async fn queue_resume(state: State<App>, visit: Extension<Visit>, name: Path<String>, body: Bytes) -> Response {
    set_paused(state, visit, name, body, false).await
}

async fn set_paused(
    State(app): State<App>,
    Extension(visit): Extension<Visit>,
    Path(name): Path<String>,
    body: Bytes,
    paused: bool,
) -> Response {
    if let Err(response) = admit(&app, &visit, &body) {
        return response;
    }
    let outcome = async {
        let client = app.pool.get().await?;
        client.query_one(sql::PAUSE, &[&name, &paused]).await?;
        Ok::<_, DbError>(())
    }
    .await;
    let flash = match outcome {
        Ok(()) => Flash::ok(format!("Queue {name} {}.", if paused { "paused" } else { "resumed" })),
        Err(error) => refused(&error),
    };
    redirect(app.https, &format!("/queues/{}", segment(&name)), flash)
}

async fn job_retry(state: State<App>, visit: Extension<Visit>, id: Path<String>, body: Bytes) -> Response {
    job_verb(
        state,
        visit,
        id,
        body,
        sql::RETRY,
        "re-driven: it is pending again",
        "not re-driven: it is neither dead nor cancelled",
    )
    .await
}

async fn job_cancel(state: State<App>, visit: Extension<Visit>, id: Path<String>, body: Bytes) -> Response {
    job_verb(state, visit, id, body, sql::CANCEL, "cancelled", "not cancelled: it is neither pending nor running").await
}

async fn job_verb(
    State(app): State<App>,
    Extension(visit): Extension<Visit>,
    Path(id): Path<String>,
    body: Bytes,
    statement: &str,
    did: &str,
    did_not: &str,
) -> Response {
    if let Err(response) = admit(&app, &visit, &body) {
        return response;
    }
    let Ok(id) = id.parse::<i64>() else {
        return failure(&app, &visit, Failure::NotFound(format!("{id:?} is not a job id.")));
    };
    let outcome = async {
        let client = app.pool.get().await?;
        Ok::<bool, DbError>(client.query_one(statement, &[&id]).await?.get(0))
    }
    .await;
    let flash = match outcome {
        Ok(true) => Flash::ok(format!("Job {id} {did}.")),
        Ok(false) => Flash::error(None, format!("Job {id} {did_not}.")),
        Err(error) => refused(&error),
    };
    redirect(app.https, &format!("/jobs/{id}"), flash)
}

async fn job_purge(
    State(app): State<App>,
    Extension(visit): Extension<Visit>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if let Err(response) = admit(&app, &visit, &body) {
        return response;
    }
    let Ok(id) = id.parse::<i64>() else {
        return failure(&app, &visit, Failure::NotFound(format!("{id:?} is not a job id.")));
    };
    let outcome = async {
        let client = app.pool.get().await?;
        Ok::<bool, DbError>(client.query_one(sql::PURGE, &[&id]).await?.get(0))
    }
    .await;
    let flash = match outcome {
        Ok(true) => Flash::ok(format!("Job {id} purged.")),
        Ok(false) => Flash::error(
            None,
            format!("Job {id} was not purged: it is not a dead or cancelled job of a queue this role manages."),
        ),
        Err(error) => refused(&error),
    };
    redirect(app.https, "/dead", flash)
}

async fn dead_retry(state: State<App>, visit: Extension<Visit>, body: Bytes) -> Response {
    dead_group(state, visit, body, sql::RETRY_DEAD, "re-driven").await
}

async fn dead_purge(state: State<App>, visit: Extension<Visit>, body: Bytes) -> Response {
    dead_group(state, visit, body, sql::PURGE_DEAD, "purged").await
}

/// Every dead job of a queue with an error code, 1,000 per call until a call handles fewer.
async fn dead_group(
    State(app): State<App>,
    Extension(visit): Extension<Visit>,
    body: Bytes,
    statement: &str,
    did: &str,
) -> Response {
    let form = match admit(&app, &visit, &body) {
        Ok(form) => form,
        Err(response) => return response,
    };
    let (Some(queue), Some(code)) = (form.get("queue"), form.get("error_code").filter(|c| !c.is_empty())) else {
        return redirect(app.https, "/dead", Flash::error(None, "Name a queue and an error code."));
    };
    let outcome = async {
        let client = app.pool.get().await?;
        let mut total = 0i64;
        loop {
            let handled: i32 = client.query_one(statement, &[queue, code, &1000i32]).await?.get(0);
            total += i64::from(handled);
            if handled < 1000 {
                return Ok::<i64, DbError>(total);
            }
        }
    }
    .await;
    let flash = match outcome {
        Ok(n) => Flash::ok(format!("{n} dead jobs of queue {queue} with error code {code} {did}.")),
        Err(error) => refused(&error),
    };
    redirect(app.https, "/dead", flash)
}

async fn schedule_pause(state: State<App>, visit: Extension<Visit>, name: Path<String>, body: Bytes) -> Response {
    schedule_verb(state, visit, name, body, sql::SCHEDULE_PAUSE, "paused").await
}

async fn schedule_resume(state: State<App>, visit: Extension<Visit>, name: Path<String>, body: Bytes) -> Response {
    schedule_verb(state, visit, name, body, sql::SCHEDULE_RESUME, "resumed").await
}

async fn schedule_verb(
    State(app): State<App>,
    Extension(visit): Extension<Visit>,
    Path(name): Path<String>,
    body: Bytes,
    statement: &str,
    did: &str,
) -> Response {
    if let Err(response) = admit(&app, &visit, &body) {
        return response;
    }
    let outcome = async {
        let client = app.pool.get().await?;
        Ok::<bool, DbError>(client.query_one(statement, &[&name]).await?.get(0))
    }
    .await;
    let flash = match outcome {
        Ok(true) => Flash::ok(format!("Schedule {name} {did}.")),
        Ok(false) => Flash::error(
            None,
            format!("Schedule {name} was not {did}: it already was, or this role does not manage it."),
        ),
        Err(error) => refused(&error),
    };
    redirect(app.https, "/schedules", flash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn filters_from_the_form() {
        let f =
            Filters::from_query(&query(&[("status", "dead"), ("key", " "), ("older_than", "1 hour"), ("page", "3")]));
        assert_eq!(f.status.as_deref(), Some("dead"));
        assert_eq!(f.key, None, "a blank field is no filter");
        assert_eq!(f.page, 3);
        assert_eq!(f.status(), Ok(Some("dead")));
        assert_eq!(f.query_at(4), "status=dead&older_than=1+hour&page=4");
        assert_eq!(Filters::from_query(&query(&[("page", "0")])).page, 1);
        assert_eq!(Filters::from_query(&query(&[("page", "x")])).page, 1);
        assert_eq!(Filters::default().status(), Ok(None));
        assert_eq!(Filters { status: Some("succeeded".into()), ..Filters::default() }.status(), Ok(Some("succeeded")));
        assert!(Filters { status: Some("bogus".into()), ..Filters::default() }.status().is_err());
    }
}
