"""bench_train.py — training batches from a slide: slidepipe's PatchSampler against the loader a
team writes today (OpenSlide read_region per patch, numpy flips and HED jitter, and numpy
Macenko normalization with the same stains), on the same patches in the same run.

    usage: .venv/bin/python bench/bench_train.py SLIDE [--size 224] [--count 2048]
               [--batch 64] [--threads 1,2] [--no-normalize]
    (run from a build: PYTHONPATH=build/python, which `make` fills)

Both sides produce the same thing: `count` patches of `size`² RGB at level 0 from the tissue
tiles of epoch 0 of a PatchSampler (seed 1, min tissue 0.5), each flipped or turned and HED
jittered (sigma 0.05) with the per-patch draws of docs/train.md, and (unless --no-normalize)
stain-normalized from the slide's stains to the reference first. The peer gets the tile list
and the stains from slidepipe, so only the per-patch work is timed; with T threads it runs T
worker processes (a PyTorch DataLoader with num_workers=T), each with its own OpenSlide handle.
A check compares the peer's first batch with slidepipe's (every pixel within 1: float32 against
float64). Prints patches/s for each side and the ratio; setup (mask, tiles, stains) is printed
apart.
"""

import argparse
import multiprocessing as mp
import os
import sys
import time

import numpy as np
import openslide

import slidepipe

HED = np.array([[0.65, 0.70, 0.29], [0.07, 0.99, 0.11], [0.27, 0.57, 0.78]])
HED_INV = np.linalg.inv(HED)
MASK64 = (1 << 64) - 1


def draws(seed):
    state, out = int(seed), []
    for _ in range(7):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        out.append(((z ^ (z >> 31)) >> 11) * 2.0**-53)
    return out


def od(rgb):
    return -np.log(np.maximum(rgb, 1) / 255.0)


def macenko(rgb, src, ref):
    """Per-pixel Macenko normalization, as numpy code written from the paper would do it."""
    he = np.array([src.h, src.e]).T
    conc = od(rgb).reshape(-1, 3) @ np.linalg.pinv(he).T
    conc *= np.array([ref.max_h / src.max_h, ref.max_e / src.max_e])
    out = 255.0 * np.exp(-(conc @ np.array([ref.h, ref.e])))
    return np.floor(np.clip(out, 0, 255) + 0.5).astype(np.uint8).reshape(rgb.shape)


def augment(rgb, seed, sigma):
    u = draws(seed)
    s = od(rgb) @ HED_INV
    s = s * (1 + sigma * (2 * np.array(u[1:4]) - 1)) + sigma * (2 * np.array(u[4:7]) - 1)
    out = np.floor(np.clip(255.0 * np.exp(-(s @ HED)), 0, 255) + 0.5).astype(np.uint8)
    t = int(u[0] * 8)
    if t & 4:
        out = out.transpose(1, 0, 2)
    if t & 2:
        out = out[::-1]
    if t & 1:
        out = out[:, ::-1]
    return np.ascontiguousarray(out)


_worker = {}


def peer_init(path, size, sigma, stains):
    _worker.update(slide=openslide.OpenSlide(path), size=size, sigma=sigma, stains=stains,
                   ref=slidepipe.Stains.reference())


def peer_batch(job):
    """One batch the way a Dataset's __getitem__ and collate would make it."""
    xs, ys, seeds = job
    w = _worker
    out = np.empty((len(xs), w["size"], w["size"], 3), dtype=np.uint8)
    for i, (x, y, seed) in enumerate(zip(xs, ys, seeds)):
        rgb = np.asarray(w["slide"].read_region((int(x), int(y)), 0, (w["size"], w["size"])))
        rgb = rgb[..., :3]
        if w["stains"] is not None:
            rgb = macenko(rgb, w["stains"], w["ref"])
        out[i] = augment(rgb, seed, w["sigma"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("slide")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--count", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--no-normalize", action="store_true")
    a = ap.parse_args()
    normalize, sigma = not a.no_normalize, 0.05

    t0 = time.perf_counter()
    kw = dict(batch_size=a.batch, min_tissue=0.5, seed=1, hed_sigma=sigma, normalize=normalize)
    with slidepipe.PatchSampler([a.slide], a.size, **kw) as s:
        setup = time.perf_counter() - t0
        rng = np.random.default_rng([1, 0])
        order = rng.permutation(len(s.tiles))
        seeds = rng.integers(0, 2**64 - 1, size=len(order), dtype=np.uint64, endpoint=True)
        count = min(a.count, len(order)) // a.batch * a.batch
        pick = order[:count]
        tiles, seeds = s.tiles[pick], seeds[:count]
        stains = s.stains[0] if normalize else None
    print(f"{os.path.basename(a.slide)}: {len(order)} tissue tiles of {a.size}², setup (mask, "
          f"tiles{', stains' if normalize else ''}) {setup:.2f} s; {count} patches in batches of "
          f"{a.batch}, HED sigma {sigma}, normalize {normalize}; {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.2f}")
    jobs = [(tiles["x"][i:i + a.batch], tiles["y"][i:i + a.batch], seeds[i:i + a.batch])
            for i in range(0, count, a.batch)]

    print(f"{'threads':>7} {'slidepipe patches/s':>20} {'OpenSlide+numpy':>16} {'ratio':>6}")
    for threads in (int(t) for t in a.threads.split(",")):
        slidepipe.set_cache_capacity(256 << 20)
        with slidepipe.PatchSampler([a.slide], a.size, threads=threads, **kw) as s:
            batches = s.epoch(0)
            first = next(batches)[0]  # start-up and first reads, not timed (as for the peer)
            t0 = time.perf_counter()
            for _ in range(len(jobs) - 1):
                next(batches)
            sp_rate = (len(jobs) - 1) * a.batch / (time.perf_counter() - t0)
        with mp.get_context("fork").Pool(threads, peer_init,
                                         (a.slide, a.size, sigma, stains)) as pool:
            out = pool.map(peer_batch, jobs[:1])  # start-up and first reads, not timed
            t0 = time.perf_counter()
            pool.map(peer_batch, jobs[1:], chunksize=1)
            peer_rate = (len(jobs) - 1) * a.batch / (time.perf_counter() - t0)
        diff = np.abs(out[0].astype(int) - first.astype(int)).max()
        if diff > 1:
            print(f"the peer's first batch differs from slidepipe's by {diff}", file=sys.stderr)
            return 1
        print(f"{threads:>7} {sp_rate:>20.1f} {peer_rate:>16.1f} {sp_rate / peer_rate:>5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
