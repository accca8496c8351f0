/* serve_pages.c — the two HTML pages of `slidepipe serve`: the index listing the served slides
 * (with links to each one's viewer, info JSON, Deep Zoom descriptor, IIIF info.json and
 * associated images), and a slide's viewer, built on Leaflet from Debian's libjs-leaflet (served
 * under /leaflet/): pan and zoom over the Deep Zoom tiles, a scale bar from the MPP, a
 * magnification readout, and overlays with one opacity slider (the tissue mask, the tile grid with
 * tissue and QC scores, the GeoJSON annotations, and every other served image of the same size,
 * such as the OME-Zarr output of `slidepipe process`). Page data go in as JSON made by cJSON, never
 * pasted text. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* Append to a growing string; *failed sticks. */
typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool failed;
} sbuf;

static void put(sbuf *b, const char *text) {
    size_t n = strlen(text);
    if (b->failed) {
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) {
            cap *= 2;
        }
        char *p = realloc(b->s, cap);
        if (p == NULL) {
            b->failed = true;
            return;
        }
        b->s = p, b->cap = cap;
    }
    memcpy(b->s + b->len, text, n + 1);
    b->len += n;
}

static char *finish(sbuf *b) {
    if (b->failed) {
        free(b->s);
        return NULL;
    }
    return b->s;
}

/* Text for HTML: the characters that matter escaped. */
static void put_escaped(sbuf *b, const char *text) {
    char one[2] = {0, 0};
    for (const char *p = text; *p; p++) {
        switch (*p) {
        case '<': put(b, "&lt;"); break;
        case '>': put(b, "&gt;"); break;
        case '&': put(b, "&amp;"); break;
        case '"': put(b, "&quot;"); break;
        case '\'': put(b, "&#39;"); break;
        default: one[0] = *p; put(b, one);
        }
    }
}

static const char STYLE[] =
    "<style>body{font-family:sans-serif;margin:0}table{border-collapse:collapse;margin:1em}"
    "td,th{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}h1{margin:.6em 1em}"
    "#map{position:absolute;top:0;bottom:0;left:0;right:0;background:#fff}"
    ".sp-box{background:#fff;padding:4px 8px;border-radius:4px;font:13px sans-serif;"
    "box-shadow:0 1px 4px rgba(0,0,0,.3)}.sp-bar{border:2px solid #222;border-top:none;"
    "height:8px;margin-top:2px}</style>";

char *serve_page_index(const serve_state *st) {
    sbuf b = {0};
    put(&b, "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>slidepipe serve</title>");
    put(&b, STYLE);
    put(&b, "</head><body><h1>slidepipe serve</h1><table><tr><th>slide</th><th>format</th>"
            "<th>size</th><th>µm/px</th><th>links</th></tr>");
    for (int i = 0; i < st->n_slides; i++) {
        const serve_slide *s = &st->slides[i];
        char num[128];
        put(&b, "<tr><td><a href=\"/viewer/");
        put(&b, s->id);
        put(&b, "\">");
        put_escaped(&b, s->path);
        put(&b, "</a></td><td>");
        put_escaped(&b, sp_slide_format(s->slide));
        snprintf(num, sizeof num, "</td><td>%lld x %lld</td><td>", (long long)s->width,
                 (long long)s->height);
        put(&b, num);
        if (s->mpp > 0) {
            snprintf(num, sizeof num, "%.4g", s->mpp);
            put(&b, num);
        } else {
            put(&b, "unknown");
        }
        put(&b, "</td><td>");
        static const char *const links[][3] = {{"/slides/", "/info.json", "info"},
                                               {"/dzi/", ".dzi", "Deep Zoom"},
                                               {"/iiif/", "/info.json", "IIIF"}};
        for (int k = 0; k < 3; k++) {
            put(&b, "<a href=\"");
            put(&b, links[k][0]);
            put(&b, s->id);
            put(&b, links[k][1]);
            put(&b, "\">");
            put(&b, links[k][2]);
            put(&b, "</a> ");
        }
        for (int32_t k = 0; k < sp_slide_associated_count(s->slide); k++) {
            const char *name = sp_slide_associated_name(s->slide, k);
            if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                strlen(name)) {
                continue; /* a name a URL segment cannot carry as is */
            }
            put(&b, "<a href=\"/slides/");
            put(&b, s->id);
            put(&b, "/associated/");
            put(&b, name);
            put(&b, ".jpg\">");
            put(&b, name);
            put(&b, "</a> ");
        }
        put(&b, "</td></tr>");
    }
    put(&b, "</table></body></html>\n");
    return finish(&b);
}

/* The viewer's script: reads window.SP (the slide, its overlays) and builds the map. The test
 * (tests/cli/test_serve_browser.py) reads window.spViewer to know when tiles have loaded and
 * to switch overlays. */
static const char VIEWER_JS[] =
    "const S = window.SP;\n"
    "const map = L.map('map', {crs: L.CRS.Simple, minZoom: 0, maxZoom: S.maxLevel + 2,\n"
    "  preferCanvas: true, attributionControl: false});\n"
    "const ll = (x, y) => map.unproject([x, y], S.maxLevel);\n"
    "const bounds = L.latLngBounds(ll(0, S.height), ll(S.width, 0));\n"
    "/* Deep Zoom tiles at the edges are smaller than 256: show them at their own size. */\n"
    "const DziLayer = L.TileLayer.extend({createTile(coords, done) {\n"
    "  return L.TileLayer.prototype.createTile.call(this, coords, (err, tile) => {\n"
    "    if (!err) { const k = this.getTileSize().x / 256;\n"
    "      tile.style.width = tile.naturalWidth * k + 'px';\n"
    "      tile.style.height = tile.naturalHeight * k + 'px'; }\n"
    "    done(err, tile); }); }});\n"
    "const dzi = (id, fmt, opts) => new DziLayer('/dzi/' + id + '_files/{z}/{x}_{y}.' + fmt,\n"
    "  Object.assign({tileSize: 256, maxNativeZoom: S.maxLevel, maxZoom: S.maxLevel + 2,\n"
    "    bounds: bounds, noWrap: true}, opts));\n"
    "const V = window.spViewer = {map: map, ll: ll, overlays: {}, pending: 0, loaded: 0,\n"
    "  errors: 0};\n"
    "const base = dzi(S.id, 'jpeg', {});\n"
    "base.on('tileloadstart', () => V.pending++);\n"
    "base.on('tileload', () => { V.pending--; V.loaded++; });\n"
    "base.on('tileerror', () => { V.pending--; V.errors++; });\n"
    "base.addTo(map);\n"
    "map.fitBounds(bounds);\n"
    "let opacity = 0.5;\n"
    "const setOpacity = (v) => { opacity = v; for (const l of Object.values(V.overlays)) {\n"
    "  if (l.setOpacity) l.setOpacity(v); } };\n"
    "/* The tissue mask and the tile grid come from one request (tiles.json says the mask's\n"
    " * scale); they are added to the layer control when it answers. */\n"
    "const control = L.control.layers(null, null, {collapsed: false}).addTo(map);\n"
    "const tissue = L.imageOverlay('/slides/' + S.id + '/tissue.png', bounds, {opacity: "
    "opacity});\n"
    "V.overlays['Tissue mask'] = tissue;\n"
    "V.ready = fetch('/slides/' + S.id + '/tiles.json').then(r => r.json()).then(g => {\n"
    "  const m = g.mask;\n"
    "  tissue.setBounds(L.latLngBounds(ll(0, m.height * m.downsample), ll(m.width * m.downsample, "
    "0)));\n"
    "  control.addOverlay(tissue, 'Tissue mask');\n"
    "  const grid = L.layerGroup();\n"
    "  for (const t of g.tiles) {\n"
    "    const r = L.rectangle([ll(t[0], t[1] + g.size), ll(t[0] + g.size, t[1])], {weight: 1,\n"
    "      color: t[2] >= 0.5 ? '#0a0' : '#888', fillColor: t[2] >= 0.5 ? '#0c0' : '#fff',\n"
    "      fillOpacity: opacity * 0.6 * t[2], opacity: opacity});\n"
    "    let tip = 'tissue ' + t[2].toFixed(2);\n"
    "    for (let k = 3; k < t.length; k++) tip += '<br>' + g.fields[k] + ' ' + t[k].toFixed(2);\n"
    "    r.tissue = t[2]; r.bindTooltip(tip); grid.addLayer(r);\n"
    "  }\n"
    "  grid.setOpacity = (v) => grid.eachLayer(r => r.setStyle({opacity: v,\n"
    "    fillOpacity: v * 0.6 * r.tissue}));\n"
    "  V.overlays['Tile grid'] = grid; control.addOverlay(grid, 'Tile grid (tissue, QC)');\n"
    "}).catch(e => { V.overlayError = String(e); });\n"
    "for (const name of S.annotations) {\n"
    "  fetch('/annotations/' + name).then(r => r.json()).then(gj => {\n"
    "    const layer = L.geoJSON(gj, {coordsToLatLng: c => ll(c[0], c[1]),\n"
    "      style: {color: '#e0f', weight: 2, fillOpacity: 0.2}});\n"
    "    layer.setOpacity = (v) => layer.setStyle({opacity: v, fillOpacity: v * 0.4});\n"
    "    V.overlays[name] = layer; control.addOverlay(layer, 'Annotations: ' + name);\n"
    "  }).catch(e => { V.overlayError = String(e); });\n"
    "}\n"
    "for (const id of S.images) {\n"
    "  const layer = dzi(id, 'png', {opacity: opacity});\n"
    "  V.overlays[id] = layer; control.addOverlay(layer, 'Image: ' + id);\n"
    "}\n"
    "/* Scale bar and magnification, from the MPP and the objective power. */\n"
    "const info = L.control({position: 'bottomleft'});\n"
    "info.onAdd = () => { const d = L.DomUtil.create('div', 'sp-box'); d.id = 'sp-info'; return d; "
    "};\n"
    "info.addTo(map);\n"
    "const slider = L.control({position: 'topleft'});\n"
    "slider.onAdd = () => { const d = L.DomUtil.create('div', 'sp-box');\n"
    "  d.innerHTML = 'overlay opacity <input id=\"sp-opacity\" type=\"range\" min=\"0\" max=\"1\" "
    "step=\"0.05\" value=\"0.5\">';\n"
    "  L.DomEvent.disableClickPropagation(d);\n"
    "  d.querySelector('input').addEventListener('input', e => setOpacity(+e.target.value));\n"
    "  return d; };\n"
    "slider.addTo(map);\n"
    "V.setOpacity = setOpacity;\n"
    "function update() {\n"
    "  const z = map.getZoom(), l0PerPx = Math.pow(2, S.maxLevel - z);\n"
    "  let html = '<span id=\"sp-zoom\">zoom ' + z;\n"
    "  if (S.objective) html += ' &middot; ' + (S.objective / l0PerPx).toPrecision(3) + 'x';\n"
    "  html += '</span>';\n"
    "  if (S.mpp) {\n"
    "    const umPerPx = S.mpp * l0PerPx, target = 120 * umPerPx;\n"
    "    const p = Math.pow(10, Math.floor(Math.log10(target)));\n"
    "    const len = [5, 2, 1].map(k => k * p).find(v => v <= target) || p;\n"
    "    const label = len >= 1000 ? (len / 1000) + ' mm' : len + ' \\u00b5m';\n"
    "    html += '<div class=\"sp-bar\" id=\"sp-scale\" style=\"width:' + (len / "
    "umPerPx).toFixed(1)\n"
    "      + 'px\"></div><span id=\"sp-scale-label\">' + label + '</span>';\n"
    "  } else { html += '<br>no MPP: no scale bar'; }\n"
    "  document.getElementById('sp-info').innerHTML = html;\n"
    "}\n"
    "map.on('zoomend', update); update();\n";

char *serve_page_viewer(const serve_state *st, int index) {
    const serve_slide *s = &st->slides[index];
    cJSON *cfg = cJSON_CreateObject();
    if (cfg == NULL) {
        return NULL;
    }
    cJSON_AddStringToObject(cfg, "id", s->id);
    cJSON_AddNumberToObject(cfg, "width", (double)s->width);
    cJSON_AddNumberToObject(cfg, "height", (double)s->height);
    cJSON_AddNumberToObject(cfg, "maxLevel", serve_dzi_max_level(s->width, s->height));
    cJSON_AddNumberToObject(cfg, "mpp", s->mpp);
    cJSON_AddNumberToObject(cfg, "objective", s->objective);
    cJSON *images = cJSON_AddArrayToObject(cfg, "images");
    for (int i = 0; i < st->n_slides; i++) {
        const serve_slide *o = &st->slides[i];
        if (i != index && o->width == s->width && o->height == s->height) {
            cJSON_AddItemToArray(images, cJSON_CreateString(o->id));
        }
    }
    cJSON *ann = cJSON_AddArrayToObject(cfg, "annotations");
    for (int i = 0; i < st->n_annotations; i++) {
        cJSON_AddItemToArray(ann, cJSON_CreateString(st->annotations[i].name));
    }
    char *json = cJSON_PrintUnformatted(cfg);
    cJSON_Delete(cfg);
    if (json == NULL) {
        return NULL;
    }
    sbuf b = {0};
    put(&b, "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>");
    put_escaped(&b, s->path);
    put(&b, " - slidepipe</title><link rel=\"stylesheet\" href=\"/leaflet/leaflet.css\">");
    put(&b, STYLE);
    put(&b, "<script src=\"/leaflet/leaflet.js\"></script></head><body><div id=\"map\"></div>"
            "<script>window.SP = ");
    put(&b, json); /* ids and names are [A-Za-z0-9._-]: nothing to close the script */
    put(&b, ";\n");
    put(&b, VIEWER_JS);
    put(&b, "</script></body></html>\n");
    free(json);
    return finish(&b);
}
