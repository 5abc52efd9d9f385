/// The store's schema, version 2, in `PRAGMA user_version`: `create` is version 1, then each
/// of `upgrades` in turn (a version-1 file is upgraded when it is opened).
///
/// STRICT tables; partial indexes, each covering only the rows one query reads (the waiting
/// jobs, the due ones, the held ones, the prunable ones), so finished rows cost the hot
/// queries nothing; no triggers. Times are Unix milliseconds.
enum SQLiteSchema {
    static let version: Int64 = 2

    static let create = """
        CREATE TABLE IF NOT EXISTS cq_queue (
          name    TEXT PRIMARY KEY,
          paused  INTEGER NOT NULL DEFAULT 0
        ) STRICT;
        CREATE TABLE IF NOT EXISTS cq_worker (
          id          TEXT PRIMARY KEY,
          node        TEXT NOT NULL,
          pid         INTEGER NOT NULL,
          started_at  INTEGER NOT NULL,
          expires_at  INTEGER NOT NULL
        ) STRICT;
        CREATE TABLE IF NOT EXISTS cq_job (
          id                INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: a stale lease never names a new job
          queue             TEXT    NOT NULL,
          kind              TEXT    NOT NULL,
          state             TEXT    NOT NULL
                            CHECK (state IN ('scheduled','available','running','completed','failed','cancelled')),
          priority          INTEGER NOT NULL,
          order_key         INTEGER NOT NULL,                    -- +id FIFO, -id LIFO
          run_at            INTEGER NOT NULL,
          attempt           INTEGER NOT NULL DEFAULT 0,
          max_attempts      INTEGER NOT NULL,
          dedup_key         TEXT    NOT NULL,
          unique_key        TEXT,                                -- dedup_key unless the policy is .allow
          rescuable         INTEGER NOT NULL,
          spec              BLOB    NOT NULL,                    -- JobSpec, JSON
          lease_owner       TEXT,                                -- the worker holding it
          lease_token       INTEGER NOT NULL DEFAULT 0,          -- fencing token, +1 per claim
          cancel_requested  INTEGER NOT NULL DEFAULT 0,
          checkpoint        BLOB,
          last_error        TEXT,
          outcome           BLOB,                                -- JobOutcome, JSON
          handled           INTEGER NOT NULL DEFAULT 0,
          created_at        INTEGER NOT NULL,
          finalized_at      INTEGER,
          CHECK ((state IN ('completed','failed','cancelled')) = (finalized_at IS NOT NULL)),
          CHECK (state <> 'running' OR lease_owner IS NOT NULL)
        ) STRICT;
        CREATE INDEX IF NOT EXISTS cq_job_fetch ON cq_job (queue, priority DESC, order_key) WHERE state = 'available';
        CREATE INDEX IF NOT EXISTS cq_job_due ON cq_job (run_at) WHERE state = 'scheduled';
        CREATE INDEX IF NOT EXISTS cq_job_owner ON cq_job (lease_owner) WHERE lease_owner IS NOT NULL;
        CREATE UNIQUE INDEX IF NOT EXISTS cq_job_pending_unique ON cq_job (queue, unique_key)
          WHERE unique_key IS NOT NULL AND state IN ('available','scheduled');
        CREATE INDEX IF NOT EXISTS cq_job_live_key ON cq_job (queue, dedup_key)
          WHERE state IN ('available','scheduled','running');
        CREATE INDEX IF NOT EXISTS cq_job_unhandled ON cq_job (queue) WHERE handled = 0 AND finalized_at IS NOT NULL;
        CREATE INDEX IF NOT EXISTS cq_job_prunable ON cq_job (finalized_at) WHERE handled = 1;
        """

    /// Version 2: `handler_failures` counts the rescues of a recorded outcome whose worker died
    /// while its handler ran; at `max_attempts` the job is failed and handled ("handlerFailed").
    static let upgrades: [(version: Int64, sql: String)] = [
        (2, "ALTER TABLE cq_job ADD COLUMN handler_failures INTEGER NOT NULL DEFAULT 0")
    ]
}
