#!/usr/bin/env python3
"""Issue 23's kill -9 test at the issue's scale, outside CI (docs/durable.md, "Tests").

    scripts/bench --durable-kill [--files 200] [--kills 5] [--rate 8m] [-j 16] [--seed N]
    scripts/test-postgres scripts/bench --durable-kill --store postgres     # on PostgreSQL

--files files of random sizes between --min-mib and --max-mib MiB (1-64; bytes from a seeded
PRNG, each MiB stamped with its file and block number, so a block written at the wrong offset
changes the sha256) served by nginx on 127.0.0.1 with limit_rate --rate per connection; one
`curlq enqueue` of them all; the real `curlq daemon` (-j) downloads them and is killed with
SIGKILL at --kills random moments (each once the bytes on disk pass a random fraction of the
total and 2 MiB more than at the daemon's start, then 0-300 ms later), and started again at
once each time; then the store is polled (`curlq status --json`) until every job is completed,
and the daemon gets SIGTERM.

Checks (any failure: exit 1, with the reason): the store holds --files jobs, every one
completed, each exactly once (one record per file, no duplicate); every file's sha256 equal to
the served one; no .part left; nginx's access log (with $http_range) shows a Range request for
every file whose .part held bytes at a kill, resuming at most where that .part ended; no file
fetched from byte 0 more than once, except once more per kill at which its job was running with
no byte of it on disk (no .part or an empty one, nothing under its final name: nginx may have sent
bytes the daemon had not written yet); every file whose transfer had ended when the store had not
recorded it at a kill (under its final name, or a whole .part) confirmed by a 416 (the next
attempt asks for the bytes past its end with If-Range), never fetched whole again. A run longer than --timeout seconds fails
with the store's counts.
Prints a Markdown summary: kills, files interrupted and resumed, bytes re-fetched vs total,
wall time.
"""
import argparse, hashlib, json, os, random, re, shutil, signal, struct, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rate import default_curlq, start_nginx  # noqa: E402

MIB = 1 << 20


def fail(message):
    raise SystemExit(f"durable_kill: FAILED: {message}")


def write_files(www, count, low, high, seed):
    """Writes count files of random sizes in [low, high] MiB; returns {name: (size, sha256)}."""
    os.makedirs(www)
    rng = random.Random(seed)
    files = {}
    for index in range(count):
        name = f"f{index:03}.bin"
        size = rng.randint(low * MIB, high * MIB)
        base = bytearray(random.Random(seed * 1000003 + index).randbytes(MIB))
        digest = hashlib.sha256()
        with open(os.path.join(www, name), "wb") as f:
            left, block = size, 0
            while left:
                base[0:16] = struct.pack("<QQ", index, block)
                piece = bytes(base[:min(left, MIB)])
                f.write(piece)
                digest.update(piece)
                left -= len(piece)
                block += 1
        files[name] = (size, digest.hexdigest())
    return files


def on_disk(folder):
    """{name: size} of the download folder's files, .part files under their own name."""
    sizes = {}
    for entry in os.scandir(folder):
        try:
            sizes[entry.name] = entry.stat().st_size
        except FileNotFoundError:  # renamed from .part to its final name meanwhile
            pass
    return sizes


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(4 * MIB):
            digest.update(chunk)
    return digest.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--curlq", default=default_curlq())
    parser.add_argument("--store", default="sqlite", help="sqlite (a file in the work folder), postgres "
                        "($CQ_POSTGRES_URL, as scripts/test-postgres exports it) or a postgres:// URL")
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--min-mib", type=int, default=1)
    parser.add_argument("--max-mib", type=int, default=64)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--rate", default="8m", help="nginx limit_rate, per connection")
    parser.add_argument("-j", "--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=900, help="seconds for the whole run (files excluded)")
    parser.add_argument("--work", default=None, help="folder for files, store and logs (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    curlq = os.path.abspath(args.curlq)
    if not os.access(curlq, os.X_OK):
        fail(f"no curlq at {curlq} (swift build --product curlq)")
    work = args.work or tempfile.mkdtemp(prefix="curlq-killsoak.")
    os.makedirs(work, exist_ok=True)
    queue = f"killsoak-{seed}"
    if args.store == "sqlite":
        store = f"sqlite:{work}/jobs.sqlite"
    elif args.store == "postgres":
        store = os.environ.get("CQ_POSTGRES_URL") or fail("--store postgres needs CQ_POSTGRES_URL (run under scripts/test-postgres)")
    else:
        store = args.store
    print(f"durable_kill: seed {seed}, work {work}, store {store.split('@')[-1]}, queue {queue}", file=sys.stderr)

    t0 = time.monotonic()
    files = write_files(os.path.join(work, "www"), args.files, args.min_mib, args.max_mib, seed)
    total = sum(size for size, _ in files.values())
    print(f"durable_kill: {len(files)} files, {total / MIB:.0f} MiB written in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    log = os.path.join(work, "access.log")
    nginx, base = start_nginx(work, None, limit_rate=args.rate, access_log=log)
    downloads = os.path.join(work, "downloads")
    os.makedirs(downloads)
    daemon = None
    daemon_log = open(os.path.join(work, "daemon.log"), "ab")

    def status():
        result = subprocess.run([curlq, "status", "--store", store, "--queue", queue, "--json", "--limit", str(args.files * 2)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if result.returncode != 0:
            fail(f"curlq status failed ({result.returncode}): {result.stderr[-400:]}")
        return json.loads(result.stdout)

    def start():
        return subprocess.Popen([curlq, "daemon", "--store", store, "--queue", queue, "-d", downloads,
                                 "-j", str(args.concurrency), "-q"],
                                stdin=subprocess.DEVNULL, stdout=daemon_log, stderr=daemon_log)

    try:
        listing = os.path.join(work, "urls.txt")
        with open(listing, "w") as f:
            for name in files:
                f.write(f"{base}/{name}\n")
        result = subprocess.run([curlq, "enqueue", "--store", store, "--queue", queue, "-i", listing],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if result.returncode != 0:
            fail(f"curlq enqueue failed ({result.returncode}): {result.stderr[-400:]}")

        start_time = time.monotonic()
        deadline = start_time + args.timeout
        # The kill moments: random fractions of the bytes, sorted; each kill 0-300 ms after its
        # fraction is on disk (the daemon is between writes, in a write, or in a store call).
        fractions = sorted(rng.uniform(0.03, 0.9) for _ in range(args.kills))
        empty_at_kill = []  # per kill: the files running with no byte on disk
        kills = []  # per kill: seconds into the run, fraction on disk, {file: .part size} after the kill
        daemon = start()
        restarted_with = 0
        for fraction in fractions:
            # Also 2 MiB more on disk than at the last start: each run of the daemon has downloads under way.
            while sum(on_disk(downloads).values()) < max(fraction * total, restarted_with + 2 * MIB):
                if time.monotonic() > deadline:
                    fail(f"timeout ({args.timeout:.0f} s) before kill {len(kills) + 1}: {status()['counts']}")
                if daemon.poll() is not None:
                    fail(f"the daemon exited ({daemon.returncode}) on its own; log: {work}/daemon.log")
                time.sleep(0.05)
            time.sleep(rng.uniform(0, 0.3))  # the sleep IS the event: a random moment to kill at
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()
            sizes = on_disk(downloads)
            parts = {name[:-5]: size for name, size in sizes.items() if name.endswith(".part")}
            # Downloads whose transfer had ended (the file under its final name, or its .part
            # already whole) that the store had not recorded completed when the daemon died: the
            # next start runs them again, from 0 (a whole .part is resumed, nginx answers 416, and
            # the core starts again from empty).
            done = {name for name in sizes if name in files} | {
                name for name, size in parts.items() if name in files and size == files[name][0]}
            jobs = status()["jobs"]
            unrecorded = {os.path.basename(job.get("file") or job["url"]) for job in jobs if job["state"] != "completed"} & done
            kills.append((time.monotonic() - start_time, sum(sizes.values()) / total, parts, unrecorded))
            # Files whose transfer was under way, with no byte of it on disk yet: the bytes nginx
            # had sent are lost with the daemon, and the next attempt fetches from 0 again.
            running = {os.path.basename(job.get("file") or job["url"]) for job in jobs if job["state"] == "running"}
            empty_at_kill.append({name for name in running if not parts.get(name) and name not in sizes})
            print(f"durable_kill: kill {len(kills)} at {kills[-1][0]:.1f} s, {kills[-1][1]:.0%} on disk, "
                  f"{len(parts)} .part files ({sum(1 for s in parts.values() if s)} with bytes), "
                  f"{len(unrecorded)} files done but not recorded", file=sys.stderr)
            restarted_with = sum(sizes.values())
            daemon = start()
        while True:
            counts = status()["counts"]
            if counts.get("completed", 0) >= args.files:
                break
            if any(counts.get(state, 0) for state in ("failed", "cancelled", "discarded")):
                fail(f"jobs ended otherwise than completed: {counts}; {work}/daemon.log")
            if time.monotonic() > deadline:
                fail(f"timeout ({args.timeout:.0f} s): the store says {counts}")
            if daemon.poll() is not None:
                fail(f"the daemon exited ({daemon.returncode}) on its own; log: {work}/daemon.log")
            time.sleep(0.5)
        wall = time.monotonic() - start_time
        daemon.send_signal(signal.SIGTERM)
        try:
            code = daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            fail("the daemon did not exit within 60 s of SIGTERM")
        if code != 0:
            fail(f"the daemon exited {code} on SIGTERM")
        daemon = None

        problems = []
        report = status()
        jobs = report["jobs"]
        if len(jobs) != args.files or len({job["id"] for job in jobs}) != args.files:
            problems.append(f"the store holds {len(jobs)} jobs ({len({job['id'] for job in jobs})} ids), not {args.files}")
        if report["counts"].get("completed", 0) != args.files or sum(report["counts"].values()) != args.files:
            problems.append(f"counts {report['counts']}, not {args.files} completed")
        named = {}
        for job in jobs:
            if job["state"] != "completed":
                problems.append(f"job {job['id']} {job['state']}: {job.get('error')}")
            name = os.path.basename(job.get("file") or job["url"])
            named[name] = named.get(name, 0) + 1
        for name in files:
            if named.get(name, 0) != 1:
                problems.append(f"{name}: {named.get(name, 0)} jobs in the store")
        left = sorted(name for name in os.listdir(downloads) if name.endswith(".part"))
        if left:
            problems.append(f".part files left: {left[:5]}")
        for name, (size, digest) in files.items():
            path = os.path.join(downloads, name)
            if not os.path.exists(path):
                problems.append(f"{name} missing")
            elif os.path.getsize(path) != size or sha256(path) != digest:
                problems.append(f"{name} differs ({os.path.getsize(path)} bytes of {size})")

        # nginx's log: per file, its requests in order (URI, status, Range, body bytes).
        requests = {}
        sent = 0
        with open(log) as f:
            for line in f:
                uri, code, ranged, body = line.split()
                requests.setdefault(uri.lstrip("/"), []).append((int(code), ranged, int(body)))
                sent += int(body)
        interrupted = {name for _, _, parts, _ in kills for name, size in parts.items() if size}
        resumed = 0
        for name in sorted(interrupted):
            starts = [int(m.group(1)) for _, ranged, _ in requests.get(name, [])
                      if (m := re.match(r"bytes=(\d+)-", ranged))]
            reached = max(parts.get(name, 0) for _, _, parts, _ in kills)
            if not any(0 < start <= reached for start in starts):
                problems.append(f"{name}: no Range request resuming its .part (.part sizes at kills: "
                                f"{[parts.get(name) for _, _, parts, _ in kills]}, Range starts {starts})")
            else:
                resumed += 1
        for name in files:
            whole = sum(1 for _, ranged, _ in requests.get(name, []) if ranged == "-" or ranged.startswith("bytes=0-"))
            allowed = 1 + sum(1 for empty in empty_at_kill if name in empty)
            late = [number + 1 for number, (_, _, _, unrecorded) in enumerate(kills) if name in unrecorded]
            if whole > allowed:
                why = f"; its transfer had ended but was not recorded at kill {late}: fetched again whole" if late else ""
                problems.append(f"{name} fetched from byte 0 {whole} times (allowed {allowed}){why}: {requests[name]}")
        rerun = sorted({name for _, _, _, unrecorded in kills for name in unrecorded})
        confirmed = [name for name in rerun if any(code == 416 for code, _, _ in requests.get(name, []))]
        for name in sorted(set(rerun) - set(confirmed)):
            problems.append(f"{name}: done but unrecorded at a kill, never confirmed by a 416: {requests.get(name)}")

        print(f"\n| store | files | MiB | -j | limit_rate | kills (s into the run, share on disk) | files interrupted "
              f"with bytes / resumed with Range | files done but unrecorded at a kill / confirmed by a 416 | bytes re-fetched vs total | wall time |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        moments = ", ".join(f"{t:.0f} s {share:.0%}" for t, share, _, _ in kills)
        print(f"| {'sqlite' if store.startswith('sqlite:') else 'postgres'} | {args.files} | {total / MIB:.0f} | "
              f"{args.concurrency} | {args.rate} | {len(kills)} ({moments}) | {len(interrupted)} / {resumed} | {len(rerun)} / {len(confirmed)} | "
              f"{(sent - total) / MIB:.1f} MiB of {total / MIB:.0f} MiB ({(sent - total) / total:.2%}) | {wall:.0f} s |")
        if problems:
            print("\n".join(problems[:40]), file=sys.stderr)
            fail(f"{len(problems)} problem(s); work folder kept: {work}")
        print(f"\ndurable_kill: OK (seed {seed})", file=sys.stderr)
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()
        nginx.terminate()
        nginx.wait()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
