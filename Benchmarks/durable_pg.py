"""The PostgreSQL half of Benchmarks/durable.py (`durable.py --postgres`): a cluster of its own
with durable settings, the store alone against pgbench running the store's own statements,
the cost per request, recovery after SIGKILL, and one worker process against three.

The cluster: PostgreSQL 15 (CQ_PG_BIN, default /usr/lib/postgresql/15/bin), initdb in a temp
folder on the same disk as the SQLite runs, 127.0.0.1 and a Unix socket, run as `postgres` when
started as root; fsync = on, full_page_writes = on, and synchronous_commit switched between on
(a commit returns once its WAL is flushed: durable) and off (a commit returns at once; a server
crash may lose the last few hundred milliseconds of commits, never corrupt anything: what many
job queues run with) with ALTER SYSTEM and a reload. Server CPU: the postmaster and all its
children (live ones from /proc/PID/stat, exited ones from the postmaster's cutime and cstime).
"""
import os, re, resource, shutil, signal, socket, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
SQL_SOURCE = os.path.join(HERE, "..", "Sources", "CurlQueuePostgres", "PostgresSQL.swift")
TICKS = os.sysconf("SC_CLK_TCK")


class Cluster:
    def __init__(self, work):
        self.bin = os.environ.get("CQ_PG_BIN", "/usr/lib/postgresql/15/bin")
        if not os.path.exists(os.path.join(self.bin, "initdb")):
            raise SystemExit(f"durable: no PostgreSQL 15 in {self.bin} (scripts/setup installs postgresql-15)")
        self.dir = os.path.join(work, "pg")
        os.makedirs(self.dir)
        self.data = os.path.join(self.dir, "data")
        self.run_as = []
        if os.getuid() == 0:
            shutil.chown(work, "postgres")
            shutil.chown(self.dir, "postgres")
            self.run_as = ["runuser", "-u", "postgres", "--"]
        self.call([os.path.join(self.bin, "initdb"), "-D", self.data, "-A", "trust", "-U", "cq", "-E", "UTF8"])
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        with open(os.path.join(self.data, "postgresql.auto.conf"), "a") as f:
            f.write(f"""listen_addresses = '127.0.0.1'
port = {self.port}
unix_socket_directories = '{self.dir}'
fsync = on
full_page_writes = on
synchronous_commit = on
max_connections = 100
shared_buffers = 256MB
max_wal_size = 4GB
""")
        self.call([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l", os.path.join(self.dir, "server.log"), "-w", "-t", "60", "start"])
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            self.pid = int(f.readline())
        self.psql("CREATE DATABASE bench", database="postgres")
        self.psql("ALTER DATABASE bench SET client_min_messages = warning", database="postgres")
        self.url = f"postgres://cq@127.0.0.1:{self.port}/bench"

    def call(self, argv):
        result = subprocess.run(self.run_as + argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            raise SystemExit(f"durable: {os.path.basename(argv[0])} failed: {result.stdout[-800:]}")

    def psql(self, sql, database="bench"):
        result = subprocess.run([os.path.join(self.bin, "psql"), "-X", "-At", "-h", "127.0.0.1", "-p", str(self.port), "-U", "cq",
                                 "-d", database, "-c", sql], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if result.returncode != 0:
            raise SystemExit(f"durable: psql failed: {result.stderr[-400:]}")
        return result.stdout.strip()

    def set_synchronous_commit(self, value):
        self.psql(f"ALTER SYSTEM SET synchronous_commit = {value}")
        self.psql("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 10
        while self.psql("SHOW synchronous_commit") != value:
            if time.monotonic() > deadline:
                raise SystemExit("durable: synchronous_commit did not change")
            time.sleep(0.05)

    def cpu(self):
        """CPU seconds of the server: the postmaster, its live children, its reaped children."""
        def fields(pid):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    text = f.read()
            except OSError:
                return None
            return text[text.rindex(")") + 2:].split()
        own = fields(self.pid)
        total = sum(int(own[i]) for i in (11, 12, 13, 14))
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != self.pid:
                f = fields(entry)
                if f and f[1] == str(self.pid):
                    total += int(f[11]) + int(f[12])
        return total / TICKS

    def stop(self):
        subprocess.run(self.run_as + [os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "immediate", "-w", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# -- pgbench: the store's statements, read from its source ---------------------------------------

def store_sql():
    """The statements of PostgresSQL.swift, as PostgreSQL receives them: the Swift interpolations
    \\(columns(prefix: "j.")) and \\(final) expanded, line continuations joined."""
    source = open(SQL_SOURCE).read()
    def literal(body):
        return re.sub(r"\\\n\s*", "", body)
    columns = literal(re.search(r'static func columns\(prefix p: String = ""\) -> String \{\s*"""\n(.*?)\n\s*"""', source, re.S).group(1))
    final = re.search(r'static let final = "(.*?)"', source).group(1)
    statements = {}
    for name, body in re.findall(r'static let (\w+) = """\n(.*?)\n\s*"""', source, re.S):
        body = re.sub(r'\\\(columns\((?:prefix: "(.*?)")?\)\)', lambda m: columns.replace("\\(p)", m.group(1) or ""), literal(body))
        body = body.replace("\\(final)", final)
        if "\\(" in body:
            raise SystemExit(f"durable: PostgresSQL.swift's {name} has an interpolation this script does not know")
        statements[name] = " ".join(line.strip() for line in body.splitlines())
    return statements


def bind(statement, values):
    """$n → the pgbench variable or SQL literal values[n]."""
    return re.sub(r"\$(\d+)", lambda m: values[int(m.group(1))], statement)


def pgbench_scripts(folder):
    sql = store_sql()
    insert = bind(sql["insert"], {1: ":queue", 2: "'get'", 3: "1", 4: "1", 5: "5", 6: ":key", 7: ":spec", 8: "NULL", 9: "true"})
    notify = "SELECT pg_notify('cq_insert', :queue);"
    # pgbench's \gset names variables after columns; the one unnamed column (?column?) is not a
    # valid name, so it gets one: the statement is otherwise the store's, character for character.
    claim = bind(sql["claim"], {1: ":queue", 2: ":kinds", 3: "1", 4: ":worker"}).replace(
        "cancel_requested_at IS NOT NULL,", "cancel_requested_at IS NOT NULL AS cancel_requested,")
    scripts = {
        "enqueue-1": f"BEGIN;\n{insert};\n{notify}\nCOMMIT;\n",
        "enqueue-1000": "BEGIN;\n" + f"{insert};\n" * 1000 + f"{notify}\nCOMMIT;\n",
        # One pgbench transaction is the store's claim(limit: 1) (one transaction: promote,
        # claimUnhandled, claim), finish(.completed) and markHandled (one statement each).
        "claim-finish": "BEGIN;\n"
        + bind(sql["promote"], {1: ":queue"}) + ";\n"
        + bind(sql["claimUnhandled"], {1: ":queue", 2: ":kinds", 3: "1", 4: ":worker"}).replace(
            "cancel_requested_at IS NOT NULL,", "cancel_requested_at IS NOT NULL AS cancel_requested,") + ";\n"
        + claim + " \\gset\n"
        + "COMMIT;\n"
        + bind(sql["finish"], {1: ":id", 2: ":lease_token", 3: "'completed'", 4: ":outcome", 5: "NULL"}) + ";\n"
        + bind(sql["markHandled"], {1: ":id", 2: ":lease_token"}) + ";\n",
    }
    paths = {}
    for name, text in scripts.items():
        paths[name] = os.path.join(folder, f"{name}.sql")
        with open(paths[name], "w") as f:
            f.write(text)
    return paths


def store_data(bench, cluster):
    """The spec and dedup key the store writes for durable-bench's job, so that pgbench inserts
    the same bytes (all its jobs are one GET, so they share one key)."""
    subprocess.run([bench, "init", cluster.url], check=True)
    subprocess.run([bench, "enqueue", cluster.url, "http://127.0.0.1:9/item", "1"], check=True)
    return {"spec": cluster.psql("SELECT spec FROM cq_job"), "key": cluster.psql("SELECT dedup_key FROM cq_job")}


def pgbench(cluster, script, clients, transactions, data):
    """Runs `script` with `clients` connections, `transactions` each (extended protocol, as
    libpq's PQexecParams): elapsed seconds, pgbench's CPU seconds, the server's CPU seconds."""
    argv = [os.path.join(cluster.bin, "pgbench"), "-n", "-M", "extended", "-c", str(clients), "-j", str(min(clients, 2)),
            "-t", str(transactions), "-f", script, "-h", "127.0.0.1", "-p", str(cluster.port), "-U", "cq",
            "-D", "queue=bench", "-D", "kinds={get}", "-D", "worker=pgbench",
            "-D", f"key={data['key']}", "-D", f"spec={data['spec']}",
            "-D", 'outcome={"completed":{"_0":{"status":200,"bytes":1024}}}', "bench"]
    c0, s0, t0 = children_cpu(), cluster.cpu(), time.monotonic()
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    time.sleep(0.3)  # pgbench's backends exit after it: the postmaster reaps them into its cutime and cstime
    if result.returncode != 0 or "aborted" in result.stdout + result.stderr and "number of failed" not in result.stdout:
        raise SystemExit(f"durable: pgbench failed: {result.stderr[-800:]}{result.stdout[-400:]}")
    if not re.search(r"number of transactions actually processed: (\d+)/\1", result.stdout):
        raise SystemExit(f"durable: pgbench did not run every transaction: {result.stdout[-600:]} {result.stderr[-600:]}")
    return wall, children_cpu() - c0, cluster.cpu() - s0


def run_json(argv, env=None):
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({result.returncode}): {result.stderr[-600:]}")
    if result.stderr.strip():
        print(result.stderr.strip(), file=sys.stderr)
    import json
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def bench_env(cluster):
    return dict(os.environ, CQ_BENCH_SERVER_PID=str(cluster.pid))


def store_and_ceiling(bench, cluster, work, jobs, drain, single, claimers):
    """The Swift store (durable-bench store) and pgbench on the same statements: rows of
    (case, Swift result, pgbench result), each with jobs/s, client and server CPU µs per job."""
    swift = run_json([bench, "store", cluster.url, str(jobs), str(single), *map(str, claimers), "--drain", str(drain)],
                     env=bench_env(cluster))
    scripts = pgbench_scripts(work)
    data = store_data(bench, cluster)
    sql = []

    def cell(case, script, clients, per_client, count, **extra):
        wall, client, server = pgbench(cluster, script, clients, per_client, data)
        sql.append({"case": case, "jobs": count, "jobs_per_s": count / wall, "cpu_us_per_job": client * 1e6 / count,
                    "server_cpu_us_per_job": server * 1e6 / count, **extra})
    subprocess.run([bench, "init", cluster.url], check=True)
    cell("enqueue-1", scripts["enqueue-1"], 1, single, single)
    subprocess.run([bench, "init", cluster.url], check=True)
    cell("enqueue-1000", scripts["enqueue-1000"], 1, jobs // 1000, jobs // 1000 * 1000)
    for count in claimers:
        subprocess.run([bench, "init", cluster.url], check=True)
        subprocess.run([bench, "enqueue", cluster.url, "http://127.0.0.1:9/item", str(jobs)], check=True)
        cell("claim-finish", scripts["claim-finish"], count, drain // count, drain // count * count, claimers=count)
        left = int(cluster.psql("SELECT count(*) FROM cq_job WHERE handled"))
        if left != drain // count * count:
            raise SystemExit(f"durable: pgbench handled {left} jobs, not {drain // count * count}")
    return list(zip(swift, sql))


def print_store(rows, jobs, drain, setting):
    print(f"| PostgreSQL store, synchronous_commit = {setting}, {jobs:,} waiting | Swift jobs/s | Swift client / server CPU µs/job "
          "| pgbench jobs/s | pgbench client / server CPU µs/job |")
    print("|---|---:|---:|---:|---:|")
    for a, b in rows:
        name = {"enqueue-1": "enqueue, 1 per transaction", "enqueue-1000": "enqueue, 1,000 per transaction"}.get(a["case"])
        if name is None:
            name = f"claim + finish of {a['jobs']:,}, {a['claimers']} claimer{'s' if a['claimers'] > 1 else ''}"
        else:
            name += f" ({a['jobs']:,} jobs)"
        print(f"| {name} | {a['jobs_per_s']:,.0f} | {a['cpu_us_per_job']:,.0f} / {a['server_cpu_us_per_job']:,.0f} "
              f"| {b['jobs_per_s']:,.0f} | {b['cpu_us_per_job']:,.0f} / {b['server_cpu_us_per_job']:,.0f} |")
    print()


def requests(bench, cluster, base, work, count, large, large_mib):
    small = run_json([bench, "requests", cluster.url, f"{base}/1k.bin", str(count), "8"], env=bench_env(cluster))
    files = os.path.join(work, "pg-files")
    os.makedirs(files, exist_ok=True)
    big = run_json([bench, "requests", cluster.url, f"{base}/large.bin", str(large), "4", files], env=bench_env(cluster))
    shutil.rmtree(files, ignore_errors=True)
    return small, big


def wait_for(cluster, sql, want, seconds, poll=0.02):
    deadline = time.monotonic() + seconds
    while True:
        value = cluster.psql(sql)
        if want(value):
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(poll)


def recovery(bench, cluster, ttl, rounds):
    """A worker holds a job whose transfer stalls; a second worker is running; the first is
    killed with SIGKILL; the time until the job runs again (attempt 2) under the second."""
    times = []
    for _ in range(rounds):
        subprocess.run([bench, "init", cluster.url], check=True)
        stall = socket.socket()
        stall.bind(("127.0.0.1", 0))
        stall.listen(16)  # never accepts: the transfer connects and waits for an answer
        url = f"http://127.0.0.1:{stall.getsockname()[1]}/stalls"
        ttl_args = ["--ttl", str(ttl)] if ttl else []
        first = subprocess.Popen([bench, "serve", cluster.url, url, *ttl_args], stdout=subprocess.DEVNULL)
        second = None
        try:
            if wait_for(cluster, "SELECT count(*) FROM cq_job WHERE state = 'running' AND attempt = 1", lambda v: v == "1", 30) is None:
                raise SystemExit("durable: the first worker did not claim its job")
            second = subprocess.Popen([bench, "serve", cluster.url, *ttl_args], stdout=subprocess.DEVNULL)
            wait_for(cluster, "SELECT count(*) FROM cq_worker", lambda v: v == "2", 30)
            first.kill()
            t0 = time.monotonic()
            first.wait()
            if wait_for(cluster, "SELECT count(*) FROM cq_job WHERE state = 'running' AND attempt = 2", lambda v: v == "1",
                        (ttl or 60) * 3, poll=0.05) is None:
                raise SystemExit("durable: the job was not rescued within 3 TTLs")
            times.append(time.monotonic() - t0)
        finally:
            for p in (first, second):
                if p and p.poll() is None:
                    p.kill()
                    p.wait()
            stall.close()
    return times


def workers(bench, cluster, url, jobs, processes, concurrency):
    """`processes` worker processes (concurrency each) drain `jobs` waiting GETs of url: the time
    from their start to every job handled, with their CPU and the server's."""
    subprocess.run([bench, "init", cluster.url], check=True)
    subprocess.run([bench, "enqueue", cluster.url, url, str(jobs)], check=True)
    c0, s0, t0 = children_cpu(), cluster.cpu(), time.monotonic()
    procs = [subprocess.Popen([bench, "serve", cluster.url, "--concurrency", str(concurrency)], stdout=subprocess.DEVNULL)
             for _ in range(processes)]
    try:
        done = wait_for(cluster, "SELECT count(*) FROM cq_job WHERE handled", lambda v: v == str(jobs), 1800, poll=0.1)
        wall = time.monotonic() - t0
        if done is None:
            raise SystemExit("durable: the workers did not finish within 30 min")
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait()
    server = cluster.cpu() - s0
    failed = int(cluster.psql("SELECT count(*) FROM cq_job WHERE state <> 'completed'"))
    if failed:
        raise SystemExit(f"durable: {failed} jobs did not complete")
    return {"processes": processes, "jobs_per_s": jobs / wall, "cpu_us_per_job": (children_cpu() - c0) * 1e6 / jobs,
            "server_cpu_us_per_job": server * 1e6 / jobs, "seconds": wall}


def main(args, bench, work, start_nginx, mib):
    """durable.py --postgres: every table, for synchronous_commit on and off."""
    skip = set(filter(None, args.skip.split(",")))
    cluster = Cluster(work)
    nginx = None
    try:
        print(f"PostgreSQL 15 cluster of its own: fsync = on, full_page_writes = on, shared_buffers = 256MB "
              f"({cluster.data}); load average {os.getloadavg()[0]:.1f}\n")
        if not {"requests", "workers"} <= skip:
            nginx, base = start_nginx(os.path.join(work, "nginx"), {"large.bin": args.large_mib * mib})
            with open(os.path.join(work, "nginx", "www", "1k.bin"), "wb") as f:
                f.write(os.urandom(1024))
        drain = args.drain or args.jobs
        for setting in ("on", "off"):
            cluster.set_synchronous_commit(setting)
            if "store" not in skip:
                rows = store_and_ceiling(bench, cluster, work, args.jobs, drain, args.single, [1, 4, 16])
                print_store(rows, args.jobs, drain, setting)
                print(f"(load average {os.getloadavg()[0]:.1f})\n")
            if "requests" not in skip:
                small, big = requests(bench, cluster, base, work, args.requests, args.large, args.large_mib)
                print(f"| Workload, PostgreSQL, synchronous_commit = {setting} | in-memory req/s | durable req/s "
                      "| in-memory CPU µs/req | durable client / server CPU µs/req | time ratio | CPU ratio (client + server) |")
                print("|---|---:|---:|---:|---:|---:|---:|")
                for label, (m, d) in ((f"{args.requests:,} × 1 KiB, c = 8", small),
                                      (f"{args.large} × {args.large_mib} MiB to disk, c = 4", big)):
                    total = d["cpu_us_per_job"] + d["server_cpu_us_per_job"]
                    print(f"| {label} | {m['jobs_per_s']:,.1f} | {d['jobs_per_s']:,.1f} | {m['cpu_us_per_job']:,.0f} | "
                          f"{d['cpu_us_per_job']:,.0f} / {d['server_cpu_us_per_job']:,.0f} | {d['seconds'] / m['seconds']:.2f} | "
                          f"{total / m['cpu_us_per_job']:.2f} |")
                print(f"\n(load average {os.getloadavg()[0]:.1f})\n")
            if "workers" not in skip:
                print(f"| {args.worker_jobs:,} × 1 KiB GET, synchronous_commit = {setting}, c = {args.worker_concurrency} per process "
                      "| seconds | jobs/s | workers' CPU µs/job | server CPU µs/job |")
                print("|---|---:|---:|---:|---:|")
                for processes in (1, 3):
                    r = workers(bench, cluster, f"{base}/1k.bin", args.worker_jobs, processes, args.worker_concurrency)
                    print(f"| {processes} worker process{'es' if processes > 1 else ''} | {r['seconds']:.1f} | {r['jobs_per_s']:,.0f} "
                          f"| {r['cpu_us_per_job']:,.0f} | {r['server_cpu_us_per_job']:,.0f} |")
                print(f"\n(load average {os.getloadavg()[0]:.1f})\n")
            if "recovery" not in skip and setting == "on":
                for ttl in ([args.recovery_ttl] if args.recovery_ttl else []) + [0]:
                    rounds = args.recoveries if ttl else 1
                    times = recovery(bench, cluster, ttl, rounds)
                    label = (f"worker TTL {ttl:g} s (heartbeat {ttl / 4:g} s, maintenance every {ttl / 6:.2g} s)" if ttl
                             else "the defaults (TTL 60 s, heartbeat 15 s, maintenance every 10 s)")
                    print(f"Recovery, PostgreSQL, {label}: " + ", ".join(f"{t:.2f} s" for t in times))
                print(f"\n(load average {os.getloadavg()[0]:.1f})\n")
    finally:
        if nginx:
            nginx.kill()
            nginx.wait()
        cluster.stop()
