#!/usr/bin/env python3
"""The benchmark driver behind scripts/bench (which installs and builds first).

Generates the payloads, a throw-away CA and server certificate, starts nginx on 127.0.0.1
(HTTP/1.1 keep-alive on one port, TLS + HTTP/2 on another), runs every client on every
workload -- interleaved, each cell the median of several runs -- reads nginx's stub_status for
the connections each run opened, stops nginx, prints one table and writes it as Markdown and
JSON under Benchmarks/results/.

Server and clients are pinned to different cores with taskset. Every client is a process of
its own printing one JSON line (requests, seconds, user+sys CPU, peak RSS, errors); the curl
CLI and aria2c are measured from outside by runstat (wait4's rusage).
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RELEASE = os.path.join(HERE, ".build", "release")
CBIN = os.path.join(HERE, ".build", "c")
KIB, MIB = 1024, 1024 * 1024


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a smoke run: small counts, one run per cell")
    p.add_argument("--runs", type=int, help="runs per cell (default 3, 1 with --quick)")
    p.add_argument("--only", help="comma-separated workload names to run")
    p.add_argument("--clients", help="comma-separated client names to run")
    p.add_argument("--server-cpu", default="0")
    p.add_argument("--client-cpu", default="1")
    p.add_argument("--output", help="file name stem under Benchmarks/results/ (default latest, or quick)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=PATH",
                   help="another build of cq-bench, run like cq-handler as client cq@NAME, like cq-async as "
                        "cq-async@NAME and like cq-batch as cq-batch@NAME (A/B of a library change)")
    return p.parse_args()


ARGS = parse_args()
QUICK = ARGS.quick
RUNS = ARGS.runs or (1 if QUICK else 3)
SMALL_N = 1000 if QUICK else 10000
BIG_SIZE = (32 if QUICK else 256) * MIB
BIG_N = 4 if QUICK else 8
SLOW_SIZE = 32 * KIB
SLOW_RATE = "16k"  # nginx limit_rate: each slow transfer takes about 2 s
SCHED_N = 20000 if QUICK else 100000
CLIENT_TIMEOUT = 300


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# The server


class Nginx:
    def __init__(self, work):
        self.work = work
        self.http_port = free_port()
        self.https_port = free_port()
        www = os.path.join(work, "www")
        os.makedirs(os.path.join(www, "slow"), exist_ok=True)
        with open(os.path.join(www, "1k"), "wb") as f:
            f.write(bytes(i % 251 for i in range(1024)))
        with open(os.path.join(www, "slow", "32k"), "wb") as f:
            f.write(os.urandom(SLOW_SIZE))
        with open(os.path.join(www, "big"), "wb") as f:
            chunk = os.urandom(MIB)
            for _ in range(BIG_SIZE // MIB):
                f.write(chunk)
        self.make_certificates()
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""
daemon off; master_process off; worker_processes 1;
pid {work}/nginx.pid; error_log {work}/error.log warn;
worker_rlimit_nofile 20000;
events {{ worker_connections 8192; multi_accept on; }}
http {{
    access_log off;
    sendfile on; tcp_nopush on; tcp_nodelay on;
    keepalive_timeout 300s; keepalive_requests 10000000;
    open_file_cache max=64 inactive=300s;
    client_body_temp_path {work}/t-body; proxy_temp_path {work}/t-proxy;
    fastcgi_temp_path {work}/t-fcgi; uwsgi_temp_path {work}/t-uwsgi; scgi_temp_path {work}/t-scgi;
    root {www};
    server {{
        listen 127.0.0.1:{self.http_port} backlog=4096;
        location = /status {{ stub_status; }}
        location /slow/ {{ limit_rate {SLOW_RATE}; }}
    }}
    server {{
        listen 127.0.0.1:{self.https_port} ssl http2 backlog=4096;
        ssl_certificate {work}/server.pem; ssl_certificate_key {work}/server.key;
        http2_max_concurrent_streams 256;
    }}
}}
""")
        self.process = subprocess.Popen(
            ["taskset", "-c", ARGS.server_cpu, shutil.which("nginx") or "/usr/sbin/nginx",
             "-p", work, "-c", conf, "-e", f"{work}/error.log"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                self.accepts()
                return
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.025)
        raise SystemExit("nginx did not start: " + open(f"{work}/error.log").read())

    def make_certificates(self):
        script = """
set -e
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj '/CN=CurlQueue Bench CA' 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj '/CN=localhost' 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > san.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile san.ext 2>/dev/null
rm -f ca.key
"""
        subprocess.run(["sh", "-c", script], cwd=self.work, check=True)
        self.ca = os.path.join(self.work, "ca.pem")

    def url(self, path, tls=False):
        return f"https://127.0.0.1:{self.https_port}{path}" if tls else f"http://127.0.0.1:{self.http_port}{path}"

    def accepts(self):
        """stub_status's count of accepted connections (this request's own included)."""
        with urllib.request.urlopen(self.url("/status"), timeout=5) as r:
            lines = r.read().decode().splitlines()
        return int(lines[2].split()[0])

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


# ---------------------------------------------------------------------------------------------
# Workloads and clients


class Workload:
    def __init__(self, name, title, path, n, c, expect, tls=False, kind="small", out=False, mode=None, same_url=False,
                 keep=False):
        self.name, self.title, self.path, self.n, self.c = name, title, path, n, c
        self.expect, self.tls, self.kind, self.out = expect, tls, kind, out
        # keep: bodies kept in memory, however large (cq-bench --keep-bodies).
        self.keep = keep
        # mode: cq-bench's --mode for a sched workload (default: its name). same_url: every
        # request equal (cq-bench --same-url, duplicates allowed); CurlQueue's handlers form only.
        self.mode, self.same_url = mode or name, same_url


def workloads():
    big_title = f"{BIG_N} × {BIG_SIZE // MIB} MiB, c=4"
    all_ = [
        Workload("h1-c1", f"{SMALL_N:,} × 1 KiB GET, HTTP/1.1, c=1", "/1k", SMALL_N, 1, 1024),
        Workload("h1-c8", f"{SMALL_N:,} × 1 KiB GET, HTTP/1.1, c=8", "/1k", SMALL_N, 8, 1024),
        Workload("h1-c64", f"{SMALL_N:,} × 1 KiB GET, HTTP/1.1, c=64", "/1k", SMALL_N, 64, 1024),
        Workload("h2-c64", f"{SMALL_N:,} × 1 KiB GET, HTTPS + HTTP/2, c=64", "/1k", SMALL_N, 64, 1024, tls=True),
        Workload("big-stream", big_title + ", streamed (discarded)", "/big", BIG_N, 4, BIG_SIZE, kind="big"),
        Workload("big-files", big_title + ", written to files", "/big", BIG_N, 4, BIG_SIZE, kind="big", out=True),
        Workload("big-memory", big_title + ", kept in memory", "/big", BIG_N, 4, BIG_SIZE, kind="big", keep=True),
        Workload("slow-100", f"100 slow transfers (32 KiB at {SLOW_RATE}/s), all at once", "/slow/32k", 100, 100,
                 SLOW_SIZE, kind="slow"),
        Workload("slow-1000", f"1,000 slow transfers (32 KiB at {SLOW_RATE}/s), all at once", "/slow/32k", 1000, 1000,
                 SLOW_SIZE, kind="slow"),
        Workload("sched-cancel", f"{SCHED_N:,} operations added to a suspended queue, then cancelled", "", SCHED_N, 0,
                 None, kind="sched"),
        Workload("sched-fifo", f"{SCHED_N:,} operations of one priority through 1 slot (no network)", "", SCHED_N, 1,
                 None, kind="sched"),
        Workload("sched-priority", f"{SCHED_N:,} operations of random priorities through 1 slot (no network)", "",
                 SCHED_N, 1, None, kind="sched"),
        # Many equal requests (issue 19.3) against as many distinct ones: CurlQueue only.
        Workload("sched-fifo-equal", f"{SCHED_N:,} equal operations through 1 slot (no network, duplicates allowed)",
                 "", SCHED_N, 1, None, kind="sched", mode="sched-fifo", same_url=True),
        Workload("h1-c8-distinct", f"{SCHED_N:,} × 1 KiB GET, distinct URLs, HTTP/1.1, c=8 (CurlQueue only)", "/1k",
                 SCHED_N, 8, 1024, kind="equal"),
        Workload("h1-c8-equal", f"{SCHED_N:,} × 1 KiB GET of one URL, HTTP/1.1, c=8 (duplicates allowed)", "/1k",
                 SCHED_N, 8, 1024, kind="equal", same_url=True),
    ]
    if ARGS.only:
        wanted = ARGS.only.split(",")
        all_ = [w for w in all_ if w.name in wanted]
    return all_


CLIENTS = ["c-multi", "cq-handler", "cq-async", "cq-batch", "urlsession", "ahc", "curl-cli", "aria2c"]
LABELS = {
    "c-multi": "C libcurl multi (limit)",
    "cq-handler": "CurlQueue, handlers",
    "cq-async": "CurlQueue, async",
    "cq-batch": "CurlQueue, async batch",
    "urlsession": "URLSession",
    "ahc": "async-http-client",
    "curl-cli": "curl CLI --parallel",
    "aria2c": "aria2c",
}
VARIANTS = dict(v.split("=", 1) for v in ARGS.variant)
for _name in VARIANTS:
    CLIENTS += [f"cq@{_name}", f"cq-async@{_name}", f"cq-batch@{_name}"]
    LABELS[f"cq@{_name}"] = f"CurlQueue, handlers [{_name}]"
    LABELS[f"cq-async@{_name}"] = f"CurlQueue, async [{_name}]"
    LABELS[f"cq-batch@{_name}"] = f"CurlQueue, async batch [{_name}]"
NOTES = {}


def client_command(client, w, server, work, out_dir):
    """The argv to run `client` on `w`, and the file its stdout goes to (runstat's), or None when
    the client does not take part in this workload."""
    url = server.url(w.path, w.tls)
    common = ["--url", url, "--requests", str(w.n), "--concurrency", str(w.c)]
    if w.expect is not None:
        common += ["--expect", str(w.expect)]
    if w.tls:
        common += ["--ca", server.ca]
    if w.out:
        common += ["--out", out_dir]

    if w.same_url:
        common += ["--same-url"]
    if w.keep and (client.startswith("cq-") or client.startswith("cq@")):
        # Bodies over Request.maxInMemoryBodySize's default (64 MiB): cq-bench sets the limit
        # to --expect's size and says so on stderr.
        common += ["--keep-bodies"]
        NOTES["cq-keep"] = ("CurlQueue's kept-in-memory cells keep each body whole (`cq-bench --keep-bodies`): "
                            "bodies over the 64 MiB default of `Request.maxInMemoryBodySize` need a higher limit, "
                            "which the client sets to the announced size (and says so).")
    if w.kind == "sched":
        if client != "cq-handler" and not client.startswith("cq@"):
            return None
        binary = os.path.abspath(VARIANTS[client[3:]]) if client.startswith("cq@") else os.path.join(RELEASE, "cq-bench")
        same = ["--same-url"] if w.same_url else []
        return [binary, "--mode", w.mode, "--url", "http://127.0.0.1:9/op", "--requests", str(w.n)] + same, None
    if w.kind == "equal" and client != "cq-handler" and not client.startswith("cq@"):
        return None
    if client == "c-multi":
        extra = ["--buffer", str(512 * KIB)] if w.kind == "big" else []
        return [os.path.join(CBIN, "multi_bench")] + common + extra, None
    if client.startswith("cq@"):
        return [os.path.abspath(VARIANTS[client[3:]]), "--mode", "handler"] + common, None
    if client.startswith("cq-async@"):
        return [os.path.abspath(VARIANTS[client[9:]]), "--mode", "async"] + common, None
    if client.startswith("cq-batch@"):
        return [os.path.abspath(VARIANTS[client[9:]]), "--mode", "batch"] + common, None
    if client in ("cq-handler", "cq-async", "cq-batch"):
        mode = client[3:]  # handler, async or batch
        if w.name == "big-stream":
            NOTES["cq-stream"] = ("CurlQueue's big-stream cells discard each body as it arrives "
                                  "(`Request.discardsBody`), like the C baseline's counting write callback.")
        return [os.path.join(RELEASE, "cq-bench"), "--mode", mode] + common, None
    if client == "urlsession":
        mode = {"big-stream": "stream", "big-files": "download"}.get(w.name, "data")
        argv = [os.path.join(RELEASE, "urlsession-bench"), "--mode", mode] + [a for a in common]
        if w.tls:
            # FoundationNetworking on Linux takes no CA file: give this one process a private
            # mount namespace in which the system bundle is the benchmark's CA.
            i = argv.index("--ca")
            del argv[i:i + 2]
            argv = ["unshare", "--mount", "sh", "-c",
                    'mount --bind "$0" /etc/ssl/certs/ca-certificates.crt && exec "$@"', server.ca] + argv
        return argv, None
    if client == "ahc":
        mode = {"big-stream": "stream", "big-files": "download"}.get(w.name, "data")
        return [os.path.join(RELEASE, "ahc-bench"), "--mode", mode] + common, None
    if client == "curl-cli":
        if w.c > 300:
            NOTES["curl-cli"] = "The curl CLI's --parallel-max stops at 300: it sits out the 1,000-transfer workload."
            return None
        config = os.path.join(work, f"curl-{w.name}.cfg")
        with open(config, "w") as f:
            for i in range(w.n):
                target = os.path.join(out_dir, f"body-{i}") if w.out else "/dev/null"
                f.write(f'url = "{url}?i={i}"\noutput = "{target}"\n')
        argv = ["curl", "-s", "--no-progress-meter", "-K", config, "-w", "%{response_code} %{size_download}\\n"]
        if w.c > 1:
            argv += ["--parallel", "--parallel-max", str(w.c)]
            if not w.tls:
                # No HTTP/2 on http://: open connections at once instead of waiting for the
                # first one to find out (which makes one transfer wait for a whole body).
                argv += ["--parallel-immediate"]
        if w.tls:
            argv += ["--http2", "--cacert", server.ca]
        stdout = os.path.join(work, "curl-stdout.txt")
        return [os.path.join(CBIN, "runstat"), "--stdout", stdout, "--"] + argv, stdout
    if client == "aria2c":
        if w.name != "big-files":
            return None
        inputs = os.path.join(work, "aria2-input.txt")
        with open(inputs, "w") as f:
            for i in range(w.n):
                f.write(f"{url}?i={i}\n  out=body-{i}\n")
        argv = ["aria2c", "-q", "-i", inputs, "-d", out_dir, "-j", str(w.c), "-x", "1", "-s", "1",
                "--file-allocation=none", "--allow-overwrite=true", "--auto-file-renaming=false",
                "--enable-http-keep-alive=true", "--max-connection-per-server=1", "--check-integrity=false"]
        return [os.path.join(CBIN, "runstat"), "--"] + argv, None
    raise ValueError(client)


def run_once(client, w, server, work):
    out_dir = os.path.join(work, "out")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    made = client_command(client, w, server, work, out_dir)
    if made is None:
        return None
    argv, stdout_file = made
    argv = ["taskset", "-c", ARGS.client_cpu] + argv
    if w.out:
        os.sync()  # start clean: no writeback of earlier runs' pages during this one
    before = server.accepts() if w.kind != "sched" else None
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=CLIENT_TIMEOUT)
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        result = json.loads(lines[-1]) if lines else None
        if result is None:
            log(f"  {client} {w.name}: no result (exit {p.returncode}) {p.stderr.strip()[-400:]}")
            result = {"requests": w.n, "seconds": 0, "cpu_user": 0, "cpu_sys": 0, "rss_peak_kib": 0,
                      "errors": w.n, "bytes": 0, "failed": True}
        elif p.stderr.strip():
            log(f"  {client} {w.name}: {p.stderr.strip()[-300:]}")
    except subprocess.TimeoutExpired:
        log(f"  {client} {w.name}: timed out after {CLIENT_TIMEOUT} s")
        result = {"requests": w.n, "seconds": CLIENT_TIMEOUT, "cpu_user": 0, "cpu_sys": 0, "rss_peak_kib": 0,
                  "errors": w.n, "bytes": 0, "failed": True}
    if "exit" in result:  # runstat: the client is the curl CLI or aria2c
        result["requests"] = w.n
        errors = 0 if result["exit"] == 0 else w.n
        if stdout_file:
            seen = open(stdout_file).read().split("\n")
            ok = sum(1 for l in seen if l.strip() == f"200 {w.expect}")
            errors = w.n - ok
        result["errors"] = errors
        result["bytes"] = w.n * (w.expect or 0) if errors == 0 else 0
    if before is not None:
        result["connections"] = server.accepts() - before - 1  # minus the second status request's own
    shutil.rmtree(out_dir, ignore_errors=True)
    return result


# ---------------------------------------------------------------------------------------------
# Figures


def cell_figures(w, runs):
    """Median of each figure over the runs."""
    def med(f):
        return statistics.median(f(r) for r in runs)
    seconds = med(lambda r: r["seconds"])
    cell = {
        "runs": len(runs),
        "seconds": seconds,
        "rate": med(lambda r: (r["bytes"] / MIB if w.kind == "big" else r["requests"]) / r["seconds"]
                    if r["seconds"] > 0 else 0),
        "cpu_us_per_request": med(lambda r: (r["cpu_user"] + r["cpu_sys"]) * 1e6 / r["requests"]),
        "cpu_seconds": med(lambda r: r["cpu_user"] + r["cpu_sys"]),
        "rss_peak_mib": med(lambda r: r["rss_peak_kib"] / 1024),
        "errors": max(r["errors"] for r in runs),
        "raw": runs,
    }
    if "connections" in runs[0]:
        cell["connections"] = med(lambda r: r["connections"])
    for key in ("add_seconds", "cancel_seconds", "handlers_seconds", "add_cancel_seconds", "bytes_per_pending_op",
                "run_seconds", "out_of_order"):
        if key in runs[0]:
            cell[key] = med(lambda r: r[key])
    return cell


def fmt(x, digits=0):
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def markdown(results, meta):
    out = []
    out.append(f"Run {meta['date']} on {meta['machine']}; {meta['runs']} run(s) per cell, median; "
               f"server on CPU {ARGS.server_cpu}, client on CPU {ARGS.client_cpu}.")
    out.append("")
    out.append("| workload | client | rate | × C rate | CPU µs/req | × C CPU | peak RSS MiB | conns | errors |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for w in results["workloads"]:
        if w["kind"] == "sched":
            continue
        cells = w["cells"]
        base = cells.get("c-multi")
        unit = "MiB/s" if w["kind"] == "big" else "req/s"
        first = True
        for client in CLIENTS:
            c = cells.get(client)
            if c is None:
                continue
            ratio = c["rate"] / base["rate"] if base and base["rate"] else None
            cpu_ratio = c["cpu_us_per_request"] / base["cpu_us_per_request"] if base and base[
                "cpu_us_per_request"] else None
            out.append("| {} | {} | {} {} | {} | {} | {} | {} | {} | {} |".format(
                f"**{w['title']}**" if first else "", LABELS[client], fmt(c["rate"], 0), unit,
                fmt(ratio, 2), fmt(c["cpu_us_per_request"], 1), fmt(cpu_ratio, 2), fmt(c["rss_peak_mib"], 1),
                fmt(c.get("connections"), 0), c["errors"]))
            first = False
    sched = [w for w in results["workloads"] if w["kind"] == "sched"]
    if sched:
        out.append("")
        out.append("Scheduler only (CurlQueue, no network):")
        out.append("")
        out.append("| workload | wall s | add s | cancel / run s | CPU s | bytes per pending op | peak RSS MiB | errors |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for w in sched:
            for client in [k for k in CLIENTS if k in w["cells"]]:
                c = w["cells"][client]
                second = c.get("add_cancel_seconds", c.get("run_seconds"))
                rest = (c.get("cancel_seconds", 0) + c.get("handlers_seconds", 0)) if "cancel_seconds" in c else c.get(
                    "run_seconds")
                out.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
                    w["title"] + ("" if client == "cq-handler" else f" [{client}]"), fmt(second if "add_cancel_seconds" in c else c["add_seconds"] + c["run_seconds"], 3),
                    fmt(c["add_seconds"], 3), fmt(rest, 3), fmt(c["cpu_seconds"], 3),
                    fmt(c.get("bytes_per_pending_op"), 0), fmt(c["rss_peak_mib"], 1), c["errors"]))
    out.append("")
    out.append("Targets (CurlQueue, both forms):")
    out.append("")
    for line in results["targets"]:
        out.append(f"- {line}")
    if NOTES:
        out.append("")
        out.append("Notes:")
        out.append("")
        for note in NOTES.values():
            out.append(f"- {note}")
    return "\n".join(out) + "\n"


def evaluate_targets(results):
    by = {w["name"]: w for w in results["workloads"]}
    lines = []

    def verdict(ok):
        return "**met**" if ok else "**MISSED**"

    for name in ("h1-c1", "h1-c8", "h1-c64", "h2-c64"):
        w = by.get(name)
        if not w or "c-multi" not in w["cells"]:
            continue
        base = w["cells"]["c-multi"]
        for client in ("cq-handler", "cq-async", "cq-batch"):
            c = w["cells"].get(client)
            if not c:
                continue
            rate = c["rate"] / base["rate"]
            cpu = c["cpu_us_per_request"] / base["cpu_us_per_request"]
            want_conns = 1 if name.startswith("h2") else w["c"]
            checks = [rate >= 0.85, c["errors"] == 0]
            text = f"{name} {LABELS[client]}: {rate:.2f}× C req/s (≥ 0.85)"
            if name != "h1-c1":
                checks += [cpu <= 1.5, c.get("connections") == want_conns]
                text += f", {cpu:.2f}× C CPU (≤ 1.5), {fmt(c.get('connections'))} connections (= {want_conns})"
            lines.append(f"{text}: {verdict(all(checks))}")
    for name in ("big-stream", "big-files"):
        w = by.get(name)
        if not w or "curl-cli" not in w["cells"]:
            continue
        ref = w["cells"]["curl-cli"]
        for client in ("cq-handler", "cq-async", "cq-batch"):
            c = w["cells"].get(client)
            if not c:
                continue
            rate = c["rate"] / ref["rate"]
            checks = [rate >= 0.95, c["errors"] == 0]
            text = f"{name} {LABELS[client]}: {rate:.2f}× curl CLI MiB/s (≥ 0.95)"
            if name == "big-files":
                checks.append(c["rss_peak_mib"] < 32)
                text += f", peak RSS {c['rss_peak_mib']:.1f} MiB (< 32)"
            lines.append(f"{text}: {verdict(all(checks))}")
    w = by.get("sched-cancel")
    if w and "cq-handler" in w["cells"]:
        c = w["cells"]["cq-handler"]
        ok = c["add_cancel_seconds"] < 1 and c["bytes_per_pending_op"] < 1024 and c["errors"] == 0
        lines.append(f"{w['n']:,} pending operations added and cancelled in {c['add_cancel_seconds']:.3f} s (< 1), "
                     f"{c['bytes_per_pending_op']:.0f} bytes each (< 1,024): {verdict(ok)}")
    for equal, distinct in (("sched-fifo-equal", "sched-fifo"), ("h1-c8-equal", "h1-c8-distinct")):
        a, b = by.get(equal), by.get(distinct)
        if a and b and "cq-handler" in a["cells"] and "cq-handler" in b["cells"]:
            ca, cb = a["cells"]["cq-handler"], b["cells"]["cq-handler"]
            ratio = ca["cpu_seconds"] / cb["cpu_seconds"] if cb["cpu_seconds"] else 0
            lines.append(f"{equal}: {ratio:.2f}× the CPU of {distinct} (≤ 1.1, no worse for equal requests): "
                         f"{verdict(ratio <= 1.1 and ca['errors'] == 0 and cb['errors'] == 0)}")
    for name in ("sched-priority",):
        w = by.get(name)
        if w and "cq-handler" in w["cells"]:
            c = w["cells"]["cq-handler"]
            lines.append(f"{name}: {c.get('out_of_order', 0):.0f} completions out of priority order: "
                         f"{verdict(c.get('out_of_order', 1) == 0 and c['errors'] == 0)}")
    small, large = by.get("slow-100"), by.get("slow-1000")
    if small and large:
        for client in ("cq-handler", "cq-async", "cq-batch"):
            a, b = small["cells"].get(client), large["cells"].get(client)
            if not a or not b:
                continue
            growth = b["cpu_us_per_request"] / a["cpu_us_per_request"] if a["cpu_us_per_request"] else 0
            ok = b["errors"] == 0 and growth <= 1.25
            lines.append(f"1,000 concurrent transfers, {LABELS[client]}: {b['errors']} errors, CPU per transfer "
                         f"{growth:.2f}× that at 100 (linear growth: ≤ 1.25×): {verdict(ok)}")
    return lines


def machine():
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    def first_line(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0].strip()
        except Exception:
            return "?"
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "machine": f"{os.cpu_count()} × {model}, {mem:.0f} GiB, Linux {platform.release()}",
        "curl": first_line(["curl", "--version"]),
        "nginx": subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip(),
        "swift": first_line(["swift", "--version"]),
        "aria2c": first_line(["aria2c", "--version"]),
    }


def main():
    # SIGTERM (a stopped run) unwinds like Ctrl-C, so nginx is stopped and the files removed.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    work = tempfile.mkdtemp(prefix="curlqueue-bench-")
    meta = machine()
    meta["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta["runs"] = RUNS
    meta["quick"] = QUICK
    meta["command"] = " ".join(["scripts/bench"] + sys.argv[1:])
    clients = ARGS.clients.split(",") if ARGS.clients else CLIENTS
    log(f"bench: payloads, certificates and nginx in {work}")
    server = Nginx(work)
    results = {"meta": meta, "workloads": []}
    started = time.time()
    try:
        for w in workloads():
            runs = {c: [] for c in clients}
            for r in range(RUNS):
                order = clients[r % len(clients):] + clients[:r % len(clients)]  # interleaved, rotated
                for client in order:
                    result = run_once(client, w, server, work)
                    if result is None:
                        runs.pop(client, None)
                        continue
                    runs[client].append(result)
            cells = {c: cell_figures(w, rs) for c, rs in runs.items() if rs}
            results["workloads"].append({"name": w.name, "title": w.title, "kind": w.kind, "n": w.n, "c": w.c,
                                         "cells": cells})
            summary = ", ".join(f"{c} {cells[c]['rate']:,.0f}" for c in cells)
            log(f"bench: {w.name} done at {time.time() - started:.0f} s: {summary}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    results["targets"] = evaluate_targets(results)
    results["notes"] = list(NOTES.values())
    meta["total_seconds"] = round(time.time() - started)
    text = markdown(results, meta)
    stem = ARGS.output or ("quick" if QUICK else "latest")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    kind = "quick smoke run" if QUICK else ("partial run" if ARGS.only or ARGS.clients or ARGS.variant else "full run")
    header = (f"# CurlQueue benchmarks ({kind})\n\n"
              f"`{meta['command']}` — {meta['machine']}; {meta['curl']}; {meta['nginx']}; {meta['swift']}; "
              f"{meta['total_seconds']} s in all.\n\n")
    with open(os.path.join(HERE, "results", stem + ".md"), "w") as f:
        f.write(header + text)
    with open(os.path.join(HERE, "results", stem + ".json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    print(text)
    log(f"bench: written Benchmarks/results/{stem}.md and .json ({meta['total_seconds']} s)")


if __name__ == "__main__":
    main()
