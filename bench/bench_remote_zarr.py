"""bench_remote_zarr.py — random regions from an OME-Zarr store served over HTTP: slidepipe
against tensorstore (the C++ Zarr library with its own HTTP store), on the same regions in the
same run, with the local folder's rate beside them.

    usage: .venv/bin/python bench/bench_remote_zarr.py STORE.zarr [--size 256] [--count 400]
               [--threads 1,2] [--seed 1]
    (run from a build: PYTHONPATH=build/python, which `make` fills)

STORE.zarr is a Zarr v2 store of slidepipe's layout (level 0 is array "0", axes c, y, x, uint8),
such as `slidepipe convert jpeg.tif STORE.zarr --codec zstd --chunk 512` of the 16384² bench
slide. The script starts nginx on loopback serving the store's parent folder, then reads `count`
random unaligned size² level-0 regions (one seed, the same for every run) with:
  slidepipe local   Slide.read_regions from the folder (the ceiling: no HTTP at all)
  slidepipe http    Slide.read_regions from http://127.0.0.1:PORT/STORE.zarr
  tensorstore http  the "zarr" driver over its "http" kvstore, every region's read issued at
                    once and awaited, with T threads for copies and T concurrent requests
Each reader has a 256 MiB chunk cache (slidepipe's default tile cache; tensorstore's cache
pool set to the same), and each run starts with a new process-wide state as far as the
libraries allow (a new handle and context). The first regions are compared across the readers.
Prints MP/s (requested pixels) and slidepipe's rate as a multiple of tensorstore's.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import tensorstore as ts

import slidepipe

CACHE_BYTES = 256 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(root, work):
    port = free_port()
    temps = " ".join(f"{k}_temp_path {work}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; master_process off; worker_processes 1;
error_log {work}/error.log; pid {work}/nginx.pid;
events {{ worker_connections 256; }}
http {{ access_log off; {temps} keepalive_requests 100000;
  server {{ listen 127.0.0.1:{port}; root {root}; }} }}
""")
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    proc = subprocess.Popen([exe, "-c", conf, "-e", f"{work}/error.log"], stdout=subprocess.DEVNULL)
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.terminate()
    sys.exit("nginx did not start")


def corners(width, height, size, count, seed):
    rng = np.random.default_rng(seed)
    xs = rng.integers(0, width - size, count)
    ys = rng.integers(0, height - size, count)
    return [(int(x), int(y)) for x, y in zip(xs, ys)]


def run_slidepipe(path, where, size, threads):
    slidepipe.set_cache_capacity(0)  # drop what an earlier run left
    slidepipe.set_cache_capacity(CACHE_BYTES)
    t0 = time.perf_counter()
    with slidepipe.open(path) as s:
        out = s.read_regions(where, 0, (size, size), rgb=True, threads=threads)
    return time.perf_counter() - t0, out


def run_tensorstore(url, where, size, threads):
    spec = {"driver": "zarr", "kvstore": {"driver": "http", "base_url": url}, "path": "0",
            "context": {"cache_pool": {"total_bytes_limit": CACHE_BYTES},
                        "data_copy_concurrency": {"limit": threads},
                        "http_request_concurrency": {"limit": threads}}}
    t0 = time.perf_counter()
    arr = ts.open(spec, read=True).result()
    futures = [arr[:, y:y + size, x:x + size].read() for x, y in where]
    out = np.stack([f.result().transpose(1, 2, 0) for f in futures])
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    store = os.path.abspath(a.store.rstrip("/"))
    if not os.path.isfile(os.path.join(store, "0", ".zarray")):
        sys.exit(f"{store}: not a Zarr v2 store with a level-0 array '0' (make one with slidepipe convert)")
    with slidepipe.open(store) as s:
        width, height = s.levels[0].width, s.levels[0].height
    where = corners(width, height, a.size, a.count, a.seed)
    work = tempfile.mkdtemp(prefix="bench-remote-zarr.")
    proc, port = start_nginx(os.path.dirname(store), work)
    url = f"http://127.0.0.1:{port}/{os.path.basename(store)}"
    try:
        mp = a.count * a.size * a.size / 1e6
        print(f"{a.count} random {a.size}² level-0 regions of {store} ({width}x{height}); "
              f"nginx on loopback; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
        print(f"{'threads':>7} {'slidepipe local':>16} {'slidepipe http':>15} {'tensorstore http':>17} {'ratio':>6}  (MP/s)")
        for t in (int(v) for v in a.threads.split(",")):
            local_s, local = run_slidepipe(store, where, a.size, t)
            http_s, remote = run_slidepipe(url, where, a.size, t)
            ts_s, peer = run_tensorstore(url + "/", where, a.size, t)
            if not (np.array_equal(local, remote) and np.array_equal(local, peer)):
                sys.exit("the readers disagree on the regions' pixels")
            print(f"{t:>7} {mp / local_s:>16.1f} {mp / http_s:>15.1f} {mp / ts_s:>17.1f} "
                  f"{ts_s / http_s:>5.2f}x")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
