//! Settings (`pg_jobqueue.*`). The limits are PGC_SUSET: only a superuser (or a role granted
//! `SET ON PARAMETER`) can change them, so an ordinary client cannot switch a safety limit off.
//! The background reaper's settings are read from the configuration file (PGC_SIGHUP: a reload
//! applies them), except the list of databases, which fixes the workers at server start.

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, Ordering};

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;

pub static MAX_PAYLOAD_BYTES: GucSetting<i32> = GucSetting::<i32>::new(1024 * 1024);
pub static MAX_RESULT_BYTES: GucSetting<i32> = GucSetting::<i32>::new(1024 * 1024);
pub static MAX_PROGRESS_BYTES: GucSetting<i32> = GucSetting::<i32>::new(64 * 1024);
pub static MAX_LEASE_SECONDS: GucSetting<i32> = GucSetting::<i32>::new(24 * 60 * 60);
pub static MAX_WAIT_SECONDS: GucSetting<i32> = GucSetting::<i32>::new(5 * 60);
pub static WAIT_RECHECK_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub static MAX_BATCH_SIZE: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub static DEPENDENTS_PER_JOB: GucSetting<i32> = GucSetting::<i32>::new(100);
pub static MAX_RETRY_DELAY_SECONDS: GucSetting<i32> = GucSetting::<i32>::new(365 * 24 * 60 * 60);
pub static INLINE_REAP_MAX: GucSetting<i32> = GucSetting::<i32>::new(10);
pub static INLINE_REAP_INTERVAL_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);

pub static ASYNC_CLAIMS: GucSetting<bool> = GucSetting::<bool>::new(true);
pub static CLAIM_FRONT: GucSetting<bool> = GucSetting::<bool>::new(true);
pub static STATS_ENABLED: GucSetting<bool> = GucSetting::<bool>::new(true);
pub static STATS_MAX_QUEUES: GucSetting<i32> = GucSetting::<i32>::new(256);

pub static REAPER_ENABLED: GucSetting<bool> = GucSetting::<bool>::new(true);
pub static REAPER_INTERVAL_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub static REAPER_MAX_JOBS: GucSetting<i32> = GucSetting::<i32>::new(10000);
pub static PRUNE_INTERVAL_S: GucSetting<i32> = GucSetting::<i32>::new(60);
pub static REAPER_DATABASES: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"*"));
pub static MAX_WORKERS: GucSetting<i32> = GucSetting::<i32>::new(8);
/// The most `max_workers` may be: the background worker's shared memory has a slot for each.
pub const MOST_WORKERS: usize = 128;
pub static REAPER_ROLE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// True in every process of a server that preloaded the library (set in the postmaster, inherited).
static PRELOADED: AtomicBool = AtomicBool::new(false);

/// Whether the library was preloaded (`shared_preload_libraries`): only then are there shared
/// memory (counters, wake-ups, listener counts) and the background reaper.
pub fn preloaded() -> bool {
    PRELOADED.load(Ordering::Relaxed)
}

pub fn init() {
    // SAFETY: a flag PostgreSQL sets while it loads shared_preload_libraries.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        PRELOADED.store(true, Ordering::Relaxed);
    }
    GucRegistry::define_int_guc(
        c"pg_jobqueue.max_payload_bytes",
        c"Largest job payload accepted by jq_enqueue and jq_enqueue_batch.",
        c"Measured as the size of the jsonb value before compression. Larger payloads are refused.",
        &MAX_PAYLOAD_BYTES,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.max_result_bytes",
        c"Largest result accepted by jq_complete and jq_complete_batch.",
        c"Measured as the size of the jsonb value before compression. A completion with a larger result is refused and changes nothing.",
        &MAX_RESULT_BYTES,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.max_progress_bytes",
        c"Largest progress report accepted by jq_progress.",
        c"Measured as the size of the jsonb value before compression. Progress lives in the table of live jobs, which claims read, so it is kept small.",
        &MAX_PROGRESS_BYTES,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.max_lease",
        c"Longest lease jq_claim grants or jq_heartbeat extends to in one call.",
        c"Longer requested leases are refused; long jobs should heartbeat instead.",
        &MAX_LEASE_SECONDS,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.max_wait",
        c"Longest wait a jq_claim accepts.",
        c"A waiting claim occupies its connection (and, behind a pooler, a server connection) while it waits.",
        &MAX_WAIT_SECONDS,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.wait_recheck",
        c"How often a waiting jq_claim looks for work on its own, between wake-ups.",
        c"Enqueues wake waiting claims at once (with the library preloaded); this finds what no wake-up announces: an unpaused queue, a freed slot of a limited queue, the end of a retry's backoff. Without preload a waiting claim polls at most every 200 ms.",
        &WAIT_RECHECK_MS,
        10,
        3_600_000,
        GucContext::Suset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.max_batch_size",
        c"Largest batch jq_claim, jq_enqueue_batch and jq_complete_batch accept.",
        c"Larger batches are refused: one statement should stay short.",
        &MAX_BATCH_SIZE,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.dependents_per_job",
        c"Most dependent jobs a completion, failure or cancel releases or cancels itself, per job it ends.",
        c"The reap pass releases or cancels the rest, so that no call's cost grows with its job's dependents.",
        &DEPENDENTS_PER_JOB,
        0,
        1_000_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.max_retry_delay",
        c"Longest retry_in jq_fail accepts.",
        c"A longer delay is refused. Backoff is bounded by each queue's backoff_cap instead.",
        &MAX_RETRY_DELAY_SECONDS,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.inline_reap_max",
        c"Most expired leases (and expired jobs) a claim reaps in its share of the maintenance, where no background worker serves the database.",
        c"Where no worker serves the database, claims reap, expire, tick schedules and prune, each pass once per interval for the whole database. 0 turns it off.",
        &INLINE_REAP_MAX,
        0,
        10000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.inline_reap_interval",
        c"Least time between two reap passes made by claims, where no background worker serves the database.",
        c"Each session asks at most this often whether a pass is due; one session takes it for the whole database.",
        &INLINE_REAP_INTERVAL_MS,
        0,
        3_600_000,
        GucContext::Suset,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_bool_guc(
        c"pg_jobqueue.async_claims",
        c"Whether a transaction that only claims or heartbeats commits without waiting for its WAL flush.",
        c"A claim or heartbeat that a crash loses is harmless: the job runs again, and its lost token is never handed out again. Any other write in the transaction keeps the commit durable.",
        &ASYNC_CLAIMS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pg_jobqueue.claim_front",
        c"Whether this session's claims start at their queue's claim front.",
        c"Off: they walk the claim index from the queue's start and never move the front; everything that makes a job pending still lowers it. For measuring what the front saves.",
        &CLAIM_FRONT,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pg_jobqueue.stats",
        c"Whether committed claims, completions, failures and the rest are counted (needs shared_preload_libraries).",
        c"The counters and latency histograms of jq_metrics() and jq_queue_counters.",
        &STATS_ENABLED,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"pg_jobqueue.reaper_enabled",
        c"Whether the background reaper reaps (it needs shared_preload_libraries).",
        c"",
        &REAPER_ENABLED,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.reaper_interval",
        c"Time between two passes of the background reaper.",
        c"",
        &REAPER_INTERVAL_MS,
        10,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.reaper_max_jobs",
        c"Most expired leases the background reaper reaps in one pass (one transaction).",
        c"",
        &REAPER_MAX_JOBS,
        1,
        1_000_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.prune_interval",
        c"Time between two retention passes (jq_prune) of the background reaper; 0 turns them off.",
        c"",
        &PRUNE_INTERVAL_S,
        0,
        86_400,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.max_workers",
        c"Most databases the background worker serves at once, one worker process each.",
        c"A database left unserved for this bound is logged once; claims maintain it meanwhile (jq_maintenance).",
        &MAX_WORKERS,
        1,
        MOST_WORKERS as i32,
        GucContext::Sighup,
        GucFlags::default(),
    );
    // A PGC_POSTMASTER setting may only be defined while the library is being preloaded.
    if preloaded() {
        GucRegistry::define_string_guc(
            c"pg_jobqueue.reaper_databases",
            c"Databases the background worker may serve, comma-separated; '*': every database; empty: no worker.",
            c"Of these, it serves each one that has the extension (one worker each), from within a second of CREATE EXTENSION.",
            &REAPER_DATABASES,
            GucContext::Postmaster,
            GucFlags::default(),
        );
        GucRegistry::define_string_guc(
            c"pg_jobqueue.reaper_role",
            c"Role the background reaper connects as; empty: the bootstrap superuser connects and every pass runs as the extension's owner in that database.",
            c"A role set here needs LOGIN and EXECUTE on jq_reap and jq_prune; the reaper logs once and retries slowly while it lacks them.",
            &REAPER_ROLE,
            GucContext::Postmaster,
            GucFlags::default(),
        );
        GucRegistry::define_int_guc(
            c"pg_jobqueue.stats_max_queues",
            c"Queues with counters of their own in shared memory; any further queue is counted under queue \"*\".",
            c"About 20 kB of shared memory each.",
            &STATS_MAX_QUEUES,
            1,
            100_000,
            GucContext::Postmaster,
            GucFlags::default(),
        );
    }
    // SAFETY: a NUL-terminated prefix; PostgreSQL copies it.
    unsafe { pg_sys::MarkGUCPrefixReserved(c"pg_jobqueue".as_ptr()) };
}

/// The role named in `pg_jobqueue.reaper_role`, if any.
pub fn reaper_role() -> Option<String> {
    REAPER_ROLE.get().map(|s| s.to_string_lossy().trim().to_owned()).filter(|role| !role.is_empty())
}

/// The databases named in `pg_jobqueue.reaper_databases` ('*' stands for every database).
pub fn reaper_databases() -> Vec<String> {
    let list = REAPER_DATABASES.get().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    list.split(',').map(str::trim).filter(|db| !db.is_empty()).map(str::to_owned).collect()
}

/// The server's settings that maintenance runs under, whoever runs it (the worker, a claim's
/// share, `jq_reap()`, `jq_prune()`): what a pass reads and writes must not depend on the session
/// that happened to trigger it (guide, "Maintenance"). Zone names, dates and intervals as text, and
/// triggers that fire.
const MAINTENANCE_SETTINGS: [(&std::ffi::CStr, &std::ffi::CStr); 6] = [
    (c"TimeZone", c"UTC"),
    (c"timezone_abbreviations", c"Default"),
    (c"DateStyle", c"ISO, MDY"),
    (c"IntervalStyle", c"postgres"),
    (c"extra_float_digits", c"1"),
    (c"session_replication_role", c"origin"),
];

/// Runs `pass` with `MAINTENANCE_SETTINGS` in force, as a function's SET clause would put them,
/// and the session's own back afterwards. A setting that already has its value is left alone (the
/// abbreviations are read from a file each time they are set). If `pass` raises an error, the
/// (sub)transaction's rollback puts the session's settings back.
pub fn with_maintenance_settings<T>(pass: impl FnOnce() -> T) -> T {
    // SAFETY: a new GUC nesting level, closed below or by the rollback of an error; each setting is
    // a known server setting given a valid value, as PostgreSQL's own function SET clauses do.
    let level = unsafe { pg_sys::NewGUCNestLevel() };
    for (name, value) in MAINTENANCE_SETTINGS {
        // SAFETY: reads a known setting's current value as a NUL-terminated string.
        let current = unsafe { pg_sys::GetConfigOption(name.as_ptr(), true, false) };
        // SAFETY: as above; a non-null value is NUL-terminated.
        if !current.is_null() && unsafe { std::ffi::CStr::from_ptr(current) } == value {
            continue;
        }
        // SAFETY: see above. PGC_SUSET, as a superuser's SET clause: session_replication_role is
        // a superuser's setting, which maintenance puts back to its default.
        unsafe {
            pg_sys::set_config_option(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_SUSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            )
        };
    }
    let result = pass();
    // SAFETY: closes the level opened above, restoring what it saved.
    unsafe { pg_sys::AtEOXact_GUC(true, level) };
    result
}
