"""bench_remote_slide.py — random regions of a slide file served over HTTP: slidepipe against
tiffslide (OpenSlide's API in Python over fsspec, what the cloud-patching seed's team used), on
the same regions in the same run, at loopback speed and through a proxy that adds a round trip.

    usage: .venv/bin/python bench/bench_remote_slide.py DIR [--slides jpeg-svs.svs,jpeg.tif]
               [--size 256] [--count 100] [--threads 1,4] [--delay 0,20] [--seed 1]
    (run from a build: PYTHONPATH=build/python, which `make` fills)

DIR holds the slides of ../shared/bench/make-bench-slides.sh DIR 16384. The script starts nginx on
loopback serving DIR and, for each --delay above 0, a proxy in front of it that holds every
request that many milliseconds (tests/loopback.py), as an object store's round trip would. For
each slide, delay and thread count it reads `count` random unaligned size² level-0 regions (one
seed, the same regions for every reader) with:
  sp local         slidepipe's Slide.read_regions from the file (no HTTP: the ceiling)
  sp http          the same from the URL
  sp 1 at a time   the same with SLIDEPIPE_HTTP_PARALLEL=1: each region's tiles are fetched one
                   after another instead of at once
  tiffslide        tiffslide.TiffSlide(URL) over fsspec's HTTP filesystem, its defaults, one
                   slide per thread (fsspec files are not safe to share between threads)
Every reader starts from a new handle, and slidepipe's tile cache is emptied before each run.
slidepipe's three runs must return the same pixels. Prints MP/s (requested pixels) and
slidepipe's HTTP rate as a multiple of tiffslide's.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tiffslide

import slidepipe

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from loopback import LatencyProxy, start_nginx  # noqa: E402


def corners(width, height, size, count, seed):
    rng = np.random.default_rng(seed)
    return [(int(x), int(y)) for x, y in zip(rng.integers(0, width - size, count),
                                             rng.integers(0, height - size, count))]


def run_slidepipe(path, where, size, threads, parallel=None):
    slidepipe.set_cache_capacity(0)  # drop what an earlier run left
    slidepipe.set_cache_capacity(256 << 20)
    if parallel is not None:
        os.environ["SLIDEPIPE_HTTP_PARALLEL"] = str(parallel)
    try:
        t0 = time.perf_counter()
        with slidepipe.open(path) as s:
            out = s.read_regions(where, 0, (size, size), rgb=True, threads=threads)
        return time.perf_counter() - t0, out
    finally:
        os.environ.pop("SLIDEPIPE_HTTP_PARALLEL", None)


def run_tiffslide(url, where, size, threads):
    def worker(k):
        s = tiffslide.TiffSlide(url)
        try:
            return [s.read_region(xy, 0, (size, size), as_array=True) for xy in where[k::threads]]
        finally:
            s.close()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, range(threads)))
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--slides", default="jpeg-svs.svs,jpeg.tif")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--threads", default="1,4")
    ap.add_argument("--delay", default="0,20", help="milliseconds each request is held; 0: none")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    root = os.path.abspath(a.dir)
    work = tempfile.mkdtemp(prefix="bench-remote-slide.")
    nginx, port = start_nginx(root, work)
    mp = a.count * a.size * a.size / 1e6
    print(f"{a.count} random {a.size}² level-0 regions per run; nginx on loopback; {os.cpu_count()} "
          f"cores; load average {os.getloadavg()[0]:.2f}; slidepipe {slidepipe.__version__}, "
          f"tiffslide {tiffslide.__version__}")
    print(f"{'slide':<13} {'delay':>6} {'thr':>3} | {'sp local':>8} {'sp http':>8} "
          f"{'sp 1 at a time':>14} {'tiffslide':>9} | {'sp / ts':>7}  (MP/s)")
    try:
        for delay in (float(v) for v in a.delay.split(",")):
            proxy = LatencyProxy(port, delay / 1000) if delay > 0 else None
            base = f"http://127.0.0.1:{proxy.port if proxy else port}"
            try:
                for name in a.slides.split(","):
                    path = os.path.join(root, name)
                    if not os.path.isfile(path):
                        sys.exit(f"no {path} (make it with ../shared/bench/make-bench-slides.sh {root} 16384)")
                    with slidepipe.open(path) as s:
                        where = corners(s.levels[0].width, s.levels[0].height, a.size, a.count, a.seed)
                    for t in (int(v) for v in a.threads.split(",")):
                        local_s, local = run_slidepipe(path, where, a.size, t)
                        http_s, remote = run_slidepipe(f"{base}/{name}", where, a.size, t)
                        one_s, one = run_slidepipe(f"{base}/{name}", where, a.size, t, parallel=1)
                        if not (np.array_equal(local, remote) and np.array_equal(local, one)):
                            sys.exit(f"{name}: slidepipe's local and HTTP reads disagree")
                        ts_s = run_tiffslide(f"{base}/{name}", where, a.size, t)
                        print(f"{name:<13} {delay:>4g}ms {t:>3} | {mp / local_s:>8.1f} {mp / http_s:>8.1f} "
                              f"{mp / one_s:>14.1f} {mp / ts_s:>9.1f} | {ts_s / http_s:>6.2f}x", flush=True)
            finally:
                if proxy:
                    proxy.close()
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
