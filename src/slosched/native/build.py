"""``slosched native build``: compile the hot modules with mypyc into the cache folder for these sources.

The build works on a private copy of the package (mypy writes its cache beside the sources, and an
installed package's folder may not be writable) in a child process (setuptools keeps global state),
then moves the finished folder into place in one rename, so a reader never sees half a build.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from slosched.core.errors import SloschedError
from slosched.native.loader import MANIFEST, cache_root, check_build
from slosched.native.modules import COMPILED_MODULES, GROUP_MODULE, GROUP_NAME
from slosched.native.sources import build_key, dependencies, module_file, package_root

# mypyc type-checks the whole import graph; libraries without stubs are not this build's business.
_MYPY_CONFIG = "[mypy]\npython_version = {version}\nignore_missing_imports = True\nfollow_imports = silent\n"

# Run in the child: setuptools' build_ext over mypycify's extensions, into --build-lib.
_CHILD = """
import json, sys
from mypyc.build import mypycify
from setuptools import setup
args = json.loads(sys.argv[1])
extensions = mypycify(
    ["--config-file", args["config"], *args["paths"]], group_name=args["group"], target_dir=args["c_dir"], opt_level="3"
)
setup(
    name="slosched-native",
    ext_modules=extensions,
    script_args=[
        "-q", "build_ext", "--build-lib", args["lib"], "--build-temp", args["temp"], "--parallel", args["jobs"]
    ],
)
"""


class NativeBuildError(SloschedError):
    """The build could not run or failed; the message says why and where its log is."""


def build(force: bool = False, jobs: int | None = None) -> Path:
    """Compile (unless a usable build for these sources exists) and return the build's folder."""
    status, _ = check_build()
    if status.active and not force:
        return status.directory
    _require_toolchain()
    with tempfile.TemporaryDirectory(prefix="slosched-native-") as scratch_name:
        scratch = Path(scratch_name)
        sources = scratch / "src"
        shutil.copytree(
            package_root() / "slosched",
            sources / "slosched",
            ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", ".mypy_cache"),
        )
        key = build_key(sources)
        staged = scratch / "out"
        _compile(sources, scratch, staged / "lib", jobs or os.cpu_count() or 1)
        files = _collect(staged / "lib")
        manifest = {"key": key, "python": sys.version, "files": files, "depends": dependencies(sources)}
        (staged / "lib" / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        target = cache_root() / key
        target.parent.mkdir(parents=True, exist_ok=True)
        # Finished beside its final place (a rename cannot cross file systems, and /tmp often is another).
        partial = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=target.parent))
        shutil.copytree(staged / "lib", partial, dirs_exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        os.replace(partial, target)
    return target


def _require_toolchain() -> None:
    missing = [name for name in ("mypyc", "setuptools") if importlib.util.find_spec(name) is None]
    if missing:
        raise NativeBuildError(f"needs {' and '.join(missing)}: pip install 'slosched[native]' (mypy ships mypyc)")


def _compile(sources: Path, scratch: Path, lib: Path, jobs: int) -> None:
    config = scratch / "mypy.ini"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    config.write_text(_MYPY_CONFIG.format(version=version))
    paths = []
    for module in COMPILED_MODULES:
        path = module_file(sources, module)
        assert path is not None, module  # build_key already found every source
        paths.append(path.relative_to(sources).as_posix())
    args = {
        "config": str(config),
        "paths": paths,
        "group": GROUP_NAME,
        "c_dir": str(scratch / "c"),
        "lib": str(lib),
        "temp": str(scratch / "temp"),
        "jobs": str(jobs),
    }
    log = cache_root() / "last-build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as log_file:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(args)],
            cwd=sources,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0:
        tail = log.read_text().strip().splitlines()[-1:] or ["(no output)"]
        raise NativeBuildError(f"mypyc build failed ({tail[0]}); full log: {log}")


def _collect(lib: Path) -> dict[str, str]:
    """Module name -> extension file relative to the build folder, for every compiled name."""
    files: dict[str, str] = {}
    for path in lib.rglob("*"):
        suffix = next((s for s in importlib.machinery.EXTENSION_SUFFIXES if path.name.endswith(s)), None)
        if suffix is None:
            continue
        relative = path.relative_to(lib)
        name = ".".join((*relative.parts[:-1], relative.name[: -len(suffix)]))
        files[name] = relative.as_posix()
    missing = sorted({*COMPILED_MODULES, GROUP_MODULE} - files.keys())
    if missing:
        raise NativeBuildError(f"the build made no extension for {', '.join(missing)}")
    return files
