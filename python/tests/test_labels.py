"""Annotations as training labels (docs/labels.md): GeoJSON and ASAP XML files of known polygons
rasterise to exactly the pixels two references give, patch labels and masks follow their
documented rules, and every invalid geometry is a SlidepipeError naming the file and feature.

The references: scikit-image's draw.polygon, which fills the pixels whose integer (row, col)
lies in a polygon, given the polygon in coordinates where the label map's pixel centres are the
integers (u = (x - x0) / d - 0.5); and a float64 numpy even-odd test at every pixel centre, the
rule docs/labels.md states, written independently of the C scanline fill. Vertices are chosen
off the pixel-centre lattice, so no centre lies on an edge and the two conventions agree.
"""

import json
import pickle
import threading

import numpy as np
import pytest
from skimage.draw import polygon as sk_polygon

import slidepipe
from slidepipe.labels import mask_patches, patch_labels

# ---- references -----------------------------------------------------------------------------


def even_odd(rings, px, py):
    """Inside by the even-odd rule over `rings`: a centre is inside when an odd number of edge
    crossings of its row lie strictly right of it; an edge covers y in [min(ya,yb), max)."""
    inside = np.zeros(px.shape, bool)
    for ring in rings:
        r = np.asarray(ring, np.float64)
        if len(r) > 1 and (r[0] == r[-1]).all():
            r = r[:-1]
        for (xa, ya), (xb, yb) in zip(r, np.roll(r, -1, axis=0)):
            if ya == yb:
                continue
            if ya > yb:
                xa, ya, xb, yb = xb, yb, xa, ya
            hit = (ya <= py) & (py < yb)
            xc = xa + (py - ya) * (xb - xa) / (yb - ya)
            inside ^= hit & (px < xc)
    return inside


def reference(features, d, x0, y0, w, h):
    """features: [(label, [polygon, ...])], polygon = [exterior, hole, ...]; later wins."""
    py, px = np.mgrid[0:h, 0:w].astype(np.float64)
    px, py = x0 + (px + 0.5) * d, y0 + (py + 0.5) * d
    out = np.zeros((h, w), np.uint8)
    for label, polys in features:
        for poly in polys:
            out[even_odd(poly, px, py)] = label
    return out


def skimage_reference(features, d, x0, y0, w, h):
    out = np.zeros((h, w), np.uint8)
    for label, polys in features:
        for poly in polys:
            m = np.zeros((h, w), bool)
            for ring in poly:
                r = np.asarray(ring, np.float64)
                rr, cc = sk_polygon((r[:, 1] - y0) / d - 0.5, (r[:, 0] - x0) / d - 0.5, (h, w))
                ring_mask = np.zeros((h, w), bool)
                ring_mask[rr, cc] = True
                m ^= ring_mask  # holes subtract (even-odd over rings)
            out[m] = label
    return out


# ---- files ----------------------------------------------------------------------------------

TRIANGLE = [[[3.3, 2.7], [41.6, 9.2], [17.1, 38.4], [3.3, 2.7]]]
CONCAVE = [[[50.2, 4.3], [88.7, 6.1], [87.9, 44.6], [70.4, 20.2], [52.6, 41.9]]]  # unclosed
HOLED = [[[10.4, 50.3], [60.6, 52.2], [58.7, 95.1], [12.2, 93.8], [10.4, 50.3]],
         [[25.1, 62.2], [45.3, 63.4], [40.2, 80.7], [25.1, 62.2]]]
RECT = [[[65.3, 55.2], [95.4, 55.2], [95.4, 75.6], [65.3, 75.6], [65.3, 55.2]]]
MULTI = [[[[70.2, 80.3], [80.1, 80.6], [75.3, 97.2], [70.2, 80.3]]],
         [[[83.4, 82.2], [97.7, 83.1], [96.1, 98.3], [83.4, 82.2]]]]
OVER = [[[30.3, 20.1], [75.6, 30.4], [62.2, 70.7], [28.7, 60.2], [30.3, 20.1]]]  # over others
STAR = [[[20.6, 100.2], [24.3, 118.4], [40.1, 121.3], [26.2, 126.8], [30.4, 140.9],
         [18.3, 130.1], [5.2, 139.7], [11.3, 125.2], [1.4, 118.2], [15.8, 116.7]]]


def gj_feature(geometry, cls=None, name=None, **extra):
    props = dict(extra)
    if cls is not None:
        props["classification"] = {"name": cls, "color": [255, 0, 0]}
    if name is not None:
        props["name"] = name
    return {"type": "Feature", "geometry": geometry, "properties": props}


def poly(coords):
    return {"type": "Polygon", "coordinates": coords}


# (class index, polygons) in file order, matching SHAPES_FILE below.
SHAPES = [(1, [TRIANGLE]), (2, [CONCAVE]), (1, [HOLED]), (3, [RECT]), (2, MULTI), (4, [OVER]),
          (3, [STAR])]


def shapes_doc():
    return {"type": "FeatureCollection", "features": [
        gj_feature(poly(TRIANGLE), "Tumor", objectType="annotation"),
        gj_feature(poly(CONCAVE), "Stroma", name="concave one"),
        gj_feature(poly(HOLED), "Tumor"),
        gj_feature(poly(RECT), "Necrosis"),
        gj_feature({"type": "MultiPolygon", "coordinates": MULTI}, "Stroma"),
        gj_feature({"type": "Point", "coordinates": [5, 5]}, "Ignored"),
        gj_feature(poly(OVER), "Immune cells"),
        gj_feature({"type": "LineString", "coordinates": [[0, 0], [9, 9]]}, "Ignored"),
        gj_feature(poly(STAR), "Necrosis"),
    ]}


@pytest.fixture
def shapes(tmp_path):
    p = tmp_path / "shapes.geojson"
    p.write_text(json.dumps(shapes_doc()))
    return slidepipe.Annotations.load(p)


# ---- rasterisation --------------------------------------------------------------------------


def test_geojson_classes_counts_and_bounds(shapes):
    assert shapes.classes == ["background", "Tumor", "Stroma", "Necrosis", "Immune cells"]
    assert shapes.feature_classes == [1, 2, 1, 3, 2, 4, 3]
    assert shapes.skipped == 2
    assert shapes.bounds == (1.4, 2.7, 97.7, 140.9)


@pytest.mark.parametrize("d,x0,y0,w,h", [(1.0, 0.0, 0.0, 100, 145), (2.5, 0, 0, 41, 58),
                                         (1.0, 13.25, 41.5, 60, 70), (0.75, -10.1, -3.3, 160, 200),
                                         (3.0, 50.2, 60.1, 20, 15)])
def test_rasterize_equals_references(shapes, d, x0, y0, w, h):
    got = shapes.rasterize(d, x=x0, y=y0, width=w, height=h)
    assert got.shape == (h, w) and got.dtype == np.uint8
    ref = reference(SHAPES, d, x0, y0, w, h)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, skimage_reference(SHAPES, d, x0, y0, w, h))
    assert len(np.unique(ref)) >= 3  # the window sees several classes


def test_hole_is_cut_out_and_later_feature_wins(shapes):
    lab = shapes.rasterize(1.0, width=100, height=145)
    assert lab[70, 35] == 0  # inside HOLED's hole, and no other shape
    assert lab[88, 20] == 1  # HOLED's body (Tumor)
    assert lab[40, 50] == 4  # OVER, drawn after HOLED, TRIANGLE and CONCAVE
    assert lab[12, 12] == 1  # TRIANGLE, not under OVER


def test_default_window_reaches_the_bounds(shapes):
    lab = shapes.rasterize(2.0)
    assert lab.shape == (71, 49)  # ceil(140.9 / 2), ceil(97.7 / 2)
    np.testing.assert_array_equal(lab, reference(SHAPES, 2.0, 0, 0, 49, 71))


def test_random_polygons_match_references(tmp_path):
    rng = np.random.default_rng(25)
    feats, ref_feats = [], []
    for k in range(12):
        n = int(rng.integers(3, 12))
        cx, cy = rng.uniform(10, 90, 2)
        ang = np.sort(rng.uniform(0, 2 * np.pi, n)) if k % 2 else rng.uniform(0, 2 * np.pi, n)
        rad = rng.uniform(3, 30, n)
        ring = np.stack([cx + rad * np.cos(ang), cy + rad * np.sin(ang)], 1).tolist()
        feats.append(gj_feature(poly([ring]), f"c{k % 5}"))
        ref_feats.append((k % 5 + 1, [[ring]]))  # self-intersecting ones too: even-odd
    p = tmp_path / "random.json"
    p.write_text(json.dumps(feats))  # a bare array of features
    ann = slidepipe.Annotations.load(p)
    assert ann.classes[1:] == ["c0", "c1", "c2", "c3", "c4"]
    for d, x0, y0 in [(1.0, 0, 0), (0.6, 5.5, 7.25), (1.7, -3.1, 2.2)]:
        w, h = int(100 / d), int(100 / d)
        got = ann.rasterize(d, x=x0, y=y0, width=w, height=h)
        np.testing.assert_array_equal(got, reference(ref_feats, d, x0, y0, w, h))
        np.testing.assert_array_equal(got, skimage_reference(ref_feats, d, x0, y0, w, h))


def test_single_feature_and_geometry_collection(tmp_path):
    p = tmp_path / "one.geojson"
    p.write_text(json.dumps(gj_feature({"type": "GeometryCollection", "geometries": [
        poly(TRIANGLE), {"type": "Point", "coordinates": [1, 1]}, poly(RECT)]}, name="named")))
    ann = slidepipe.Annotations.load(p)
    assert ann.classes == ["background", "named"]  # properties.name when no classification
    np.testing.assert_array_equal(ann.rasterize(1, width=100, height=100),
                                  reference([(1, [TRIANGLE, RECT])], 1, 0, 0, 100, 100))


def test_qupath_export(tmp_path):
    """A QuPath 0.4-style export: ids, objectType, classification with name and colour, a named
    but unclassified annotation, an unnamed unclassified one, a detection-like point."""
    doc = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "id": "5d2f3c1e-0000-4000-8000-000000000001",
         "geometry": poly(TRIANGLE),
         "properties": {"objectType": "annotation", "isLocked": False,
                        "classification": {"name": "Tumor", "color": [200, 0, 0]}}},
        {"type": "Feature", "id": "5d2f3c1e-0000-4000-8000-000000000002",
         "geometry": poly(RECT), "properties": {"objectType": "annotation", "name": "Region*"}},
        {"type": "Feature", "geometry": poly(CONCAVE), "properties": {"objectType": "annotation"}},
        {"type": "Feature", "geometry": {"type": "MultiPoint", "coordinates": [[1, 2], [3, 4]]},
         "properties": {"objectType": "annotation", "classification": {"name": "Points"}}},
        {"type": "Feature", "geometry": poly(STAR), "properties": {
            "objectType": "annotation", "name": "x", "classification": {"name": "Tumor"}}},
    ]}
    p = tmp_path / "qupath.geojson"
    p.write_text(json.dumps(doc, indent=2))
    ann = slidepipe.Annotations.load(p)
    assert ann.classes == ["background", "Tumor", "Region*", "unclassified"]
    assert ann.feature_classes == [1, 2, 3, 1]
    assert ann.skipped == 1
    lab = ann.rasterize(1, width=100, height=145)
    np.testing.assert_array_equal(
        lab, reference([(1, [TRIANGLE]), (2, [RECT]), (3, [CONCAVE]), (1, [STAR])],
                       1, 0, 0, 100, 145))


def asap_xml(annotations, comma=False):
    out = ['<?xml version="1.0"?>', "<ASAP_Annotations>", "\t<Annotations>"]
    for k, (name, typ, group, coords) in enumerate(annotations):
        out.append(f'\t\t<Annotation Name="{name}" Type="{typ}" PartOfGroup="{group}" '
                   f'Color="#F4FA58">')
        out.append("\t\t\t<Coordinates>")
        order = list(range(len(coords)))
        order = order[1::2] + order[0::2]  # written out of order: Order sorts them
        for i in order:
            x, y = (f"{v!r}".replace(".", ",") if comma else repr(v) for v in coords[i])
            out.append(f'\t\t\t\t<Coordinate Order="{i}" X="{x}" Y="{y}" />')
        out.append("\t\t\t</Coordinates>")
        out.append("\t\t</Annotation>")
    out += ["\t</Annotations>", "\t<AnnotationGroups>",
            '\t\t<Group Name="tumor" PartOfGroup="None" Color="#64FE2E"><Attributes /></Group>',
            "\t</AnnotationGroups>", "</ASAP_Annotations>", ""]
    return "\n".join(out)


@pytest.mark.parametrize("comma", [False, True])
def test_asap_xml(tmp_path, comma):
    rect = RECT[0][:4]
    doc = asap_xml([
        ("Annotation 0", "Polygon", "tumor", TRIANGLE[0][:-1]),
        ("Annotation 1", "Rectangle", "stroma", rect),
        ("Annotation 2", "Dot", "tumor", [(5.5, 5.5)]),
        ("Annotation 3", "Spline", "None", CONCAVE[0]),
        ("Annotation &amp; 4", "Polygon", "tumor", STAR[0]),
        ("Annotation 5", "PointSet", "stroma", [(1.5, 1.5), (2.5, 2.5)]),
    ], comma=comma)
    p = tmp_path / "asap.xml"
    p.write_text(doc)
    ann = slidepipe.Annotations.load(p)
    assert ann.classes == ["background", "tumor", "stroma", "unclassified"]
    assert ann.feature_classes == [1, 2, 3, 1]
    assert ann.skipped == 2
    ref_feats = [(1, [TRIANGLE]), (2, [[rect]]), (3, [CONCAVE]), (1, [STAR])]
    for d, x0, y0 in [(1.0, 0.0, 0.0), (2.0, 1.35, -4.65)]:
        w, h = 50, 72
        got = ann.rasterize(d, x=x0, y=y0, width=w, height=h)
        np.testing.assert_array_equal(got, reference(ref_feats, d, x0, y0, w, h))
        np.testing.assert_array_equal(got, skimage_reference(ref_feats, d, x0, y0, w, h))


def test_rasterize_from_threads_agrees(shapes):
    want = shapes.rasterize(0.5, width=200, height=290)
    results = [None] * 4

    def run(k):
        results[k] = shapes.rasterize(0.5, width=200, height=290)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, want)


def test_pickles_by_path(shapes):
    again = pickle.loads(pickle.dumps(shapes))
    assert again.classes == shapes.classes
    np.testing.assert_array_equal(again.rasterize(2), shapes.rasterize(2))


def test_bad_window_arguments(shapes):
    with pytest.raises(slidepipe.SlidepipeError):
        shapes.rasterize(0.0, width=4, height=4)
    with pytest.raises(slidepipe.SlidepipeError):
        shapes.rasterize(float("nan"), width=4, height=4)
    with pytest.raises(slidepipe.SlidepipeError):
        shapes.rasterize(-2.0)  # the default size is not computed from a bad downsample
    with pytest.raises(ValueError):
        shapes.rasterize(1.0, width=-1, height=4)
    assert shapes.rasterize(1.0, width=0, height=3).shape == (3, 0)


# ---- patch labels and masks -----------------------------------------------------------------


def test_patch_labels_centre_and_majority():
    # A 4 x 6 map at downsample 10: map pixel (i, j) covers level-0 [10 i, 10 i + 10).
    lab = np.array([[0, 0, 1, 1, 2, 2],
                    [0, 3, 1, 1, 2, 2],
                    [3, 3, 3, 1, 2, 0],
                    [3, 3, 0, 0, 0, 0]], np.uint8)
    tiles = [(0, 0), (20, 0), (0, 20), (38, 0), (40, 10), (50, 30), (55, 35), (100, 100),
             (10, 10)]
    # centre rule: the map pixel holding (x + 10, y + 10)
    centre = patch_labels(lab, 10, tiles, 20)
    assert centre.tolist() == [3, 1, 3, 2, 0, 0, 0, 0, 3]
    # majority over the map pixels whose centres (10 i + 5, 10 j + 5) lie in [x, x + 20)
    maj = patch_labels(lab, 10, tiles, 20, rule="majority")
    # (0,0): {0,0,0,3} -> 0; (20,0): {1,1,1,1} -> 1; (0,20): {3,3,3,3} -> 3;
    # (38,0): pixels i 4,5 (centres 45, 55) rows 0,1 -> {2,2,2,2} -> 2;
    # (40,10): {2,2,2,0} -> 2; (50,30): i=5 j=3 in map, the other three off it -> 0;
    # (55,35): centres 65 and 45 -> i=6 (off), j=4 (off): all background -> 0;
    # (100,100): off the map -> 0; (10,10): {3,1,3,3} -> 3
    assert maj.tolist() == [0, 1, 3, 2, 2, 0, 0, 0, 3]
    # ties go to the smaller label: {1,1,2,2}
    tie = np.array([[1, 2], [1, 2]], np.uint8)
    assert patch_labels(tie, 1, [(0, 0)], 2, rule="majority").tolist() == [1]
    assert patch_labels(tie[:, ::-1], 1, [(0, 0)], 2, rule="majority").tolist() == [1]
    # background counts: {0,0,0,5} -> 0 although 5 is the only class present
    assert patch_labels(np.array([[0, 0], [0, 5]], np.uint8), 1, [(0, 0)], 2,
                        rule="majority").tolist() == [0]
    # a patch smaller than a map pixel, holding no centre: the centre rule
    assert patch_labels(lab, 10, [(21, 1)], 3, rule="majority").tolist() == [1]
    # a map with an origin
    assert patch_labels(lab, 10, [(1000, 2000)], 20, map_origin=(980, 1990)).tolist() == [1]
    with pytest.raises(ValueError):
        patch_labels(lab, 10, tiles, 20, rule="mode")


def test_patch_labels_from_a_rasterized_map(shapes):
    lab = shapes.rasterize(4.0)
    rng = np.random.default_rng(3)
    tiles = rng.uniform(0, 120, (50, 2)).round()
    got = patch_labels(lab, 4.0, tiles, 16, rule="majority")
    for (x, y), g in zip(tiles, got):
        # the map pixels with centres in the patch, by brute force
        ii = [i for i in range(lab.shape[1] + 10) if x <= 4 * i + 2 < x + 16]
        jj = [j for j in range(lab.shape[0] + 10) if y <= 4 * j + 2 < y + 16]
        vals = [int(lab[j, i]) if j < lab.shape[0] and i < lab.shape[1] else 0
                for j in jj for i in ii]
        counts = np.bincount(vals, minlength=8)
        assert g == int(np.argmax(counts))


def test_mask_patches_line_up_with_patch_pixels(shapes):
    tiles = np.array([[0, 0], [32, 48], [60, 60], [-8, 100]], np.int64)
    masks = mask_patches(shapes, tiles, 24, downsample=1)
    assert masks.shape == (4, 24, 24) and masks.dtype == np.uint8
    full = shapes.rasterize(1.0, x=-8, y=0, width=120, height=150)
    for (x, y), m in zip(tiles, masks):
        np.testing.assert_array_equal(m, full[y:y + 24, x + 8:x + 32])
    # at downsample 2, patch pixel (i, j) covers level-0 [x + 2i, x + 2i + 2): centre x + 2i + 1
    masks2 = mask_patches(shapes, tiles, 16, downsample=2)
    for (x, y), m in zip(tiles, masks2):
        np.testing.assert_array_equal(m, reference(SHAPES, 2.0, x, y, 16, 16))
    assert masks2[2].any()


# ---- invalid input --------------------------------------------------------------------------


def _bad_geojson(geometry, **props):
    ok = gj_feature(poly(TRIANGLE), "Tumor", name="fine")
    return json.dumps({"type": "FeatureCollection", "features": [
        ok, gj_feature(geometry, props.pop("cls", "Stroma"), name="the bad one", **props)]})


BAD_GEOJSON = {
    "two-points": (_bad_geojson(poly([[[1, 1], [5, 5], [1, 1], [5, 5]]])), "3 distinct"),
    "too-short": (_bad_geojson(poly([[[1, 1], [5, 5]]])), "3 distinct"),
    "hole-degenerate": (_bad_geojson(poly(TRIANGLE + [[[5, 5], [5, 5], [5, 5]]])), "hole"),
    # JSON has no infinity; a number past double's range parses to one
    "infinite": (_bad_geojson(poly([[[1, 1], [12345.678, 5], [3, 9]]])).replace("12345.678",
                                                                                  "1e400"),
                 "finite"),
    "absurd": (_bad_geojson(poly([[[1, 1], [2e12, 5], [3, 9]]])), "2^40"),
    "string-coords": (_bad_geojson(poly("nope")), "not a non-empty array"),
    "string-number": (_bad_geojson(poly([[[1, 1], ["5", 5], [3, 9]]])), "position 1"),
    "missing-coords": (_bad_geojson({"type": "Polygon"}), "no \"coordinates\""),
    "empty-multi": (_bad_geojson({"type": "MultiPolygon", "coordinates": []}), "empty"),
    "unknown-type": (_bad_geojson({"type": "Circle", "coordinates": [1, 2]}), "Circle"),
    "no-geometry-type": (_bad_geojson({"coordinates": [1, 2]}), "type"),
}


@pytest.mark.parametrize("case", sorted(BAD_GEOJSON))
def test_invalid_geojson_names_file_and_feature(tmp_path, case):
    text, words = BAD_GEOJSON[case]
    p = tmp_path / f"{case}.geojson"
    p.write_text(text)
    with pytest.raises(slidepipe.SlidepipeError) as e:
        slidepipe.Annotations.load(p)
    msg = str(e.value)
    assert str(p) in msg
    assert 'feature 1 ("the bad one", class "Stroma")' in msg, msg
    assert words in msg, msg


@pytest.mark.parametrize("doc,words", [
    ([{"type": "Feature", "geometry": None, "properties": {"classification": 7}}],
     "classification is a number"),
    ([{"type": "Feature", "properties": {}}], 'no "geometry"'),
    ([{"type": "Feature", "geometry": None, "properties": "x"}], "not an object"),
    ([3], "not a GeoJSON Feature"),
])
def test_invalid_feature_members(tmp_path, doc, words):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(slidepipe.SlidepipeError) as e:
        slidepipe.Annotations.load(p)
    assert str(p) in str(e.value) and "feature 0" in str(e.value) and words in str(e.value)


def _bad_asap(coords_xml, typ="Polygon"):
    return ('<ASAP_Annotations><Annotations>'
            '<Annotation Name="ok" Type="Polygon" PartOfGroup="tumor"><Coordinates>'
            '<Coordinate Order="0" X="1" Y="1"/><Coordinate Order="1" X="9" Y="1"/>'
            '<Coordinate Order="2" X="5" Y="8"/></Coordinates></Annotation>'
            f'<Annotation Name="the bad one" Type="{typ}" PartOfGroup="stroma"><Coordinates>'
            f'{coords_xml}</Coordinates></Annotation></Annotations></ASAP_Annotations>')


@pytest.mark.parametrize("text,words", [
    (_bad_asap('<Coordinate Order="0" X="1" Y="1"/><Coordinate Order="1" X="4" Y="4"/>'),
     "3 distinct"),
    (_bad_asap('<Coordinate Order="0" X="abc" Y="1"/>'), 'X="abc" is not a number'),
    (_bad_asap('<Coordinate Order="0" Y="1"/>'), "no X attribute"),
    (_bad_asap(''), "no coordinates"),
    (_bad_asap('<Coordinate Order="0" X="1e13" Y="1"/><Coordinate X="2" Y="2"/>'
               '<Coordinate X="3" Y="1"/>'), "2^40"),
    (_bad_asap('<Coordinate X="1" Y="1"/>', typ="Ellipse"), 'unsupported Type "Ellipse"'),
])
def test_invalid_asap_names_file_and_feature(tmp_path, text, words):
    p = tmp_path / "bad.xml"
    p.write_text(text)
    with pytest.raises(slidepipe.SlidepipeError) as e:
        slidepipe.Annotations.load(p)
    msg = str(e.value)
    assert str(p) in msg and 'feature 1 ("the bad one", class "stroma")' in msg, msg
    assert words in msg, msg


@pytest.mark.parametrize("text,words", [
    ("{\"type\": \"FeatureCollection\", \"features\": [", "invalid JSON"),
    ("<ASAP_Annotations><Annotations></ASAP_Annotations>", "invalid XML at line 1"),
    ("<!DOCTYPE x [<!ENTITY a \"b\">]><ASAP_Annotations/>", "DOCTYPE"),
    ("<other/>", "not ASAP_Annotations"),
    ("hello", "neither GeoJSON nor ASAP XML"),
    ("", "empty"),
    ("{\"type\": \"Polygon\", \"coordinates\": []}", "not a GeoJSON FeatureCollection"),
])
def test_malformed_files(tmp_path, text, words):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(slidepipe.SlidepipeError) as e:
        slidepipe.Annotations.load(p)
    assert str(p) in str(e.value) and words in str(e.value), str(e.value)


def test_missing_file_and_class_limit(tmp_path):
    with pytest.raises(slidepipe.SlidepipeError):
        slidepipe.Annotations.load(tmp_path / "absent.geojson")
    feats = [gj_feature(poly(TRIANGLE), f"class {k}") for k in range(256)]
    p = tmp_path / "many.json"
    p.write_text(json.dumps(feats))
    with pytest.raises(slidepipe.SlidepipeError) as e:
        slidepipe.Annotations.load(p)
    assert "more than 255 classes" in str(e.value) and "feature 255" in str(e.value)
    p.write_text(json.dumps(feats[:255]))
    assert len(slidepipe.Annotations.load(p).classes) == 256
