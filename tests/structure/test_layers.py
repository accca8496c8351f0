"""The source tree's layers look only down, and only io/ touches files (docs/architecture.md).

Each folder of src/ has a rank; a file may include headers of its own folder and of folders of a
lower rank, never of a higher or an equal one (two containers, two jobs do not lean on each
other). The public header slidepipe.h is open to all. The front ends (cli/, python/, mpi/, serve/) see the
public header and their own files only. Raw file-system calls (open, pread, rename, opendir, stat,
...) appear only under src/io/, so remote storage and injected I/O faults reach every reader and
writer; the files that still write to disk themselves are listed below with why, and the list
may only shrink."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
FRONT_ENDS = ("cli", "python", "mpi", "serve")

RANKS = {
    "base": 0,  # errors, limits, strings, numbers, option tables, properties, the thread pool
    "io": 1,  # byte sources, stores, HTTP and S3, the request pool, durable renames
    "codecs": 2,  # one file per codec
    "tiff": 3,  # containers: every offset and length untrusted
    "dicom": 3,
    "zarr": 3,
    "formats": 4,  # thin vendor adapters and the inside of an open slide they fill
    "slide": 5,  # the handle, region painter, scaled and batched reads, tile cache
    "ops": 6,  # one file per op (CPU reference)
    "cuda": 7,  # the GPU backend: registers kernels for ops by name
    "engine": 8,  # the level streamer
    "jobs": 9,  # convert, process, spectrum, train, synth: one subfolder each
}

# Files that still make file-system calls themselves, each with the reason (none now: the Zarr
# store writes through io/write_target.h). The list may only shrink.
RAW_IO_PENDING: dict[str, str] = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
RAW_IO = re.compile(
    r"(?<![\w>.])(open|openat|fopen|fdopen|pread|pwrite|read|write|close|rename|renameat|unlink|"
    r"unlinkat|mkdir|rmdir|opendir|fdopendir|readdir|closedir|fsync|fdatasync|syncfs|stat|lstat|"
    r"fstat|ftruncate|mkstemp|realpath|access)\s*\("
)


def _sources(root: Path):
    return sorted(p for p in root.rglob("*") if p.suffix in (".c", ".h", ".cu") and p.is_file())


def _folder(rel: str) -> str:
    """A file's layer folder: jobs/ files by their subfolder (jobs/convert, ...)."""
    parts = rel.split("/")
    return "/".join(parts[:2]) if parts[0] == "jobs" and len(parts) > 2 else parts[0]


def _rank(folder: str) -> int:
    return RANKS[folder.split("/")[0]]


def _code(text: str) -> str:
    """The text without comments and string literals (so prose naming open() does not count)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"'(?:\\.|[^'\\])'", "' '", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def test_every_folder_has_a_rank():
    folders = {p.relative_to(SRC).parts[0] for p in _sources(SRC)}
    assert not folders - set(RANKS), f"src/ folders without a layer: {sorted(folders - set(RANKS))}"


def test_includes_look_only_down():
    problems = []
    for path in _sources(SRC):
        rel = path.relative_to(SRC).as_posix()
        mine = _folder(rel)
        for inc in INCLUDE.findall(path.read_text(errors="replace")):
            if inc == "slidepipe.h" or "/" not in inc:
                continue
            theirs = _folder(inc)
            if theirs == mine:
                continue
            if theirs.split("/")[0] not in RANKS:
                problems.append(f"{rel}: includes {inc}, outside the layers")
            elif _rank(theirs) >= _rank(mine):
                problems.append(f"{rel} ({mine}, rank {_rank(mine)}) includes {inc} ({theirs}, rank {_rank(theirs)})")
    assert not problems, "includes that do not look down:\n  " + "\n  ".join(problems)


def test_front_ends_use_the_public_api_only():
    """cli/, python/, mpi/ and serve/ include the public header and front-end files (mpi/ and
    serve/ share the command line's helpers), never a file of src/."""
    problems = []
    root = SRC.parent
    front_files = {p.name for front in FRONT_ENDS for p in _sources(root / front)}
    for front in FRONT_ENDS:
        for path in _sources(root / front):
            for inc in INCLUDE.findall(path.read_text(errors="replace")):
                if inc != "slidepipe.h" and inc not in front_files:
                    problems.append(f"{path.relative_to(root)}: includes {inc}")
    assert not problems, "front ends reaching past the public header:\n  " + "\n  ".join(problems)


def test_file_system_calls_only_in_io():
    problems, seen = [], set()
    for path in _sources(SRC):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("io/"):
            continue
        calls = sorted(set(RAW_IO.findall(_code(path.read_text(errors="replace")))))
        if calls and rel not in RAW_IO_PENDING:
            problems.append(f"{rel}: {', '.join(calls)}")
        if calls:
            seen.add(rel)
    assert not problems, "file-system calls outside src/io/:\n  " + "\n  ".join(problems)
    stale = sorted(set(RAW_IO_PENDING) - seen)
    assert not stale, f"listed as pending but no longer calling the file system (remove them): {stale}"
