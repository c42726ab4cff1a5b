"""Where corpus files come from: the Python standard library, Debian packages, plain directories.

A *source* yields candidate files as (source name, root, path relative to root). The relative
path is what the manifest records and what the held-out split hashes, so a stdlib file has
the same key (`json/decoder.py`) in every corpus built from it, the default model's
included, and the acceptance report's held-out prompts (scripts/acceptance_report.py) stay
held out.

Debian packages are read through `dpkg -L`, so a package contributes exactly the files it
ships, whatever else is installed beside it. Only files under /usr/lib/python3/dist-packages
count (where bookworm puts every python3-* module).
"""
import os
import subprocess
from typing import Dict, Iterator, List, Tuple

DIST_PACKAGES = "/usr/lib/python3/dist-packages"

# Directory names never descended into. Tests are excluded because they are repetitive
# fixtures and assertions; vendored trees because they are (possibly modified) copies of other
# projects that would otherwise appear twice and could leak held-out files into training.
EXCLUDED_DIRS = frozenset({
    "test", "tests", "testing", "idle_test", "__pycache__", "site-packages", "dist-packages",
    "_vendor", "vendor", "vendored", "_vendored", "extern", "externals", "_distutils",
    "third_party",
})

Candidate = Tuple[str, str, str]  # (source, root, relative path)


def excluded(rel: str) -> bool:
    """True when any directory component of `rel` is an excluded directory name."""
    return any(part in EXCLUDED_DIRS for part in rel.split("/")[:-1])


def walk_tree(source: str, root: str) -> Iterator[Candidate]:
    """*.py files under root (sorted), skipping excluded directories and symlinks."""
    if not os.path.isdir(root):
        raise SystemExit(f"corpus source {source!r}: {root} is not a directory")
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED_DIRS)
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            if fn.endswith(".py") and not os.path.islink(full):
                yield source, root, os.path.relpath(full, root)


def _dpkg(args: List[str]) -> str:
    try:
        r = subprocess.run(["dpkg-query"] + args, capture_output=True, text=True)
    except FileNotFoundError:
        raise SystemExit("dpkg-query not found: Debian packages as corpus sources need a "
                         "Debian system (or pass --packages none)")
    if r.returncode != 0:
        return ""
    return r.stdout


def package_files(pkg: str) -> Iterator[Candidate]:
    """The *.py files a Debian package installed under DIST_PACKAGES, sorted."""
    listing = _dpkg(["-L", pkg])
    if not listing:
        raise SystemExit(f"Debian package {pkg} is not installed: run scripts/build_corpus.sh "
                         f"(it apt-get installs the corpus packages) or apt-get install {pkg}")
    prefix = DIST_PACKAGES + "/"
    rels = []
    for path in listing.splitlines():
        if path.startswith(prefix) and path.endswith(".py") and os.path.isfile(path) \
                and not os.path.islink(path):
            rel = path[len(prefix):]
            if not excluded(rel):
                rels.append(rel)
    for rel in sorted(set(rels)):
        yield pkg, DIST_PACKAGES, rel


def package_version(pkg: str) -> str:
    return _dpkg(["-W", "-f", "${Version}", pkg]).strip() or "unknown"


def stdlib_packages(stdlib_root: str) -> List[str]:
    """Debian packages that make up the walked stdlib tree (for the version record)."""
    name = os.path.basename(os.path.normpath(stdlib_root))  # e.g. python3.11
    return [f"lib{name}-minimal", f"lib{name}-stdlib", "python3-distutils", "python3-lib2to3",
            f"{name}-venv", "python3-tk"]


def read_package_list(path: str) -> List[str]:
    """One Debian package per line; '#' starts a comment."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line)
    return out


def versions(names: List[str]) -> Dict[str, str]:
    return {n: package_version(n) for n in names}
