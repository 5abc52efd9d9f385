#!/usr/bin/env python3
"""Instructions and mallocs per GET under callgrind (scripts/callgrind-per-get runs it).

Starts nginx on 127.0.0.1 serving a 1 KiB file over HTTP/1.1, runs each client under
`valgrind --tool=callgrind` at two request counts (2,000 and 6,000 by default) and prints the
steady-state cost per GET: (at 6,000 - at 2,000) / 4,000, for the instructions callgrind counts
(`Ir`, every thread of the client) and for the calls to malloc, calloc, realloc and
posix_memalign/aligned_alloc it saw. Instructions do not depend on the machine's load, so the
figures can be compared across runs and machines of one kind (timing still moves them a
little: how many reads a response takes, how many transfers one engine turn finishes).

    callgrind.py                           the four cells: CurlQueue handlers c=8, distinct and
                                           equal URLs, and the C libcurl multi program the same
    callgrind.py --cells cq-distinct --concurrency 1 --low 2000 --high 12000
    callgrind.py --check Benchmarks/thresholds.json     the CI guard (see that file)

Each cell may be run --runs times (the median is kept). Exit status 1 when --check finds a
figure more than the file's tolerance over its threshold.
"""
import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CELLS = {
    # name: (client, same_url)
    "cq-distinct": ("cq", False),
    "cq-equal": ("cq", True),
    "c-distinct": ("c", False),
    "c-equal": ("c", True),
}
ALLOCATORS = {"malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", default="cq-distinct,cq-equal,c-distinct,c-equal",
                   help="comma-separated: " + ", ".join(CELLS))
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--low", type=int, default=2000)
    p.add_argument("--high", type=int, default=6000)
    p.add_argument("--runs", type=int, default=1, help="runs per cell; the median is kept")
    p.add_argument("--cq", default=os.path.join(HERE, ".build", "release", "cq-bench"), help="the cq-bench binary")
    p.add_argument("--c", default=os.path.join(HERE, ".build", "c", "multi_bench"), help="the C baseline binary")
    p.add_argument("--check", metavar="FILE", help="thresholds (JSON) to check the cells against")
    p.add_argument("--keep", metavar="DIR", help="keep the callgrind files in DIR")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON line too")
    return p.parse_args()


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx on 127.0.0.1 (one worker, keep-alive without limit), started and stopped here."""

    def __init__(self, work):
        self.port = free_port()
        www = os.path.join(work, "www")
        os.makedirs(www)
        with open(os.path.join(www, "1k"), "wb") as f:
            f.write(bytes(i % 251 for i in range(1024)))
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""
daemon off; master_process off; worker_processes 1;
pid {work}/nginx.pid; error_log {work}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on; tcp_nopush on; tcp_nodelay on;
    keepalive_timeout 300s; keepalive_requests 10000000;
    client_body_temp_path {work}/t-body; proxy_temp_path {work}/t-proxy;
    fastcgi_temp_path {work}/t-fcgi; uwsgi_temp_path {work}/t-uwsgi; scgi_temp_path {work}/t-scgi;
    root {www};
    server {{ listen 127.0.0.1:{self.port}; }}
}}
""")
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.process = subprocess.Popen([nginx, "-p", work, "-c", conf, "-e", f"{work}/error.log"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}/1k"
        for _ in range(400):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    if len(r.read()) == 1024:
                        return
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.025)
        self.stop()
        raise SystemExit("callgrind: nginx did not start: " + open(f"{work}/error.log").read())

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def read_profile(path):
    """(instructions, allocator calls) of a callgrind file: its totals, and the calls= lines
    whose callee is an allocator (names compressed as `(id) name` or not)."""
    names = {}
    instructions = None
    allocs = 0
    callee = None
    ref = re.compile(r"^\((\d+)\)(?: (.*))?$")

    def name_of(text):
        m = ref.match(text)
        if not m:
            return text
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "")

    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("fn="):
                name_of(line[3:].rstrip("\n"))
                callee = None
            elif line.startswith("cfn="):
                callee = name_of(line[4:].rstrip("\n"))
            elif line.startswith("calls="):
                if callee in ALLOCATORS:
                    allocs += int(line[6:].split()[0])
            elif line.startswith("summary:") or line.startswith("totals:"):
                instructions = int(line.split()[1])
    if instructions is None:
        raise SystemExit(f"callgrind: no totals in {path}")
    return instructions, allocs


def run_client(args, cell, url, n, work):
    client, same = CELLS[cell]
    out = os.path.join(work, f"cg.{cell}.{n}.{time.monotonic_ns()}")
    if client == "cq":
        cmd = [args.cq, "--mode", "handler", "--url", url, "--requests", str(n),
               "--concurrency", str(args.concurrency), "--expect", "1024"] + (["--same-url"] if same else [])
    else:
        cmd = [args.c, "--url", url, "--requests", str(n), "--concurrency", str(args.concurrency),
               "--expect", "1024"] + (["--same-url"] if same else [])
    full = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--compress-pos=no"] + cmd
    r = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    result = json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {}
    if r.returncode != 0 or result.get("errors", 1) != 0:
        raise SystemExit(f"callgrind: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    figures = read_profile(out)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        shutil.move(out, os.path.join(args.keep, f"cg.{cell}.c{args.concurrency}.{n}"))
    else:
        os.remove(out)
    return figures


def measure(args, cell, url, work):
    """Per-GET instructions and mallocs, steady state, median over the runs."""
    per_get, allocs = [], []
    span = args.high - args.low
    for _ in range(args.runs):
        low = run_client(args, cell, url, args.low, work)
        high = run_client(args, cell, url, args.high, work)
        per_get.append((high[0] - low[0]) / span)
        allocs.append((high[1] - low[1]) / span)
        log(f"callgrind: {cell} c={args.concurrency}: {per_get[-1]:,.0f} instructions, "
            f"{allocs[-1]:.2f} mallocs per GET")
    return {"instructions": statistics.median(per_get), "mallocs": statistics.median(allocs),
            "runs": [{"instructions": i, "mallocs": m} for i, m in zip(per_get, allocs)]}


def check(results, path):
    """Compares the cells with the thresholds file; returns the lines of the failures."""
    with open(path) as f:
        spec = json.load(f)
    tolerance = spec["tolerance"]
    failures = []
    for cell, limits in spec["cells"].items():
        got = results.get(cell)
        if got is None:
            continue
        for key in ("instructions", "mallocs"):
            limit = limits[key]
            ratio = got[key] / limit
            verdict = "FAIL" if ratio > 1 + tolerance else "ok"
            line = (f"{verdict:4} {cell} {key} per GET: {got[key]:,.2f} against {limit:,.2f} "
                    f"({(ratio - 1) * 100:+.1f} %, allowed +{tolerance * 100:.0f} %)")
            print(line)
            if verdict == "FAIL":
                failures.append(line)
    return failures


def main():
    args = parse_args()
    cells = [c for c in args.cells.split(",") if c]
    if args.check:
        with open(args.check) as f:
            spec = json.load(f)
        args.concurrency, args.low, args.high = spec["concurrency"], spec["low"], spec["high"]
        args.runs = max(args.runs, spec.get("runs", 1))
        cells = list(spec["cells"])
    for cell in cells:
        if cell not in CELLS:
            raise SystemExit(f"callgrind: unknown cell {cell}")
    work = tempfile.mkdtemp(prefix="curlqueue-callgrind-")
    server = Nginx(work)
    results = {}
    try:
        for cell in cells:
            results[cell] = measure(args, cell, server.url, work)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    c_ref = {False: results.get("c-distinct"), True: results.get("c-equal")}
    print(f"per GET, steady state ({args.high:,} - {args.low:,}) / {args.high - args.low:,}, "
          f"c = {args.concurrency}, median of {args.runs}:")
    print(f"{'cell':14} {'instructions':>12} {'x C':>6} {'mallocs':>8}")
    for cell, r in results.items():
        ref = c_ref[CELLS[cell][1]]
        ratio = f"{r['instructions'] / ref['instructions']:.2f}" if ref else "-"
        print(f"{cell:14} {r['instructions']:>12,.0f} {ratio:>6} {r['mallocs']:>8.2f}")
    if args.json:
        print(json.dumps({"concurrency": args.concurrency, "low": args.low, "high": args.high, "cells": results}))
    if args.check:
        failures = check(results, args.check)
        if failures:
            print(f"callgrind: {len(failures)} figure(s) over the thresholds of {args.check}; if the cost is "
                  "meant, move the threshold in a commit that says why", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
