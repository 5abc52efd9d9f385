#!/usr/bin/env python3
"""The OpenAPI transports side by side: one generated client (Tests/OpenAPIFixtureClient), one
server (Tests/OpenAPIFixture, release, on 127.0.0.1), three transports -- CurlQueueTransport,
swift-openapi-async-http-client and swift-openapi-urlsession -- in one run, interleaved, each
cell the median of --runs runs.

Workloads: small JSON calls (getItem) at c = 1 and c = 64 (calls/s, CPU per call), one
streamed download and one streamed upload of unknown length (rate, peak RSS of the client
process).

Server and client are pinned to different cores with taskset when there are two or more.
Writes the table to Benchmarks/results/openapi.md and prints it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCH = os.path.join(HERE, "OpenAPIBench")
MIB = 1 << 20


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--calls", type=int, default=5000, help="JSON calls per run")
    p.add_argument("--size", type=int, default=256 * MIB, help="streamed body size")
    p.add_argument("--no-build", action="store_true")
    p.add_argument("--only", default="", help="run only the workloads whose name starts with this (json, stream, upload)")
    args = p.parse_args()

    if not args.no_build:
        subprocess.run(["swift", "build", "-c", "release", "--product", "OpenAPIFixture"], cwd=ROOT, check=True)
        subprocess.run(["swift", "build", "-c", "release"], cwd=BENCH, check=True)
    server_bin = os.path.join(ROOT, ".build", "release", "OpenAPIFixture")
    client_bin = os.path.join(BENCH, ".build", "release", "openapi-bench")
    two_cores = (os.cpu_count() or 1) >= 2
    pin = (lambda core: ["taskset", "-c", str(core)]) if two_cores else (lambda core: [])

    server = subprocess.Popen(pin(0) + [server_bin], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        transports = ["cq", "ahc", "urlsession"]
        workloads = [
            ("json c=1", ["--mode", "json", "--concurrency", "1", "--count", str(args.calls)]),
            ("json c=64", ["--mode", "json", "--concurrency", "64", "--count", str(args.calls)]),
            ("stream %d MiB" % (args.size // MIB), ["--mode", "stream", "--size", str(args.size)]),
            ("upload %d MiB" % (args.size // MIB), ["--mode", "upload", "--size", str(args.size)]),
        ]
        workloads = [w for w in workloads if w[0].startswith(args.only)]
        results = {}
        for run in range(args.runs):
            for name, flags in workloads:
                for transport in transports:
                    out = subprocess.run(pin(1) + [client_bin, "--transport", transport, "--url", url] + flags,
                                         capture_output=True, text=True)
                    if out.returncode != 0:
                        print("%s %s failed: %s" % (transport, name, out.stderr.strip()), file=sys.stderr)
                        continue
                    line = json.loads(out.stdout.strip().splitlines()[-1])
                    results.setdefault((name, transport), []).append(line)
                    print(run, name, transport, out.stdout.strip(), file=sys.stderr)
    finally:
        server.kill()
        server.wait()

    names = {"cq": "CurlQueueTransport", "ahc": "AsyncHTTPClientTransport 1.5.0",
             "urlsession": "URLSessionTransport 1.4.0"}
    rows = ["| Workload | Transport | Calls/s | CPU µs/call | MiB/s | Peak RSS MiB |", "|---|---|---:|---:|---:|---:|"]
    for name, _ in workloads:
        for transport in transports:
            runs = results.get((name, transport))
            if not runs:
                rows.append("| %s | %s | failed | | | |" % (name, names[transport]))
                continue
            med = lambda f: statistics.median(f(r) for r in runs)
            if name.startswith("json"):
                rows.append("| %s | %s | %.0f | %.0f | | %.0f |" % (
                    name, names[transport], med(lambda r: r["calls"] / r["seconds"]),
                    med(lambda r: r["cpu"] / max(r["calls"], 1) * 1e6), med(lambda r: r["peakRSSKiB"] / 1024)))
            else:
                rows.append("| %s | %s | | | %.0f | %.0f |" % (
                    name, names[transport], med(lambda r: r["bytes"] / MIB / r["seconds"]),
                    med(lambda r: r["peakRSSKiB"] / 1024)))
    table = "\n".join(rows)
    header = "Median of %d runs, %d calls per JSON run, server and client pinned to different cores.\n\n" % (
        args.runs, args.calls)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "openapi.md"), "w") as f:
        f.write("# OpenAPI transports (Benchmarks/openapi.py)\n\n" + header + table + "\n")
    print(table)


if __name__ == "__main__":
    main()
