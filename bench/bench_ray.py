"""bench_ray.py — training patches/s through Ray Data (issue 23): slidepipe.ray.read_patches
against the cloud-patching study's pipeline, tiffslide inside Ray Data (a dataset of tile
coordinates, map_batches reading each with tiffslide.read_region), with 1 and 2 worker nodes of
one CPU each on a local Ray cluster whose head has no CPU, so all reading is on the workers.

    usage: PYTHONPATH=build/python .venv/bin/python bench/bench_ray.py
               [--slide /work/bench-slides/jpeg-svs.svs] [--patches 1500] [--workers 1,2]

Both pipelines read the same thing: the first --patches samples of epoch 0 of a PatchSampler
(seed 1, 224² tiles at level 0 with at least half tissue, no augmentation), as 224x224x3 uint8,
and the driver consumes them with iter_batches(batch_size=64) in numpy. What is timed is the
whole dataset's execution after the cluster is up (task scheduling included); the first run of
each pipeline warms the page cache and worker start-up and is not counted. A check compares the
first 16 patches of the two pipelines (they must be equal: same JPEG decoder).
"""

import argparse
import os
import sys
import time

import numpy as np


def tiffslide_dataset(ray, path, tiles, size, blocks):
    import ray.data

    items = [{"x": int(t["x"]), "y": int(t["y"]), "index": i} for i, t in enumerate(tiles)]

    def read(batch):
        import tiffslide
        global _TS
        try:
            ts = _TS
        except NameError:
            ts = _TS = tiffslide.TiffSlide(path)
        out = np.empty((len(batch["x"]), size, size, 3), dtype=np.uint8)
        for k, (x, y) in enumerate(zip(batch["x"], batch["y"])):
            out[k] = ts.read_region((int(x), int(y)), 0, (size, size), as_array=True)[..., :3]
        return {"image": out, "index": batch["index"]}

    ds = ray.data.from_items(items, override_num_blocks=blocks)
    return ds.map_batches(read, batch_size=None, num_cpus=1)


def run(ds):
    t = time.perf_counter()
    n, first = 0, None
    for b in ds.iter_batches(batch_size=64, batch_format="numpy"):
        if first is None:
            first = (b["image"][:16].copy(), b["index"][:16].copy())
        n += len(b["image"])
    return n, time.perf_counter() - t, first


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slide", default="/work/bench-slides/jpeg-svs.svs")
    ap.add_argument("--patches", type=int, default=1500)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()
    os.environ.setdefault("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    import ray
    from ray.cluster_utils import Cluster

    import slidepipe
    import slidepipe.ray as spray

    kw = dict(level=0, batch_size=64, min_tissue=0.5, seed=1, dihedral=False, threads=1,
              mask_side=1024)
    sampler = slidepipe.PatchSampler([args.slide], args.size, **kw)
    sampler.tiles = sampler.tiles[:args.patches]  # the first N candidates, in grid order
    tiles, _ = sampler.plan(0)
    n_blocks = -(-len(tiles) // args.block)
    print(f"{args.slide}: {len(tiles)} patches of {args.size}², blocks of {args.block}")
    rows = []
    for w in [int(v) for v in args.workers.split(",")]:
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0,
                                                          "include_dashboard": False})
        try:
            for _ in range(w):
                c.add_node(num_cpus=1)
            c.wait_for_nodes()
            ray.init(address=c.address, log_to_driver=False)
            ray.data.DataContext.get_current().enable_progress_bars = False
            result = {}
            for name in ("slidepipe", "tiffslide"):
                def make():
                    if name == "slidepipe":
                        return spray.read_patches(sampler, epoch=0, order="epoch",
                                                  block_size=args.block, preserve_order=False)
                    return tiffslide_dataset(ray, args.slide, tiles, args.size, n_blocks)
                run(make())  # warm-up
                n, dt, first = run(make())
                result[name] = (n, dt, first)
                rows.append((name, w, n, dt, n / dt))
            a, b = result["slidepipe"][2], result["tiffslide"][2]
            same = all(np.array_equal(a[0][np.argsort(a[1])][k], b[0][np.argsort(b[1])][k])
                       for k in range(min(len(a[1]), len(b[1])))) if \
                np.array_equal(np.sort(a[1]), np.sort(b[1])) else "not compared (other rows)"
            print(f"{w} workers: first patches equal: {same}")
        finally:
            ray.shutdown()
            c.shutdown()
    print(f"{'pipeline':10} {'workers':>7} {'patches':>8} {'seconds':>8} {'patches/s':>10}")
    for name, w, n, dt, rate in rows:
        print(f"{name:10} {w:7d} {n:8d} {dt:8.2f} {rate:10.1f}")
    by = {(r[0], r[1]): r[4] for r in rows}
    for w in sorted({r[1] for r in rows}):
        print(f"{w} workers: slidepipe / tiffslide = {by[('slidepipe', w)] / by[('tiffslide', w)]:.2f}x")
    ws = sorted({r[1] for r in rows})
    if len(ws) > 1:
        for name in ("slidepipe", "tiffslide"):
            print(f"{name} scaling {ws[0]} -> {ws[-1]} workers: "
                  f"{by[(name, ws[-1])] / by[(name, ws[0])]:.2f}x")


if __name__ == "__main__":
    main()
