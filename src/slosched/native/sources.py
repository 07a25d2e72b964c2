"""What a compiled build depends on: the compiled modules' sources (its key) and every slosched module they
import, directly or not (checked before the build is used).

The key names the cache folder, so an edit to a compiled module simply finds no build. The dependencies
matter too: mypyc compiles attribute reads of, say, ``Request.prompt_tokens`` with the type its source
declares, so a changed ``core/request.py`` must retire the build just as surely. Imports under
``TYPE_CHECKING`` count: mypyc used their types.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import sys
from pathlib import Path

from slosched.native.modules import COMPILED_MODULES

PACKAGE = "slosched"
# The loader itself (imported by ``slosched/__init__.py``): nothing compiled uses its types, and tracking it
# would retire the build at every edit of the loader.
_LOADER = "slosched.native"


def package_root() -> Path:
    """The folder that holds the ``slosched`` package (``src`` in a checkout)."""
    return Path(__file__).resolve().parent.parent.parent


def module_file(root: Path, module: str) -> Path | None:
    """The source file of ``module`` under ``root`` (a package's ``__init__.py``), or None."""
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def build_key(root: Path) -> str:
    """Digest of the interpreter's ABI and every compiled module's source, in a fixed order."""
    digest = hashlib.sha256()
    digest.update(f"{sys.implementation.cache_tag} {importlib.machinery.EXTENSION_SUFFIXES[0]}".encode())
    for module in COMPILED_MODULES:
        path = module_file(root, module)
        if path is None:
            raise FileNotFoundError(f"compiled module {module} has no source under {root}")
        digest.update(module.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:24]


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def dependencies(root: Path) -> dict[str, str]:
    """Every slosched source the compiled modules import (transitively, packages' ``__init__`` included)
    and not compiled themselves, the loader (``slosched.native``) left out: relative path -> sha256."""
    compiled = set(COMPILED_MODULES)
    seen: set[str] = set()
    pending = list(COMPILED_MODULES)
    while pending:
        module = pending.pop()
        if module in seen or module.startswith(_LOADER):
            continue
        seen.add(module)
        path = module_file(root, module)
        if path is None:
            continue
        for imported in _imports(path, module, root, function_bodies=module in compiled):
            if imported not in seen:
                pending.append(imported)
    files = {}
    for module in sorted(seen - compiled):
        path = module_file(root, module)
        if path is not None:
            files[path.relative_to(root).as_posix()] = file_digest(path)
    return files


def _imports(path: Path, module: str, root: Path, function_bodies: bool = True) -> set[str]:
    """slosched modules named by ``path``'s imports, with their parent packages.

    ``function_bodies=False`` (a dependency, not a compiled module) skips imports inside functions: mypyc
    reads a dependency's module-level names, classes and signatures, never what its functions import when
    they run (``slosched/__init__.py`` imports the SDK lazily, and an SDK edit must not retire the build)."""
    is_package = path.name == "__init__.py"
    package_parts = module.split(".") if is_package else module.split(".")[:-1]
    names: set[str] = set()
    tree = ast.parse(path.read_bytes(), filename=str(path))
    for node in ast.walk(tree) if function_bodies else _outside_functions(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package_parts[: len(package_parts) - node.level + 1]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            # ``from slosched.sim import kv`` imports a module, not a name.
            names.update(f"{base}.{alias.name}" for alias in node.names if module_file(root, f"{base}.{alias.name}"))
    found: set[str] = set()
    for name in names:
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            continue
        parts = name.split(".")
        found.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return found


def _outside_functions(tree: ast.Module) -> list[ast.AST]:
    """Every node of ``tree`` but those inside a function (a class body and an ``if TYPE_CHECKING:`` block
    count: they run, or are read by mypy, with the module)."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        found.append(node)
        pending.extend(
            child
            for child in ast.iter_child_nodes(node)
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        )
    return found
