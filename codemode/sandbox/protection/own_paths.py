"""What codemode runs or reads as its own, and how a writable root is kept off it.

Two kinds, both read or run later on the host with the user's full authority:

- its **state**: ``$CODEMODE_HOME`` (config, rules, hooks, sessions, logs) and its cache
  (``$CODEMODE_CACHE``: the compiled helpers root's commands start through, models),
  plus the user's git configuration (``~/.gitconfig``, ``$XDG_CONFIG_HOME/git``), which
  git on the host reads, and its runtime folder (the warm server's socket);
- its **installation**: the ``codemode`` package, the environment it runs from
  (``sys.prefix``, and the base one), the user site when this Python reads it, and the
  folder of its console scripts.

A writable root that lies inside one of them (a workspace that *is* the home, the
package or the environment) is refused. One that contains them keeps them read-only:
with bubblewrap each is bound read-only and every folder between the root and it is
bound onto itself, so no command can rename a parent aside and put a folder of its own
in its place (``~/.cache`` moved away, a new ``~/.cache/codemode/helpers``); Landlock
cannot make part of a root read-only, so there such a root is refused. A dotfile that is
a symlink is protected as the link (checked after each command, ``git_guard``) and as
its target. The file tools refuse all of them wherever they are (``paths``).

What the user's *other* programs run or trust in a root that contains the home (its
dot-entries, the PATH folders in it, the folders the environment names: ``user_trust``)
is kept the same way, except that a root inside one of them is no refusal (a workspace
in ``~/.config/nvim`` is the user editing that). So are the workspace files trusted
hooks run (``hook_files``), except under Landlock, where they are not kept rather than
their root refused.
"""

from __future__ import annotations

import contextlib
import functools
import os
import site
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from codemode.locations.user_dirs import cache_home, codemode_home, config_home, home
from codemode.sandbox.protection import hook_files, user_trust


@dataclass(frozen=True)
class OwnPath:
    path: Path  # as codemode names it (a dotfile may be a symlink)
    what: str  # what it is, for refusals: "codemode's home (config, rules, sessions)"
    state: bool  # state (made before the first command when missing) or installation
    # the path as named and where its symlinks lead, both protected (looked up once)
    forms: tuple[Path, ...] = ()
    # a root inside it is allowed (the user's other programs' settings, ``user_trust``)
    inside_ok: bool = False
    # under Landlock (which cannot keep it) its root is allowed, the path not kept
    # (a trusted hook's file: ``hook_files``)
    landlock_ok: bool = False

    @classmethod
    def of(cls, path: Path, what: str, state: bool, inside_ok: bool = False,
           landlock_ok: bool = False) -> OwnPath:
        named = Path(os.path.abspath(path))
        forms = tuple(dict.fromkeys([named, Path(os.path.realpath(named))]))
        return cls(named, what, state, forms, inside_ok, landlock_ok)


def own_paths() -> tuple[OwnPath, ...]:
    """Everything codemode runs or reads as its own (see the module docstring)."""
    env = os.environ
    names = ("HOME", "CODEMODE_HOME", "CODEMODE_CACHE", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
             "XDG_RUNTIME_DIR")  # fmt: skip
    return _own_paths(tuple(env.get(n) for n in names))


@functools.lru_cache(maxsize=8)
def _own_paths(_env: tuple[str | None, ...]) -> tuple[OwnPath, ...]:
    # A function of the variables it is keyed by (looked at for every command).
    out = [
        OwnPath.of(codemode_home(), "codemode's home (config, rules, hooks, sessions)", True),
        OwnPath.of(cache_home(), "codemode's cache (the helpers it runs, models)", True),
        OwnPath.of(home() / ".gitconfig", "your git configuration", False),
        OwnPath.of(config_home() / "git", "your git configuration", False),
    ]
    # The folders the warm server's socket may live in, as ``warm.place.runtime_folder``
    # chooses them (a test keeps the two the same): a command that could replace that
    # socket would be handed the next caller's stdio (a command's, a Codex session's).
    what = "codemode's runtime folder (the warm server's socket)"
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        out.append(OwnPath.of(Path(runtime) / "codemode", what, False))
    out.append(OwnPath.of(Path("/tmp") / f"codemode-{os.geteuid()}", what, False))
    return tuple(out) + _installation()


def kept_paths(roots: Sequence[Path]) -> tuple[OwnPath, ...]:
    """``own_paths``, what the user's other programs trust in ``roots``
    (``user_trust``) and the files trusted hooks run (``hook_files``): everything kept
    off those roots."""
    trusted = user_trust.trusted(roots)
    hooks = hook_files.held()
    if not trusted and not hooks:
        return own_paths()
    return (
        own_paths()
        + tuple(OwnPath.of(p, what, False, True) for p, what in trusted)
        + tuple(OwnPath.of(p, hook_files.WHAT, False, True, True) for p in hooks)
    )


@functools.cache
def _installation() -> tuple[OwnPath, ...]:
    package = Path(__file__).resolve().parents[2]  # codemode/ (codemode/sandbox/protection/)
    found = [OwnPath.of(package, "codemode's own package", False)]
    prefixes = dict.fromkeys([sys.prefix, sys.exec_prefix, sys.base_prefix])
    found += [
        OwnPath.of(Path(p), "the Python environment codemode runs from", False) for p in prefixes
    ]
    if site.ENABLE_USER_SITE and sys.flags.no_user_site == 0:
        user_site = site.getusersitepackages()
        found.append(OwnPath.of(Path(user_site), "the user site this Python reads", False))
    scripts = sysconfig.get_path("scripts")
    if scripts:
        found.append(OwnPath.of(Path(scripts), "codemode's console scripts", False))
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.is_absolute() and argv0.name in ("interpreter", "i"):
        found.append(OwnPath.of(argv0.parent, "codemode's console scripts", False))
    return tuple(found)


def _inside(p: Path, root: Path) -> bool:
    return p == root or p.is_relative_to(root)


def root_refusal(root: Path, backend: str) -> str | None:
    """Why ``root`` (a resolved writable root) cannot be one, or None."""
    for own in kept_paths([root]):
        for p in own.forms:
            if _inside(root, p) and not own.inside_ok:
                return (
                    f"the writable root {root} is inside {own.what} ({own.path}): commands "
                    "there could change what codemode runs or reads next time, on the host. "
                    "Run codemode in another folder."
                )
            # (state folders count when absent too: codemode makes them)
            there = os.path.lexists(p) or own.state
            if (backend == "landlock" and p != root and _inside(p, root) and there
                    and not own.landlock_ok):
                return (
                    f"the writable root {root} contains {own.what} ({p}), which Landlock "
                    "cannot keep read-only inside it. Install bubblewrap (which binds it "
                    "read-only), or run codemode in a folder that does not contain it."
                )
    return None


def file_refusal(real: Path, lexical: Path, roots: Sequence[Path] = ()) -> str | None:
    """Why the file tools may not write ``real`` (reached as ``lexical``) in ``roots``,
    or None."""
    for own in kept_paths(roots):
        for p in own.forms:
            if _inside(real, p) or _inside(lexical, p):
                return (
                    f"{p} is read-only ({own.what}: codemode, git or another program reads or "
                    "runs it on the host)"
                )
    for form in dict.fromkeys([lexical, real]):
        what = user_trust.write_refusal(form, roots) if roots else None
        if what is not None:
            return f"{form} is read-only ({what}: another program reads or runs it on the host)"
    return None


def inside_roots(roots: Sequence[Path]) -> list[tuple[Path, Path]]:
    """(root, own path) for each own path (as named or its target) inside a root."""
    return list(_inside_roots(tuple(roots), kept_paths(roots)))


@functools.lru_cache(maxsize=32)
def _inside_roots(
    roots: tuple[Path, ...], owns: tuple[OwnPath, ...]
) -> tuple[tuple[Path, Path], ...]:
    # Lexical only, so a function of its arguments: asked before every command.
    out: list[tuple[Path, Path]] = []
    for root in roots:
        for own in owns:
            for p in own.forms:
                if p != root and _inside(p, root):
                    out.append((root, p))
    return tuple(out)


def make_state_dirs(roots: Sequence[Path]) -> None:
    """Create codemode's state folders that a root contains but do not exist yet, so
    that they are protected (bound read-only) from the first command instead of
    created, with contents of its choosing, by one."""
    from codemode.hostfs.writer import writer_at
    from codemode.tool_terms.errors import ToolError

    for own in own_paths():
        if own.state and not os.path.lexists(own.path):
            inside = [r for r in roots if _inside(own.path, r) and own.path != r]
            if inside:
                # From the root's descriptor, no link followed: an earlier session's
                # command may have made a folder on the way (``~/.cache``) a link.
                with contextlib.suppress(OSError, ToolError):
                    # (if not made, checked after each command like a missing dotfile)
                    writer, rel = writer_at(own.path, inside)
                    writer.mkdir(rel, 0o700, make_parents=True)


def pin_and_protect(roots: Sequence[Path]) -> tuple[list[str], list[str]]:
    """bubblewrap options: the folders between each root and the own paths inside it,
    bound onto themselves (so none can be renamed or removed), and the own paths
    themselves, bound read-only. The pins go before any other bind of the root, the
    read-only binds after every other one (nothing bound later may reopen them)."""
    pins: dict[Path, None] = {}
    protect: dict[Path, None] = {}
    for root, p in inside_roots(roots):
        if not os.path.exists(p):
            continue
        rel = p.relative_to(root).parts
        for i in range(1, len(rel)):
            d = root.joinpath(*rel[:i])
            if not os.path.islink(d):
                pins[d] = None
        protect[Path(os.path.realpath(p))] = None
    pin_opts: list[str] = []
    for d in sorted(pins, key=lambda q: len(q.parts)):
        pin_opts += ["--bind", str(d), str(d)]
    ro: list[str] = []
    for p in sorted(protect, key=lambda q: len(q.parts)):
        ro += ["--ro-bind", str(p), str(p)]
    return pin_opts, ro


def links(roots: Iterable[Path]) -> list[Path]:
    """Own paths inside a root that are symlinks or absent (a dotfile that points
    elsewhere, a ``~/.gitconfig`` not made yet): a mount cannot hold them, so they are
    compared after each command and put back."""
    out = []
    roots = list(roots)
    kept = kept_paths(roots)
    for root in roots:
        for p in _named_inside(root, kept):
            if os.path.islink(p) or not os.path.lexists(p):
                out.append(p)
    return out


@functools.lru_cache(maxsize=32)
def _named_inside(root: Path, owns: tuple[OwnPath, ...]) -> tuple[Path, ...]:
    # Lexical only (the links are looked at by the caller, each time).
    return tuple(own.path for own in owns if own.path != root and _inside(own.path, root))
