"""Training data through the binding: augmentation against a numpy evaluation of its definition
(docs/train.md), the binding's masks, tiles and stains against the command line of the same
build, and PatchSampler against the same steps done one by one.
"""

import json

import numpy as np
import pytest

import slidepipe

SMALL = "aperio/CMU-1-Small-Region.svs"
PYRAMID = "aperio/tcga-cr-7395-01a-01-ts1.svs"

MASK64 = (1 << 64) - 1
HED_FROM_STAINS = np.array([[0.65, 0.70, 0.29], [0.07, 0.99, 0.11], [0.27, 0.57, 0.78]])


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def draws(seed):
    """The 7 uniform draws of a patch: the flip, then alpha and beta of H, E, D."""
    state, out = seed, []
    for _ in range(7):
        state, z = splitmix64(state)
        out.append((z >> 11) * 2.0**-53)
    return out


def dihedral(a, t):
    if t & 4:
        a = a.transpose(1, 0, 2)
    if t & 2:
        a = a[::-1]
    if t & 1:
        a = a[:, ::-1]
    return a


def augment_oracle(patch, seed, flips, sigma):
    """docs/train.md's definition in double precision; float result before rounding."""
    u = draws(seed)
    out = patch.astype(np.float64)
    if sigma > 0:
        od = -np.log(np.maximum(patch, 1) / 255.0)
        s = od @ np.linalg.inv(HED_FROM_STAINS)
        alpha = 1 + sigma * (2 * np.array(u[1:4]) - 1)
        beta = sigma * (2 * np.array(u[4:7]) - 1)
        out = np.clip(255.0 * np.exp(-((s * alpha + beta) @ HED_FROM_STAINS)), 0, 255)
    if flips:
        out = dihedral(out, int(u[0] * 8))
    return out


def random_patches(n, size, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, size, size, 3), dtype=np.uint8)


def test_flips_are_exact_and_cover_all_eight():
    patches = random_patches(64, 17, 1)
    seeds = np.arange(64, dtype=np.uint64) * 7919 + 3
    got = slidepipe.augment(patches.copy(), seeds, dihedral=True, hed_sigma=0.0)
    kinds = set()
    for i in range(64):
        t = int(draws(int(seeds[i]))[0] * 8)
        kinds.add(t)
        assert np.array_equal(got[i], dihedral(patches[i], t))
    assert kinds == set(range(8))


@pytest.mark.parametrize("sigma", [0.02, 0.1, 0.5])
def test_hed_jitter_matches_numpy(sigma):
    patches = random_patches(16, 32, 2)
    seeds = np.random.default_rng(3).integers(0, 2**63, size=16).astype(np.uint64)
    got = slidepipe.augment(patches.copy(), seeds, dihedral=True, hed_sigma=sigma)
    for i in range(16):
        want = augment_oracle(patches[i], int(seeds[i]), True, sigma)
        diff = np.abs(got[i].astype(np.float64) - want)
        # float32 in the library against double here: only values within a hair of .5 may round
        # the other way.
        assert diff.max() <= 0.5 + 1e-3, (i, diff.max())
        assert np.mean(np.abs(got[i] - np.floor(want + 0.5)) == 0) > 0.99


def test_jitter_does_not_depend_on_flips_or_threads():
    patches = random_patches(40, 24, 4)
    seeds = np.arange(1, 41, dtype=np.uint64) * 0x9E3779B97F4A7C15 % MASK64
    flipped = slidepipe.augment(patches.copy(), seeds, dihedral=True, hed_sigma=0.2, threads=1)
    plain = slidepipe.augment(patches.copy(), seeds, dihedral=False, hed_sigma=0.2, threads=2)
    for i in range(40):
        assert np.array_equal(flipped[i], dihedral(plain[i], int(draws(int(seeds[i]))[0] * 8)))
    again = slidepipe.augment(patches.copy(), seeds, dihedral=True, hed_sigma=0.2, threads=0)
    assert np.array_equal(again, flipped)


def test_nothing_switched_on_changes_nothing():
    patches = random_patches(3, 9, 5)
    got = slidepipe.augment(patches.copy(), np.array([1, 2, 3], dtype=np.uint64),
                            dihedral=False, hed_sigma=0.0)
    assert np.array_equal(got, patches)


def test_augment_rejects_bad_arguments():
    patches = random_patches(2, 8, 6)
    with pytest.raises(ValueError):
        slidepipe.augment(patches, np.zeros(3, dtype=np.uint64))
    with pytest.raises(ValueError):
        slidepipe.augment(patches[:, :4], np.zeros(2, dtype=np.uint64))
    with pytest.raises(ValueError):
        slidepipe.augment(patches.astype(np.float32), np.zeros(2, dtype=np.uint64))
    with pytest.raises(slidepipe.SlidepipeError):
        slidepipe.augment(patches, np.zeros(2, dtype=np.uint64), hed_sigma=1.5)


@pytest.mark.parametrize("name", [SMALL, PYRAMID])
def test_mask_tiles_and_stains_match_the_command_line(testdata, cli, name):
    path = testdata / name
    info = json.loads(cli("tissue", path, "--json", "--max-side", 512).stdout)
    tiles_cli = json.loads(cli("tiles", path, "--size", 128, "--min-tissue", 0.25, "--max-side",
                               512, "--json").stdout)
    stains_cli = json.loads(cli("stains", path, "--json").stdout)
    with slidepipe.open(path) as s:
        mask = s.tissue_mask(512)
        assert mask.array.shape == (info["height"], info["width"])
        assert mask.downsample == pytest.approx(info["downsample"], rel=1e-12)
        assert mask.threshold == info["threshold"]
        assert mask.tissue_fraction == pytest.approx(info["tissue_fraction"], abs=1e-9)
        assert mask.array.mean() == pytest.approx(mask.tissue_fraction, abs=1e-12)
        tiles = s.tissue_tiles(128, min_tissue=0.25, mask=mask)
        want = np.array(tiles_cli["tiles"], dtype=np.float64).reshape(-1, 3)
        assert len(tiles) == len(want) > 0
        assert np.array_equal(tiles["x"], want[:, 0]) and np.array_equal(tiles["y"], want[:, 1])
        assert np.allclose(tiles["tissue"], want[:, 2], atol=1e-4)
        assert (tiles["tissue"] >= 0.25).all() and (tiles["slide"] == 0).all()
        stains = s.stains()
        assert np.allclose(stains.h, stains_cli["h"], atol=1e-6)
        assert np.allclose(stains.e, stains_cli["e"], atol=1e-6)
        assert stains.max_h == pytest.approx(stains_cli["max_h"], rel=1e-6)
        assert stains.max_e == pytest.approx(stains_cli["max_e"], rel=1e-6)


def test_normalize_from_reference_to_reference_keeps_pixels(testdata):
    with slidepipe.open(testdata / SMALL) as s:
        patch = s.read_region((500, 500), 0, (128, 128), rgb=True)
    ref = slidepipe.Stains.reference()
    out = slidepipe.normalize_stains(patch.copy(), ref, ref)
    # Pixels that the two stains explain keep their colour; the rest (a third OD direction,
    # values at 0 or 255) are projected onto the H&E plane, so only most pixels stay close.
    assert np.mean(np.abs(out.astype(int) - patch) <= 12) > 0.5
    with pytest.raises(ValueError):
        slidepipe.normalize_stains(patch[..., :2].copy(), ref)


def sampler_kwargs(**over):
    kw = dict(level=0, batch_size=16, min_tissue=0.5, seed=11, dihedral=True, hed_sigma=0.05,
              mask_side=512, threads=2)
    kw.update(over)
    return kw


def test_sampler_visits_every_tile_once_per_epoch_in_a_seeded_order(testdata):
    paths = [testdata / SMALL, testdata / PYRAMID]
    with slidepipe.PatchSampler(paths, 96, **sampler_kwargs()) as sampler:
        n = len(sampler.tiles)
        assert n > 16 and len(sampler) == -(-n // 16)
        assert set(sampler.tiles["slide"]) == {0, 1}
        assert (sampler.tiles["tissue"] >= 0.5).all()
        first = list(sampler)
        second = list(sampler)
        seen = np.concatenate([t for _, t in first])
        assert len(seen) == n and len(np.unique(seen[["slide", "x", "y"]])) == n
        order2 = np.concatenate([t for _, t in second])
        assert not np.array_equal(seen, order2)  # a new epoch, a new order
        for (p, t), (q, u) in zip(first, sampler.epoch(0)):
            assert np.array_equal(t, u) and np.array_equal(p, q)
        assert first[0][0].shape == (16, 96, 96, 3) and first[0][0].dtype == np.uint8
    with slidepipe.PatchSampler(paths, 96, **sampler_kwargs(seed=12, threads=1)) as other:
        assert not np.array_equal(next(iter(other))[1], first[0][1])


@pytest.mark.parametrize("normalize", [False, True])
def test_sampler_batches_equal_the_steps_one_by_one(testdata, normalize):
    paths = [testdata / SMALL, testdata / PYRAMID]
    kw = sampler_kwargs(normalize=normalize, hed_sigma=0.1, batch_size=8)
    with slidepipe.PatchSampler(paths, 64, **kw) as sampler:
        rng = np.random.default_rng([kw["seed"], 0])
        order = rng.permutation(len(sampler.tiles))
        seeds = rng.integers(0, 2**64 - 1, size=len(order), dtype=np.uint64, endpoint=True)
        patches, tiles = next(sampler.epoch(0))
        for i, t in enumerate(tiles):
            assert np.array_equal(t, sampler.tiles[order[i]])
            s = sampler.slides[t["slide"]]
            want = s.read_region((int(t["x"]), int(t["y"])), 0, (64, 64), rgb=True)
            if normalize:
                slidepipe.normalize_stains(want, s.stains(512))
            slidepipe.augment(want[None], seeds[i:i + 1], dihedral=True, hed_sigma=0.1)
            assert np.array_equal(patches[i], want)


def test_sampler_refuses_slides_without_tissue(tmp_path):
    import tifffile

    blank = tmp_path / "blank.tif"
    tifffile.imwrite(blank, np.full((512, 512, 3), 255, dtype=np.uint8), tile=(256, 256))
    with pytest.raises(ValueError, match="no 64x64 tile"):
        slidepipe.PatchSampler([blank], 64, mask_side=256)
