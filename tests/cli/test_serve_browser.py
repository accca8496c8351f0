"""`slidepipe serve`'s viewer in a real browser: Debian's chromium, headless, driven over the
DevTools protocol (tests/cdp_browser.py). The test opens a slide's viewer, waits for its tiles,
checks that the slide's colours appear where Leaflet says each slide point is on the screen
(against `slidepipe region` of the level at the same scale), zooms in and checks again, reads
the magnification and the scale bar, then switches overlays on one by one (the tissue mask,
the OME-Zarr output of `slidepipe process`, the opacity slider, the tile grid, the GeoJSON
annotations) and checks that each one changes the pixels. The screenshots are kept as test
artefacts in $SP_ARTEFACTS (default: test-artefacts/serve beside the slidepipe binary).
Without chromium the test is skipped, saying so.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from cdp_browser import Browser, find_chromium
from serve_server import Server

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("websocket", reason="websocket-client is not installed (tests/requirements.txt)")


@pytest.fixture(scope="module")
def artefacts(slidepipe_bin):
    d = Path(os.environ.get("SP_ARTEFACTS", slidepipe_bin.parent / "test-artefacts")) / "serve"
    d.mkdir(parents=True, exist_ok=True)
    print(f"screenshots in {d}")
    return d


@pytest.fixture(scope="module")
def setup(slidepipe_bin, testdata):
    browser_bin = find_chromium()
    if browser_bin is None:
        why = "chromium not found (apt-get install chromium)"
        print(why)
        pytest.skip(why)
    tmp = Path(tempfile.mkdtemp(prefix="sp-serve-browser-"))
    synth, sobel = tmp / "synth.tif", tmp / "synth-sobel.zarr"
    subprocess.run([str(slidepipe_bin), "synth", str(synth), "--size", "2048"], check=True,
                   capture_output=True)
    subprocess.run([str(slidepipe_bin), "process", str(synth), str(sobel), "--op", "sobel",
                    "--dtype", "uint8"], check=True, capture_output=True)
    ann = tmp / "regions.geojson"
    ann.write_text(json.dumps({"type": "FeatureCollection", "features": [{
        "type": "Feature", "properties": {"name": "box"},
        "geometry": {"type": "Polygon", "coordinates": [[[300, 400], [1800, 400], [1800, 2400],
                                                         [300, 2400], [300, 400]]]}}]}))
    svs = testdata / "aperio/CMU-1-Small-Region.svs"
    server = Server(slidepipe_bin, [synth, sobel, svs], "--annotations", ann)
    browser = Browser(browser_bin)
    yield {"server": server, "browser": browser, "synth": synth, "svs": svs}
    browser.close()
    server.stop()
    subprocess.run(["rm", "-rf", str(tmp)], check=True)


def shot(browser, artefacts, name) -> np.ndarray:
    browser.wait_for("[...document.querySelectorAll('.leaflet-tile')].every("
                     "t => getComputedStyle(t).opacity === '1')", 30)
    data = browser.screenshot()
    (artefacts / f"{name}.png").write_bytes(data)
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(int)


def wait_tiles(browser):
    assert browser.wait_for("window.spViewer && spViewer.loaded > 0 && spViewer.pending === 0",
                            60), "the viewer's tiles did not load"
    assert browser.eval("spViewer.errors") == 0
    # Leaflet fades tiles in: wait until every tile shows at full opacity.
    assert browser.wait_for("[...document.querySelectorAll('.leaflet-tile')].every("
                            "t => getComputedStyle(t).opacity === '1')", 30)


def screen_points(browser, points):
    js = ("JSON.stringify(%s.map(p => spViewer.map.latLngToContainerPoint(spViewer.ll(p[0], p[1])))"
          ".map(q => [q.x, q.y]))" % json.dumps(points))
    return json.loads(browser.eval(js))


def colours_match(img, screen, region, scale, points):
    """Mean absolute difference between the screenshot at each point's screen position and
    the region's pixel for it (each a 3x3 mean, JPEG tiles and resampling differ a little)."""
    diffs = []
    for (x, y), (sx, sy) in zip(points, screen):
        sx, sy = int(round(sx)), int(round(sy))
        rx, ry = int(x / scale), int(y / scale)
        got = img[sy - 1:sy + 2, sx - 1:sx + 2].reshape(-1, 3).mean(0)
        want = region[ry - 1:ry + 2, rx - 1:rx + 2, :3].reshape(-1, 3).mean(0)
        diffs.append(np.abs(got - want).mean())
    return float(np.mean(diffs))


def test_viewer_zoom_and_overlays(setup, artefacts, read_region):
    b, server = setup["browser"], setup["server"]
    b.navigate(f"{server.base}/viewer/synth")
    wait_tiles(b)
    zoom = b.eval("spViewer.map.getZoom()")
    assert zoom == 9  # the 2048-pixel slide fitted into 1000 x 800: 512 pixels, level 2's scale
    img = shot(b, artefacts, "1-overview")
    level2 = read_region(setup["synth"], 2, 0, 0, 512, 512)
    points = [[x, y] for x in range(160, 2048, 288) for y in range(160, 2048, 288)]
    screen = screen_points(b, points)
    assert all(0 < sx < 1000 and 0 < sy < 800 for sx, sy in screen)
    samples = np.array([img[int(sy), int(sx)] for sx, sy in screen])
    assert samples.std(0).max() > 10, "the slide shows no structure: tiles missing?"
    assert colours_match(img, screen, level2, 4, points) < 12
    assert (img[5, 990] == 255).all()  # outside the slide: the page's white

    # Zoom in twice: level 0's scale, the slide's colours again, the readout says so.
    b.eval("new Promise(r => { spViewer.map.once('zoomend', () => r(true)); spViewer.map.setZoom(11); })")
    wait_tiles(b)
    img2 = shot(b, artefacts, "2-zoomed")
    assert not np.array_equal(img, img2)
    centre = b.eval("JSON.stringify(spViewer.map.project(spViewer.map.getCenter(), 11))")
    c = json.loads(centre)
    cx, cy = int(c["x"]), int(c["y"])
    pts = [[cx + dx, cy + dy] for dx in (-300, 0, 300) for dy in (-200, 0, 200)]
    level0 = read_region(setup["synth"], 0, 0, 0, 2048, 2048)
    assert colours_match(img2, screen_points(b, pts), level0, 1, pts) < 12
    text = b.eval("document.getElementById('sp-zoom').textContent")
    assert text == "zoom 11"  # synth.tif has no objective power: no magnification
    # The scale bar: its width in screen pixels times 0.25 um (the slide's MPP) is its label.
    width = b.eval("parseFloat(getComputedStyle(document.getElementById('sp-scale')).width)")
    label = b.eval("document.getElementById('sp-scale-label').textContent").split()
    microns = float(label[0]) * (1000 if label[1] == "mm" else 1)
    assert abs(width * 0.25 - microns) < 0.5, (width, label)

    # Overlays, one by one: each changes the pixels.
    def toggle(name):
        b.eval("""(() => { for (const l of document.querySelectorAll('.leaflet-control-layers label'))
                   if (l.textContent.includes(%s)) { l.querySelector('input').click(); return true; }
                   throw new Error('no overlay ' + %s); })()""" % (json.dumps(name), json.dumps(name)))

    assert b.wait_for("Object.keys(spViewer.overlays).includes('Tile grid')", 60)
    toggle("Tissue mask")
    assert b.wait_for("spViewer.overlays['Tissue mask']._image.complete", 30)
    img3 = shot(b, artefacts, "3-tissue-mask")
    changed = np.abs(img3 - img2).max(2) > 8
    assert changed.mean() > 0.01, "the tissue mask changed nothing"
    assert (img3[changed][:, 1] - img2[changed][:, 1]).mean() > 0  # greener where it shows

    toggle("Image: synth-sobel")
    b.wait_for("spViewer.overlays['synth-sobel'].isLoading && !spViewer.overlays['synth-sobel'].isLoading()", 30)
    b.wait_for("Object.values(spViewer.overlays['synth-sobel']._tiles).every(t => t.loaded)", 30)
    img4 = shot(b, artefacts, "4-process-output")
    assert (np.abs(img4 - img3).max(2) > 8).mean() > 0.01, "the process output changed nothing"

    b.eval("(() => { const s = document.getElementById('sp-opacity'); s.value = 1;"
           " s.dispatchEvent(new Event('input')); })()")
    img5 = shot(b, artefacts, "5-opacity-1")
    assert (np.abs(img5 - img4).max(2) > 8).mean() > 0.01, "the opacity slider changed nothing"


def test_tile_grid_annotations_and_magnification(setup, artefacts):
    b, server = setup["browser"], setup["server"]
    b.navigate(f"{server.base}/viewer/CMU-1-Small-Region")
    wait_tiles(b)
    text = b.eval("document.getElementById('sp-zoom').textContent")
    zoom = b.eval("spViewer.map.getZoom()")
    # 20x objective at zoom 12 (full resolution); each zoom step down halves it.
    assert f"{20 / 2 ** (12 - zoom):#.3g}x" in text, text
    base = shot(b, artefacts, "6-cmu")
    assert b.wait_for("Object.keys(spViewer.overlays).includes('Tile grid')", 60)
    b.eval("""(() => { for (const l of document.querySelectorAll('.leaflet-control-layers label'))
              if (l.textContent.includes('Tile grid')) l.querySelector('input').click(); })()""")
    grid = shot(b, artefacts, "7-tile-grid")
    assert (np.abs(grid - base).max(2) > 8).mean() > 0.005, "the tile grid changed nothing"
    assert b.wait_for("'regions.geojson' in spViewer.overlays", 30)
    b.eval("""(() => { for (const l of document.querySelectorAll('.leaflet-control-layers label'))
              if (l.textContent.includes('Annotations')) l.querySelector('input').click(); })()""")
    ann = shot(b, artefacts, "8-annotations")
    assert (np.abs(ann - grid).max(2) > 8).mean() > 0.001, "the annotations changed nothing"
