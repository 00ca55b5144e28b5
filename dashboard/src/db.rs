//! The database side: a small pool of connections as the role of the connection string, each
//! set up by session.sql, and every statement the dashboard runs, one file each in dashboard/sql.
//! Every statement reads the extension's views and functions, never its tables.

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::{Client, NoTls};

/// Every statement, read as SQL from its file. Each file's header names its parameters.
pub mod sql {
    pub const SESSION: &str = include_str!("../sql/session.sql");
    pub const ACCESS: &str = include_str!("../sql/access.sql");
    pub const OVERVIEW: &str = include_str!("../sql/overview.sql");
    pub const COUNTERS: &str = include_str!("../sql/counters.sql");
    pub const BACKLOG: &str = include_str!("../sql/backlog.sql");
    pub const QUEUE_FIGURES: &str = include_str!("../sql/queue_figures.sql");
    pub const HAS_RIGHT: &str = include_str!("../sql/has_right.sql");
    pub const QUEUE_SETTINGS: &str = include_str!("../sql/queue_settings.sql");
    pub const QUEUE_JOBS: &str = include_str!("../sql/queue_jobs.sql");
    pub const FINISHED_IDS: &str = include_str!("../sql/finished_ids.sql");
    pub const FINISHED_JOBS: &str = include_str!("../sql/finished_jobs.sql");
    pub const HELD_KEYS: &str = include_str!("../sql/held_keys.sql");
    pub const JOB: &str = include_str!("../sql/job.sql");
    pub const JOB_EVENTS: &str = include_str!("../sql/job_events.sql");
    pub const JOB_PARENTS: &str = include_str!("../sql/job_parents.sql");
    pub const SCHEDULES: &str = include_str!("../sql/schedules.sql");
    pub const FAILURE_COUNTS: &str = include_str!("../sql/failure_counts.sql");
    pub const METRICS: &str = include_str!("../sql/metrics.sql");
    pub const DATABASES: &str = include_str!("../sql/databases.sql");
    pub const PAUSE: &str = include_str!("../sql/pause.sql");
    pub const RETRY: &str = include_str!("../sql/retry.sql");
    pub const CANCEL: &str = include_str!("../sql/cancel.sql");
    pub const RETRY_DEAD: &str = include_str!("../sql/retry_dead.sql");
    pub const PURGE: &str = include_str!("../sql/purge.sql");
    pub const PURGE_DEAD: &str = include_str!("../sql/purge_dead.sql");
    pub const SCHEDULE_PAUSE: &str = include_str!("../sql/schedule_pause.sql");
    pub const SCHEDULE_RESUME: &str = include_str!("../sql/schedule_resume.sql");
}

/// Why a connection is refused in a database without the extension.
pub const NO_EXTENSION: &str = "the extension pg_jobqueue is not installed in this database";

/// At most this many connections: a page runs its statements one after another on one, and the
/// sampler holds one while it samples.
const MAX_CONNECTIONS: usize = 4;

pub struct Pool {
    dsn: String,
    idle: Mutex<Vec<Client>>,
    permits: Arc<Semaphore>,
}

/// A connection of the pool, back in the pool when dropped (unless it broke).
pub struct Conn {
    client: Option<Client>,
    pool: Arc<Pool>,
    _permit: OwnedSemaphorePermit,
}

impl std::ops::Deref for Conn {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("held until drop")
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("held until drop")
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            if !client.is_closed() {
                self.pool.idle.lock().unwrap().push(client);
            }
        }
    }
}

#[derive(Debug)]
pub enum DbError {
    /// The server could not be reached, or the extension is not installed there.
    Unavailable(String),
    /// A statement failed: its SQLSTATE (when the server sent one) and message.
    Statement { sqlstate: Option<String>, message: String },
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbError::Unavailable(message) => write!(f, "the database is unavailable: {message}"),
            DbError::Statement { sqlstate: Some(code), message } => write!(f, "{message} (SQLSTATE {code})"),
            DbError::Statement { sqlstate: None, message } => f.write_str(message),
        }
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(error: tokio_postgres::Error) -> DbError {
        match error.as_db_error() {
            Some(db) => {
                DbError::Statement { sqlstate: Some(db.code().code().to_owned()), message: db.message().to_owned() }
            }
            None if error.is_closed() => DbError::Unavailable(error.to_string()),
            None => {
                DbError::Statement { sqlstate: error.code().map(|c| c.code().to_owned()), message: error.to_string() }
            }
        }
    }
}

impl DbError {
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            DbError::Statement { sqlstate, .. } => sqlstate.as_deref(),
            DbError::Unavailable(_) => None,
        }
    }

    pub fn message(&self) -> String {
        match self {
            DbError::Statement { message, .. } => message.clone(),
            DbError::Unavailable(_) => self.to_string(),
        }
    }
}

impl Pool {
    pub fn new(dsn: &str) -> Arc<Pool> {
        Arc::new(Pool {
            dsn: dsn.to_owned(),
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        })
    }

    /// A connection: an idle one, or a new one set up by session.sql.
    pub async fn get(self: &Arc<Pool>) -> Result<Conn, DbError> {
        let permit = self.permits.clone().acquire_owned().await.expect("the semaphore is never closed");
        let idle = self.idle.lock().unwrap().pop();
        let client = match idle {
            Some(client) => client,
            None => self.connect().await?,
        };
        Ok(Conn { client: Some(client), pool: self.clone(), _permit: permit })
    }

    async fn connect(&self) -> Result<Client, DbError> {
        let (client, connection) =
            tokio_postgres::connect(&self.dsn, NoTls).await.map_err(|error| DbError::Unavailable(error.to_string()))?;
        tokio::spawn(async move {
            // It ends when the client is dropped or the server goes; the next use then reconnects.
            let _ = connection.await;
        });
        let set = client.query(sql::SESSION, &[]).await?;
        if set.is_empty() {
            return Err(DbError::Unavailable(NO_EXTENSION.into()));
        }
        Ok(client)
    }
}

/// What the connecting role may read and call (access.sql), asked once per page.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub jobs: bool,
    pub events: bool,
    pub schedules: bool,
    pub has_right: bool,
    pub parent_results: bool,
    pub failure_counts: bool,
    pub counters: bool,
    pub role: String,
}

pub async fn access(client: &Client) -> Result<Access, DbError> {
    let row = client.query_one(sql::ACCESS, &[]).await?;
    Ok(Access {
        jobs: row.get(0),
        events: row.get(1),
        schedules: row.get(2),
        has_right: row.get(3),
        parent_results: row.get(4),
        failure_counts: row.get(5),
        counters: row.get(6),
        role: row.get(7),
    })
}

/// Whether the database says the role has `manage` on the queue; false where it may not even ask.
pub async fn may_manage(client: &Client, access: &Access, queue: &str) -> Result<bool, DbError> {
    if !access.has_right {
        return Ok(false);
    }
    let row = client.query_one(sql::HAS_RIGHT, &[&queue, &"manage"]).await?;
    Ok(row.get::<_, Option<bool>>(0).unwrap_or(false))
}
