#!/usr/bin/env python3
"""The durable queue's costs, on this machine, in one run (docs/performance.md, "Durable queues").

    scripts/bench --durable [--jobs 100000] [--drain 2000] [--single 2000] [--requests 10000] [--large 8] [--large-mib 256]

1. The SQLite store alone (durable-bench store): enqueue one job per call (one transaction each,
   synchronous = FULL) and in calls of 1,000; claim + finish + markHandled of --drain of --jobs
   waiting jobs, one job per claim, with 1, 4 and 16 claimers (each its own store handle: its own connection).
   Beside it, the ceiling: the same statements with no Swift (Python's sqlite3 module, one
   process per claimer, on a file whose schema durable-bench created).
2. The cost per request: --requests × 1 KiB GET at c = 8 and --large × --large-mib MiB files (to
   disk, c = 4) against nginx on 127.0.0.1, the in-memory RequestQueue then DurableWorker on
   SQLite, in one process one after the other; their ratio.
3. Recovery: a worker (durable-bench serve) holds a job whose transfer stalls (a listening socket
   that never answers); it is killed with SIGKILL once the store shows the job running; a new
   worker is started; the time from the kill to the store showing the job running again under a
   new lease (the new worker's first maintain() rescues it at once through the dead worker's flock).
Prints Markdown tables. CPU per job: getrusage (user + system) of the measuring process.

With --postgres, the same on PostgreSQL instead (Benchmarks/durable_pg.py: a cluster of its own,
synchronous_commit on and off, pgbench as the ceiling, server CPU too, and one worker process
against three). --drain N claims only N of the --jobs waiting jobs in each claim cell (both stores).
"""
import argparse, json, multiprocessing, os, resource, shutil, socket, sqlite3, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rate import start_nginx  # noqa: E402

MIB = 1 << 20


def run_json(argv):
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({result.returncode}): {result.stderr[-600:]}")
    if result.stderr.strip():
        print(result.stderr.strip(), file=sys.stderr)
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


# The store's statements (Sources/CurlQueueSQLite/SQLiteJobStore.swift), with no Swift.
INSERT = """INSERT INTO cq_job (queue, kind, state, priority, order_key, run_at, max_attempts, dedup_key, unique_key,
                    rescuable, spec, created_at) VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?) RETURNING id"""
SPEC = json.dumps({"kind": "get", "request": {"url": "http://127.0.0.1:9/item", "method": "GET"}}).encode()
CLAIM = """UPDATE cq_job SET state = 'running', attempt = attempt + 1, lease_owner = ?, lease_token = lease_token + 1,
                  cancel_requested = 0
WHERE id IN (SELECT id FROM cq_job WHERE queue = ? AND state = 'available'
             AND kind IN (SELECT value FROM json_each(?)) ORDER BY priority DESC, order_key LIMIT ?)
RETURNING id, queue, spec, state, attempt, run_at, created_at, finalized_at, lease_owner, last_error, outcome, handled,
          checkpoint, cancel_requested, lease_token, priority, order_key"""
HANDLER = """UPDATE cq_job SET lease_owner = ?, lease_token = lease_token + 1
WHERE id IN (SELECT id FROM cq_job WHERE queue = ? AND handled = 0 AND finalized_at IS NOT NULL
             AND lease_owner IS NULL AND kind IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?)
RETURNING id"""
FINISH = """UPDATE cq_job SET state = 'completed', outcome = ?, finalized_at = ?, last_error = NULL
WHERE id = ? AND lease_token = ? AND state = 'running' RETURNING queue"""
MARK = """UPDATE cq_job SET handled = 1, lease_owner = NULL
WHERE id = ? AND lease_token = ? AND finalized_at IS NOT NULL AND handled = 0 AND lease_owner IS NOT NULL"""


def connect(path):
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("PRAGMA foreign_keys = ON")
    return db


def now_ms():
    return int(time.time() * 1000)


def sql_insert(db, count):
    db.execute("BEGIN IMMEDIATE")
    for _ in range(count):
        now = now_ms()
        (job,) = db.execute(INSERT, ("bench", "get", "available", 0, now, 3, "k", None, 1, SPEC, now)).fetchone()
        db.execute("UPDATE cq_job SET order_key = ? WHERE id = ?", (job, job))
    db.execute("COMMIT")


def sql_claimer(path, worker, quota=None):
    db = connect(path)
    db.execute("INSERT OR REPLACE INTO cq_worker (id, node, pid, started_at, expires_at) VALUES (?, 'bench', ?, ?, ?)",
               (worker, os.getpid(), now_ms(), now_ms() + 60000))
    outcome = json.dumps({"completed": {"_0": {"status": 200, "bytes": 1024}}}).encode()
    while quota is None or quota > 0:
        if quota is not None:
            quota -= 1
        db.execute("BEGIN IMMEDIATE")
        now = now_ms()
        db.execute("SELECT 1 FROM cq_worker WHERE id = ?", (worker,)).fetchone()
        db.execute("UPDATE cq_job SET state = 'available' WHERE state = 'scheduled' AND run_at <= ?", (now,))
        db.execute(HANDLER, (worker, "bench", '["get"]', 1)).fetchall()
        db.execute("SELECT paused FROM cq_queue WHERE name = ?", ("bench",)).fetchone()
        rows = db.execute(CLAIM, (worker, "bench", '["get"]', 1)).fetchall()
        db.execute("COMMIT")
        if not rows:
            return
        job, token = rows[0][0], rows[0][14]
        json.loads(rows[0][2])  # the store decodes the spec
        db.execute("BEGIN IMMEDIATE")
        db.execute(FINISH, (outcome, now_ms(), job, token)).fetchall()
        db.execute("COMMIT")
        db.execute(MARK, (job, token))


def cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(name, jobs, body, **extra):
    c0, t0 = cpu(), time.monotonic()
    body()
    wall, used = time.monotonic() - t0, cpu() - c0
    return {"case": name, "jobs": jobs, "seconds": wall, "jobs_per_s": jobs / wall, "cpu_us_per_job": used * 1e6 / jobs, **extra}


def sql_ceiling(bench, path, jobs, single, claimers, drain):
    def fresh():
        subprocess.run([bench, "init", path], check=True)
        return connect(path)
    results = []
    db = fresh()
    results.append(measure("enqueue-1", single, lambda: [sql_insert(db, 1) for _ in range(single)]))
    db = fresh()
    results.append(measure("enqueue-1000", jobs, lambda: [sql_insert(db, 1000) for _ in range(jobs // 1000)]))
    for count in claimers:
        db = fresh()
        for _ in range(jobs // 1000):
            sql_insert(db, 1000)
        db.close()

        def run():
            context = multiprocessing.get_context("fork")
            quota = None if drain >= jobs else drain // count
            workers = [context.Process(target=sql_claimer, args=(path, f"w{i}", quota)) for i in range(count)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        claimed = jobs if drain >= jobs else drain // count * count
        results.append(measure("claim-finish", claimed, run, claimers=count))
        left = connect(path).execute("SELECT count(*) FROM cq_job WHERE handled = 0").fetchone()[0]
        if left != jobs - claimed:
            raise SystemExit(f"the SQL ceiling left {left} jobs unhandled, not {jobs - claimed}")
    return results


def recovery(bench, path, rounds):
    times = []
    for _ in range(rounds):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        stall = socket.socket()
        stall.bind(("127.0.0.1", 0))
        stall.listen(16)  # never accepts: the transfer connects and waits for an answer
        url = f"http://127.0.0.1:{stall.getsockname()[1]}/stalls"
        first = subprocess.Popen([bench, "serve", path, url], stdout=subprocess.DEVNULL)

        def lease():
            try:
                db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
                row = db.execute("SELECT lease_token FROM cq_job WHERE state = 'running'").fetchone()
                db.close()
                return row[0] if row else 0
            except sqlite3.Error:
                return 0
        deadline = time.monotonic() + 30
        while lease() < 1:
            if time.monotonic() > deadline:
                first.kill()
                raise SystemExit("the first worker did not claim its job")
            time.sleep(0.002)
        first.kill()
        t0 = time.monotonic()
        first.wait()
        second = subprocess.Popen([bench, "serve", path], stdout=subprocess.DEVNULL)
        while lease() < 2:
            if time.monotonic() - t0 > 60:
                second.kill()
                raise SystemExit("the job was not rescued within 60 s")
            time.sleep(0.002)
        times.append(time.monotonic() - t0)
        second.kill()
        second.wait()
        stall.close()
    return times


def row(r):
    claim = f" ({r['claimers']})" if "claimers" in r else ""
    return f"{r['case']}{claim}", r["jobs_per_s"], r["cpu_us_per_job"]


def main():
    parser = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--bench", default=os.path.join(here, "..", ".build", "release", "durable-bench"))
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--single", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=8)
    parser.add_argument("--large-mib", type=int, default=256)
    parser.add_argument("--recoveries", type=int, default=3)
    parser.add_argument("--skip", default="", help="comma-separated: store,sql,requests,recovery (and workers with --postgres)")
    parser.add_argument("--postgres", action="store_true", help="measure the PostgreSQL store (Benchmarks/durable_pg.py)")
    parser.add_argument("--drain", type=int, default=2000, help="claim + finish this many of the --jobs waiting (0: all)")
    parser.add_argument("--worker-jobs", type=int, default=5000, help="--postgres: jobs the worker processes drain")
    parser.add_argument("--worker-concurrency", type=int, default=8)
    parser.add_argument("--recovery-ttl", type=float, default=5, help="--postgres: a short worker TTL (0: the default only)")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    bench = os.path.abspath(args.bench)
    work = tempfile.mkdtemp(prefix="cq-durable-")
    path = os.path.join(work, "jobs.sqlite")
    print(f"load average before: {os.getloadavg()[0]:.1f} (cores: {os.cpu_count()})\n")
    if args.postgres:
        import durable_pg
        try:
            durable_pg.main(args, bench, work, start_nginx, MIB)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        return
    try:
        if "store" not in skip or "sql" not in skip:
            drain = args.drain or args.jobs
            swift = [] if "store" in skip else run_json(
                [bench, "store", path, str(args.jobs), str(args.single), "1", "4", "16", "--drain", str(drain)])
            sql = [] if "sql" in skip else sql_ceiling(bench, path, args.jobs, args.single, [1, 4, 16], drain)
            waiting = f", claim + finish of {drain:,} of them" if drain < args.jobs else ""
            print(f"| SQLite store, {args.jobs:,} jobs{waiting} | Swift jobs/s | Swift CPU µs/job | SQL only jobs/s | SQL only CPU µs/job |")
            print("|---|---:|---:|---:|---:|")
            for a, b in zip(swift or [None] * len(sql), sql or [None] * len(swift)):
                name, rate, cpu_us = row(a or b)
                left = f"{rate:,.0f} | {cpu_us:,.0f}" if a else "- | -"
                right = f"{b['jobs_per_s']:,.0f} | {b['cpu_us_per_job']:,.0f}" if b else "- | -"
                print(f"| {name} | {left} | {right} |")
            print()
        if "requests" not in skip:
            nginx, base = start_nginx(os.path.join(work, "nginx"), {"large.bin": args.large_mib * MIB})
            try:
                with open(os.path.join(work, "nginx", "www", "1k.bin"), "wb") as f:
                    f.write(os.urandom(1024))
                small = run_json([bench, "requests", path, f"{base}/1k.bin", str(args.requests), "8"])
                files = os.path.join(work, "files")
                os.makedirs(files)
                large = run_json([bench, "requests", path, f"{base}/large.bin", str(args.large), "4", files])
            finally:
                nginx.kill()
                nginx.wait()
            print("| workload | in-memory req/s | durable req/s | in-memory CPU µs/req | durable CPU µs/req | time ratio | CPU ratio |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for label, (m, d) in ((f"{args.requests:,} × 1 KiB, c = 8", small),
                                  (f"{args.large} × {args.large_mib} MiB to disk, c = 4", large)):
                print(f"| {label} | {m['jobs_per_s']:,.1f} | {d['jobs_per_s']:,.1f} | {m['cpu_us_per_job']:,.0f} | "
                      f"{d['cpu_us_per_job']:,.0f} | {d['seconds'] / m['seconds']:.2f} | {d['cpu_us_per_job'] / m['cpu_us_per_job']:.2f} |")
            print()
        if "recovery" not in skip:
            times = recovery(bench, path, args.recoveries)
            print("Recovery (SIGKILL to the job running again on a new worker, SQLite): "
                  + ", ".join(f"{t * 1000:.0f} ms" for t in times))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
