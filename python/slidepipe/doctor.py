"""Which shared libraries the installed slidepipe needs, and which of them this machine lacks.

The wheel links Debian 12's libraries instead of carrying copies (docs/python.md says why: a
manylinux repair would bundle a second libjpeg-turbo, OpenJPEG and libcurl whose pixels and TLS
setup the project no longer controls). So an install on a machine without them must say which one
is missing. This module reads the NEEDED entries of the extension and of the slidepipe command
straight from their ELF dynamic sections, asks the dynamic loader for each, and maps a missing one
to the Debian package that holds it. `python -m slidepipe.doctor` prints the table and exits 1 when
something is missing; the import check (_import_check.py) names every missing library with it.
It imports nothing of the package, so `python .../slidepipe/doctor.py` runs even when
`import slidepipe` fails.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import shutil
import struct
import sys

# The Debian 12 package of each library the build links (pkg-config names in CMakeLists.txt).
DEBIAN_PACKAGES = {
    "libjpeg.so.62": "libjpeg62-turbo",
    "libdeflate.so.0": "libdeflate0",
    "libzstd.so.1": "libzstd1",
    "libpng16.so.16": "libpng16-16",
    "libcjson.so.1": "libcjson1",
    "libopenjp2.so.7": "libopenjp2-7",
    "libwebp.so.7": "libwebp7",
    "libblosc.so.1": "libblosc1",
    "libcrypto.so.3": "libssl3",
    "libssl.so.3": "libssl3",
    "libcurl.so.4": "libcurl4",
    "libfftw3f.so.3": "libfftw3-single3",
    "libfftw3f_threads.so.3": "libfftw3-single3",
    "libstdc++.so.6": "libstdc++6",
    "libgcc_s.so.1": "libgcc-s1",
    "libm.so.6": "libc6",
    "libc.so.6": "libc6",
}

_DT_NEEDED = 1
_SHT_DYNAMIC = 6


def debian_hint(soname: str) -> str:
    package = DEBIAN_PACKAGES.get(soname)
    if package:
        return f"Debian package {package}: apt-get install {package}"
    return f"find its package with: apt-file search {soname}"


def missing_from_message(message: str) -> str | None:
    """The library named by a loader error such as "libfoo.so.1: cannot open shared object file"."""
    m = re.search(r"([\w.+-]+\.so[\w.]*): cannot open shared object file", message)
    return m.group(1) if m else None


def needed(path: str) -> list[str]:
    """The NEEDED entries (sonames) of an ELF64 little-endian file, in the file's order. Raises
    ValueError naming the file when it is not one or its dynamic section is out of bounds."""
    with open(path, "rb") as f:
        data = f.read()

    def bad(why):
        return ValueError(f"{path}: {why}")

    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise bad("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise bad("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(data):
        raise bad("section headers out of bounds")
    sections = []
    for i in range(shnum):
        (_name, sh_type, _flags, _addr, offset, size, link, _info, _align,
         _entsize) = struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
        sections.append((sh_type, offset, size, link))
    names = []
    for sh_type, offset, size, link in sections:
        if sh_type != _SHT_DYNAMIC:
            continue
        if offset + size > len(data) or link >= len(sections):
            raise bad("dynamic section out of bounds")
        _t, str_off, str_size, _l = sections[link]
        if str_off + str_size > len(data):
            raise bad("dynamic string table out of bounds")
        for pos in range(offset, offset + size - 15, 16):
            tag, value = struct.unpack_from("<qQ", data, pos)
            if tag == 0:
                break
            if tag == _DT_NEEDED:
                if value >= str_size:
                    raise bad("NEEDED entry out of bounds")
                end = data.find(b"\0", str_off + value, str_off + str_size)
                names.append(data[str_off + value:end].decode("ascii", "replace"))
    return names


def loads(soname: str) -> bool:
    """Whether the dynamic loader finds and loads `soname` (and what it needs) here."""
    try:
        ctypes.CDLL(soname)
        return True
    except OSError:
        return False


def check(paths) -> list[tuple[str, str, bool]]:
    """(file, soname, found) for every NEEDED entry of every file in `paths`."""
    rows = []
    for path in paths:
        for soname in needed(path):
            rows.append((path, soname, loads(soname)))
    return rows


def package_dirs(package_path=()) -> list[str]:
    """The folders that may hold the extension: the package's own (`package_path`, and this
    file's); only when those hold no build record (the sources of an editable install, whose
    compiled parts live in the environment), each slidepipe folder on sys.path that has one.
    Imports nothing, so it works when the package does not import."""
    dirs = []
    for d in [*package_path, os.path.dirname(os.path.abspath(__file__))]:
        if os.path.abspath(d) not in dirs:
            dirs.append(os.path.abspath(d))
    if any(os.path.isfile(os.path.join(d, "_build.py")) for d in dirs):
        return dirs
    for entry in sys.path:
        d = os.path.abspath(os.path.join(entry or os.getcwd(), "slidepipe"))
        if d not in dirs and os.path.isfile(os.path.join(d, "_build.py")):
            dirs.append(d)
    return dirs


def extension_files(package_path=()) -> list[str]:
    files = []
    for d in package_dirs(package_path):
        files += sorted(glob.glob(os.path.join(d, "_core.*.so")))
    return files


def installed_files() -> list[str]:
    """The extension beside this module (or beside its build record, for an editable install)
    and the slidepipe command of this environment or PATH, whichever exist."""
    files = extension_files()
    command = shutil.which("slidepipe", path=os.pathsep.join(
        [os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    if command:
        files.append(os.path.realpath(command))
    return files


def main(argv=None) -> int:
    paths = list(argv if argv is not None else sys.argv[1:]) or installed_files()
    if not paths:
        print("slidepipe doctor: found neither the extension nor the slidepipe command",
              file=sys.stderr)
        return 1
    try:
        rows = check(paths)
    except (OSError, ValueError) as e:
        print(f"slidepipe doctor: {e}", file=sys.stderr)
        return 1
    missing = sorted({soname for _p, soname, found in rows if not found})
    for path in paths:
        print(path)
        for p, soname, found in rows:
            if p == path:
                print(f"  {'ok     ' if found else 'MISSING'} {soname}"
                      + ("" if found else f"  ({debian_hint(soname)})"))
    if missing:
        print(f"slidepipe doctor: missing {', '.join(missing)}", file=sys.stderr)
        return 1
    print("slidepipe doctor: every library is found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
