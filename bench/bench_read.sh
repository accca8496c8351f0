#!/usr/bin/env bash
# bench_read.sh — region reads, slidepipe against OpenSlide and tiffslide, in one invocation on the
# same inputs and the same regions (issue 8; DESIGN.md's read rows). For each slide, thread count
# (1, 2) and placement (unaligned, aligned to the tile grid) it runs
#   slidepipe bench read SLIDE --size 256 --count N --threads T --seed S [--aligned] --json
#   osbench SLIDE 0 256 256 N T S        (../shared/bench/osbench.c, built here against Debian's
#                                          libopenslide; for aligned runs a copy whose positions are
#                                          rounded down to the tile size)
#   python py_read.py slidepipe SLIDE N T S [TILE]   (slidepipe's Python binding, build/python)
#   python py_read.py tiffslide SLIDE N T S [TILE]   (tiffslide from the pinned venv)
# which all draw the same regions (glibc rand_r streams, see cmd_bench.c), and prints MP/s of
# requested pixels, slidepipe's ratio to OpenSlide, and each tool's peak RSS (/usr/bin/time).
# The two Python readers use threads sharing one slide, as a PyTorch data loader with threads
# would; the binding's figure is what Python code gets from the C library (SLIDEPIPE_PYTHONPATH
# picks another build of it).
# Then a whole level-0 read into memory (slidepipe bench read --whole-level --rgb) against the
# decode rate of libjpeg-turbo's TurboJPEG API times the threads (bench/tj_tile_rate.c: Debian 12
# packages no tjbench binary, so this is our own tjbench-like loop, over one tile and over a
# sample of the level's tiles).
#
#   usage: bench/bench_read.sh DIR [SLIDEPIPE]
#     DIR        holds jpeg.tif, jpeg-svs.svs, j2k-svs.svs from ../shared/bench/make-bench-slides.sh
#     SLIDEPIPE  the binary (default: build/slidepipe)
#   env: COUNT (regions per run, default 2000: with 400 a 2-thread run lasts 0.14 s and swings
#        by a third; J2K runs use COUNT/4), SEED (default 1),
#        SLIDES (default "jpeg.tif jpeg-svs.svs j2k-svs.svs"), THREADS (default "1 2"),
#        REPEAT (default 3: each tool runs that many times, alternating, and its best MP/s is
#        kept — on a shared machine the best run is the one least disturbed by other work).
# Nothing built here is kept: osbench and tj_tile_rate go to a temporary folder.
set -euo pipefail

dir=${1:?usage: bench_read.sh DIR [SLIDEPIPE]}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
sp=${2:-$repo/build/slidepipe}
py=$repo/.venv/bin/python
count=${COUNT:-2000}
seed=${SEED:-1}
slides=${SLIDES:-"jpeg.tif jpeg-svs.svs j2k-svs.svs"}
threads_list=${THREADS:-"1 2"}
repeat=${REPEAT:-3}

[ -x "$sp" ] || { echo "no slidepipe binary at $sp (build it with make)" >&2; exit 1; }
sp_python=$(cd "$(dirname "$sp")" && pwd)/python
[ -f "$sp_python/slidepipe/__init__.py" ] || { echo "no Python binding in $sp_python (make builds it; it needs python3-dev)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
pkg-config --exists openslide || { echo "needs libopenslide-dev" >&2; exit 1; }
pkg-config --exists libturbojpeg || { echo "needs libturbojpeg0-dev" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-read.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
gcc -O2 "$repo/../shared/bench/osbench.c" -o "$tmp/osbench" $(pkg-config --cflags --libs openslide) -lpthread
gcc -O2 "$here/tj_tile_rate.c" -o "$tmp/tj_tile_rate" $(pkg-config --cflags --libs libturbojpeg)

# Peak RSS in MiB of a command (its stdout goes to $tmp/out).
run_rss() {
    /usr/bin/time -f '%M' -o "$tmp/rss" "$@" >"$tmp/out"
    echo $(( $(tail -1 "$tmp/rss") / 1024 ))
}
best() { "$py" -c "import sys; print(max(float(sys.argv[1]), float(sys.argv[2])))" "$1" "$2"; }
json_field() { "$py" -c "import json,sys; print('%.1f' % json.load(open(sys.argv[1]))[sys.argv[2]])" "$tmp/out" "$1"; }

echo "# bench_read.sh on $(hostname), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $("$sp" --version), $(pkg-config --modversion openslide | sed 's/^/OpenSlide /'), regions of 256x256 at level 0, seed $seed, best of $repeat runs"
printf '%-13s %-9s %3s %7s | %9s %9s %6s | %9s %9s | %6s %6s %6s\n' slide placement thr regions \
    "sp MP/s" "os MP/s" "sp/os" "sp.py MP/s" "ts MP/s" "sp RSS" "os RSS" "ts RSS"
for name in $slides; do
    slide=$dir/$name
    [ -s "$slide" ] || { echo "no $slide (make it with ../shared/bench/make-bench-slides.sh $dir 16384)" >&2; exit 1; }
    cat "$slide" >/dev/null # page cache, for every tool alike
    n=$count
    case $name in j2k*) n=$(( count / 4 )) ;; esac
    tile=$("$sp" info "$slide" --json | "$py" -c "import json,sys; print(json.load(sys.stdin)['levels'][0]['tile_width'])")
    sed "s|int64_t x = rand_r(&s) % (lw - W), y = rand_r(&s) % (lh - H);|int64_t x = rand_r(\&s) % (lw - W), y = rand_r(\&s) % (lh - H); x = x / $tile * $tile; y = y / $tile * $tile;|" \
        "$repo/../shared/bench/osbench.c" >"$tmp/osbench_aligned.c"
    grep -q "x = x / $tile" "$tmp/osbench_aligned.c" || { echo "could not make the aligned osbench" >&2; exit 1; }
    gcc -O2 "$tmp/osbench_aligned.c" -o "$tmp/osbench_aligned" $(pkg-config --cflags --libs openslide) -lpthread
    for placement in unaligned aligned; do
        for t in $threads_list; do
            flag=""; os=$tmp/osbench; align=0
            if [ $placement = aligned ]; then flag=--aligned; os=$tmp/osbench_aligned; align=$tile; fi
            sp_mps=0 os_mps=0 py_mps=0 ts_mps=0 sp_rss=0 os_rss=0 ts_rss=0
            for _ in $(seq "$repeat"); do
                r=$(run_rss "$sp" bench read "$slide" --size 256 --count "$n" --threads "$t" --seed "$seed" $flag --json)
                v=$(json_field mp_per_s); sp_mps=$(best "$sp_mps" "$v"); sp_rss=$(best "$sp_rss" "$r")
                r=$(run_rss "$os" "$slide" 0 256 256 "$n" "$t" "$seed")
                v=$(sed -n 's/.*MP\/s=\([0-9.]*\).*/\1/p' "$tmp/out"); os_mps=$(best "$os_mps" "$v"); os_rss=$(best "$os_rss" "$r")
                SLIDEPIPE_PYTHONPATH=$sp_python "$py" "$here/py_read.py" slidepipe "$slide" "$n" "$t" "$seed" "$align" >"$tmp/out"
                v=$(json_field mp_per_s); py_mps=$(best "$py_mps" "$v")
                r=$(run_rss "$py" "$here/py_read.py" tiffslide "$slide" "$n" "$t" "$seed" "$align")
                v=$(json_field mp_per_s); ts_mps=$(best "$ts_mps" "$v"); ts_rss=$(best "$ts_rss" "$r")
            done
            ratio=$("$py" -c "print('%.2f' % ($sp_mps / $os_mps))")
            printf '%-13s %-9s %3s %7s | %9s %9s %6s | %9s %9s | %6s %6s %6s\n' "$name" $placement "$t" "$n" \
                "$sp_mps" "$os_mps" "${ratio}x" "$py_mps" "$ts_mps" "$sp_rss" "$os_rss" "$ts_rss"
        done
    done
done

# Whole level: every tile of jpeg.tif's level 0 decoded into one RGB buffer, against TurboJPEG
# decoding the same kind of tiles again and again (as tjbench does) times the threads: one tile
# from the middle (tjbench's single-tile figure) and every tile of the level, round-robin into one
# small reused buffer (the level's average tile, the fair ceiling for a whole-level read; an
# earlier version sampled every 16th tile, which took columns 0, 16, 32 and 48 only).
slide=$dir/jpeg.tif
mkdir -p "$tmp/tiles"
"$py" - "$slide" "$tmp" <<'PY'
import sys, tifffile
t = tifffile.TiffFile(sys.argv[1]); p = t.pages[0]; fh = t.filehandle
def dump(i, path):
    fh.seek(p.dataoffsets[i]); open(path, "wb").write(fh.read(p.databytecounts[i]))
dump(len(p.dataoffsets) // 2 + p.chunked[1] // 2, sys.argv[2] + "/tile.jpg")  # middle tile
for i in range(len(p.dataoffsets)):
    dump(i, "%s/tiles/%06d.jpg" % (sys.argv[2], i))
open(sys.argv[2] + "/tables.jpg", "wb").write(p.jpegtables or b"")
PY
tj1=0 tj=0
for _ in $(seq "$repeat"); do
    "$tmp/tj_tile_rate" "$tmp/tables.jpg" 3 "$tmp/tile.jpg" >"$tmp/out"
    tj1=$(best "$tj1" "$(json_field mp_per_s)")
    "$tmp/tj_tile_rate" "$tmp/tables.jpg" 3 "$tmp"/tiles/*.jpg >"$tmp/out"
    tj=$(best "$tj" "$(json_field mp_per_s)")
done
echo
echo "# whole level 0 of jpeg.tif (16384x16384) into memory as RGB8. TurboJPEG per thread: $tj1 MP/s on one"
echo "# middle tile (the tjbench figure), $tj MP/s over all the level's tiles (the level's average)"
printf '%-13s %3s | %9s %11s %7s %11s %7s | %6s\n' slide thr "sp MP/s" "TJ1 x thr" "sp/TJ1" "TJlvl x thr" "sp/TJlvl" "sp RSS"
for t in $threads_list; do
    mps=0
    for _ in $(seq "$repeat"); do
        rss=$(run_rss "$sp" bench read "$slide" --whole-level --rgb --threads "$t" --json)
        mps=$(best "$mps" "$(json_field mp_per_s)")
    done
    r1=$("$py" -c "print('%.1f' % ($tj1 * $t))")
    q1=$("$py" -c "print('%.0f%%' % (100 * $mps / ($tj1 * $t)))")
    r=$("$py" -c "print('%.1f' % ($tj * $t))")
    q=$("$py" -c "print('%.0f%%' % (100 * $mps / ($tj * $t)))")
    printf '%-13s %3s | %9s %11s %7s %11s %7s | %6s\n' jpeg.tif "$t" "$mps" "$r1" "$q1" "$r" "$q" "$rss"
done
