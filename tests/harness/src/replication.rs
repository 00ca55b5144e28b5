//! A streaming standby of a test server, for failover tests: `pg_basebackup` of a running
//! primary, asynchronous streaming, and the steps of a failover (cut the stream, stop the primary
//! as a crash would, promote the standby).

use std::process::Command;
use std::time::Duration;

use crate::{as_postgres, free_port, is_root, wait_until, Client, Cluster};

impl Cluster {
    /// A standby of this server, streaming asynchronously from it, in hot standby (it answers
    /// reads), started and caught up.
    pub fn start_standby(&self) -> Cluster {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("jq-harness-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        if is_root() {
            let chown = Command::new("chown").arg("postgres:").arg(&dir).status().expect("chown runs");
            assert!(chown.success(), "the standby's directory could not be given to postgres");
        }
        let backup = as_postgres(&self.version, "pg_basebackup")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-X", "stream", "-R", "-D"])
            .arg(&dir)
            .env_remove("RUST_BACKTRACE")
            .output()
            .expect("pg_basebackup runs");
        // Its warnings about the primary's socket files, which live in its data directory, are noise.
        assert!(backup.status.success(), "pg_basebackup failed: {}", String::from_utf8_lossy(&backup.stderr));
        // The primary's log came along with its data directory.
        let _ = std::fs::remove_file(dir.join("server.log"));
        // The copied postgresql.conf names the primary's port and socket directory; later lines win.
        let conf = dir.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).unwrap();
        text.push_str(&format!("\nport = {port}\nunix_socket_directories = '{}'\n", dir.display()));
        std::fs::write(&conf, text).unwrap();
        // pg.sh skips initdb for a directory that holds a cluster, as after a halt.
        let standby = Cluster { dir, port, stopped: false, version: self.version.clone() };
        standby.start_again();
        standby.wait_caught_up(self);
        standby
    }

    /// Waits until this standby has replayed everything `primary` has written so far.
    pub fn wait_caught_up(&self, primary: &Cluster) {
        let target: String = primary.connect().query_one("SELECT pg_current_wal_lsn()::text", &[]).unwrap().get(0);
        let mut standby = self.connect();
        wait_until("the standby replays what the primary wrote", || {
            standby
                .query_one("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", &[&target])
                .unwrap()
                .get::<_, bool>(0)
        });
    }

    /// Cuts this standby off its primary: no more WAL arrives, and what arrived is replayed.
    /// The primary goes on serving; nothing it commits from now on reaches the standby.
    pub fn cut_streaming(&self) {
        let mut standby = self.connect();
        standby.batch_execute("ALTER SYSTEM SET primary_conninfo = ''").unwrap();
        standby.batch_execute("SELECT pg_reload_conf()").unwrap();
        wait_until("the standby's WAL receiver stops", || {
            standby.query_one("SELECT count(*) FROM pg_stat_wal_receiver", &[]).unwrap().get::<_, i64>(0) == 0
        });
        wait_until("the standby replays what it received", || {
            standby
                .query_one(
                    "SELECT pg_last_wal_receive_lsn() IS NULL OR pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()",
                    &[],
                )
                .unwrap()
                .get::<_, bool>(0)
        });
    }

    /// Promotes this standby to a primary, and waits until it takes writes.
    pub fn promote(&self) {
        let promoted = as_postgres(&self.version, "pg_ctl")
            .args(["promote", "-w", "-t", "60", "-D"])
            .arg(&self.dir)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("pg_ctl promote runs");
        assert!(promoted.success(), "the standby was not promoted (see {}/server.log)", self.dir.display());
        let mut client = self.connect();
        wait_until("the promoted standby takes writes", || {
            !client.query_one("SELECT pg_is_in_recovery()", &[]).unwrap().get::<_, bool>(0)
        });
    }

    /// Waits a moment for connections while a server starts.
    pub fn connect_retrying(&self) -> Client {
        let mut client = None;
        wait_until("the server takes connections", || {
            client = self.try_connect();
            if client.is_none() {
                std::thread::sleep(Duration::from_millis(100));
            }
            client.is_some()
        });
        client.unwrap()
    }
}
