"""Tile QC (slidepipe.tile_qc, docs/qc.md) on synthetic slides with painted artefacts.

Ground truth is the sidecar of `slidepipe synth --artifacts`: a tissue tile (256 px, level 0,
tissue >= 0.5) is a positive for an artefact kind when the kind's rectangles cover at least a
quarter of it, a negative when they do not touch it, and left out of that kind's figures when
they cover less than a quarter (a sliver of ink is neither a clear hit nor a clear miss). A tile
is flagged at the thresholds of slidepipe.QC_THRESHOLDS: pen > 0.05, blur < 50, fold > 0.6.
Precision and recall over three seeds must reach 0.9; the blur score must equal a numpy/scipy
evaluation of its definition; threads must not change anything; the CLI must agree.
"""

import json

import numpy as np
import pytest
import scipy.ndimage

import slidepipe

SIZE = 256
SEEDS = (1, 2, 3)
FLOOR = 0.9


@pytest.fixture(scope="module")
def slides(tmp_path_factory, cli):
    out = []
    folder = tmp_path_factory.mktemp("qc")
    for seed in SEEDS:
        path = folder / f"art{seed}.tif"
        proc = cli("synth", path, "--size", 4096, "--seed", seed, "--artifacts")
        sidecar = proc.stdout.strip().split("artifacts: ", 1)[1]
        assert sidecar == f"{path}.artifacts.json"
        out.append((path, json.load(open(sidecar))["artifacts"]))
    return out


def _cover(tiles, rects):
    """The fraction of each tile the rectangles cover (they do not overlap one another)."""
    cover = np.zeros(len(tiles))
    for r in rects:
        w = np.clip(np.minimum(tiles["x"] + SIZE, r["x"] + r["width"]) - np.maximum(tiles["x"], r["x"]), 0, None)
        h = np.clip(np.minimum(tiles["y"] + SIZE, r["y"] + r["height"]) - np.maximum(tiles["y"], r["y"]), 0, None)
        cover += w * h / SIZE**2
    return cover


def _flags(qc):
    t = slidepipe.QC_THRESHOLDS
    return {"pen": qc["pen"] > t["max_pen"], "blur": qc["blur"] < t["min_blur"],
            "fold": qc["fold"] > t["max_fold"]}


@pytest.fixture(scope="module")
def figures(slides):
    counts = {k: [0, 0, 0] for k in ("pen", "blur", "fold")}  # tp, fp, fn
    colour_right = colour_all = 0
    for path, rects in slides:
        with slidepipe.open(path) as s:
            tiles = s.tissue_tiles(SIZE)
            qc = slidepipe.tile_qc(s, tiles, SIZE, threads=2)
        flags = _flags(qc)
        for kind in counts:
            mine = [r for r in rects if r["kind"].startswith(kind)]
            cover = _cover(tiles, mine)
            pos, neg = cover >= 0.25, cover == 0
            counts[kind][0] += int(np.sum(flags[kind] & pos))
            counts[kind][1] += int(np.sum(flags[kind] & neg))
            counts[kind][2] += int(np.sum(~flags[kind] & pos))
        # the dominant ink of each pen positive is the ink painted there
        for colour in ("pen_blue", "pen_green", "pen_black"):
            pos = _cover(tiles, [r for r in rects if r["kind"] == colour]) >= 0.25
            dominant = np.argmax(np.stack([qc["pen_blue"], qc["pen_green"], qc["pen_black"]]), 0)
            colour_right += int(np.sum(pos & (dominant == ("pen_blue", "pen_green", "pen_black").index(colour))))
            colour_all += int(np.sum(pos))
    result = {}
    for kind, (tp, fp, fn) in counts.items():
        result[kind] = (tp / (tp + fp) if tp + fp else 0.0, tp / (tp + fn) if tp + fn else 0.0,
                        tp, fp, fn)
        print(f"{kind}: precision {result[kind][0]:.3f} recall {result[kind][1]:.3f} "
              f"(tp {tp}, fp {fp}, fn {fn})")
    result["colour"] = (colour_right, colour_all)
    print(f"pen colour: {colour_right} of {colour_all} right")
    return result


@pytest.mark.parametrize("kind", ["pen", "blur", "fold"])
def test_precision_and_recall(figures, kind):
    precision, recall, tp, fp, fn = figures[kind]
    assert tp >= 3, f"too few {kind} positives to measure ({tp})"
    assert precision >= FLOOR and recall >= FLOOR, figures[kind]


def test_pen_colour(figures):
    right, total = figures["colour"]
    assert total > 0 and right == total


def _reference(rgb):
    """Every score from docs/qc.md's rules, in numpy."""
    r, g, b = (rgb[..., k].astype(np.int64) for k in range(3))
    mx, mn = np.maximum(np.maximum(r, g), b), np.minimum(np.minimum(r, g), b)
    chroma = mx - mn
    cls = np.full(r.shape, 6)  # tissue
    luma = (77 * r + 150 * g + 29 * b + 128) >> 8
    rules = [  # (class, rule), first match wins
        (0, (mn >= 200) & (chroma <= 24)),
        (1, (mx <= 80) & (chroma <= 40)),
        (2, (b >= g + 30) & (g >= r)),
        (3, (g >= r + 20) & (g >= b + 20)),
        (4, chroma <= 8),
        (5, (luma <= 140) & (2 * chroma >= mx)),
    ]
    done = np.zeros(r.shape, bool)
    for c, rule in rules:
        cls[rule & ~done] = c
        done |= rule
    tissue = np.isin(cls, (1, 2, 3, 5, 6))
    kernel = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]])
    lap = scipy.ndimage.correlate(luma, kernel, mode="constant")[1:-1, 1:-1]
    sel = lap[tissue[1:-1, 1:-1]]
    n = len(sel)
    s, s2 = float(sel.sum()), float((sel * sel).sum())
    blur = (s2 - s * s / n) / n if n else 0.0
    all_px = float(r.size)
    return {"blur": blur, "pen_blue": np.sum(cls == 2) / all_px, "pen_green": np.sum(cls == 3) / all_px,
            "pen_black": np.sum(cls == 1) / all_px, "pen": np.sum((cls >= 1) & (cls <= 3)) / all_px,
            "fold": np.sum(cls == 5) / np.sum(tissue) if np.sum(tissue) else 0.0,
            "background": np.sum(cls == 0) / all_px}


@pytest.mark.parametrize("level", [0, 1])
def test_scores_equal_numpy_definition(slides, level):
    path, rects = slides[0]
    with slidepipe.open(path) as s:
        tiles = s.tissue_tiles(SIZE, level=level)
        qc = slidepipe.tile_qc(s, tiles, SIZE, level=level)
        pick = np.linspace(0, len(tiles) - 1, 6).astype(int)
        # plus the tiles with the most ink, the most fold and the least blur
        pick = np.unique(np.concatenate([pick, [np.argmax(qc["pen"]), np.argmax(qc["fold"]),
                                                np.argmin(qc["blur"])]]))
        for i in pick:
            rgb = s.read_region((int(tiles["x"][i]), int(tiles["y"][i])), level, (SIZE, SIZE), rgb=True)
            ref = _reference(rgb)
            for name, value in ref.items():
                assert qc[name][i] == value, (i, name, qc[name][i], value)


def test_threads_do_not_change_scores(slides):
    path, _ = slides[1]
    with slidepipe.open(path) as s:
        tiles = s.tissue_tiles(SIZE, min_tissue=0.0)
        one = slidepipe.tile_qc(s, tiles, SIZE, threads=1)
        two = slidepipe.tile_qc(s, tiles, SIZE, threads=2)
    assert one.tobytes() == two.tobytes()


def test_cli_json_equals_python(slides, cli):
    path, _ = slides[2]
    doc = json.loads(cli("tiles", path, "--size", SIZE, "--qc", "--json", "--threads", 2).stdout)
    with slidepipe.open(path) as s:
        tiles = s.tissue_tiles(SIZE)
        qc = slidepipe.tile_qc(s, tiles, SIZE)
    assert [t[:2] for t in doc["tiles"]] == [[float(x), float(y)] for x, y in zip(tiles["x"], tiles["y"])]
    assert len(doc["qc"]) == len(qc)
    for got, want in zip(doc["qc"], qc):
        for name in slidepipe.QC_DTYPE.names:
            assert got[name] == pytest.approx(want[name], rel=1e-15, abs=0), name
    text = cli("tiles", path, "--size", SIZE, "--qc").stdout.splitlines()
    assert len(text) == len(qc) and "blur=" in text[0]


def test_filter_and_refusals(slides):
    path, rects = slides[0]
    with slidepipe.open(path) as s:
        tiles = s.tissue_tiles(SIZE)
        qc = slidepipe.tile_qc(s, tiles, SIZE)
        keep = slidepipe.qc_filter(tiles, qc, **slidepipe.QC_THRESHOLDS)
        flags = _flags(qc)
        assert np.array_equal(keep, ~(flags["pen"] | flags["blur"] | flags["fold"]))
        assert slidepipe.qc_filter(tiles, qc).all()
        xy = np.stack([tiles["x"], tiles["y"]], 1)
        assert slidepipe.tile_qc(s, xy, SIZE).tobytes() == qc.tobytes()
        assert len(slidepipe.tile_qc(s, tiles[:0], SIZE)) == 0
        with pytest.raises(slidepipe.SlidepipeError):
            slidepipe.tile_qc(s, tiles, 0)
        with pytest.raises(slidepipe.SlidepipeError):
            slidepipe.tile_qc(s, tiles, SIZE, level=99)
        with pytest.raises(ValueError):
            slidepipe.qc_filter(tiles[:1], qc)
