"""Reinhard normalization, stain augmentation and the per-slide estimate cache (docs/stains.md)
through the binding.

Oracles: a float64 numpy evaluation of each definition; torchstain 1.4.1's numpy Reinhard and
Macenko normalizers (pinned in tests/requirements.txt) on the same patch with the same target,
whose differences are measured and bounded here and explained in docs/stains.md; and the cache
file itself, read, poisoned, planted and touched.
"""

import json
import os
import shutil

import numpy as np
import pytest

import slidepipe
from slidepipe import stain_tools

SMALL = "aperio/CMU-1-Small-Region.svs"
PYRAMID = "aperio/tcga-cr-7395-01a-01-ts1.svs"
MASK64 = (1 << 64) - 1
STREAM = 0x737461696E617567

RGB_TO_XYZ = np.array([[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169],
                       [0.019334, 0.119193, 0.950227]])
WHITE = np.array([0.95047, 1.0, 1.08883])


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test gets its own cache folder; the user's ~/.cache is never touched."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SLIDEPIPE_STAIN_CACHE", raising=False)
    return tmp_path / "xdg" / "slidepipe" / "stains"


def patch_of(testdata, name=SMALL, x=600, y=400, size=512):
    with slidepipe.open(str(testdata / name)) as s:
        rgba = s.read_region((x, y), 0, (size, size))
    assert (rgba[..., 3] == 255).all()
    return np.ascontiguousarray(rgba[..., :3])


# ---- numpy evaluations of the definitions ----------------------------------------------------

def rgb_to_lab(rgb):
    v = rgb.astype(np.float64) / 255.0
    lin = np.where(v > 0.04045, ((v + 0.055) / 1.055) ** 2.4, v / 12.92)
    t = (lin @ RGB_TO_XYZ.T) / WHITE
    f = np.where(t > 0.008856, np.cbrt(t), 7.787 * t + 16.0 / 116.0)
    return np.stack([116.0 * f[..., 1] - 16.0, 500.0 * (f[..., 0] - f[..., 1]),
                     200.0 * (f[..., 1] - f[..., 2])], axis=-1)


def lab_to_rgb_exact(lab):
    """Float sRGB in [0, 1] before rounding."""
    fy = (lab[..., 0] + 16.0) / 116.0
    f = np.stack([lab[..., 1] / 500.0 + fy, fy, fy - lab[..., 2] / 200.0], axis=-1)
    xyz = np.where(f > 0.2068966, f ** 3, (f - 16.0 / 116.0) / 7.787) * WHITE
    lin = xyz @ np.linalg.inv(RGB_TO_XYZ).T
    s = np.where(lin > 0.0031308, 1.055 * np.abs(lin) ** (1 / 2.4) - 0.055, 12.92 * lin)
    return np.clip(s, 0.0, 1.0)


def reinhard_numpy(rgb, src, tgt):
    lab = rgb_to_lab(rgb)
    lab = (lab - np.array(src.mean)) / np.array(src.std) * np.array(tgt.std) + np.array(tgt.mean)
    return 255.0 * lab_to_rgb_exact(lab)


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def augment_numpy(rgb, stains, seed, sigma):
    """The unrounded result of docs/stains.md's stain augmentation."""
    state, u = seed ^ STREAM, []
    for _ in range(4):
        state, z = splitmix64(state)
        u.append((z >> 11) * 2.0**-53)
    alpha = np.array([1 - sigma + 2 * sigma * u[0], 1 - sigma + 2 * sigma * u[1]])
    beta = np.array([-sigma + 2 * sigma * u[2], -sigma + 2 * sigma * u[3]])
    he = np.array([stains.h, stains.e]).T  # 3 x 2
    x = rgb.reshape(-1, 3).astype(np.float64)
    od = -np.log(np.maximum(x, 1.0) / 255.0)
    c = np.linalg.lstsq(he, od.T, rcond=None)[0]  # 2 x n
    d = c * (alpha[:, None] - 1.0) + beta[:, None]
    out = x * np.exp(-(he @ d).T)
    return out.reshape(rgb.shape)


# ---- Reinhard --------------------------------------------------------------------------------

def test_stats_match_skimage(testdata):
    skcolor = pytest.importorskip("skimage.color")
    rgb = patch_of(testdata)
    got = slidepipe.ReinhardStats.of(rgb)
    lab = skcolor.rgb2lab(rgb).reshape(-1, 3)
    assert got.pixels == rgb.shape[0] * rgb.shape[1]
    np.testing.assert_allclose(got.mean, lab.mean(axis=0), rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.std, lab.std(axis=0), rtol=0, atol=1e-9)
    tissue = slidepipe.ReinhardStats.of(rgb, tissue_only=True)
    keep = (rgb <= 219).any(axis=-1).reshape(-1)
    assert tissue.pixels == keep.sum()
    np.testing.assert_allclose(tissue.mean, lab[keep].mean(axis=0), rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", [SMALL, PYRAMID])
def test_reinhard_matches_numpy(testdata, name):
    rgb = patch_of(testdata, name)
    with slidepipe.open(str(testdata / name)) as s:
        src = s.reinhard_stats(cache=False)
    tgt = slidepipe.ReinhardStats.reference()
    got = slidepipe.reinhard_normalize(rgb.copy(), src, tgt)
    want = reinhard_numpy(rgb, src, tgt)
    diff = np.abs(got - want)
    assert diff.max() <= 0.5 + 1e-6, diff.max()
    assert np.mean(got == np.floor(want + 0.5)) >= 0.999


def test_reinhard_identity_and_refusals(testdata):
    rgb = patch_of(testdata)
    stats = slidepipe.ReinhardStats.of(rgb)
    same = slidepipe.reinhard_normalize(rgb.copy(), stats, stats)
    # Only the LAB round trip's rounding separates a pixel from itself.
    assert np.abs(same.astype(int) - rgb).max() <= 1
    assert np.mean(same == rgb) > 0.999
    for bad in (slidepipe.ReinhardStats((50, 0, 0), (0, 1, 1)),
                slidepipe.ReinhardStats((float("nan"), 0, 0), (1, 1, 1)),
                slidepipe.ReinhardStats((150, 0, 0), (1, 1, 1))):
        before = rgb.copy()
        with pytest.raises(slidepipe.SlidepipeError):
            slidepipe.reinhard_normalize(before, bad)
        assert np.array_equal(before, rgb)


def test_reinhard_against_torchstain(testdata):
    """torchstain's NumpyReinhardNormalizer on the same patch with the same target statistics.
    Its own source statistics (float32 LAB of all the patch's pixels) are handed to slidepipe, so
    the two differ only in the per-pixel arithmetic: float32 against float64 and truncation
    (astype uint8) against rounding. So slidepipe is at most one level above torchstain's byte
    (truncation) plus float32 noise; measured: max 1, mean ~0.5 (docs/stains.md)."""
    ts = pytest.importorskip("torchstain.numpy.normalizers")
    from torchstain.numpy.utils.rgb2lab import rgb2lab
    from torchstain.numpy.utils.split import lab_split

    rgb = patch_of(testdata, SMALL)
    target = patch_of(testdata, PYRAMID, x=2000, y=2000)
    norm = ts.NumpyReinhardNormalizer()
    norm.fit(target)
    want = norm.normalize(rgb.copy())
    labs = lab_split(rgb2lab(rgb.astype("float32") / 255))
    src = slidepipe.ReinhardStats([float(np.mean(c)) for c in labs],
                                  [float(np.std(c)) for c in labs])
    tgt = slidepipe.ReinhardStats(norm.target_means, norm.target_stds)
    got = slidepipe.reinhard_normalize(rgb.copy(), src, tgt)
    d = got.astype(int) - want.astype(int)
    print(f"reinhard vs torchstain: max |d| {np.abs(d).max()}, mean |d| {np.abs(d).mean():.4f}, "
          f"d in {np.unique(d)}")
    assert np.abs(d).max() <= 2
    assert d.min() >= -1  # truncation puts torchstain below, never above by more than noise
    assert np.abs(d).mean() <= 0.75
    # Against the unrounded float64 value, torchstain's is the floor of it (within float32).
    exact = reinhard_numpy(rgb, src, tgt)
    assert np.mean(np.abs(want - np.floor(exact)) <= 1) > 0.999


def macenko_numpy(rgb):
    """docs/stains.md's estimate, in numpy, from an RGB array."""
    od = -np.log(np.maximum(rgb.reshape(-1, 3).astype(np.float64), 1) / 255.0)
    x = od[(od >= 0.15).all(axis=1)]
    _, vecs = np.linalg.eigh(np.cov(x.T))
    v1, v2 = vecs[:, 2], vecs[:, 1]
    v1 = v1 if v1.sum() >= 0 else -v1
    v2 = v2 if v2.sum() >= 0 else -v2
    phi = np.arctan2(x @ v2, x @ v1)
    ends = []
    for p in (1, 99):
        a = np.percentile(phi, p)
        v = v1 * np.cos(a) + v2 * np.sin(a)
        v /= np.linalg.norm(v)
        ends.append(v if v.sum() >= 0 else -v)
    h, e = (ends[0], ends[1]) if ends[0][0] > ends[1][0] else (ends[1], ends[0])
    c = np.linalg.lstsq(np.array([h, e]).T, x.T, rcond=None)[0]
    return slidepipe.Stains(h, e, np.percentile(c[0], 99), np.percentile(c[1], 99))


def angle(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.degrees(np.arccos(min(1.0, a @ b / np.linalg.norm(a) / np.linalg.norm(b))))


def test_macenko_against_torchstain(testdata):
    """torchstain's NumpyMacenkoNormalizer and slidepipe's Macenko on the same patch, both to the
    HEnorm reference. They differ by design (docs/stains.md): torchstain takes
    od = -ln((I + 1) / 240) and writes 240 exp(-od), and it takes the 99th-percentile
    concentrations over all pixels, background included, not over the stained ones. So: the stain
    directions agree within a few degrees; torchstain's maxima are smaller; with torchstain's
    stains and maxima as the source, slidepipe's map differs from torchstain's only by the
    od definition and Io (measured on stained pixels: max 6, mean 2.0); with each estimating its
    own, the stained pixels differ by ~34 levels on average (the maxima)."""
    ts = pytest.importorskip("torchstain.numpy.normalizers")
    rgb = patch_of(testdata, SMALL)
    norm = ts.NumpyMacenkoNormalizer()
    want, _, _ = norm.normalize(rgb.copy(), stains=True)
    he, _, max_c = norm._NumpyMacenkoNormalizer__compute_matrices(rgb.copy(), 240, 1, 0.15)
    theirs = slidepipe.Stains(he[:, 0], he[:, 1], max_c[0], max_c[1])
    ours = macenko_numpy(rgb)
    stained = (-np.log(np.maximum(rgb, 1) / 255.0) >= 0.15).all(axis=-1)
    ah, ae = angle(ours.h, theirs.h), angle(ours.e, theirs.e)
    full = np.abs(slidepipe.normalize_stains(rgb.copy(), ours).astype(int) - want)[stained]
    same = np.abs(slidepipe.normalize_stains(rgb.copy(), theirs).astype(int) - want)[stained]
    print(f"macenko vs torchstain: H {ah:.2f} deg, E {ae:.2f} deg apart; max_h {ours.max_h:.3f} "
          f"vs {theirs.max_h:.3f}, max_e {ours.max_e:.3f} vs {theirs.max_e:.3f}; stained pixels, "
          f"own estimates: max {full.max()} mean {full.mean():.2f}; torchstain's stains: max "
          f"{same.max()} mean {same.mean():.2f}")
    assert ah <= 3.0 and ae <= 3.0
    assert ours.max_h > theirs.max_h
    assert same.max() <= 8 and same.mean() <= 3.0
    assert full.mean() <= 45


# ---- stain augmentation ----------------------------------------------------------------------

@pytest.mark.parametrize("sigma", [0.0, 0.05, 0.2, 1.0])
def test_augment_matches_numpy(testdata, sigma):
    with slidepipe.open(str(testdata / SMALL)) as s:
        stains = s.stains(cache=False)
    patches = np.stack([patch_of(testdata, x=100 + 300 * i, size=128) for i in range(4)])
    seeds = np.array([0, 1, 2**63 + 5, MASK64], dtype=np.uint64)
    got = slidepipe.augment_stains(patches.copy(), stains, seeds, sigma)
    for i in range(4):
        want = augment_numpy(patches[i], stains, int(seeds[i]), sigma)
        diff = np.abs(got[i] - np.minimum(want, 255.0))
        assert diff.max() <= 0.5 + 1e-6, (i, diff.max())
        assert np.mean(got[i] == np.minimum(np.floor(want + 0.5), 255)) > 0.999
    if sigma == 0.0:
        assert np.array_equal(got, patches)


def test_augment_is_deterministic_across_threads(testdata):
    with slidepipe.open(str(testdata / SMALL)) as s:
        stains = s.stains(cache=False)
    patches = np.stack([patch_of(testdata, x=50 * i, y=40 * i, size=96) for i in range(16)])
    seeds = np.arange(16, dtype=np.uint64) * 7919
    one = slidepipe.augment_stains(patches.copy(), stains, seeds, 0.1, threads=1)
    two = slidepipe.augment_stains(patches.copy(), stains, seeds, 0.1, threads=2)
    assert np.array_equal(one, two)
    single = slidepipe.augment_stains(patches[5:6].copy(), stains, seeds[5:6], 0.1)
    assert np.array_equal(single[0], one[5])
    assert not np.array_equal(one, patches)
    with pytest.raises(slidepipe.SlidepipeError):
        slidepipe.augment_stains(patches.copy(), stains, seeds, 1.5)


# ---- the cache -------------------------------------------------------------------------------

def entries(folder):
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def test_cache_hit_poison_plant(testdata, tmp_path, private_cache):
    slide = tmp_path / "slide.svs"
    shutil.copyfile(testdata / SMALL, slide)
    with slidepipe.open(str(slide)) as s:
        fresh_s, fresh_r, hit = stain_tools.estimate_stains(s._core, 2048, True)
        assert not hit
        files = entries(private_cache)
        assert len(files) == 1
        doc = json.loads(files[0].read_text())
        assert doc["max_side"] == 2048 and doc["reinhard"]["pixels"] == fresh_r.pixels
        again_s, again_r, hit = stain_tools.estimate_stains(s._core, 2048, True)
        assert hit and again_r == fresh_r and again_s._tuple() == fresh_s._tuple()
        plain = s.stains(cache=False)
        assert plain._tuple() == fresh_s._tuple()  # the numbers survive the file bit for bit

        # Poisoned entries are detected, recomputed and rewritten.
        good = files[0].read_text()
        for poison in (good.replace('"std": [', '"std": [-'), good.replace('"max_h": ', '"max_h": 1e999 + '),
                       good[: len(good) // 2], good.replace('"pixels": ', '"pixels": 1.5 + 0*'),
                       "", "null", good.replace(doc["key"], "0" * 64)):
            files[0].write_text(poison)
            st, r, hit = stain_tools.estimate_stains(s._core, 2048, True)
            assert not hit, poison[:80]
            assert r == fresh_r and st._tuple() == fresh_s._tuple()
            assert json.loads(files[0].read_text()) == doc

        # A valid planted entry is used as it is.
        planted = dict(doc)
        planted["reinhard"] = dict(doc["reinhard"], mean=[60.0, 10.0, -5.0])
        files[0].write_text(json.dumps(planted))
        _, r, hit = stain_tools.estimate_stains(s._core, 2048, True)
        assert hit and r.mean == (60.0, 10.0, -5.0)
        assert s.reinhard_stats().mean == (60.0, 10.0, -5.0)
        assert s.reinhard_stats(cache=False) == fresh_r

        # Another max side is another entry.
        _, _, hit = stain_tools.estimate_stains(s._core, 1024, True)
        assert not hit and len(entries(private_cache)) == 2


def test_cache_misses_after_touch_and_can_be_disabled(testdata, tmp_path, private_cache,
                                                      monkeypatch):
    slide = tmp_path / "slide.svs"
    shutil.copyfile(testdata / SMALL, slide)
    with slidepipe.open(str(slide)) as s:
        assert not stain_tools.estimate_stains(s._core, 512, True)[2]
        assert stain_tools.estimate_stains(s._core, 512, True)[2]
    st = slide.stat()
    os.utime(slide, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with slidepipe.open(str(slide)) as s:
        assert not stain_tools.estimate_stains(s._core, 512, True)[2]
        assert len(entries(private_cache)) == 2
    monkeypatch.setenv("SLIDEPIPE_STAIN_CACHE", "0")
    shutil.rmtree(private_cache)
    with slidepipe.open(str(slide)) as s:
        for _ in range(2):
            assert not stain_tools.estimate_stains(s._core, 512, True)[2]
    assert entries(private_cache) == []


def test_reinhard_without_stains(tmp_path, private_cache):
    """A pale slide: tissue for Reinhard (green <= 219) but no pixel stained in all three channels,
    so Macenko fails while the Reinhard statistics are still given (and nothing is cached)."""
    tifffile = pytest.importorskip("tifffile")
    rng = np.random.default_rng(3)
    img = np.empty((512, 512, 3), np.uint8)
    img[..., 0] = 240
    img[..., 1] = rng.integers(150, 210, (512, 512))
    img[..., 2] = 230
    path = tmp_path / "pale.tif"
    tifffile.imwrite(path, img, tile=(256, 256), photometric="rgb")
    with slidepipe.open(str(path)) as s:
        stats = s.reinhard_stats()
        assert stats.pixels == 512 * 512
        assert stats == slidepipe.ReinhardStats.of(img, tissue_only=True)
        with pytest.raises(slidepipe.SlidepipeError, match="too few stained pixels"):
            s.stains()
    assert entries(private_cache) == []
