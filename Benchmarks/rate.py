#!/usr/bin/env python3
"""Bandwidth-limit accuracy of curlq against curl and aria2c, on nginx at 127.0.0.1.

    python3 Benchmarks/rate.py [--curlq PATH] [--seconds 10]

Each case downloads enough bytes to last --seconds at the asked rate from a fast local nginx
(no limit of its own), and prints the achieved rate as a share of the asked one:

  per file 1 MiB/s      curlq --limit-rate 1M    curl --limit-rate 1M   aria2c --max-download-limit=1M
  per file 10 MiB/s     the same with 10M
  overall 10 MiB/s, 4   curlq --max-overall-rate 10M -j 4 (4 files of a quarter each)
                        aria2c -Z --max-overall-download-limit=10M -j 4 (-Z: each URL a file of its own, not mirrors)

Achieved = bytes / seconds, the seconds from the start of the run to the last file's end
(curlq's --json `seconds`; for curl and aria2c the process's wall time, which includes their
start-up of a few milliseconds). Prints a Markdown table (docs/performance.md has one).
"""
import argparse, json, os, shutil, socket, subprocess, sys, tempfile, time

MIB = 1 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(work, files, limit_rate=None, access_log=None):
    """Starts nginx serving `files` ({name: size in bytes, a multiple of 1 MiB}) from work/www on
    a free port of 127.0.0.1; `limit_rate` (nginx's syntax, "2m") limits each connection. Returns
    (process, base URL). Benchmarks/split.py, durable.py and durable_kill.py use it too.
    `files` None: work/www exists already (durable_kill.py writes it). `access_log`: a path that
    gets one line per request: URI, status, Range header ("-" when none), body bytes sent."""
    www = os.path.join(work, "www")
    if files is not None:
        os.makedirs(www)
        chunk = os.urandom(MIB)
        for name, size in files.items():
            with open(os.path.join(www, name), "wb") as f:
                for _ in range(size // MIB):
                    f.write(chunk)
    port = free_port()
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""
daemon off; master_process off; worker_processes 1;
pid {work}/nginx.pid; error_log {work}/error.log warn;
events {{ worker_connections 256; }}
http {{
    {f"log_format range '$uri $status $http_range $body_bytes_sent'; access_log {access_log} range;" if access_log else "access_log off;"} sendfile on;{f" limit_rate {limit_rate};" if limit_rate else ""}
    client_body_temp_path {work}/t-body; proxy_temp_path {work}/t-proxy;
    fastcgi_temp_path {work}/t-fcgi; uwsgi_temp_path {work}/t-uwsgi; scgi_temp_path {work}/t-scgi;
    root {www};
    server {{ listen 127.0.0.1:{port}; }}
}}
""")
    process = subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-p", work, "-c", conf, "-e", f"{work}/error.log"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.025)
    process.kill()
    raise SystemExit("nginx did not start")


def timed(argv):
    start = time.monotonic()
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    elapsed = time.monotonic() - start
    if result.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({result.returncode}): {result.stderr[-400:]}")
    return elapsed, result.stdout


def default_curlq():
    """The release curlq if built, else the debug one."""
    here = os.path.dirname(os.path.abspath(__file__))
    release = os.path.join(here, "..", ".build", "release", "curlq")
    return release if os.path.exists(release) else os.path.join(here, "..", ".build", "debug", "curlq")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--curlq", default=default_curlq())
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    s = args.seconds
    one = int(1 * MIB * s) // MIB * MIB
    ten = int(10 * MIB * s) // MIB * MIB
    quarter = ten // 4 // MIB * MIB
    files = {"one": one, "ten": ten, "q1": quarter, "q2": quarter, "q3": quarter, "q4": quarter}
    work = tempfile.mkdtemp(prefix="curlq-rate-")
    nginx, base = start_nginx(work, files)
    rows = []
    try:
        def curlq(label, options, names):
            out = os.path.join(work, "out-" + label.replace(" ", "-"))
            _, stdout = timed([args.curlq, "get", "-q", "--json", "-d", out, *options] + [f"{base}/{n}" for n in names])
            report = json.loads(stdout)
            records = report.get("files") or report.get("results") or []
            total = sum(r["bytes"] for r in records)
            seconds = max(r["seconds"] for r in records)
            shutil.rmtree(out, ignore_errors=True)
            return total, seconds

        def other(argv, total, out):
            os.makedirs(out, exist_ok=True)
            seconds, _ = timed(argv)
            shutil.rmtree(out, ignore_errors=True)
            return total, seconds

        cases = [
            ("per file 1 MiB/s", 1 * MIB, [
                ("curlq --limit-rate 1M", lambda: curlq("1", ["--limit-rate", "1M"], ["one"])),
                ("curl --limit-rate 1M", lambda: other(["curl", "-s", "-o", f"{work}/c1/one", "--limit-rate", "1M", f"{base}/one"], one, f"{work}/c1")),
                ("aria2c --max-download-limit=1M", lambda: other(["aria2c", "-q", "-d", f"{work}/a1", "--max-download-limit=1M", "--allow-overwrite=true", f"{base}/one"], one, f"{work}/a1")),
            ]),
            ("per file 10 MiB/s", 10 * MIB, [
                ("curlq --limit-rate 10M", lambda: curlq("10", ["--limit-rate", "10M"], ["ten"])),
                ("curl --limit-rate 10M", lambda: other(["curl", "-s", "-o", f"{work}/c10/ten", "--limit-rate", "10M", f"{base}/ten"], ten, f"{work}/c10")),
                ("aria2c --max-download-limit=10M", lambda: other(["aria2c", "-q", "-d", f"{work}/a10", "--max-download-limit=10M", "--allow-overwrite=true", f"{base}/ten"], ten, f"{work}/a10")),
            ]),
            ("overall 10 MiB/s, 4 files", 10 * MIB, [
                ("curlq --max-overall-rate 10M -j 4", lambda: curlq("o", ["--max-overall-rate", "10M", "-j", "4"], ["q1", "q2", "q3", "q4"])),
                ("aria2c -Z --max-overall-download-limit=10M -j 4", lambda: other(
                    ["aria2c", "-q", "-Z", "-d", f"{work}/ao", "-j", "4", "--max-overall-download-limit=10M", "--allow-overwrite=true"]
                    + [f"{base}/q{i}" for i in range(1, 5)], 4 * quarter, f"{work}/ao")),
            ]),
        ]
        for case, asked, runs in cases:
            for label, run in runs:
                total, seconds = run()
                achieved = total / seconds
                rows.append((case, label, total / MIB, seconds, achieved / MIB, 100 * achieved / asked))
                print(f"{case:28} {label:46} {total / MIB:7.1f} MiB {seconds:7.2f} s {achieved / MIB:7.3f} MiB/s {100 * achieved / asked:6.1f} %",
                      file=sys.stderr)
    finally:
        nginx.kill()
        nginx.wait()
        shutil.rmtree(work, ignore_errors=True)
    print("| Case | Command | MiB | Seconds | MiB/s | Achieved/asked |")
    print("|---|---|---:|---:|---:|---:|")
    for case, label, mib, seconds, rate, share in rows:
        print(f"| {case} | `{label}` | {mib:.0f} | {seconds:.2f} | {rate:.3f} | {share:.1f} % |")


if __name__ == "__main__":
    main()
