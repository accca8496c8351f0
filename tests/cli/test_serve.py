"""`slidepipe serve`: the IIIF Image API 3 and Deep Zoom server, checked request by request.

The IIIF checks follow the spec (https://iiif.io/api/image/3.0/): info.json's required members
and level-1 features, each region and size form with the image size the spec's rules give
(computed here from the spec's text, not from the server), 400 for bad syntax and requests
outside the image or the server's limits, 501 for valid requests of features not implemented,
the base URI's redirect, CORS and the JSON-LD media type. Tiles are compared with the oracle
`slidepipe region` for the same area (PNG: equal bytes; JPEG: close), at level 0 and at a level
whose downsample is the tile's scale factor. The info JSON and associated images equal those of
`slidepipe info --json` and `slidepipe associated`. The security tests send raw requests
(traversal through `..`, `%2e%2e`, encoded slashes, absolute paths, a symlink beside a served
slide), huge regions, hundreds of connections at once, thousands one after another, slow
clients, oversized headers and other methods; nothing outside the served set comes back, the
server stays up and its memory stays bounded.
"""

from __future__ import annotations

import io
import json
import math
import os
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from serve_server import Server, wait_until

Image = pytest.importorskip("PIL.Image")

SVS = "aperio/CMU-1-Small-Region.svs"
BOXES = "generic-tiff/boxes.tiff"
SVS_ID = "CMU-1-Small-Region"
SECRET = b"slidepipe-serve-secret-0123456789"


@pytest.fixture(scope="module")
def files(testdata, slidepipe_bin):
    """A folder with the served files and the unserved neighbours the traversal tests aim at:
    a secret file, a symlink to it named like a slide, a symlink to /etc/passwd."""
    tmp = Path(tempfile.mkdtemp(prefix="sp-serve-"))
    synth = tmp / "synth.tif"
    subprocess.run([str(slidepipe_bin), "synth", str(synth), "--size", "2048"], check=True,
                   capture_output=True)
    (tmp / "secret.txt").write_bytes(SECRET)
    (tmp / "secret.svs").symlink_to(tmp / "secret.txt")
    (tmp / "passwd.tif").symlink_to("/etc/passwd")
    (tmp / "slide.svs").symlink_to(testdata / SVS)
    ann = tmp / "regions.geojson"
    ann.write_text(json.dumps({"type": "FeatureCollection", "features": [{
        "type": "Feature", "properties": {"classification": {"name": "tumour"}},
        "geometry": {"type": "Polygon",
                     "coordinates": [[[500, 500], [1500, 500], [1500, 1800], [500, 1800], [500, 500]]]}}]}))
    yield {"dir": tmp, "svs": testdata / SVS, "boxes": testdata / BOXES, "synth": synth,
           "link": tmp / "slide.svs", "ann": ann}
    for p in sorted(tmp.iterdir()):
        p.unlink()
    tmp.rmdir()


@pytest.fixture(scope="module")
def server(slidepipe_bin, files):
    s = Server(slidepipe_bin, [files["svs"], files["boxes"], files["synth"]],
               "--annotations", files["ann"], "--timeout", "3", "--max-per-client", "32",
               "--max-connections", "128")
    yield s
    err = s.stop()
    assert not any(m in err for m in ("AddressSanitizer", "LeakSanitizer", "runtime error:")), err


def png(body: bytes) -> np.ndarray:
    im = Image.open(io.BytesIO(body))
    assert im.format == "PNG"
    return np.asarray(im)


def image_size(body: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(body)).size


# ---- the served set and info ------------------------------------------------------------


def test_binds_to_loopback_and_lists_the_slides(server):
    assert server.host == "127.0.0.1"
    st, h, body = server.get("/slides.json")
    assert st == 200 and h["content-type"] == "application/json"
    doc = json.loads(body)
    assert [s["id"] for s in doc["slides"]] == [SVS_ID, "boxes", "synth"]
    assert doc["annotations"] == ["regions.geojson"]
    st, _, body = server.get("/")
    assert st == 200 and b"/viewer/CMU-1-Small-Region" in body
    assert b"/slides/CMU-1-Small-Region/associated/label.jpg" in body


def test_info_json_equals_slidepipe_info(server, info, files):
    st, h, body = server.get(f"/slides/{SVS_ID}/info.json")
    assert st == 200, body
    assert json.loads(body) == info(files["svs"])


def test_associated_images_equal_the_cli(server, files, run):
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("label", "macro", "thumbnail"):
            out = Path(tmp) / f"{name}.png"
            proc = run(["associated", files["svs"], name, "-o", out])
            assert proc.returncode == 0, proc.stderr
            st, h, body = server.get(f"/slides/{SVS_ID}/associated/{name}.png")
            assert st == 200 and h["content-type"] == "image/png"
            assert np.array_equal(png(body), np.asarray(Image.open(out))), name
    st, _, body = server.get(f"/slides/{SVS_ID}/associated/nothing.png")
    assert st == 404 and b"nothing" in body


# ---- IIIF Image API 3 ---------------------------------------------------------------------

W, H = 2220, 2967  # CMU-1-Small-Region


def test_info_json_is_image_api_3_level_1(server):
    st, h, body = server.get(f"/iiif/{SVS_ID}/info.json")
    assert st == 200
    assert h["content-type"] == "application/json"
    assert h["access-control-allow-origin"] == "*"  # cors (level 1)
    info = json.loads(body)
    assert info["@context"] == "http://iiif.io/api/image/3/context.json"
    assert info["id"] == f"{server.base}/iiif/{SVS_ID}"
    assert info["type"] == "ImageService3"
    assert info["protocol"] == "http://iiif.io/api/image"
    assert info["profile"] in ("level1", "level2")
    assert (info["width"], info["height"]) == (W, H)
    assert info["maxWidth"] >= 256 and info["maxArea"] >= 256 * 256
    tiles = info["tiles"]
    assert tiles and tiles[0]["width"] == 256 and tiles[0]["scaleFactors"][0] == 1
    sf = tiles[0]["scaleFactors"]
    assert all(b == 2 * a for a, b in zip(sf, sf[1:]))
    assert math.ceil(max(W, H) / sf[-1]) <= 256  # the coarsest scale fits one tile
    for size in info["sizes"]:
        assert size["width"] <= W and size["height"] <= H
    assert {"png", "webp"} <= set(info["extraFormats"])
    # jsonldMediaType (level 1): asked for, the JSON-LD type with the context as profile
    st, h, _ = server.get(f"/iiif/{SVS_ID}/info.json", {"Accept": "application/ld+json"})
    assert h["content-type"] == 'application/ld+json;profile="http://iiif.io/api/image/3/context.json"'


def test_base_uri_redirects_to_info_json(server):
    st, h, _ = server.get(f"/iiif/{SVS_ID}")
    assert st == 303 and h["location"] == f"{server.base}/iiif/{SVS_ID}/info.json"


def spec_region(region: str):
    """The region the spec's section 4.1 describes, cropped to the image."""
    if region == "full":
        return 0, 0, W, H
    if region == "square":
        s = min(W, H)
        return (W - s) // 2, (H - s) // 2, s, s
    if region.startswith("pct:"):
        x, y, w, h = map(float, region[4:].split(","))
        x0, y0 = math.floor(x / 100 * W), math.floor(y / 100 * H)
        x1, y1 = math.ceil((x + w) / 100 * W), math.ceil((y + h) / 100 * H)
        return x0, y0, min(x1, W) - x0, min(y1, H) - y0
    x, y, w, h = map(int, region.split(","))
    return x, y, min(w, W - x), min(h, H - y)


# (region, size, rotation, expected output width, height): sizes by the spec's 4.2 rules.
IMAGE_CASES = [
    ("full", "max", "0", W, H),
    ("square", "max", "0", W, W),
    ("0,0,256,256", "max", "0", 256, 256),  # regionByPx
    ("2000,2900,512,512", "max", "0", 220, 67),  # cropped at the image's edge
    ("pct:10,10,50,50", "max", "0", None, None),  # regionByPct
    ("full", "500,", "0", 500, round(H * 500 / W)),  # sizeByW keeps the aspect ratio
    ("full", ",300", "0", round(W * 300 / H), 300),  # sizeByH
    ("0,0,1000,1000", "300,200", "0", 300, 200),  # sizeByWh: exactly as asked
    ("full", "!400,400", "0", math.floor(W * 400 / H), 400),  # sizeByConfinedWh
    ("full", "pct:25", "0", round(W * 0.25), round(H * 0.25)),  # sizeByPct
    ("0,0,256,256", "^512,", "0", 512, 512),  # sizeUpscaling
    ("0,0,300,200", "max", "90", 200, 300),  # rotationBy90s swaps the sides
    ("0,0,300,200", "max", "!180", 300, 200),  # mirroring
]


@pytest.mark.parametrize("region,size,rotation,ew,eh", IMAGE_CASES,
                         ids=[f"{c[0]}|{c[1]}|{c[2]}" for c in IMAGE_CASES])
def test_image_requests_give_the_spec_size(server, region, size, rotation, ew, eh):
    if ew is None:
        _, _, ew, eh = spec_region(region)
    st, h, body = server.get(f"/iiif/{SVS_ID}/{region}/{size}/{rotation}/default.png")
    assert st == 200, body
    assert h["content-type"] == "image/png"
    assert image_size(body) == (ew, eh)


def test_formats_and_qualities(server):
    magic = {"jpg": (b"\xff\xd8\xff", "image/jpeg"), "png": (b"\x89PNG", "image/png"),
             "webp": (b"RIFF", "image/webp")}
    for fmt, (head, mime) in magic.items():
        for quality in ("default", "color", "gray", "bitonal"):
            st, h, body = server.get(f"/iiif/{SVS_ID}/0,0,200,100/max/0/{quality}.{fmt}")
            assert st == 200, body
            assert h["content-type"] == mime and body.startswith(head), (fmt, quality)
            im = Image.open(io.BytesIO(body))
            assert im.size == (200, 100)
            if quality in ("gray", "bitonal") and fmt == "png":
                assert im.mode == "L"
                if quality == "bitonal":
                    assert set(np.unique(np.asarray(im))) <= {0, 255}
    assert body[8:12] == b"WEBP"


BAD_REQUESTS = [
    ("0,0,0,10/max/0/default.jpg", 400, "zero width"),
    ("abc/max/0/default.jpg", 400, "region must be"),
    ("-1,0,10,10/max/0/default.jpg", 400, "not a whole number"),
    ("0,0,10/max/0/default.jpg", 400, "region must be"),
    (f"{W},0,10,10/max/0/default.jpg", 400, "outside"),  # entirely outside the image
    ("full/full/0/default.jpg", 400, "size must be"),  # Image API 2's "full" is gone in 3
    ("full/0,/0/default.jpg", 400, "above 0"),
    ("full/,0/0/default.jpg", 400, "above 0"),
    ("0,0,256,256/512,/0/default.jpg", 400, "without '^'"),  # upscaling needs ^
    ("0,0,256,256/pct:200/0/default.jpg", 400, "without '^'"),
    ("full/^8192,/0/default.jpg", 400, "limits"),  # over maxWidth
    ("full/max/abc/default.jpg", 400, "rotation"),
    ("full/max/400/default.jpg", 400, "rotation"),
    ("full/max/0/best.jpg", 400, "quality"),
    ("full/max/0/default.bmp", 400, "format"),
    ("full/max/0/default", 400, "quality.format"),
    ("full/max/45/default.jpg", 501, "multiples of 90"),  # valid, not implemented
    ("full/max/0/default.tif", 501, "not implemented"),
    ("full/max/0", 400, "REGION/SIZE"),
]


@pytest.mark.parametrize("path,status,words", BAD_REQUESTS, ids=[c[0] for c in BAD_REQUESTS])
def test_bad_requests_get_a_status_and_a_message(server, path, status, words):
    st, h, body = server.get(f"/iiif/{SVS_ID}/{path}")
    assert st == status, body
    assert h["content-type"].startswith("text/plain")
    assert words.encode() in body, body


def test_iiif_tiles_equal_slidepipe_region(server, files, read_region):
    # Level 0: the PNG tile is the region's RGBA, byte for byte.
    st, _, body = server.get(f"/iiif/{SVS_ID}/256,512,256,256/256,/0/default.png")
    assert st == 200, body
    assert np.array_equal(png(body), read_region(files["svs"], 0, 256, 512, 256, 256))
    # A partial edge tile (the spec's tile arithmetic: width and height rounded up).
    st, _, body = server.get(f"/iiif/{SVS_ID}/2048,2816,256,256/172,/0/default.png")
    assert st == 200, body
    assert np.array_equal(png(body), read_region(files["svs"], 0, 2048, 2816, 172, 151))
    # Scale factor 4 on a pyramid with a level at downsample 4 (synth.tif: 2048, 1024, 512...).
    st, _, body = server.get("/iiif/synth/1024,0,1024,1024/256,/0/default.png")
    assert st == 200, body
    assert np.array_equal(png(body), read_region(files["synth"], 2, 1024, 0, 256, 256))
    # JPEG is lossy: close to the region, not equal.
    st, _, body = server.get(f"/iiif/{SVS_ID}/256,512,256,256/max/0/default.jpg")
    got = np.asarray(Image.open(io.BytesIO(body)).convert("RGB")).astype(int)
    want = read_region(files["svs"], 0, 256, 512, 256, 256)[..., :3].astype(int)
    assert np.abs(got - want).mean() < 3.0


# ---- Deep Zoom ----------------------------------------------------------------------------


def test_dzi_descriptor_and_tiles(server, files, read_region):
    st, h, body = server.get(f"/dzi/{SVS_ID}.dzi")
    assert st == 200 and h["content-type"] == "application/xml"
    assert b'TileSize="256"' in body and b'Overlap="0"' in body
    assert f'Width="{W}" Height="{H}"'.encode() in body
    top = math.ceil(math.log2(max(W, H)))  # 12
    st, _, body = server.get(f"/dzi/{SVS_ID}_files/{top}/1_2.png")
    assert np.array_equal(png(body), read_region(files["svs"], 0, 256, 512, 256, 256))
    st, _, body = server.get(f"/dzi/{SVS_ID}_files/{top}/8_11.png")  # edge: 172 x 151
    assert image_size(body) == (172, 151)
    st, _, body = server.get("/dzi/synth_files/9/1_0.png")  # level 11 - 2: downsample 4
    assert np.array_equal(png(body), read_region(files["synth"], 2, 1024, 0, 256, 256))
    st, _, body = server.get(f"/dzi/{SVS_ID}_files/0/0_0.jpeg")
    assert st == 200 and image_size(body) == (1, 1)
    for path, status in [(f"{top}/9_0.jpeg", 404), (f"{top + 1}/0_0.jpeg", 404),
                         (f"{top}/1_x.jpeg", 400), (f"{top}/1_1.gif", 400),
                         (f"{top}/-1_0.jpeg", 400), ("x/0_0.jpeg", 400)]:
        st, _, body = server.get(f"/dzi/{SVS_ID}_files/{path}")
        assert st == status, (path, body)


def test_overlays(server):
    st, h, body = server.get(f"/slides/{SVS_ID}/tiles.json")
    assert st == 200, body
    grid = json.loads(body)
    assert grid["tiles"] and grid["mask"]["downsample"] >= 1
    scored = [t for t in grid["tiles"] if len(t) == 7]
    assert scored and all(0 <= v <= 1 for t in scored for v in t[2:3])
    st, h, body = server.get(f"/slides/{SVS_ID}/tissue.png")
    mask = png(body)
    assert mask.shape[2] == 4 and 0 < (mask[..., 3] > 0).mean() < 1
    st, h, body = server.get("/annotations/regions.geojson")
    assert st == 200 and json.loads(body)["features"][0]["geometry"]["type"] == "Polygon"


# ---- safety -------------------------------------------------------------------------------

TRAVERSALS = [
    "/../../../../etc/passwd",
    "/leaflet/../../../../../etc/passwd",
    "/leaflet/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/leaflet/..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/leaflet/images/../../../../../../etc/passwd",
    "//etc/passwd",
    "/etc/passwd",
    "/slides/..%2f..%2f..%2fetc%2fpasswd/info.json",
    "/slides/%2fetc%2fpasswd/info.json",
    "/iiif/..%2fsecret/info.json",
    "/iiif/secret/info.json",  # a symlink named like a slide beside the served one
    "/dzi/secret.dzi",
    "/dzi/passwd.dzi",  # a symlink to /etc/passwd
    "/dzi/%2e%2e%2fsecret.txt",
    "/annotations/../secret.txt",
    "/annotations/%2e%2e%2fsecret.txt",
    f"/slides/{SVS_ID}/associated/..%2f..%2fsecret.png",
    "/viewer/../secret.txt",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_nothing_outside_the_served_set(server, path):
    answer = server.raw(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    status = int(answer.split(b" ", 2)[1])
    assert status in (400, 404), answer[:300]
    assert SECRET not in answer and b"root:" not in answer
    assert server.alive()


def test_huge_regions_are_refused(server):
    for path in ["full/^65536,/0/default.png", "full/^4097,4096/0/default.png",
                 "full/^pct:1000/0/default.png", "0,0,2220,2967/^5000,/0/default.png"]:
        st, _, body = server.get(f"/iiif/{SVS_ID}/{path}")
        assert st == 400 and b"limit" in body, (path, body)
    # max is bounded by maxWidth / maxArea, never the whole image when that is larger
    st, _, body = server.get(f"/iiif/{SVS_ID}/full/max/0/default.jpg")
    assert st == 200


def test_other_methods_and_oversized_requests(server):
    st, h, body = server.get("/slides.json", method="POST")
    assert st == 405 and h["allow"] == "GET, HEAD"
    st, h, body = server.get("/slides.json", method="HEAD")
    assert st == 200 and body == b""
    big = "GET /slides.json HTTP/1.1\r\nHost: x\r\nX-Big: " + "a" * 100_000 + "\r\n\r\n"
    answer = server.raw(big.encode())
    assert answer == b"" or int(answer.split(b" ", 2)[1]) in (400, 413, 414, 431)
    long_url = "/iiif/" + "a" * 50_000 + "/info.json"
    answer = server.raw(f"GET {long_url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert answer == b"" or int(answer.split(b" ", 2)[1]) in (400, 404, 414, 431)
    answer = server.raw(os.urandom(4096))
    assert answer == b"" or answer.startswith(b"HTTP/1.")
    assert server.get("/slides.json")[0] == 200


def test_many_connections_and_slow_clients(server):
    rss_before = server.rss_kib()
    # Hundreds of idle connections at once from 127.0.0.1 (more than the 32 allowed per client
    # and the 128 in all): the extra ones are closed, and another client is still served.
    held = []
    for _ in range(400):
        try:
            held.append(socket.create_connection((server.host, server.port), timeout=5))
        except OSError:
            break
    for s in held[::2]:  # half of them are slow clients: a request line, never finished
        try:
            s.sendall(b"GET /slides.json HTTP/1.1\r\nHo")
        except OSError:
            pass
    st, _, _ = server.get("/slides.json", source="127.0.0.2")
    assert st == 200
    # The idle timeout (--timeout 3) closes the slow and idle ones.
    def closed(s):
        try:
            s.settimeout(0.05)
            return s.recv(1) == b""
        except socket.timeout:
            return False
        except OSError:
            return True
    assert wait_until(lambda: all(closed(s) for s in held), timeout=20), "idle clients kept open"
    for s in held:
        s.close()
    # Thousands of connections one after another, some with a request, some without.
    for i in range(2000):
        with socket.create_connection((server.host, server.port), timeout=5) as s:
            if i % 4 == 0:
                s.sendall(b"GET /slides.json HTTP/1.0\r\n\r\n")
                s.recv(100)
    # Tiles from 16 threads at once while that went on: every answer is a whole image.
    errors = []

    def fetch(k):
        for j in range(8):
            st, _, body = server.get(f"/dzi/{SVS_ID}_files/12/{(k + j) % 9}_{j % 12}.jpeg")
            if st != 200 or not body.startswith(b"\xff\xd8"):
                errors.append((k, j, st))
    threads = [threading.Thread(target=fetch, args=(k,)) for k in range(16)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors
    assert server.alive() and server.get("/slides.json")[0] == 200
    # Bounded memory: what the server holds grew by less than the tile cache plus 200 MiB.
    assert server.rss_kib() - rss_before < (256 + 200) * 1024, (rss_before, server.rss_kib())


def test_token(slidepipe_bin, files):
    s = Server(slidepipe_bin, [files["link"]], "--token", "sekrit-token-42")
    try:
        assert s.get("/slides.json")[0] == 401
        assert s.get("/slides.json?token=wrong-token-42")[0] == 401
        assert s.get("/slides.json", {"Authorization": "Bearer sekrit-token-42"})[0] == 200
        st, h, _ = s.get("/?token=sekrit-token-42")
        assert st == 200 and "sp_token=sekrit-token-42" in h["set-cookie"]
        assert "HttpOnly" in h["set-cookie"]
        assert s.get("/dzi/slide.dzi", {"Cookie": "sp_token=sekrit-token-42"})[0] == 200
    finally:
        s.stop()


def test_command_line_errors(run, files, testdata):
    proc = run(["serve", testdata / "robustness/broken.svs", "--port", "0"])
    assert proc.returncode == 1 and "broken.svs" in proc.stderr
    proc = run(["serve", "--port", "70000", files["svs"]])
    assert proc.returncode == 2 and "--port" in proc.stderr
    proc = run(["serve", "--bind", "localhost", "--port", "0", files["svs"]], timeout=30)
    assert proc.returncode == 1 and "numeric" in proc.stderr
    proc = run(["serve", "--token", "short", files["svs"]])
    assert proc.returncode == 2 and "token" in proc.stderr
    proc = run(["serve"])
    assert proc.returncode == 2


def test_remote_slide_and_store(slidepipe_bin, files, read_region, tmp_path):
    """A slide and an OME-Zarr store over HTTP (nginx on loopback) serve the same tiles as the
    local file."""
    import shutil as _shutil

    from loopback import start_nginx

    if not (_shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        why = "nginx is not installed (scripts/bootstrap installs nginx-light)"
        print(why)
        pytest.skip(why)
    root = tmp_path / "www"
    root.mkdir()
    os.symlink(files["svs"], root / "remote.svs")
    zarr = root / "synth.zarr"
    subprocess.run([str(slidepipe_bin), "convert", str(files["synth"]), str(zarr)], check=True,
                   capture_output=True)
    work = tmp_path / "nginx"
    work.mkdir()
    proc, port = start_nginx(str(root), str(work))
    s = None
    try:
        s = Server(slidepipe_bin, [f"http://127.0.0.1:{port}/remote.svs",
                                   f"http://127.0.0.1:{port}/synth.zarr"])
        ids = [x["id"] for x in json.loads(s.get("/slides.json")[2])["slides"]]
        assert ids == ["remote", "synth"]
        st, _, body = s.get("/iiif/remote/256,512,256,256/max/0/default.png")
        assert st == 200, body
        assert np.array_equal(png(body), read_region(files["svs"], 0, 256, 512, 256, 256))
        st, _, body = s.get("/dzi/synth_files/11/2_3.png")
        assert st == 200, body
        assert np.array_equal(png(body), read_region(files["synth"], 0, 512, 768, 256, 256))
    finally:
        if s is not None:
            s.stop()
        proc.terminate()
        proc.wait()
