#!/usr/bin/env python3
"""One big file over several connections: curlq -s N against curl and aria2c -x N -s N, on an
nginx at 127.0.0.1 that limits each connection (limit_rate, as a busy mirror does).

    python3 Benchmarks/split.py [--curlq PATH] [--mib 64] [--rate 2m]

Every command downloads the same file (--mib MiB of random bytes; nginx sends its ETag and
Last-Modified, so curlq may split it) into an empty folder; the time is the process's wall
time, start-up included, and every result is checked byte for byte against the file served.
Prints a Markdown table (docs/performance.md has one).
"""
import argparse, filecmp, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rate import MIB, default_curlq, start_nginx  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--curlq", default=default_curlq())
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--rate", default="2m", help="nginx limit_rate per connection (2m = 2 MiB/s)")
    args = parser.parse_args()
    size = args.mib * MIB
    work = tempfile.mkdtemp(prefix="curlq-split-")
    nginx, base = start_nginx(work, {"big": size}, limit_rate=args.rate)
    url = f"{base}/big"
    served = os.path.join(work, "www", "big")
    runs = [
        ("curlq -s 1", lambda out: [args.curlq, "get", "-q", "-s", "1", "-d", out, url]),
        ("curlq -s 4", lambda out: [args.curlq, "get", "-q", "-s", "4", "-d", out, url]),
        ("curlq -s 8", lambda out: [args.curlq, "get", "-q", "-s", "8", "-d", out, url]),
        ("curl", lambda out: ["curl", "-s", "-f", "-o", f"{out}/big", url]),
        ("aria2c -x 4 -s 4", lambda out: ["aria2c", "-q", "-x", "4", "-s", "4", "--file-allocation=none", "-d", out, url]),
        ("aria2c -x 8 -s 8", lambda out: ["aria2c", "-q", "-x", "8", "-s", "8", "--file-allocation=none", "-d", out, url]),
        # aria2c splits no piece below --min-split-size (default 20M): 1M, its least, lets it use all 8.
        ("aria2c -x 8 -s 8 -k 1M", lambda out: ["aria2c", "-q", "-x", "8", "-s", "8", "-k", "1M", "--file-allocation=none", "-d", out, url]),
    ]
    rows = []
    try:
        for index, (label, argv) in enumerate(runs):
            out = os.path.join(work, f"out{index}")
            os.makedirs(out)
            start = time.monotonic()
            result = subprocess.run(argv(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            seconds = time.monotonic() - start
            if result.returncode != 0:
                raise SystemExit(f"{label} failed ({result.returncode}): {result.stderr[-400:]}")
            if not filecmp.cmp(served, os.path.join(out, "big"), shallow=False):
                raise SystemExit(f"{label}: the file differs from the one served")
            rows.append((label, seconds, size / MIB / seconds))
            print(f"{label:20} {seconds:7.2f} s {size / MIB / seconds:7.2f} MiB/s", file=sys.stderr)
            shutil.rmtree(out, ignore_errors=True)
    finally:
        nginx.kill()
        nginx.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"| Command ({args.mib} MiB, nginx limit_rate {args.rate} per connection) | Seconds | MiB/s |")
    print("|---|---:|---:|")
    for label, seconds, rate in rows:
        print(f"| `{label}` | {seconds:.2f} | {rate:.2f} |")


if __name__ == "__main__":
    main()
