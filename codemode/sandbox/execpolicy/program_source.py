"""Whether a command name is the program an ``allow`` means.

An ``allow`` for ``pip --version`` means the pip installed on this machine. It does not
hold when the name resolves to a file a command could have written, a ``./bin`` on
``PATH``, a project's ``.venv/bin/pip`` (even a link to the system's: its folder holds
the ``site-packages`` that Python runs at start), nor when the program found is a
toolchain proxy that picks what actually runs from files of the repository (rustup's
``cargo`` and ``rust-toolchain.toml``, yarn's ``yarnPath``, corepack, version-manager
shims: ``toolchain_proxies.toml``). Such a command is then ``prompt``, and says why.

Names are looked up along the ``PATH`` the command gets (``PolicyContext.path``).
Where a program lies outside every writable root is cached (commands cannot change
it); the ``PATH`` entries inside one are looked at each time.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import tomllib
from dataclasses import dataclass
from importlib import resources

from codemode.sandbox.execpolicy.verdicts import PolicyContext


@dataclass(frozen=True)
class _Proxy:
    names: tuple[str, ...]
    why: str
    beside: str | None = None
    always: bool = False
    real_contains: str | None = None
    folder: str | None = None
    real_name: str | None = None


@functools.cache
def _proxies() -> tuple[_Proxy, ...]:
    resource = resources.files("codemode.sandbox.execpolicy").joinpath("toolchain_proxies.toml")
    text = resource.read_text()
    out = []
    for p in tomllib.loads(text)["proxy"]:
        out.append(_Proxy(**{**p, "names": tuple(p["names"])}))
    return tuple(out)


def allow_problem(name: str, ctx: PolicyContext) -> str | None:
    """Why an ``allow`` for the command named ``name`` does not hold here, or None."""
    roots = _real_roots(tuple(str(r) for r in ctx.writable_roots))
    if "/" in name:
        full = os.path.normpath(os.path.join(ctx.cwd, name))
        if _inside(full, roots) or _inside(os.path.realpath(full), roots):
            return f"{name} lies in the writable roots: it is whatever a command wrote there"
        return proxy_reason(os.path.basename(name), full)
    found = resolve(name, ctx.path, str(ctx.cwd), roots)
    if found is None:
        return None  # nothing runs (127)
    path, inside = found
    if inside:
        return (
            f"`{name}` here is {path}, in the writable roots: a program a command could "
            f"have written, not the {name} an allow means"
        )
    return proxy_reason(name, path)


def resolve(
    name: str, search: str | None, cwd: str, roots: tuple[str, ...]
) -> tuple[str, bool] | None:
    """The file ``name`` runs as along ``search``, and whether it lies in ``roots``."""
    entries = tuple((search if search is not None else os.environ.get("PATH", "")).split(":"))
    hit = _outside_hit(name, entries, roots)
    stop = hit[0] if hit is not None else len(entries)
    for i, full in _risky_entries(entries, cwd, roots):
        if i >= stop:
            break
        candidate = os.path.join(full, name)
        if _runnable(candidate):  # looked at each time: a command may have put it there
            return os.path.normpath(candidate), True
    return (hit[1], False) if hit is not None else None


@functools.lru_cache(maxsize=64)
def _real_roots(roots: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(os.path.realpath(r) for r in roots)


@functools.lru_cache(maxsize=256)
def _risky_entries(
    entries: tuple[str, ...], cwd: str, roots: tuple[str, ...]
) -> tuple[tuple[int, str], ...]:
    """The entries (index, folder) that are relative or lie in a root."""
    out = []
    for i, entry in enumerate(entries):
        full = os.path.join(cwd, entry or ".")
        if _risky(entry, full, roots):
            out.append((i, full))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _outside_hit(
    name: str, entries: tuple[str, ...], roots: tuple[str, ...]
) -> tuple[int, str] | None:
    # the first hit among the absolute entries outside the roots (commands cannot change
    # what is there; a program a link there leads into a root counts as inside)
    for i, entry in enumerate(entries):
        if not os.path.isabs(entry) or _risky(entry, entry, roots):
            continue
        candidate = os.path.join(entry, name)
        if _runnable(candidate) and not _inside(os.path.realpath(candidate), roots):
            return i, candidate
    return None


def _risky(entry: str, full: str, roots: tuple[str, ...]) -> bool:
    return not os.path.isabs(entry) or _inside(os.path.realpath(full), roots)


@functools.lru_cache(maxsize=1024)
def proxy_reason(name: str, path: str) -> str | None:
    """Why the program ``name`` found at ``path`` runs what a workspace file names (a
    version manager's shim, a toolchain proxy: ``toolchain_proxies.toml``), or None. (Cached: a
    function of files outside the writable roots, which commands cannot change.)"""
    real = os.path.realpath(path)
    folder = os.path.dirname(path)
    for p in _proxies():
        if not any(fnmatch.fnmatchcase(name, n) for n in p.names):
            continue
        if (
            p.always
            or (p.beside and os.path.exists(os.path.join(folder, p.beside)))
            or (p.beside and os.path.basename(real) == p.beside)
            or (p.real_contains and p.real_contains in real)
            or (p.folder and os.path.basename(folder) == p.folder)
            or (p.real_name and os.path.basename(real) == p.real_name)
        ):
            return f"`{name}` is {p.why}"
    return None


def _inside(p: str, roots: tuple[str, ...]) -> bool:
    return any(p == r or p.startswith(r.rstrip("/") + "/") for r in roots)


def _runnable(p: str) -> bool:
    return os.path.isfile(p) and os.access(p, os.X_OK)
