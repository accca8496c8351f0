"""Why the compiled extension slidepipe._core did not import, in words a user can act on.

The extension is built for one CPython (one ABI tag, e.g. cpython-311-x86_64-linux-gnu) and links
Debian's shared libraries (libjpeg, OpenJPEG, libcurl, ...). Without this check, Python reports a
missing or foreign build as "cannot import name '_core' from partially initialized module
'slidepipe' (most likely due to a circular import)", and a missing library as a bare loader line.
`explain` turns the original ImportError into one that names the running interpreter, the ABI the
extension was built for and, for a missing library, the library and the Debian package that holds
it (python -m slidepipe.doctor checks them all). It imports nothing of the package but _build and doctor.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig

from . import doctor


def running_abi() -> str:
    """The ABI tag this interpreter loads extensions for, e.g. cpython-311-x86_64-linux-gnu."""
    return sysconfig.get_config_var("SOABI") or sys.implementation.cache_tag


def _interpreter() -> str:
    v = sys.version_info
    return (f"{sys.implementation.name} {v.major}.{v.minor}.{v.micro} ({running_abi()}) "
            f"at {sys.executable}")


def built_abis(package_path) -> list[str]:
    """The ABI tags of the _core extension files present beside the package, from their names
    (_core.<tag>.so); 'abi3' for a stable-ABI build."""
    tags = []
    for d in doctor.package_dirs(package_path):
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            m = re.fullmatch(r"_core\.(.+)\.(so|pyd)", name)
            if m and m.group(1) not in tags:
                tags.append(m.group(1))
    return tags


def _recorded_abi() -> str | None:
    try:
        from . import _build
    except ImportError:
        return None
    return f"{_build.SOABI} (Python {_build.PYTHON_VERSION})"


def explain(error: ImportError, package_path) -> ImportError:
    """An ImportError saying why slidepipe._core did not load, chained to `error` by the caller."""
    first = doctor.missing_from_message(str(error))
    if first:
        missing = [first]
        try:
            rows = doctor.check(doctor.extension_files(package_path))
            missing += [so for _f, so, found in rows if not found and so not in missing]
        except (OSError, ValueError):
            pass
        named = "; ".join(f"{so} ({doctor.debian_hint(so)})" for so in missing)
        return ImportError(
            f"slidepipe: the compiled extension needs shared libraries this machine lacks: "
            f"{named}. `python {doctor.__file__}` lists every library it needs. "
            f"Interpreter: {_interpreter()}. Original error: {error}")
    tags = built_abis(package_path)
    here = running_abi()
    if tags and here not in tags and "abi3" not in tags:
        return ImportError(
            f"slidepipe: this package's extension was built for {', '.join(tags)}, but the "
            f"running interpreter is {_interpreter()}; reinstall it with this interpreter "
            f"({sys.executable} -m pip install <slidepipe source folder>) or run the "
            f"interpreter it was built for.")
    if not tags:
        recorded = _recorded_abi()
        built = f"it was built for {recorded}" if recorded else "no build record either"
        return ImportError(
            f"slidepipe: no compiled extension (_core) beside the package in "
            f"{', '.join(doctor.package_dirs(package_path))} ({built}); the running interpreter is "
            f"{_interpreter()}. Build and install it: {sys.executable} -m pip install "
            f"<slidepipe source folder> (or `make`, which puts the package in build/python).")
    return ImportError(
        f"slidepipe: the extension built for {', '.join(tags)} did not load under "
        f"{_interpreter()}: {error}")
