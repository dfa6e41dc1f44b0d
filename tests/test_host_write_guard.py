"""Every write codemode's own process makes into a workspace, repository or copy goes
through the one host-side writer (``codemode/hostfs/writer.py`` on top of
``codemode/hostfs/beneath.py``: no link followed, random temporary names created
exclusively, modes set on the descriptor). This test reads ``codemode/`` as syntax trees
and fails on any write-family call elsewhere — ``open`` for writing, ``os.open`` with a
writing flag, ``chmod``, ``rename``, ``replace``, ``unlink``, ``remove``, ``mkdir``,
``rmdir``, ``symlink``, ``link``, ``write_text``/``write_bytes``, ``touch`` and every
``shutil`` copy, move or removal — unless ``ALLOWED`` below names it with the reason it
is not a write into a place a program could shape.

Calls on a ``Writer`` (a receiver named ``writer`` or ``*.writer``) are the writer's own
API and pass. An entry is (module, enclosing function, call); one entry covers every
such call in that function, so a function on the list gains no new kind of write
unnoticed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "codemode"

# The writer itself: the only modules where these calls are the point.
WRITER_MODULES = {"hostfs/beneath.py", "hostfs/writer.py"}

_OS_WRITES = {
    "chmod", "lchmod", "fchmod", "chown", "lchown", "fchown", "rename", "renames", "replace",
    "unlink", "remove", "rmdir", "removedirs", "mkdir", "makedirs", "symlink", "link",
    "truncate", "mkfifo", "mknod",
}  # fmt: skip
_SHUTIL_WRITES = {
    "copy", "copy2", "copyfile", "copyfileobj", "copymode", "copystat", "copytree", "move",
    "rmtree", "chown", "unpack_archive", "make_archive",
}  # fmt: skip
# Path methods; "rename"/"replace" count with exactly one positional argument (str's
# take two), and never as dataclasses.replace.
_METHODS = {
    "write_text", "write_bytes", "chmod", "lchmod", "unlink", "rmdir", "mkdir",
    "symlink_to", "hardlink_to", "touch", "rename", "replace",
}  # fmt: skip
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")

# (module below codemode/, enclosing function, call) -> why it is not a write into a
# place a program could shape. Keep each reason true when the code changes.
_OWN_HOME = "codemode's own home (CODEMODE_HOME), never a writable root of a program"
_OWN_CACHE = (
    "codemode's own cache (helpers/): bound read-only to commands, its folders above pinned "
    "(own_paths), and a helper is checked against its recorded digest before it runs"
)
_RUNTIME = (
    "codemode's private runtime folder ($XDG_RUNTIME_DIR/codemode or /tmp/codemode-UID, "
    "0700, checked by warm.place.private), never a writable root"
)
_CODEX_INSTALL = (
    "Codex's install folder the user named (a copy beside it, made with a private "
    "mkdtemp), not a workspace: no confined command writes there (one in a writable "
    "root is refused: beside._refusal)"
)
_IN_SANDBOX = (
    "runs inside the sandbox, in the confined command server (same user, mounts and "
    "filter as its commands): no authority a command lacks"
)
_PRIVATE_TMP = (
    "a private folder this process just made (mkdtemp, 0700), before any program ran in it"
)
ALLOWED: dict[tuple[str, str, str], str] = {
    # --- the Codex host (codemode/codex_host): not a workspace ----------------------------
    ("codex_host/warm/beside.py", "vendor_with_our_host", ".mkdir"): _CODEX_INSTALL,
    ("codex_host/warm/beside.py", "vendor_with_our_host", "shutil.copytree"): _CODEX_INSTALL,
    ("codex_host/warm/beside.py", "vendor_with_our_host", "os.link"): _CODEX_INSTALL
    + " (copytree's copy_function: hard links into the new private copy)",
    ("codex_host/warm/beside.py", "vendor_with_our_host", "shutil.rmtree"): _CODEX_INSTALL,
    ("codex_host/warm/beside.py", "vendor_with_our_host", ".rename"): _CODEX_INSTALL,
    ("codex_host/warm/beside.py", "vendor_with_our_host", ".unlink"): _CODEX_INSTALL,
    ("codex_host/warm/beside.py", "_put", "os.fchmod"): _CODEX_INSTALL
    + " (the mode set on the descriptor of a new mkstemp file)",
    ("codex_host/warm/beside.py", "_put", "os.replace"): _CODEX_INSTALL,
    ("codex_host/warm/beside.py", "_put", "os.unlink"): _CODEX_INSTALL
    + " (its own mkstemp file, after a failed write)",
    # --- the sandbox: codemode's own state, or writes made inside the sandbox ----------------
    ("sandbox/execpolicy/rules_file.py", "_append_line", ".mkdir"): _OWN_HOME
    + " (rules/default.rules, or the rules file the embedder named)",
    ("sandbox/execpolicy/rules_file.py", "_append_line", ".open"): _OWN_HOME
    + " (rules/default.rules, or the rules file the embedder named)",
    ("hooks/confined.py", "run_confined", "os.unlink"): "the hook's input file this "
    "process made with mkstemp in the sandbox's scratch folder (a confined command may "
    "have renamed another over it: unlink removes that entry, following no link, in a "
    "folder commands may write anyway)",
    ("hooks/script_folders.py", "pycache_prefix", ".mkdir"): _OWN_CACHE
    + " (hook-pycache, where hooks' Pythons keep byte code)",
    ("sandbox/helpers/compiled.py", "_build", ".write_bytes"): _OWN_CACHE,
    ("sandbox/helpers/compiled.py", "_build", ".chmod"): _OWN_CACHE,
    ("sandbox/helpers/compiled.py", "_build", "os.replace"): _OWN_CACHE,
    ("sandbox/helpers/compiled.py", "_remove_older_formats", "os.unlink"): _OWN_CACHE,
    ("sandbox/helpers/compiled.py", "path", ".mkdir"): _OWN_CACHE + " (made 0700)",
    ("sandbox/server/tidy.py", "remove_all", "os.unlink"): _IN_SANDBOX
    + " (/dev/shm of the sandbox)",
    ("sandbox/server/tidy.py", "remove_all", "os.rmdir"): _IN_SANDBOX,
    ("sandbox/server/tidy.py", "remove_all", "os.chmod"): _IN_SANDBOX,
    ("sandbox/server/tidy.py", "tidy", "os.chmod"): _IN_SANDBOX
    + " (/dev/shm of the sandbox)",
    ("sandbox/server/process_tree.py", "_write", "os.open"): "/proc/self/uid_map, gid_map and "
    "setgroups of the child being confined (between fork and exec), not files",
    # --- codemode's own files, in its own home or a folder it made for itself --------------
    ("agent/rollout.py", "Rollout._open", ".mkdir"): _OWN_HOME + " (sessions/)",
    ("agent/rollout.py", "Rollout._open", ".open"): _OWN_HOME + " (a new session file, 'x')",
    ("agent/rollout.py", "Rollout.append_to", ".open"): _OWN_HOME + " (a resumed session)",
    ("terminal/crash.py", "record_crash", ".mkdir"): _OWN_HOME + " (logs/), else the temp folder",
    ("terminal/crash.py", "record_crash", "os.open"): "a new crash file, O_EXCL | O_NOFOLLOW",
    ("eval/command.py", "write_choice", ".mkdir"): _OWN_HOME + " (config.toml)",
    ("eval/command.py", "write_choice", ".write_text"): _OWN_HOME + " (config.toml)",
    ("eval/command.py", "write_choice", ".replace"): _OWN_HOME + " (config.toml)",
    ("eval/report.py", "save_report", ".mkdir"): _OWN_HOME + " (eval/), or a path the user named",
    ("eval/report.py", "save_report", ".write_text"): _OWN_HOME + ", or a path the user named",
    ("eval/report.py", "save_report", "os.replace"): _OWN_HOME + ", or a path the user named",
    ("eval/runner.py", "run_task", ".mkdir"): _PRIVATE_TMP + " (the task's workspace)",
    ("batch/run_record.py", "record_selection", ".mkdir"): _OWN_HOME + " (batch/runs/)",
    ("batch/run_record.py", "record_selection", "os.open"): _OWN_HOME
    + " (batch/runs/RUN_ID.json, a new file)",
    ("locations/written_roots.py", "record", ".mkdir"): _OWN_HOME + " (writable-roots)",
    ("locations/written_roots.py", "_open_locked", "os.open"): _OWN_HOME + " (writable-roots)",
    ("locations/written_roots.py", "_compact", ".write_bytes"): _OWN_HOME + " (writable-roots)",
    ("locations/written_roots.py", "_compact", "os.chmod"): _OWN_HOME + " (writable-roots)",
    ("locations/written_roots.py", "_compact", "os.replace"): _OWN_HOME + " (writable-roots)",
    ("warm/place.py", "runtime_folder", "os.mkdir"): _RUNTIME,
    ("warm/place.py", "serving", "os.open"): _RUNTIME + " (the server's lock, read-only probe)",
    ("warm/place.py", "listen_at", "os.unlink"): _RUNTIME + " (a dead server's socket)",
    ("warm/server.py", "Server._stop_listening", "os.unlink"): _RUNTIME + " (its socket)",
    ("warm/start.py", "leave_server", "os.open"): _RUNTIME + " (the server's log)",
    ("warm/start.py", "serve", "os.open"): _RUNTIME + " (the server's lock)",
    ("hooks/trust.py", "TrustStore._save", ".mkdir"): _OWN_HOME + " (the hook trust store)",
    ("hooks/trust.py", "TrustStore._save", "os.replace"): _OWN_HOME + " (the hook trust store)",
    ("hooks/trust.py", "TrustStore._save", ".unlink"): _OWN_HOME + " (its temporary file)",
    ("mcp/connection.py", "ServerConnection._transport", ".mkdir"): _OWN_HOME + " (logs/)",
    ("mcp/connection.py", "ServerConnection._transport", ".open"): _OWN_HOME + " (logs/)",
    ("tools/declarations_cache.py", "_store", ".mkdir"): _OWN_HOME + " (cache/)",
    ("tools/declarations_cache.py", "_store", ".write_text"): _OWN_HOME + " (cache/)",
    ("tools/declarations_cache.py", "_store", "os.replace"): _OWN_HOME + " (cache/)",
    ("tools/declarations_cache.py", "_store", ".unlink"): _OWN_HOME + " (cache/)",
    ("tools/store/journal.py", "Recording.close", "os.unlink"): _OWN_HOME + " (journal/)",
    ("tools/store/journal.py", "open_dir", ".mkdir"): _OWN_HOME + " (journal/, 0700)",
    ("tools/store/journal.py", "_new_file", "os.open"): _OWN_HOME
    + " (journal/: O_TMPFILE, else O_EXCL)",
    ("tools/store/journal.py", "_name_it", "os.link"): _OWN_HOME
    + " (journal/: the unnamed file, whole and locked)",
    ("tools/store/journal.py", "begin", "os.rename"): _OWN_HOME + " (journal/)",
    ("tools/store/journal.py", "begin", "os.unlink"): _OWN_HOME + " (journal/)",
    ("tools/store/journal.py", "recover", "os.unlink"): _OWN_HOME + " (journal/)",
    ("tools/store/forget.py", "forget", "os.unlink"): _OWN_HOME + " (journal/)",
    ("tools/store/publish_marker.py", "begin", "os.open"): _OWN_HOME
    + " (journal/: the marker's temporary file, named for this process, O_NOFOLLOW)",
    ("tools/store/publish_marker.py", "begin", "os.replace"): _OWN_HOME + " (journal/)",
    ("tools/store/publish_marker.py", "end", "os.unlink"): _OWN_HOME + " (journal/)",
    ("tools/store/journal.py", "_recover_one", "os.rename"): _OWN_HOME + " (journal/)",
    ("tools/store/journal.py", "_recover_one", "os.unlink"): _OWN_HOME + " (journal/)",
    ("tui/input.py", "TerminalReader.__init__", ".mkdir"): _OWN_HOME + " (the input history)",
    ("tui/snapshots.py", "Snapshots._hash_and_store", ".write_bytes"): _PRIVATE_TMP
    + " (/undo's content store; the workspace is written through beneath)",
    ("tui/snapshots.py", "Snapshots.close", "shutil.rmtree"): _PRIVATE_TMP + " (the store)",
    ("tui/wizard.py", "write_provider_choice", ".mkdir"): _OWN_HOME + " (config.toml)",
    ("tui/wizard.py", "write_provider_choice", ".write_text"): _OWN_HOME + " (config.toml)",
    ("tui/wizard.py", "write_provider_choice", ".replace"): _OWN_HOME + " (config.toml)",
    # --- descriptors, not files ---------------------------------------------------------
    ("acp/stdio.py", "stdio_streams", "open"): "descriptor 1 (stdout), closefd=False",
    ("cli/__init__.py", "_quiet_stdout", "os.open"): "os.devnull",
    # --- batch: the copies a script runs in, and the report ------------------------------
    ("batch/report.py", "ReportWriter.__enter__", ".mkdir"): "the --report path the user named",
    (
        "batch/report.py",
        "ReportWriter.__enter__",
        "os.open",
    ): "the --report path the user named, opened before any repository runs, O_NOFOLLOW",
    (
        "batch/report.py",
        "ReportWriter.discard_if_empty",
        ".unlink",
    ): "the report this run created (a run that never started)",
    ("batch/shipping.py", "unpack", ".mkdir"): "a Ray worker's private temporary folder",
    ("batch/workcopy.py", "make_copy", "os.makedirs"): _PRIVATE_TMP,
    ("batch/workcopy.py", "make_copy", "os.mkdir"): _PRIVATE_TMP,
    ("batch/workcopy.py", "_copy_entry", "os.symlink"): _PRIVATE_TMP,
    ("batch/workcopy.py", "_copy_entry", "os.mkdir"): _PRIVATE_TMP,
    ("batch/workcopy.py", "_copy_file", "os.open"): _PRIVATE_TMP + " (O_EXCL)",
    ("batch/workcopy.py", "_copy_file", "os.fchmod"): _PRIVATE_TMP + " (on the descriptor)",
    ("batch/workcopy.py", "_copy_stat", "os.chmod"): _PRIVATE_TMP + " (its own folders)",
    ("batch/workcopy.py", "_copy_git_dir", "os.mkdir"): _PRIVATE_TMP,
    ("batch/workcopy.py", "_copy_git_dir", "os.makedirs"): _PRIVATE_TMP,
    ("batch/workcopy.py", "_copy_git_dir", "open"): _PRIVATE_TMP + " (objects/info/alternates)",
}


def _mode(call: ast.Call, index: int) -> str | None:
    given: ast.expr | None = call.args[index] if len(call.args) > index else None
    for keyword in call.keywords:
        if keyword.arg == "mode":
            given = keyword.value
    if given is None:
        return None
    if isinstance(given, ast.Constant) and isinstance(given.value, str):
        return given.value
    return "?"  # computed: counted as writing


def _writes_mode(mode: str | None) -> bool:
    return mode is not None and any(c in mode for c in "wax+?")


def _receiver(node: ast.expr) -> str:
    return ast.unparse(node)


# Every assignment in the module being scanned, by the name assigned: flags given as a
# variable (``flags |= os.O_APPEND``) are read through it.
_assigned: dict[str, list[str]] = {}


def _flags_text(call: ast.Call) -> str:
    text = ast.unparse(call)
    for node in ast.walk(call):
        if isinstance(node, ast.Name):
            text += " ".join(_assigned.get(node.id, []))
    return text


def _kind(call: ast.Call) -> str | None:
    """The write-family call this is, None if it is none."""
    func = call.func
    if isinstance(func, ast.Name):
        return "open" if func.id == "open" and _writes_mode(_mode(call, 1)) else None
    if not isinstance(func, ast.Attribute):
        return None
    owner = _receiver(func.value)
    if owner == "os":
        if func.attr in _OS_WRITES:
            return f"os.{func.attr}"
        if func.attr == "open" and any(flag in _flags_text(call) for flag in _WRITE_FLAGS):
            return "os.open"
        return None
    if owner == "shutil":
        return f"shutil.{func.attr}" if func.attr in _SHUTIL_WRITES else None
    if owner in ("dataclasses", "tarfile", "io", "gzip", "zipfile"):
        return None
    if owner == "writer" or owner.endswith(".writer"):
        return None  # the writer's own API
    if func.attr == "open":
        return ".open" if _writes_mode(_mode(call, 0)) else None
    if func.attr in _METHODS:
        if func.attr in ("rename", "replace") and len(call.args) != 1:
            return None
        return f".{func.attr}"
    return None


def _reference(parent: ast.AST, node: ast.AST) -> str | None:
    """``os.X``/``shutil.X`` of a write function, as a value rather than called."""
    if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name):
        return None
    if isinstance(parent, ast.Call) and parent.func is node:
        return None  # called: _kind's
    if isinstance(parent, ast.Attribute):
        return None  # an attribute of it (shutil.rmtree.avoids_symlink_attacks)
    owner, name = node.value.id, node.attr
    if (owner == "os" and name in _OS_WRITES) or (owner == "shutil" and name in _SHUTIL_WRITES):
        return f"{owner}.{name}"
    return None


def write_calls(source: str) -> Iterator[tuple[str, str, int]]:
    """(enclosing function, call kind, line) of every write-family call in ``source``."""
    tree = ast.parse(source)
    _assigned.clear()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    _assigned.setdefault(target.id, []).append(ast.unparse(node.value))
    scopes: list[str] = []

    def visit(node: ast.AST) -> Iterator[tuple[str, str, int]]:
        named = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        if named:
            scopes.append(node.name)  # type: ignore[union-attr]
        if isinstance(node, ast.Call) and (kind := _kind(node)) is not None:
            yield ".".join(scopes) or "<module>", kind, node.lineno
        # A write function handed on rather than called (a finalizer's, a copytree's
        # copy_function) writes all the same.
        for child in ast.iter_child_nodes(node):
            if (kind := _reference(node, child)) is not None:
                yield ".".join(scopes) or "<module>", kind, child.lineno
        for child in ast.iter_child_nodes(node):
            yield from visit(child)
        if named:
            scopes.pop()

    yield from visit(tree)


def unlisted() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module in WRITER_MODULES:
            continue
        for scope, kind, line in write_calls(path.read_text("utf-8")):
            if (module, scope, kind) not in ALLOWED:
                found.append(f"codemode/{module}:{line}: {kind} in {scope}")
    return found


def test_every_host_write_goes_through_the_writer_or_says_why_not() -> None:
    found = unlisted()
    assert not found, (
        "write-family calls outside codemode/hostfs/writer.py and beneath.py; route them "
        "through the writer, or add them to ALLOWED with the reason:\n  " + "\n  ".join(found)
    )


def test_the_allow_list_names_only_calls_that_exist() -> None:
    present = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        present |= {(module, scope, kind) for scope, kind, _ in write_calls(path.read_text())}
    assert not set(ALLOWED) - present, sorted(set(ALLOWED) - present)


def test_the_scan_finds_each_kind_of_write() -> None:
    # The detector itself, on the shapes it must not miss (and two it must).
    source = """
import os, shutil
def f(p, q, writer):
    open(p, "wb"); p.open("a"); os.open(p, os.O_WRONLY | os.O_CREAT)
    os.chmod(p, 0o600); p.chmod(0o600); os.rename(p, q); os.replace(p, q); p.replace(q)
    os.unlink(p); p.unlink(); shutil.copy2(p, q); shutil.rmtree(p); p.write_text("x")
    os.symlink(p, q); p.mkdir(); os.makedirs(p)
    flags = os.O_CREAT; flags |= os.O_NOFOLLOW; os.open(p, flags)
    ro = os.O_RDONLY | os.O_NOFOLLOW; os.open(p, ro)
    open(p); p.open(); "a".replace("b", "c"); writer.write("x", b""); shutil.which("git")
    weakref.finalize(p, shutil.rmtree, p); shutil.copytree(p, q, copy_function=os.link)
    shutil.rmtree.avoids_symlink_attacks
"""
    kinds = [kind for _, kind, _ in write_calls(source)]
    assert kinds == [
        "open", ".open", "os.open", "os.chmod", ".chmod", "os.rename", "os.replace",
        ".replace", "os.unlink", ".unlink", "shutil.copy2", "shutil.rmtree", ".write_text",
        "os.symlink", ".mkdir", "os.makedirs", "os.open", "shutil.rmtree", "shutil.copytree",
        "os.link",
    ]  # fmt: skip
