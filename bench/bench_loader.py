"""bench_loader.py — patches/s delivered into a PyTorch training loop (issue 25): slidepipe's
PatchSampler against the pipelines users run today, MONAI's PatchWSIDataset and an OpenSlide +
torchvision Dataset in a DataLoader, on the same slides and the same tissue tiles, at 1 and 2 cores.

    usage: .venv/bin/python bench/bench_loader.py [--slides A,B] [--patches 1600] [--batch 64]
               [--cores 1,2] [--pipelines slidepipe,monai,monai-fixed,openslide-tv]
    (run from a build: PYTHONPATH=build/python, which `make` fills)

Every pipeline makes the same thing: 224² RGB patches at level 0 of the tissue tiles (min tissue
0.5) of epoch 0 of a PatchSampler (seed 1), in that order, each Macenko-normalised to the
reference stains, flipped or turned (one of the 8 symmetries of the square), HED jittered (sigma
0.05, docs/train.md's formula), and handed over as a float16 NCHW batch of 64 normalised by the
ImageNet mean/std ((v / 255 - mean) / std in float32, then rounded to half). The loop takes each
batch as a torch tensor and touches one element (`float(x[0, 0, 0, 0])`), so what is timed is
delivery, not the model. The pipelines:
- slidepipe: PatchSampler(float16, NCHW, mean/std, prefetch 4), threads=T; torch.from_numpy.
- monai: PatchWSIDataset(reader="OpenSlide") over the tiles, then MONAI's NormalizeHEStains
  (which estimates the stains again on every patch), the HED jitter in numpy, RandFlip and
  RandRotate90, NormalizeIntensity and a cast to float16; DataLoader(num_workers=T).
- monai-fixed: the same with NormalizeHEStains replaced by numpy Macenko from each slide's stains
  (estimated once, as slidepipe does), so that only MONAI's reader and transforms are compared.
- openslide-tv: a map-style Dataset whose __getitem__ calls read_region on an OpenSlide handle
  opened once per worker, RGBA to RGB, numpy Macenko from each slide's stains, the HED jitter in
  numpy, torchvision v2 flips and a random transpose, ToDtype + Normalize, then float16;
  DataLoader(num_workers=T).
The stains and the per-patch HED draws (the seed of each tile) are slidepipe's, so openslide-tv
and monai-fixed do slidepipe's arithmetic (the peers' numpy in float32): a check compares their
first 8 patches with slidepipe's. "Cores" is slidepipe's thread count and the DataLoader's worker
processes; the main process only consumes. BLAS and OpenMP pools are held to one thread
(OPENBLAS/OMP/MKL_NUM_THREADS=1), else numpy's matrix products in one worker spread over both
cores. Each run is its own process. The slides are read once beforehand, so every run sees a warm
page cache. The first batch (start-up, worker spawn) is not timed.

Memory: peak RSS is sampled from outside every 0.1 s over the run's whole process tree (main and
workers, setup included, summed); it counts the pages forked workers share with the main process
(torch's libraries) once per process. PSS, which splits shared pages, is the tree's sum read once
at the end of the timed part. "cpu" is the cores the tree used in the timed part, "others" the
cores the rest of the machine kept busy meanwhile (the machine is shared: a 2-core run with
others near 1 had one core); "per cpu-s" is patches/s over cpu, which contention stretches
much less than wall time. Prints the table, then slidepipe / the faster peer and slidepipe's
patches/s per core at each core count, against the issue's targets (reported, never asserted).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import bench_train  # the same directory: its draws() is the definition once

SLIDES = "/work/bench-slides/jpeg-svs.svs,/work/bench-slides/jpeg.tif"
SIZE, MIN_TISSUE, SEED, SIGMA = 224, 0.5, 1, 0.05
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
PIPELINES = ("slidepipe", "monai", "monai-fixed", "openslide-tv")
TARGET_RATIO, TARGET_PER_CORE = 5.0, 650.0

HED = np.array([[0.65, 0.70, 0.29], [0.07, 0.99, 0.11], [0.27, 0.57, 0.78]], dtype=np.float32)
HED_INV = np.linalg.inv(HED.astype(np.float64)).astype(np.float32)


# --- the peers' per-patch work, in numpy (float32) -------------------------------------------

def draws(seed):
    """The seven numbers docs/train.md draws from a patch's seed (bench_train.draws), float32."""
    return np.array(bench_train.draws(seed), dtype=np.float32)


def od(rgb):
    return -np.log(np.maximum(rgb, 1).astype(np.float32) / np.float32(255))


def to_uint8(v):
    return np.floor(np.clip(v, 0, 255) + 0.5).astype(np.uint8)


def macenko(rgb, src, ref):
    """Macenko normalisation with fixed stains, as numpy written from the paper does it.
    src, ref: (he (3, 2) unit OD vectors of H and E, max (2,) 99th-percentile concentrations)."""
    he_pinv = np.linalg.pinv(src[0]).T.astype(np.float32)
    conc = od(rgb).reshape(-1, 3) @ he_pinv
    conc *= (ref[1] / src[1]).astype(np.float32)
    out = 255 * np.exp(-(conc @ ref[0].T.astype(np.float32)))
    return to_uint8(out).reshape(rgb.shape)


def hed_jitter(rgb, seed, sigma):
    """docs/train.md's HED jitter with the patch's own draws u1..u6."""
    u = draws(seed)
    c = od(rgb) @ HED_INV
    c = c * (1 + sigma * (2 * u[1:4] - 1)) + sigma * (2 * u[4:7] - 1)
    return to_uint8(255 * np.exp(-(c @ HED)))


# --- the plan every pipeline gets --------------------------------------------------------------

def stains_pair(s):
    return np.array([s.h, s.e]).T, np.array([s.max_h, s.max_e])


def make_plan(paths, patches, batch, out):
    """Epoch 0's tiles and seeds from a PatchSampler, the slides' stains and the reference, into
    an .npz the runs load. Returns (tile count, patches planned, setup seconds)."""
    import slidepipe

    t0 = time.perf_counter()
    with slidepipe.PatchSampler(paths, SIZE, batch_size=batch, min_tissue=MIN_TISSUE,
                                normalize=True, hed_sigma=SIGMA, seed=SEED) as s:
        setup = time.perf_counter() - t0
        tiles, seeds = s.plan(0)
        count = min(patches, len(tiles)) // batch * batch
        src = [stains_pair(st) for st in s.stains]
        ref = stains_pair(s.target)
        np.savez(out, tiles=tiles[:count], seeds=seeds[:count],
                 src_he=np.array([h for h, _ in src]), src_max=np.array([m for _, m in src]),
                 ref_he=ref[0], ref_max=ref[1], paths=np.array(paths))
        return len(s.tiles), count, setup


def load_plan(path):
    p = np.load(path)
    src = [(he, m) for he, m in zip(p["src_he"], p["src_max"])]
    return ([str(q) for q in p["paths"]], p["tiles"], p["seeds"], src, (p["ref_he"], p["ref_max"]))


# --- the pipelines (each runs in its own process) -----------------------------------------------

def slidepipe_batches(plan, batch, cores):
    import warnings

    import slidepipe
    import torch

    # The batch is the library's read-only memory; the loop only reads it.
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    paths, tiles, _, _, _ = plan
    s = slidepipe.PatchSampler(paths, SIZE, batch_size=batch, min_tissue=MIN_TISSUE,
                               normalize=True, dihedral=True, hed_sigma=SIGMA, dtype="float16",
                               layout="NCHW", mean=MEAN, std=STD, threads=cores, prefetch=4,
                               seed=SEED)
    mine, _ = s.plan(0)
    if not np.array_equal(mine[:len(tiles)], tiles):
        raise RuntimeError("the sampler's epoch 0 is not the plan's tile list")
    n = len(tiles) // batch
    for i, (patches, _) in enumerate(s.epoch(0)):
        if i == n:
            break
        yield torch.from_numpy(patches)
    s.close()


class OpenSlideDataset:
    """What a team writes today: read_region per item on a handle opened once per worker, numpy
    for the colour, torchvision for flips and the float conversion."""

    def __init__(self, plan):
        import torch
        from torchvision.transforms import v2

        self.paths, self.tiles, self.seeds, self.src, self.ref = plan
        self.handles = None

        def transpose(x):
            return x.transpose(-1, -2) if torch.rand(()) < 0.5 else x

        self.flip = v2.Compose([v2.RandomHorizontalFlip(), v2.RandomVerticalFlip(),
                                v2.Lambda(transpose)])
        self.tofloat = v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])

    def __len__(self):
        return len(self.tiles)

    def __getitem__(self, i):
        import openslide
        import torch

        if self.handles is None:  # here, not in __init__: each worker opens its own
            self.handles = [openslide.OpenSlide(p) for p in self.paths]
        t = self.tiles[i]
        k = int(t["slide"])
        img = self.handles[k].read_region((int(t["x"]), int(t["y"])), 0, (SIZE, SIZE))
        rgb = np.asarray(img.convert("RGB"))
        rgb = hed_jitter(macenko(rgb, self.src[k], self.ref), self.seeds[i], SIGMA)
        x = self.flip(torch.from_numpy(rgb).permute(2, 0, 1))
        return self.tofloat(x).to(torch.float16)


def monai_dataset(plan, per_patch_stains):
    """MONAI's way: PatchWSIDataset with the OpenSlide reader and dictionary transforms."""
    import torch
    from monai.apps.pathology.transforms import NormalizeHEStainsd
    from monai.data import PatchWSIDataset
    from monai.transforms import (CastToTyped, Compose, EnsureTyped, Lambda, NormalizeIntensityd,
                                  RandFlipd, RandRotate90d)

    paths, tiles, seeds, src, ref = plan

    def to_hwc(d):  # MetaTensor CHW uint8 -> numpy HWC, the layout NormalizeHEStains takes
        img = d["image"]
        return {"image": np.ascontiguousarray(img.numpy().transpose(1, 2, 0)),
                "seed": img.meta["seed"], "slide": int(img.meta["slide"])}

    def fixed_macenko(d):
        return dict(d, image=macenko(d["image"], src[d["slide"]], ref))

    def jitter_chw(d):
        return {"image": np.ascontiguousarray(hed_jitter(d["image"], d["seed"], SIGMA)
                                              .transpose(2, 0, 1))}

    norm = (NormalizeHEStainsd("image") if per_patch_stains else Lambda(fixed_macenko))
    transform = Compose([
        Lambda(to_hwc), norm, Lambda(jitter_chw),
        RandFlipd("image", prob=0.5, spatial_axis=0),
        RandRotate90d("image", prob=0.75, max_k=3),  # with the flip: the 8 symmetries, evenly
        EnsureTyped("image", data_type="tensor", dtype=torch.float32, track_meta=False),
        NormalizeIntensityd("image", subtrahend=[255 * m for m in MEAN],
                            divisor=[255 * s for s in STD], channel_wise=True),
        CastToTyped("image", dtype=torch.float16),
    ])
    data = [{"image": paths[int(t["slide"])], "location": [int(t["y"]), int(t["x"])],
             "seed": int(s), "slide": int(t["slide"])} for t, s in zip(tiles, seeds)]
    return PatchWSIDataset(data, patch_size=SIZE, patch_level=0, transform=transform,
                           include_label=False, center_location=False,
                           additional_meta_keys=["seed", "slide"], reader="OpenSlide")


def _seed_monai_worker(worker_id):
    import torch

    info = torch.utils.data.get_worker_info()
    info.dataset.transform.set_random_state(seed=1000 + worker_id)


def loader_batches(name, plan, batch, cores):
    import torch
    from torch.utils.data import DataLoader

    if name == "openslide-tv":
        ds, init = OpenSlideDataset(plan), None
    else:
        ds, init = monai_dataset(plan, per_patch_stains=(name == "monai")), _seed_monai_worker
    for b in DataLoader(ds, batch_size=batch, num_workers=cores, shuffle=False,
                        worker_init_fn=init):
        yield b["image"] if isinstance(b, dict) else b


# --- measuring ---------------------------------------------------------------------------------

def tree(pid):
    """pid and its descendants (through /proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def tree_cpu(pid):
    """CPU seconds (user + system) of the process tree now."""
    total, tick = 0, os.sysconf("SC_CLK_TCK")
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / tick


def machine_busy():
    """CPU seconds the whole machine has spent busy (not idle, not waiting for I/O)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def tree_rss(pid):
    """Sum of the RSS of the process tree in KiB (statm: cheap enough to sample often)."""
    total, page = 0, os.sysconf("SC_PAGE_SIZE") // 1024
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * page
        except OSError:
            pass
    return total


def tree_pss(pid):
    """Sum of the PSS of the process tree in KiB. smaps_rollup walks the page tables under the
    process's memory lock (tens of ms for a process holding torch), so it is read once, after
    the timed part, not sampled."""
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except OSError:
            pass
    return total


def run_one(name, plan_path, batch, cores):
    """One pipeline at one core count, in this process; prints one JSON line."""
    plan = load_plan(plan_path)
    batches = (slidepipe_batches(plan, batch, cores) if name == "slidepipe"
               else loader_batches(name, plan, batch, cores))
    x = next(batches)  # start-up, worker spawn and first reads: not timed
    if tuple(x.shape) != (batch, 3, SIZE, SIZE) or str(x.dtype) != "torch.float16":
        raise RuntimeError(f"{name} made {tuple(x.shape)} {x.dtype}")
    float(x[0, 0, 0, 0])
    n, c0, b0, t0 = 0, tree_cpu(os.getpid()), machine_busy(), time.perf_counter()
    for _ in range(len(plan[1]) // batch - 1):
        x = next(batches)
        float(x[0, 0, 0, 0])  # the loop consumes the batch: one element read
        n += x.shape[0]
    # Before the end of the iterator: a DataLoader's workers exit there, taking their CPU time.
    wall = time.perf_counter() - t0
    cpu, busy = tree_cpu(os.getpid()) - c0, machine_busy() - b0
    pss = tree_pss(os.getpid())
    batches.close()
    print(json.dumps({"patches": n, "rate": n / wall, "cpu": cpu / wall,
                      "others": max(0.0, busy - cpu) / wall, "pss": pss / 1024}), flush=True)


def measure(name, plan_path, batch, cores):
    """Runs one pipeline in a child process, sampling its tree's memory; returns its result."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--run", name, "--plan", plan_path,
           "--batch", str(batch), "--cores", str(cores)]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        rss = 0
        while child.poll() is None:
            rss = max(rss, tree_rss(child.pid))
            time.sleep(0.1)
        out.seek(0)
        err.seek(0)
        lines = out.read().splitlines()
        if child.returncode != 0 or not lines:
            why = (err.read().strip().splitlines() or [f"exit {child.returncode}"])[-1]
            return {"error": why}
    result = json.loads(lines[-1])
    result.update(rss=rss / 1024)
    return result


def check(plan_path, batch, n=8):
    """The largest difference, in 8-bit levels, between slidepipe's first n patches and those of
    openslide-tv and monai-fixed, each compared under the best of the 8 flips (the flips are
    drawn by different generators). Within 1 plus float16's rounding (about 0.06 of a level at
    these values): the same work, with roundings of float32 at .5 falling either way."""
    plan = load_plan(plan_path)
    sp = next(slidepipe_batches(plan, batch, 0)).float().numpy()[:n]
    tv, mf = OpenSlideDataset(plan), monai_dataset(plan, per_patch_stains=False)
    scale = 255 * np.array(STD, dtype=np.float32)[:, None, None]
    worst = 0.0
    for i in range(n):
        for y in (tv[i], mf[i]["image"]):
            y = y.float().numpy()
            worst = max(worst, min((np.abs(np.rot90(y, k, (1, 2))[:, :, ::f] - sp[i]) * scale)
                                   .max() for k in range(4) for f in (1, -1)))
    return worst


def warm(paths):
    """Read every slide once so that all runs see a warm page cache."""
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slides", default=SLIDES, help="comma-separated slide paths")
    ap.add_argument("--patches", type=int, default=1600, help="patches a run (whole batches)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--cores", default="1,2", help="threads / DataLoader workers")
    ap.add_argument("--pipelines", default=",".join(PIPELINES))
    ap.add_argument("--run", choices=PIPELINES, help=argparse.SUPPRESS)  # a child's one run
    ap.add_argument("--plan", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.run:
        run_one(a.run, a.plan, a.batch, int(a.cores))
        return 0

    paths = a.slides.split(",")
    names = a.pipelines.split(",")
    unknown = set(names) - set(PIPELINES)
    if unknown:
        ap.error(f"unknown pipelines: {', '.join(sorted(unknown))}")
    cores = [int(c) for c in a.cores.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        plan_path = os.path.join(tmp, "plan.npz")
        total, count, setup = make_plan(paths, a.patches, a.batch, plan_path)
        warm(paths)
        diff = check(plan_path, a.batch)
        print(f"{', '.join(os.path.basename(p) for p in paths)}: {total} tissue tiles of "
              f"{SIZE}² (min tissue {MIN_TISSUE}), setup {setup:.2f} s; {count} patches a run in "
              f"batches of {a.batch} (the first batch untimed), Macenko + flips + HED jitter "
              f"(sigma {SIGMA}), float16 NCHW mean/std; the loop reads x[0,0,0,0]; "
              f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
        same = "" if diff <= 1.1 else " (more than 1 + the float16 rounding)"
        print(f"check: openslide-tv's and monai-fixed's first 8 patches are slidepipe's within "
              f"{diff:.2f} levels of 255, up to the flip{same}")
        print(f"{'pipeline':<14} {'cores':>5} {'patches/s':>10} {'cpu':>5} {'others':>6} "
              f"{'per cpu-s':>9} {'peak RSS MiB':>13} {'PSS MiB':>8}")
        results = {}
        for c in cores:
            for name in names:
                r = results[name, c] = measure(name, plan_path, a.batch, c)
                if "error" in r:
                    print(f"{name:<14} {c:>5} failed: {r['error']}")
                else:
                    print(f"{name:<14} {c:>5} {r['rate']:>10.1f} {r['cpu']:>5.2f} "
                          f"{r['others']:>6.2f} {r['rate'] / r['cpu']:>9.1f} {r['rss']:>13.0f} "
                          f"{r['pss']:>8.0f}", flush=True)

    print(f"targets (issue 25): slidepipe >= {TARGET_RATIO:g}x the faster peer, "
          f">= {TARGET_PER_CORE:g} patches/s a core")
    for c in cores:
        sp = results.get(("slidepipe", c), {})
        peers = [(r["rate"], n) for (n, k), r in results.items()
                 if k == c and n != "slidepipe" and "rate" in r]
        if "rate" not in sp:
            print(f"{c} cores: slidepipe did not run")
            continue
        per_core = sp["rate"] / c
        line = (f"{c} cores: slidepipe {per_core:.0f} patches/s a core "
                f"({'met' if per_core >= TARGET_PER_CORE else 'not met'})")
        if peers:
            rate, peer = max(peers)
            ratio = sp["rate"] / rate
            pr = results[peer, c]
            line += (f"; slidepipe / {peer} (the faster peer) {ratio:.1f}x "
                     f"({'met' if ratio >= TARGET_RATIO else 'not met'}); per CPU second "
                     f"{(sp['rate'] / sp['cpu']) / (pr['rate'] / pr['cpu']):.1f}x")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
