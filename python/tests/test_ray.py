"""slidepipe.ray against the single-process PatchSampler on a real local Ray cluster: a head and
two worker nodes (each its own raylet and worker process) on loopback. The rows must be the
sampler's samples with the sampler's bytes, in its order with order="epoch", each exactly once
with order="slide"; a worker killed (SIGKILL) while it reads a block is retried and nothing is
lost or duplicated; cohort conversion as Ray tasks gives the dataset hash a local run gives.
Skipped, saying so, when Ray Data is not installed, and in the ASan run (below).
"""

import os
import signal

import numpy as np
import pytest

import slidepipe

# Ray gives every node this machine's network address, and a head told 127.0.0.1 alone is not
# reached by its own clients; with its switch for platforms without clusters (Windows, macOS)
# off, Ray keeps every node and client on 127.0.0.1. Set before Ray is imported: it reads it then.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'ray[data]', "
                          "tests/requirements.txt pins it)")
pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'ray[data]')")
import slidepipe.ray as spray  # noqa: E402

# The sanitizer run of this suite (scripts/run-tests preloads the ASan runtime) leaves the
# Ray cluster out: it costs a minute or more there, and the reads it drives are the loader's and
# the slide's, which that run covers through test_loader.py and test_binding.py; the release run
# covers Ray itself.
if "asan" in os.environ.get("LD_PRELOAD", ""):
    pytest.skip("Ray cluster tests run in the release run only (the ASan run covers the reads "
                "they drive through test_loader.py and test_binding.py)", allow_module_level=True)

SMALL = "aperio/CMU-1-Small-Region.svs"
PYRAMID = "aperio/tcga-cr-7395-01a-01-ts1.svs"


def sampler_kwargs(**over):
    kw = dict(level=0, batch_size=16, min_tissue=0.5, seed=11, dihedral=True, hed_sigma=0.05,
              mask_side=512, threads=1)
    kw.update(over)
    return kw


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    # The nodes' worker processes import the slidepipe this test imports (conftest.py's).
    package = os.path.dirname(os.path.dirname(slidepipe.__file__))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = package + ("" if old is None else os.pathsep + old)
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        workers = [c.add_node(num_cpus=1) for _ in range(2)]
        c.wait_for_nodes()
        ray.init(address=c.address, log_to_driver=False)
        where = {n["NodeManagerAddress"] for n in ray.nodes()} | {c.address.rsplit(":", 1)[0]}
        assert where == {"127.0.0.1"}, f"the cluster is not on loopback: {where}"
        yield c, workers
    finally:
        ray.shutdown()
        c.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def rows_of(ds):
    parts = list(ds.iter_batches(batch_size=None, batch_format="numpy"))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def single_process(paths, size, **kw):
    with slidepipe.PatchSampler(paths, size, **kw) as sampler:
        batches = list(sampler.epoch(1))
    return (np.concatenate([p for p, _ in batches]), np.concatenate([t for _, t in batches]))


def test_epoch_order_is_the_samplers_byte_for_byte(testdata, cluster):
    # The pyramid does not record its MPP: the override pickles with the Slide.
    paths = [slidepipe.open(testdata / SMALL), slidepipe.open(testdata / PYRAMID, mpp=0.5)]
    kw = sampler_kwargs(mpp=0.75, dtype="float16", layout="NCHW", mean=(0.5, 0.5, 0.5),
                        std=(0.25, 0.25, 0.25))
    patches, tiles = single_process(paths, 48, **kw)
    ds = spray.read_patches(paths, 48, epoch=1, order="epoch", block_size=100, **kw)
    rows = rows_of(ds)
    assert rows["image"].dtype == np.float16 and rows["image"].shape == patches.shape
    assert np.array_equal(rows["index"], np.arange(len(patches)))
    assert np.array_equal(rows["image"].view(np.uint16), patches.view(np.uint16))
    for name in ("slide", "x", "y", "label"):
        assert np.array_equal(rows[name], tiles[name]), name
    # The workers read the blocks: the two worker nodes, not the driver (the head has no CPU).
    alive = [n for n in ray.nodes() if n["Alive"]]
    assert len(alive) == 3 and len({n["NodeManagerAddress"] for n in alive}) == 1


def test_slide_blocks_hold_each_sample_once_with_its_bytes_and_shard_by_rank(testdata, cluster):
    paths = [testdata / SMALL, testdata / PYRAMID]
    kw = sampler_kwargs()
    patches, tiles = single_process(paths, 64, **kw)
    with slidepipe.PatchSampler(paths, 64, **kw) as sampler:
        blocks = spray.plan_blocks(sampler, 1, block_size=37)
        plan = sampler.plan(1)[0]
    assert len(blocks) > 4 and all(len(set(plan["slide"][b])) == 1 for b in blocks)
    ds = spray.read_patches(paths, 64, epoch=1, block_size=37, **kw)
    rows = rows_of(ds)
    idx = rows["index"]
    assert sorted(idx.tolist()) == list(range(len(patches)))
    assert np.array_equal(rows["image"], patches[idx])
    # A block is a run of one slide: the slide column only changes once.
    assert np.count_nonzero(np.diff(rows["slide"])) == 1
    # Ranks: rank r of 2 gets the single-process rank's samples, the two together everyone.
    # (On the JPEG slide alone: the JPEG 2000 one's masks take most of the time.)
    seen, paths = [], paths[:1]
    patches, tiles = single_process(paths, 64, **kw)
    for rank in (0, 1):
        p, t = single_process(paths, 64, **kw, rank=rank, world_size=2)
        r = rows_of(spray.read_patches(paths, 64, epoch=1, block_size=64, **kw, rank=rank,
                                       world_size=2))
        assert np.array_equal(r["image"], p[r["index"]])
        seen.extend(zip(t["slide"].tolist(), t["x"].tolist(), t["y"].tolist()))
    assert sorted(seen) == sorted(zip(tiles["slide"].tolist(), tiles["x"].tolist(),
                                      tiles["y"].tolist()))


def test_iter_torch_batches_streams_the_rows(testdata, cluster):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    paths = [testdata / SMALL]
    kw = sampler_kwargs(dtype="float32", layout="NCHW")
    patches, _ = single_process(paths, 32, **kw)
    ds = spray.read_patches(paths, 32, epoch=1, order="epoch", block_size=50, **kw)
    got = [b["image"] for b in ds.iter_torch_batches(batch_size=16)]
    assert all(isinstance(x, torch.Tensor) and x.dtype == torch.float32 for x in got)
    assert np.array_equal(torch.cat(got).numpy(), patches)


def kill_once(marker, victim):
    """An on_block hook: the worker that starts block `victim` first kills itself (SIGKILL, no
    cleanup), leaving `marker` so that the retry reads the block."""
    def hook(number):
        if number == victim and not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
    return hook


def test_a_worker_killed_mid_block_is_retried_without_loss_or_duplication(testdata, cluster,
                                                                           tmp_path):
    paths = [testdata / SMALL, testdata / PYRAMID]
    kw = sampler_kwargs()
    patches, _ = single_process(paths, 64, **kw)
    marker = tmp_path / "killed"
    ds = spray.read_patches(paths, 64, epoch=1, order="epoch", block_size=128,
                            on_block=kill_once(str(marker), 3), **kw)
    rows = rows_of(ds)
    assert marker.exists(), "the hook never ran: no worker was killed"
    killed = int(marker.read_text())
    assert killed != os.getpid()
    assert np.array_equal(rows["index"], np.arange(len(patches)))
    assert np.array_equal(rows["image"], patches)


def test_cohort_convert_as_ray_tasks_gives_the_local_hash(testdata, cluster, tmp_path):
    src = testdata / SMALL
    local = slidepipe.convert(src, tmp_path / "local.zarr", threads=1)
    remote = spray.convert([((str(src), str(tmp_path / "ray.zarr")), {"threads": 1}),
                            ((str(src), str(tmp_path / "ray2.zarr")), {"threads": 1})])
    assert remote == [local, local]


def test_a_bad_argument_is_refused_before_any_task(testdata, cluster):
    paths = [testdata / SMALL]
    with pytest.raises(ValueError, match="order"):
        spray.read_patches(paths, 64, order="random", **sampler_kwargs())
    with pytest.raises(ValueError, match="size"):
        spray.read_patches(paths, **sampler_kwargs())
