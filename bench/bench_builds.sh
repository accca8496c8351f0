#!/usr/bin/env bash
# bench_builds.sh — two builds of slidepipe side by side on the same slide, alternating, for a
# change that must not be slower (docs/benchmarks.md, "The rebuild"): convert, Sobel, spectrum and
# random region reads, ROUNDS times each build in turn. It prints wall and CPU seconds (user +
# system) and peak RSS per run; on a shared machine compare the CPU seconds, which other work
# stretches much less than wall time.
#
#   usage: bench/bench_builds.sh OLD_SLIDEPIPE NEW_SLIDEPIPE [SLIDE]
#     SLIDE  default /work/bench-slides/jpeg.tif (../shared/bench/make-bench-slides.sh DIR 16384)
#   env: ROUNDS (default 3)
set -euo pipefail
old=$1 new=$2 slide=${3:-/work/bench-slides/jpeg.tif} rounds=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-6s %-5s %-9s %8s %8s %8s\n' round build job wall_s cpu_s rss_mb
for round in $(seq 1 "$rounds"); do
  for build in old new; do
    bin=$old
    [ "$build" = new ] && bin=$new
    for job in convert sobel spectrum read; do
      rm -rf "$tmp/o.zarr"
      case $job in
        convert) cmd=("$bin" convert "$slide" "$tmp/o.zarr") ;;
        sobel) cmd=("$bin" process "$slide" "$tmp/o.zarr" --op sobel --dtype uint8) ;;
        spectrum) cmd=("$bin" spectrum "$slide" --json "$tmp/s.json") ;;
        read) cmd=("$bin" bench read "$slide" --size 256 --count 2000 --threads 2 --seed 7 --json) ;;
      esac
      /usr/bin/time -o "$tmp/t" -f '%e %U %S %M' "${cmd[@]}" > /dev/null
      awk -v r="$round" -v b="$build" -v j="$job" \
        '{ printf "%-6s %-5s %-9s %8.2f %8.2f %8d\n", r, b, j, $1, $2 + $3, $4 / 1024 }' "$tmp/t"
    done
  done
done
