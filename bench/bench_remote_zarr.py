"""bench_remote_zarr.py — random regions from an OME-Zarr store served over HTTP: slidepipe
against tensorstore (the C++ Zarr library with its own HTTP store), on the same regions in the
same run, with the local folder's rate beside them.

    usage: .venv/bin/python bench/bench_remote_zarr.py STORE.zarr [--size 256] [--count 400]
               [--threads 1,2] [--seed 1] [--delay MS]
    (run from a build: PYTHONPATH=build/python, which `make` fills)

STORE.zarr is a Zarr v2 store of slidepipe's layout (level 0 is array "0", axes c, y, x, uint8),
such as `slidepipe convert jpeg.tif STORE.zarr --codec zstd --chunk 512` of the 16384² bench
slide. The script starts nginx on loopback serving the store's parent folder, then reads `count`
random unaligned size² level-0 regions (one seed, the same for every run) with:
  slidepipe local   Slide.read_regions from the folder (the ceiling: no HTTP at all)
  slidepipe http    Slide.read_regions from http://127.0.0.1:PORT/STORE.zarr, and again with
                    SLIDEPIPE_HTTP_PARALLEL=1 (each region's chunks fetched one after another)
  tensorstore http  the "zarr" driver over its "http" kvstore, every region's read issued at
                    once and awaited, with T threads for copies and at least as many concurrent
                    requests as slidepipe has in flight (below; TS_REQUESTS overrides)
With --delay, a proxy in front of nginx holds every request that long (tests/loopback.py), as
a store's round trip would, and counts the requests it holds at the same moment: slidepipe's
most in flight is measured there and tensorstore gets that many (column "in flight"), so both
read at equal requests in flight. Without a delay nothing holds requests long enough to count
them, so tensorstore reads twice, with T requests at once and with T + 64 (slidepipe's most:
its T readers and the 64 threads that send chunk requests ahead, src/io/io_pool.h), and the
ratio is taken against the faster of the two. Each reader has a 256 MiB chunk cache
(slidepipe's default tile cache; tensorstore's cache pool set to the same), and each run starts
with a new process-wide state as far as the libraries allow (a new handle and context). The
first regions are compared across the readers. Prints MP/s (requested pixels), slidepipe's rate
as a multiple of tensorstore's, and the CPU seconds the process spent on each reader's run (user
+ system of every thread: less noisy than the rates on a shared machine; with a delay the proxy,
in this process too, counts in both). First it times opening over HTTP (the median of 5):
slidepipe.open of the store (its group, every level's and associated image's array, the
completion marker) against tensorstore opening the levels' arrays, all at once, each time in a
new context.
"""

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time

import numpy as np
import tensorstore as ts

import slidepipe

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from loopback import LatencyProxy, start_nginx  # noqa: E402

CACHE_BYTES = 256 << 20
SLIDEPIPE_MOST_AHEAD = 64  # the io pool's threads (src/io/io_pool.c THREADS_MAX)


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


def run_tensorstore(url, where, size, threads, requests):
    spec = {"driver": "zarr", "kvstore": {"driver": "http", "base_url": url}, "path": "0",
            "context": {"cache_pool": {"total_bytes_limit": CACHE_BYTES},
                        "data_copy_concurrency": {"limit": threads},
                        "http_request_concurrency": {"limit": requests}}}
    t0 = time.perf_counter()
    arr = ts.open(spec, read=True).result()
    futures = [arr[:, y:y + size, x:x + size].read() for x, y in where]
    out = np.stack([f.result().transpose(1, 2, 0) for f in futures])
    return time.perf_counter() - t0, out


def with_cpu(fn, *args):
    """fn(*args) and the CPU seconds (user + system) the whole process spent meanwhile."""
    def used():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    c0 = used()
    result = fn(*args)
    return result, used() - c0


def median_open_ms(fn, rounds=5):
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return sorted(times)[rounds // 2]


def open_slidepipe(url):
    with slidepipe.open(url) as s:
        return len(s.levels)


def open_tensorstore(url, levels):
    ctx = ts.Context()
    futures = [ts.open({"driver": "zarr", "kvstore": {"driver": "http", "base_url": url},
                        "path": str(i)}, read=True, context=ctx) for i in range(levels)]
    return [f.result() for f in futures]


def run_slidepipe_http(url, where, size, threads, parallel):
    os.environ["SLIDEPIPE_HTTP_PARALLEL"] = str(parallel)
    try:
        return run_slidepipe(url, where, size, threads)
    finally:
        del os.environ["SLIDEPIPE_HTTP_PARALLEL"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--delay", type=float, default=0.0,
                    help="ms each request is held (a latency proxy)")
    a = ap.parse_args()
    store = os.path.abspath(a.store.rstrip("/"))
    if not os.path.isfile(os.path.join(store, "0", ".zarray")):
        sys.exit(f"{store}: not a Zarr v2 store with a level-0 array '0' "
                 "(make one with slidepipe convert)")
    with slidepipe.open(store) as s:
        width, height = s.levels[0].width, s.levels[0].height
    where = corners(width, height, a.size, a.count, a.seed)
    work = tempfile.mkdtemp(prefix="bench-remote-zarr.")
    proc, port = start_nginx(os.path.dirname(store), work)
    proxy = LatencyProxy(port, a.delay / 1000) if a.delay > 0 else None
    url = f"http://127.0.0.1:{proxy.port if proxy else port}/{os.path.basename(store)}"
    try:
        mp = a.count * a.size * a.size / 1e6
        print(f"{a.count} random {a.size}² level-0 regions of {store} ({width}x{height}); "
              f"nginx on loopback{f', every request held {a.delay:g} ms' if proxy else ''}; "
              f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
        levels = open_slidepipe(url)
        sp_ms = median_open_ms(lambda: open_slidepipe(url))
        ts_ms = median_open_ms(lambda: open_tensorstore(url + "/", levels))
        print(f"opening: slidepipe {sp_ms:.1f} ms (group, {levels} levels, associated images, "
              f"marker); tensorstore {ts_ms:.1f} ms ({levels} level arrays at once)")
        print(f"{'threads':>7} {'sp local':>9} {'sp http':>8} {'sp http, 1 at a time':>21} "
              f"{'in flight':>9} {'tensorstore http':>17} {'sp / ts':>8}  (MP/s; CPU s sp / ts)")
        for t in (int(v) for v in a.threads.split(",")):
            local_s, local = run_slidepipe(store, where, a.size, t)
            if proxy:
                proxy.most_at_once = 0
            (http_s, remote), sp_cpu = with_cpu(run_slidepipe, url, where, a.size, t)
            in_flight = max(t, proxy.most_at_once if proxy else t)
            one_s, one = run_slidepipe_http(url, where, a.size, t, 1)
            if "TS_REQUESTS" in os.environ:
                choices = [int(os.environ["TS_REQUESTS"])]
            else:
                choices = [in_flight] if proxy else [t, t + SLIDEPIPE_MOST_AHEAD]
            peers = [(with_cpu(run_tensorstore, url + "/", where, a.size, t, n), n)
                     for n in choices]
            ((ts_s, peer), ts_cpu), requests = min(peers, key=lambda p: p[0][0][0])
            if not all(np.array_equal(local, other) for other in (remote, one, peer)):
                sys.exit("the readers disagree on the regions' pixels")
            tried = (" ".join(f"{n}: {mp / r[0][0]:.1f}" for r, n in peers)
                     if len(peers) > 1 else "")
            print(f"{t:>7} {mp / local_s:>9.1f} {mp / http_s:>8.1f} {mp / one_s:>21.1f} "
                  f"{requests:>9} {mp / ts_s:>17.1f} {ts_s / http_s:>7.2f}x"
                  f"  {sp_cpu:.2f} / {ts_cpu:.2f}"
                  + (f"  (tensorstore with {tried})" if tried else ""))
    finally:
        if proxy:
            proxy.close()
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
