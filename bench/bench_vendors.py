"""bench_vendors.py — random 256x256 level-0 regions from Philips TIFF, Leica SCN, Ventana BIF,
Sakura SVSlide and Trestle slides, slidepipe's Python binding against openslide-python (OpenSlide 4) in the same run.

    usage: .venv/bin/python bench/bench_vendors.py [--regions 300] [--repeat 3] [--cache]
    (run from a build: PYTHONPATH=build/python, which `make` fills)

There are no public sample files small enough to keep, so the slides are written first by the
tests' writers (tests/data/vendor_samples.py and sakura_writer.py: real JPEG tiles of the shared
CMU-1-Small-Region.svs, the vendors' layouts: Leica's two regions at offsets that are not tile
multiples, BIF's overlapping camera frames, Sakura's per-channel greyscale JPEGs in SQLite). Both readers run one thread and, unless --cache,
with their decoded-tile caches off, so that every region decodes its tiles (the slides are small
enough for a cache to hold whole, which would time the cache, not the format). The regions are
the same for both (seeded). Prints MP/s of each side and the ratio; best of --repeat runs.
"""

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "data"))

import openslide  # noqa: E402
import sakura_writer  # noqa: E402
import slidepipe  # noqa: E402
import trestle_writer  # noqa: E402
import vendor_samples  # noqa: E402


def rate(open_slide, locations, repeat):
    best = float("inf")
    for _ in range(repeat):
        slide = open_slide()
        start = time.perf_counter()
        for x, y in locations:
            slide.read_region((x, y), 0, (256, 256))
        best = min(best, time.perf_counter() - start)
    return len(locations) * 256 * 256 / best / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--regions", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cache", action="store_true", help="leave both tile caches on")
    args = ap.parse_args()
    testdata = ROOT.parent / "shared" / "testdata"
    if not args.cache:
        slidepipe.set_cache_capacity(0)
    with tempfile.TemporaryDirectory(prefix="bench-vendors-") as tmp:
        slides = [
            ("Philips TIFF", vendor_samples.write_philips(Path(tmp) / "p.tiff", testdata)),
            ("Leica SCN", vendor_samples.write_leica(Path(tmp) / "l.scn", testdata)),
            ("Ventana BIF", vendor_samples.write_bif(Path(tmp) / "v.bif", testdata)),
            ("Sakura", sakura_writer.write_sakura(Path(tmp) / "s.svslide", testdata)),
            ("Trestle", trestle_writer.write_sample(Path(tmp) / "t.tif", testdata)),
        ]
        print(f"{'format':<14}{'slidepipe MP/s':>16}{'OpenSlide 4 MP/s':>18}{'ratio':>8}")
        for name, path in slides:
            with openslide.OpenSlide(str(path)) as o:
                w, h = o.dimensions
            rng = random.Random(7)
            locations = [(rng.randrange(0, w - 256), rng.randrange(0, h - 256))
                         for _ in range(args.regions)]

            def open_openslide():
                s = openslide.OpenSlide(str(path))
                if not args.cache:
                    s.set_cache(openslide.OpenSlideCache(0))
                return s

            ours = rate(lambda: slidepipe.open(str(path)), locations, args.repeat)
            theirs = rate(open_openslide, locations, args.repeat)
            print(f"{name:<14}{ours:>16.1f}{theirs:>18.1f}{ours / theirs:>7.2f}x")


if __name__ == "__main__":
    main()
