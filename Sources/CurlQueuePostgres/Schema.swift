/// The store's tables, created once per database by whichever daemon gets there first.
///
/// Every daemon runs `migrate` when it starts. The first statement takes a transaction-scoped
/// advisory lock, so two daemons starting on an empty database take turns: the first creates the
/// tables and records version 1 in `cq_migration`, the second then finds version 1 and does
/// nothing. (Without the lock, two concurrent `CREATE TABLE IF NOT EXISTS` can both miss the
/// table and one fails on the catalog's unique index.) The lock is released at commit, or by the
/// server when the connection dies.
enum Schema {
    static let version = 2

    /// `hashtext('curlqueue.schema')` is the lock's key: any 64-bit number would do, this one is
    /// readable in `pg_locks`.
    static let lock = "SELECT pg_advisory_xact_lock(hashtext('curlqueue.schema'))"

    static let createMigrationTable = """
        CREATE TABLE IF NOT EXISTS cq_migration (
          version    integer PRIMARY KEY,
          applied_at timestamptz NOT NULL DEFAULT now())
        """

    /// Version 1. Notes on the choices:
    /// - `state` is text with a CHECK rather than an enum type: adding a state later is one
    ///   ALTER of a constraint, and the text protocol reads it as is.
    /// - `cq_worker` is a logged table on purpose: crash recovery empties an UNLOGGED table,
    ///   which would make every worker look dead after a server restart and rescue every job.
    ///   fillfactor 50 keeps its heartbeat updates HOT.
    /// - Every index on `cq_job` but pruning's is partial on the states its query reads, so
    ///   finished rows (most of the table) cost those indexes nothing; no trigger runs per row.
    /// - `lease_owner` is set while a worker holds the job: running, or final with its handler
    ///   still to return. `lease_token` stays on a row its holder finished, so a finish retried
    ///   after a lost connection can tell "my earlier commit went through" from "my lease was
    ///   taken".
    static let v1 = """
        CREATE SEQUENCE cq_order;
        CREATE SEQUENCE cq_lease;
        CREATE TABLE cq_queue (
          name      text PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 127),
          paused_at timestamptz);
        CREATE TABLE cq_worker (
          id           text PRIMARY KEY,
          node         text NOT NULL,
          pid          integer NOT NULL,
          started_at   timestamptz NOT NULL DEFAULT now(),
          heartbeat_at timestamptz NOT NULL DEFAULT now(),
          expires_at   timestamptz NOT NULL
        ) WITH (fillfactor = 50);
        CREATE TABLE cq_job (
          id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          queue           text     NOT NULL CHECK (length(queue) BETWEEN 1 AND 127),
          kind            text     NOT NULL CHECK (length(kind) BETWEEN 1 AND 127),
          state           text     NOT NULL DEFAULT 'available'
                          CHECK (state IN ('available','scheduled','running','completed','failed','cancelled')),
          priority        smallint NOT NULL DEFAULT 1,
          order_key       bigint   NOT NULL,
          run_at          timestamptz NOT NULL DEFAULT now(),
          attempt         integer  NOT NULL DEFAULT 0,
          max_attempts    integer  NOT NULL DEFAULT 6 CHECK (max_attempts > 0),
          rescuable       boolean  NOT NULL DEFAULT true,
          dedup_key       text,
          spec            text     NOT NULL,
          lease_owner     text,
          lease_token     bigint,
          cancel_requested_at timestamptz,
          checkpoint      text,
          last_error      text,
          outcome         text,
          handled         boolean  NOT NULL DEFAULT false,
          created_at      timestamptz NOT NULL DEFAULT now(),
          attempted_at    timestamptz,
          finalized_at    timestamptz,
          CONSTRAINT cq_job_finalized CHECK ((state IN ('completed','failed','cancelled')) = (finalized_at IS NOT NULL)),
          CONSTRAINT cq_job_leased    CHECK (state <> 'running' OR lease_owner IS NOT NULL)
        ) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
                autovacuum_analyze_scale_factor = 0.02);
        CREATE INDEX cq_job_fetch     ON cq_job (queue, priority DESC, order_key) INCLUDE (kind) WHERE state = 'available';
        CREATE INDEX cq_job_due       ON cq_job (run_at) WHERE state = 'scheduled';
        CREATE INDEX cq_job_held      ON cq_job (lease_owner) WHERE lease_owner IS NOT NULL;
        CREATE INDEX cq_job_unhandled ON cq_job (queue, id) WHERE state IN ('completed','failed','cancelled') AND NOT handled AND lease_owner IS NULL;
        CREATE INDEX cq_job_dedup     ON cq_job (queue, dedup_key) WHERE state IN ('available','scheduled','running');
        CREATE INDEX cq_job_finalized ON cq_job (finalized_at) WHERE finalized_at IS NOT NULL;
        INSERT INTO cq_migration (version) VALUES (1);
        """

    /// Version 2: `handler_failures` counts the rescues of a recorded outcome whose worker
    /// died while its handler ran; at `max_attempts` the rescue fails the job, handled.
    static let v2 = """
        ALTER TABLE cq_job ADD COLUMN handler_failures integer NOT NULL DEFAULT 0;
        INSERT INTO cq_migration (version) VALUES (2);
        """

    /// Creates or upgrades the schema; safe to run from any number of daemons at once.
    static func migrate(_ connection: PGConnection) throws(PostgresStoreError) {
        try connection.query("BEGIN")
        do throws(PostgresStoreError) {
            try connection.query(lock)
            try connection.query(createMigrationTable)
            let current = try connection.query("SELECT coalesce(max(version), 0) AS version FROM cq_migration")
                .first?.decode("version", as: Int.self) ?? 0
            if current < 1 { try connection.query(v1) }
            if current < 2 { try connection.query(v2) }
            try connection.query("COMMIT")
        } catch {
            if !connection.isBroken { _ = try? connection.query("ROLLBACK") }
            throw error
        }
    }
}
