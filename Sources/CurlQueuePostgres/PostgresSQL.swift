/// The store's statements. Every write to a claimed job names the job's `lease_token` (the
/// fencing token), so a worker whose lease was taken over can never change the job again.
enum SQL {
    /// The final states, as SQL.
    static let final = "('completed','failed','cancelled')"

    /// Claim of available jobs: one statement. The MATERIALIZED CTE is an optimization fence:
    /// without it the planner may run the LIMITed, locking subquery once per outer row (a
    /// nested loop), locking and updating more rows than asked (Oban and pg-boss both hit this).
    /// `FOR NO KEY UPDATE` is the weakest lock an UPDATE that keeps the key needs; `SKIP LOCKED`
    /// lets concurrent claimers pass each other's rows instead of waiting on them. `attempt`
    /// counts claims, so a job that kills its worker every time still runs out of attempts; the
    /// token comes from a sequence, so no two claims of any job ever share one.
    /// $1 queue, $2 kinds (text[]), $3 limit, $4 worker.
    static let claim = """
        WITH locked AS MATERIALIZED (
          SELECT id FROM cq_job
          WHERE queue = $1 AND state = 'available' AND kind = ANY($2::text[])
            AND NOT EXISTS (SELECT 1 FROM cq_queue WHERE name = $1 AND paused_at IS NOT NULL)
          ORDER BY priority DESC, order_key
          LIMIT $3
          FOR NO KEY UPDATE SKIP LOCKED)
        UPDATE cq_job j
        SET state = 'running', attempt = j.attempt + 1, attempted_at = now(),
            lease_owner = $4, lease_token = nextval('cq_lease')
        FROM locked WHERE j.id = locked.id
        RETURNING \(columns(prefix: "j.")), j.order_key
        """

    /// Claim of recorded outcomes whose handler never returned (their worker died or gave them
    /// back): only the handler is to run. Same shape as `claim`. $1 queue, $2 kinds, $3 limit, $4 worker.
    static let claimUnhandled = """
        WITH locked AS MATERIALIZED (
          SELECT id FROM cq_job
          WHERE queue = $1 AND state IN \(final) AND NOT handled AND lease_owner IS NULL AND kind = ANY($2::text[])
          ORDER BY id
          LIMIT $3
          FOR NO KEY UPDATE SKIP LOCKED)
        UPDATE cq_job j SET lease_owner = $4, lease_token = nextval('cq_lease')
        FROM locked WHERE j.id = locked.id
        RETURNING \(columns(prefix: "j.")), j.order_key
        """

    /// What `JobRecord` is made of, then the token: read by name (`PostgresJobRow`), in any order.
    static func columns(prefix p: String = "") -> String {
        """
        \(p)id, \(p)queue, \(p)spec, \(p)state, \(p)attempt, extract(epoch from \(p)run_at) AS run_at, \
        extract(epoch from \(p)created_at) AS created_at, extract(epoch from \(p)finalized_at) AS finalized_at, \(p)lease_owner, \
        \(p)last_error, \(p)outcome, \(p)handled, \(p)checkpoint, \(p)cancel_requested_at IS NOT NULL AS cancel_requested, \
        \(p)lease_token
        """
    }

    /// $1 queue, $2 kind, $3 priority, $4 order sign (1 FIFO, -1 LIFO), $5 max attempts,
    /// $6 dedup key, $7 spec, $8 delay in seconds (NULL: now), $9 rescuable.
    static let insert = """
        INSERT INTO cq_job (queue, kind, priority, order_key, max_attempts, dedup_key, spec, state, run_at, rescuable)
        VALUES ($1, $2, $3, $4::int * nextval('cq_order'), $5, $6, $7,
                CASE WHEN $8::float8 > 0 THEN 'scheduled' ELSE 'available' END,
                now() + make_interval(secs => greatest(0, coalesce($8::float8, 0))), $9)
        RETURNING id
        """

    /// Equal enqueues take turns on their key for the rest of their transaction, so "at most
    /// one pending job per key and queue" holds under concurrent enqueues without a unique
    /// index (which `.allow` jobs, equal on purpose, would break). $1 queue, $2 key.
    static let lockKey = "SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(10) || $2, 0))"

    /// An equal job that is pending or running. $1 queue, $2 key.
    static let existing = """
        SELECT id FROM cq_job WHERE queue = $1 AND dedup_key = $2 AND state IN ('available','scheduled','running')
        ORDER BY id LIMIT 1
        """

    /// Cancels pending jobs, asks running ones to cancel. $1 queue (NULL: any), $2 key (NULL:
    /// any), $3 id (NULL: any), $4 reason. Columns: id, result ('cancelled' or 'requested').
    static let cancel = """
        WITH pending AS (
          UPDATE cq_job SET state = 'cancelled', finalized_at = now(), handled = true, last_error = $4
          WHERE state IN ('available','scheduled')
            AND ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR dedup_key = $2) AND ($3::bigint IS NULL OR id = $3)
          RETURNING id),
        running AS (
          UPDATE cq_job SET cancel_requested_at = coalesce(cancel_requested_at, now()), last_error = $4
          WHERE state = 'running'
            AND ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR dedup_key = $2) AND ($3::bigint IS NULL OR id = $3)
          RETURNING id)
        SELECT id, 'cancelled' AS result FROM pending UNION ALL SELECT id, 'requested' FROM running
        """

    /// One wakeup per transaction and queue, never per row (a trigger per row would take the
    /// notification queue's global lock once per inserted row).
    static let notify = "SELECT pg_notify('cq_insert', $1)"

    /// $1 worker, $2 node, $3 pid, $4 ttl seconds.
    static let registerWorker = """
        INSERT INTO cq_worker (id, node, pid, expires_at) VALUES ($1, $2, $3, now() + make_interval(secs => $4::float8))
        ON CONFLICT (id) DO UPDATE SET node = $2, pid = $3, heartbeat_at = now(), expires_at = now() + make_interval(secs => $4::float8)
        """

    /// The worker's heartbeat: renews its lease only while it has not expired (an expired
    /// worker stays dead, so the rescuer and the worker agree on who holds what), records the
    /// checkpoints of jobs it still holds, and returns which jobs it holds and which of them
    /// were asked to cancel. $1 worker, $2 ttl seconds, $3 job ids, $4 checkpoints (JSON).
    static let heartbeat = """
        WITH me AS (
          UPDATE cq_worker SET heartbeat_at = now(), expires_at = now() + make_interval(secs => $2::float8)
          WHERE id = $1 AND expires_at > now() RETURNING id),
        cp AS (
          UPDATE cq_job j SET checkpoint = c.cp
          FROM unnest($3::bigint[], $4::text[]) AS c(id, cp)
          WHERE j.id = c.id AND j.lease_owner = $1 AND j.state = 'running' AND EXISTS (SELECT 1 FROM me))
        SELECT (SELECT count(*) FROM me) AS alive,
               array(SELECT id FROM cq_job WHERE lease_owner = $1 ORDER BY id) AS held,
               array(SELECT id FROM cq_job WHERE lease_owner = $1 AND state = 'running'
                                             AND cancel_requested_at IS NOT NULL ORDER BY id) AS cancel_requested
        """

    /// Fenced outcome. $1 id, $2 token, $3 final state, $4 outcome (JSON), $5 error text.
    static let finish = """
        UPDATE cq_job SET state = $3, finalized_at = now(), outcome = $4, last_error = $5, handled = false, checkpoint = NULL
        WHERE id = $1 AND lease_token = $2 AND state = 'running' RETURNING id
        """

    /// Fenced retry: scheduled `$4` seconds from the database's now() while attempts remain,
    /// else failed with the outcome `$5`. $1 id, $2 token, $3 reason, $4 delay, $5 failed outcome.
    static let retry = """
        UPDATE cq_job SET
          state        = CASE WHEN attempt < max_attempts THEN 'scheduled' ELSE 'failed' END,
          run_at       = now() + make_interval(secs => greatest(0, $4::float8)),
          finalized_at = CASE WHEN attempt < max_attempts THEN NULL ELSE now() END,
          outcome      = CASE WHEN attempt < max_attempts THEN NULL ELSE $5 END,
          lease_owner  = CASE WHEN attempt < max_attempts THEN NULL ELSE lease_owner END,
          handled      = false, last_error = $3
        WHERE id = $1 AND lease_token = $2 AND state = 'running' RETURNING id
        """

    /// After a fenced write, retried because its connection broke, found no row: whether this
    /// token's own earlier write is what moved the job on. Only a fenced write leaves its token
    /// on a job it took out of `running`: a rescue and a release clear it, a claim replaces it.
    static let wroteWithToken = "SELECT state <> 'running' AS moved_on FROM cq_job WHERE id = $1 AND lease_token = $2"

    /// Fenced: the handler returned. $1 id, $2 token.
    static let markHandled = """
        UPDATE cq_job SET handled = true, lease_owner = NULL
        WHERE id = $1 AND lease_token = $2 AND state IN \(final) RETURNING id
        """

    static let handledWithToken = "SELECT handled AS moved_on FROM cq_job WHERE id = $1 AND lease_token = $2"

    /// Graceful stop: running jobs go back without spending an attempt (their checkpoint kept),
    /// or fail when they may not be repeated; held unhandled outcomes are left for another
    /// claim. $1 ids, $2 tokens, $3 the failed outcome, $4 its reason.
    static let release = """
        UPDATE cq_job j SET
          state        = CASE WHEN j.state <> 'running' THEN j.state WHEN j.rescuable THEN 'available' ELSE 'failed' END,
          attempt      = CASE WHEN j.state = 'running' AND j.rescuable THEN greatest(0, j.attempt - 1) ELSE j.attempt END,
          finalized_at = CASE WHEN j.state = 'running' AND NOT j.rescuable THEN now() ELSE j.finalized_at END,
          outcome      = CASE WHEN j.state = 'running' AND NOT j.rescuable THEN $3 ELSE j.outcome END,
          last_error   = CASE WHEN j.state = 'running' AND NOT j.rescuable THEN $4 ELSE j.last_error END,
          lease_owner = NULL, lease_token = NULL
        FROM unnest($1::bigint[], $2::bigint[]) AS r(id, token)
        WHERE j.id = r.id AND j.lease_token = r.token AND j.lease_owner IS NOT NULL
        RETURNING j.queue
        """

    /// Jobs the store says a worker holds but the worker does not run (a claim whose reply was
    /// lost): given back as `release` does, fenced by the owner. $1 ids, $2 worker.
    static let releaseHeld = """
        UPDATE cq_job j SET
          state       = CASE WHEN j.state = 'running' THEN 'available' ELSE j.state END,
          attempt     = CASE WHEN j.state = 'running' THEN greatest(0, j.attempt - 1) ELSE j.attempt END,
          lease_owner = NULL, lease_token = NULL, cancel_requested_at = NULL
        WHERE j.id = ANY($1::bigint[]) AND j.lease_owner = $2
        RETURNING j.queue
        """

    /// A worker's lease ends now (unregister): the rescue then takes what it held.
    static let expireWorker = "UPDATE cq_worker SET expires_at = now() - interval '1 microsecond' WHERE id = $1"
    static let deleteWorker = "DELETE FROM cq_worker WHERE id = $1"

    /// Rescue: jobs held by workers whose lease expired (or that are gone). A running one goes
    /// back to available (its attempt counted), or fails when its attempts are spent or it may
    /// not be repeated (a POST without an idempotency key), with a failed outcome for its
    /// handler to see; a held, unhandled outcome is left for another claim, and counted in
    /// `handler_failures`: at `max_attempts` it is failed and handled instead (its handler
    /// killed its worker each time). State and owner are checked again under the row lock, so
    /// the rescue never overwrites a finish that won the race. $1 the outcome of a job out of
    /// attempts, $2 of one that may not be repeated, $3 of one whose handler failed, $4 its reason.
    static let rescue = """
        WITH orphan AS (
          SELECT j.id FROM cq_job j
          WHERE j.lease_owner IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM cq_worker w WHERE w.id = j.lease_owner AND w.expires_at >= now())
          ORDER BY j.id LIMIT 1000 FOR NO KEY UPDATE OF j SKIP LOCKED),
        before AS (
          SELECT j.id, j.state, j.lease_owner,
                 j.state <> 'running' AND j.handler_failures + 1 >= j.max_attempts AS handler_spent,
                 CASE WHEN j.state <> 'running' AND j.handler_failures + 1 >= j.max_attempts THEN 'failed'
                      WHEN j.state <> 'running' THEN j.state
                      WHEN NOT j.rescuable OR j.attempt >= j.max_attempts THEN 'failed' ELSE 'available' END AS next
          FROM cq_job j JOIN orphan USING (id))
        UPDATE cq_job j SET
          state        = b.next,
          finalized_at = CASE WHEN b.state = 'running' AND b.next = 'failed' THEN now() ELSE j.finalized_at END,
          handled      = CASE WHEN b.state = 'running' THEN false ELSE b.handler_spent OR j.handled END,
          handler_failures = CASE WHEN b.state <> 'running' THEN j.handler_failures + 1 ELSE j.handler_failures END,
          outcome      = CASE WHEN b.handler_spent THEN $3
                              WHEN b.state <> 'running' THEN j.outcome WHEN b.next = 'available' THEN NULL
                              WHEN NOT j.rescuable THEN $2 ELSE $1 END,
          last_error   = CASE WHEN b.handler_spent THEN $4
                              WHEN b.state <> 'running' THEN j.last_error
                              WHEN NOT j.rescuable THEN 'interrupted after it may have been sent'
                              WHEN b.next = 'failed' THEN 'interrupted: its worker died, no attempts left'
                              ELSE 'interrupted: its worker died' END,
          lease_owner  = NULL, lease_token = NULL
        FROM before b WHERE j.id = b.id AND j.lease_owner = b.lease_owner
        RETURNING j.id, b.state AS state_before, j.state AS state_after, b.lease_owner, j.queue, b.handler_spent
        """

    /// Due scheduled jobs become available. $1 queue (NULL: every queue).
    static let promote = """
        UPDATE cq_job SET state = 'available'
        WHERE id IN (SELECT id FROM cq_job WHERE state = 'scheduled' AND run_at <= now() AND ($1::text IS NULL OR queue = $1)
                     ORDER BY run_at LIMIT 1000 FOR NO KEY UPDATE SKIP LOCKED)
        RETURNING queue
        """

    /// Final, handled jobs past their retention, 1,000 at a time. $1 retention of completed and
    /// cancelled jobs in seconds, $2 of failed ones. Pending jobs are never pruned.
    static let prune = """
        DELETE FROM cq_job WHERE id IN (
          SELECT id FROM cq_job
          WHERE finalized_at < now() - make_interval(secs => (CASE WHEN state = 'failed' THEN $2 ELSE $1 END)::float8)
            AND handled
          ORDER BY finalized_at LIMIT 1000)
        RETURNING 1
        """

    static let pruneWorkers = """
        DELETE FROM cq_worker WHERE expires_at < now() - interval '1 hour'
          AND NOT EXISTS (SELECT 1 FROM cq_job WHERE lease_owner = cq_worker.id)
        """

    /// $1 paused, $2 queue.
    static let setPaused = """
        INSERT INTO cq_queue (name, paused_at) VALUES ($2, CASE WHEN $1::bool THEN now() END)
        ON CONFLICT (name) DO UPDATE SET paused_at = CASE WHEN $1::bool THEN coalesce(cq_queue.paused_at, now()) END
        """

    /// $1 queue, $2 states (text[]), $3 ids (bigint[]), $4 limit; NULL: any.
    static let jobs = """
        SELECT \(columns()) FROM cq_job
        WHERE ($1::text IS NULL OR queue = $1) AND ($2::text[] IS NULL OR state = ANY($2::text[]))
          AND ($3::bigint[] IS NULL OR id = ANY($3::bigint[]))
        ORDER BY id DESC LIMIT $4
        """

    /// Final, handled jobs of queue $1 removed now: those in $2, or every one when $2 is null.
    static let removeFinished = """
        DELETE FROM cq_job WHERE queue = $1 AND finalized_at IS NOT NULL AND handled
          AND ($2::bigint[] IS NULL OR id = ANY($2::bigint[]))
        RETURNING id
        """

    static let health = """
        SELECT (SELECT (extract(epoch FROM min(run_at)) * 1000)::bigint FROM cq_job WHERE queue = $1 AND state = 'available')
                 AS oldest_available,
               (SELECT count(*) FROM cq_worker WHERE expires_at > now()) AS workers_alive,
               (extract(epoch FROM now()) * 1000)::bigint AS now
        """
    static let counts = "SELECT state, count(*) AS count FROM cq_job WHERE ($1::text IS NULL OR queue = $1) GROUP BY state"
}
