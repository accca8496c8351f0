"""bench_serve.py — Deep Zoom tiles per second served to concurrent clients: `slidepipe serve`
against openslide-python's DeepZoomGenerator behind a small threaded HTTP server written here
(the way OpenSlide's Deep Zoom example serves tiles: one DeepZoomGenerator, a thread per
request, each tile read with get_tile and saved as JPEG by Pillow), on the same slide, the same
tiles in the same order and the same clients, in one run.

    usage: .venv/bin/python bench/bench_serve.py [SLIDE] [--clients 16] [--tiles 3000]
               [--levels 3] [--seed 1] [--repeat 3] [--bin build/slidepipe]

SLIDE defaults to a 16384-pixel synthetic H&E slide (`slidepipe synth`, JPEG tiles, a pyramid)
made in a temporary folder. Both servers use Deep Zoom tiles of 256 pixels with no overlap and
JPEG quality 90 (DeepZoomGenerator(tile_size=256, overlap=0, limit_bounds=False)), so the tiles
are the same images. The tile list is a seeded sample of the tiles of the top --levels Deep Zoom
levels, each requested once; --clients threads share it, each on one keep-alive connection.
Each run starts each server fresh (cold caches); --repeat runs alternate the two servers and
the median ratio is printed. The first tiles of both servers are decoded and
compared (mean absolute difference) to show they are the same tiles. Prints tiles/s for each
and slidepipe's as a multiple of OpenSlide's. The clients are Python threads on the same
machine, so on a small machine both figures include the clients' own cost.
"""

from __future__ import annotations

import argparse
import http.client
import io
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from serve_server import Server  # noqa: E402


def openslide_server(slide_path: str):
    """A threaded HTTP server answering /dzi/s_files/L/C_R.jpeg from a DeepZoomGenerator."""
    import openslide
    from openslide.deepzoom import DeepZoomGenerator

    dz = DeepZoomGenerator(openslide.OpenSlide(slide_path), tile_size=256, overlap=0,
                           limit_bounds=False)
    pattern = re.compile(r"^/dzi/s_files/(\d+)/(\d+)_(\d+)\.jpeg$")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            m = pattern.match(self.path)
            if m is None:
                self.send_error(404)
                return
            level, col, row = map(int, m.groups())
            try:
                tile = dz.get_tile(level, (col, row))
            except ValueError:
                self.send_error(404)
                return
            buf = io.BytesIO()
            tile.save(buf, "jpeg", quality=90)
            body = buf.getvalue()
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, dz


def run_clients(port: int, paths: list[str], clients: int) -> tuple[float, int]:
    """Fetch every path once with `clients` threads; returns (seconds, bytes)."""
    lock = threading.Lock()
    queue = list(reversed(paths))
    total = [0]
    errors = []

    def work():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                if not queue:
                    break
                path = queue.pop()
            conn.request("GET", path)
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                errors.append((path, r.status))
            with lock:
                total[0] += len(body)
        conn.close()

    threads = [threading.Thread(target=work) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"{len(errors)} requests failed, first {errors[0]}")
    return seconds, total[0]


def fetch(port: int, path: str) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path)
    body = conn.getresponse().read()
    conn.close()
    return body


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("slide", nargs="?")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--tiles", type=int, default=3000)
    ap.add_argument("--levels", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bin", default=str(HERE.parent / "build" / "slidepipe"))
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory(prefix="sp-bench-serve-")
    slide = args.slide
    if slide is None:
        slide = os.path.join(tmp.name, "s.tif")
        subprocess.run([args.bin, "synth", slide, "--size", "16384"], check=True)
    else:  # the servers address it as "s"
        link = os.path.join(tmp.name, "s" + Path(slide).suffix)
        os.symlink(os.path.abspath(slide), link)
        slide = link

    import numpy as np
    from PIL import Image

    httpd, dz = openslide_server(slide)
    top = dz.level_count - 1
    tiles = []
    for level in range(top - args.levels + 1, top + 1):
        cols, rows = dz.level_tiles[level]
        tiles += [(level, c, r) for c in range(cols) for r in range(rows)]
    random.Random(args.seed).shuffle(tiles)
    tiles = tiles[: args.tiles]
    paths = [f"/dzi/s_files/{l}/{c}_{r}.jpeg" for l, c, r in tiles]

    ours = Server(Path(args.bin), [slide])
    try:
        # Same tiles: both servers' first 20 tiles decoded and compared.
        diffs = []
        for p in paths[:20]:
            a = np.asarray(Image.open(io.BytesIO(fetch(ours.port, p))).convert("RGB"), dtype=float)
            b = np.asarray(Image.open(io.BytesIO(fetch(httpd.server_port, p))).convert("RGB"),
                           dtype=float)
            if a.shape != b.shape:
                raise SystemExit(f"{p}: slidepipe {a.shape} vs OpenSlide {b.shape}")
            diffs.append(np.abs(a - b).mean())
    finally:
        ours.stop()
    httpd.shutdown()

    # Alternate the two servers, each started fresh (cold caches) for every run, so that a
    # change in the machine's load falls on both.
    n = len(paths)
    runs = []
    for _ in range(args.repeat):
        ours = Server(Path(args.bin), [slide])
        try:
            sp_s, sp_bytes = run_clients(ours.port, paths, args.clients)
        finally:
            ours.stop()
        httpd, dz = openslide_server(slide)
        os_s, os_bytes = run_clients(httpd.server_port, paths, args.clients)
        httpd.shutdown()
        runs.append((sp_s, sp_bytes, os_s, os_bytes))

    print(f"slide {args.slide or 'synth 16384 (JPEG)'}: {n} Deep Zoom tiles of levels "
          f"{top - args.levels + 1}..{top}, {args.clients} clients, each tile once")
    print(f"same tiles: mean |slidepipe - OpenSlide| over the first 20 = {np.mean(diffs):.2f} "
          f"(max {np.max(diffs):.2f}) of 255")
    print(f"{'run':<5}{'server':<36}{'seconds':>9}{'tiles/s':>10}{'MB out':>9}")
    for i, (sp_s, sp_bytes, os_s, os_bytes) in enumerate(runs, 1):
        print(f"{i:<5}{'slidepipe serve':<36}{sp_s:>9.2f}{n / sp_s:>10.0f}{sp_bytes / 1e6:>9.1f}")
        print(f"{i:<5}{'OpenSlide DeepZoomGenerator + http':<36}{os_s:>9.2f}{n / os_s:>10.0f}"
              f"{os_bytes / 1e6:>9.1f}")
    ratios = sorted(r[2] / r[0] for r in runs)
    print(f"slidepipe / OpenSlide: median {np.median(ratios):.2f}x (runs: "
          f"{', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
