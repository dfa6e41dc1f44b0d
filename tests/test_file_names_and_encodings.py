"""The file tools against hostile names and non-UTF-8 text: a path with a newline, an
escape or a bidirectional override is refused before anything is touched, and a
UTF-16 or UTF-32 file is text that keeps its byte order mark, encoding and line
endings through read_file, edit, write_file, apply_patch and grep. Real files in a
temporary workspace, every call through the registry as a surface makes it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.file_tools_support import call, call_error


def _tree(root: Path) -> dict[str, bytes | str | None]:
    """Every entry under ``root``: a file's bytes, a symlink's target, None for a folder."""
    found: dict[str, bytes | str | None] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            found[rel] = os.readlink(path) if os.path.islink(path) else Path(path).read_bytes()
    return found


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "keep.txt").write_text("a\n")
    return w


# --- names ---------------------------------------------------------------------------

# Each refused character, and the words the refusal must use for it.
BAD_NAMES = {
    "a\nb.txt": "a newline (U+000A)",
    "a\rb.txt": "a carriage return (U+000D)",
    "a\x1b[31mb.txt": "an escape character (U+001B)",
    "a\tb.txt": "a tab (U+0009)",
    "a\x7fb.txt": "a delete character (U+007F)",
    "a\x85b.txt": "a next-line character (U+0085)",
    "a\u2028b.txt": "a line separator (U+2028)",
    "evil\u202etxt.exe": "a bidirectional formatting character (U+202E)",
    "dir\n/b.txt": "a newline (U+000A)",
    "a\0b": "a NUL character (U+0000)",
}


@pytest.mark.parametrize("name", list(BAD_NAMES))
@pytest.mark.parametrize(
    "tool",
    ["write_file", "read_file", "edit", "edit_create", "list_dir", "grep", "glob"],
)
async def test_a_path_with_a_control_character_is_refused(ws: Path, tool: str, name: str) -> None:
    # was: write_file created "a\nb.txt" (and "dir\n/b.txt"), edit created one too
    args: dict[str, Any] = {
        "write_file": {"path": name, "content": "x\n"},
        "read_file": {"path": name},
        "edit": {"path": name, "old_string": "a", "new_string": "b"},
        "edit_create": {"path": name, "old_string": "", "new_string": "x\n"},
        "list_dir": {"path": name},
        "grep": {"pattern": "x", "path": name},
        "glob": {"pattern": "*", "path": name},
    }[tool]
    before = _tree(ws)
    message = await call_error(ws, tool.removesuffix("_create"), **args)
    assert BAD_NAMES[name] in message, message
    assert "invalid path" in message and repr(name) in message, message
    assert _tree(ws) == before


@pytest.mark.parametrize("name", [n for n in BAD_NAMES if "\n" not in n and "\0" not in n])
@pytest.mark.parametrize("header", ["Add File", "Update File", "Delete File", "Move to"])
async def test_a_patch_header_with_a_control_character_changes_nothing(
    ws: Path, header: str, name: str
) -> None:
    # was: "*** Add File: a\rb.txt" and "*** Move to: g\x1bh" created those files
    (ws / "f.txt").write_text("one\n")
    body = {
        "Add File": f"*** Add File: {name}\n+x\n",
        "Update File": f"*** Update File: {name}\n@@\n-a\n+b\n",
        "Delete File": f"*** Delete File: {name}\n",
        "Move to": f"*** Update File: f.txt\n*** Move to: {name}\n@@\n-one\n+two\n",
    }[header]
    # A good operation first: all or nothing means it must not land either.
    patch = f"*** Begin Patch\n*** Add File: new.txt\n+fine\n{body}*** End Patch\n"
    before = _tree(ws)
    message = await call_error(ws, "apply_patch", input=patch)
    header_word = "*** Move to" if header == "Move to" else f"*** {header}"
    assert f"{header_word}: {name!r} is refused" in message, message
    assert BAD_NAMES[name] in message, message
    # The character is quoted, never written raw into the message.
    assert name not in message
    assert _tree(ws) == before


async def test_a_symlink_to_a_control_character_name_is_not_written_through(ws: Path) -> None:
    # The name the tool was given is clean; the one its symlink leads to is not.
    os.symlink("evil\nname", ws / "link")
    before = _tree(ws)
    message = await call_error(ws, "write_file", path="link", content="x\n")
    assert "'evil\\nname' is refused" in message and "newline" in message, message
    patch = "*** Begin Patch\n*** Add File: link\n+x\n*** End Patch\n"
    message = await call_error(ws, "apply_patch", input=patch)
    assert "newline" in message, message
    assert _tree(ws) == before and not (ws / "evil\nname").exists()


async def test_ordinary_unicode_names_are_still_written(ws: Path) -> None:
    for name in ("café.txt", "日本語.md", "emoji 👍🏽.txt", "with space.txt"):
        await call(ws, "write_file", path=name, content="x\n")
        assert (ws / name).read_text() == "x\n"
        assert (await call(ws, "read_file", path=name))["content"] == "x\n"


# --- UTF-16 and UTF-32 --------------------------------------------------------------

MARKS = {
    "utf-16le": b"\xff\xfe",
    "utf-16be": b"\xfe\xff",
    "utf-32le": b"\xff\xfe\x00\x00",
    "utf-32be": b"\x00\x00\xfe\xff",
}


def _write(path: Path, encoding: str, text: str) -> None:
    path.write_bytes(MARKS[encoding] + text.encode(encoding))


def _assert_file(path: Path, encoding: str, text: str) -> None:
    data = path.read_bytes()
    assert data.startswith(MARKS[encoding]), data[:8]
    assert data[len(MARKS[encoding]) :].decode(encoding) == text


@pytest.mark.parametrize("encoding", list(MARKS))
async def test_a_file_with_a_byte_order_mark_is_text_in_its_encoding(
    ws: Path, encoding: str
) -> None:
    # was: "read_file: u.txt looks like a binary file", and grep passed it over
    f = ws / "u.txt"
    _write(f, encoding, "héllo\r\nwörld ✓\r\n")
    read = await call(ws, "read_file", path="u.txt")
    assert read["encoding"] == encoding
    assert read["content"] == "héllo\r\nwörld ✓\r\n" and read["total_lines"] == 2
    found = await call(ws, "grep", pattern="w.rld")
    assert [(m["path"], m["line"], m["text"]) for m in found["matches"]] == [
        ("u.txt", 2, "wörld ✓")
    ]
    assert found["latin1_files"] == []

    # edit: the model's "\n" become the file's CRLF; the mark and encoding stay.
    await call(ws, "edit", path="u.txt", old_string="wörld ✓\n", new_string="wörld ✓\nthird\n")
    _assert_file(f, encoding, "héllo\r\nwörld ✓\r\nthird\r\n")

    patch = (
        "*** Begin Patch\n*** Update File: u.txt\n@@\n héllo\n-wörld ✓\n+WORLD ✗\n*** End Patch\n"
    )
    await call(ws, "apply_patch", input=patch)
    _assert_file(f, encoding, "héllo\r\nWORLD ✗\r\nthird\r\n")

    # A whole new content keeps the encoding and gets the mark exactly once.
    await call(ws, "write_file", path="u.txt", content="new ✓\n")
    _assert_file(f, encoding, "new ✓\n")
    await call(ws, "write_file", path="u.txt", content="\ufeffmarked\n")
    _assert_file(f, encoding, "marked\n")

    # Converting on request, and back.
    await call(ws, "write_file", path="u.txt", content="plain\n", encoding="utf-8")
    assert f.read_bytes() == b"plain\n"
    await call(ws, "write_file", path="u.txt", content="plain\n", encoding=encoding)
    _assert_file(f, encoding, "plain\n")


async def test_add_file_over_a_utf16_file_keeps_its_encoding(ws: Path) -> None:
    _write(ws / "u.txt", "utf-16le", "old\n")
    patch = "*** Begin Patch\n*** Add File: u.txt\n+new ✓\n*** End Patch\n"
    await call(ws, "apply_patch", input=patch)
    _assert_file(ws / "u.txt", "utf-16le", "new ✓\n")


async def test_a_mark_on_bytes_that_do_not_decode_is_not_taken_for_utf16(ws: Path) -> None:
    # An odd number of bytes after FF FE is no UTF-16; a NUL makes it binary.
    (ws / "odd.bin").write_bytes(b"\xff\xfea\x00b")
    message = await call_error(ws, "read_file", path="odd.bin")
    assert "binary file" in message, message


async def test_binary_files_are_still_refused(ws: Path) -> None:
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    (ws / "img.png").write_bytes(data)
    message = await call_error(ws, "read_file", path="img.png")
    assert "img.png looks like a binary file" in message, message
    # was: edit changed the binary file, as Latin-1
    message = await call_error(ws, "edit", path="img.png", old_string="PNG", new_string="GIF")
    assert "binary file" in message, message
    patch = "*** Begin Patch\n*** Update File: img.png\n@@\n-x\n+y\n*** End Patch\n"
    assert "binary file" in await call_error(ws, "apply_patch", input=patch)
    assert (await call(ws, "grep", pattern="PNG"))["matches"] == []
    assert (ws / "img.png").read_bytes() == data
    # Replacing a binary file with text writes UTF-8, not Latin-1 (which would refuse ✓).
    await call(ws, "write_file", path="img.png", content="now text ✓\n")
    assert (ws / "img.png").read_bytes() == "now text ✓\n".encode()


# --- line endings --------------------------------------------------------------------


async def test_edit_keeps_a_crlf_file_crlf(ws: Path) -> None:
    # was: old_string "a\nb\n" was not found in "a\r\nb\r\n", and a new_string with "\n"
    # put LF-only lines into a CRLF file
    f = ws / "w.txt"
    f.write_bytes(b"a\r\nb\r\nc\r\n")
    await call(ws, "edit", path="w.txt", old_string="a\nb\n", new_string="a\nB\nb2\n")
    assert f.read_bytes() == b"a\r\nB\r\nb2\r\nc\r\n"
    await call(ws, "edit", path="w.txt", old_string="c", new_string="c\nd")
    assert f.read_bytes() == b"a\r\nB\r\nb2\r\nc\r\nd\r\n"
    # Text that already says CRLF is taken as it is.
    await call(ws, "edit", path="w.txt", old_string="B\r\nb2\r\n", new_string="")
    assert f.read_bytes() == b"a\r\nc\r\nd\r\n"


async def test_edit_leaves_mixed_and_lf_files_as_they_are(ws: Path) -> None:
    f = ws / "m.txt"
    f.write_bytes(b"a\r\nb\nc\r\n")  # mixed: nothing is rewritten
    await call(ws, "edit", path="m.txt", old_string="b\n", new_string="B\n")
    assert f.read_bytes() == b"a\r\nB\nc\r\n"
    message = await call_error(ws, "edit", path="m.txt", old_string="a\nB", new_string="x")
    assert "not found" in message
    (ws / "lf.txt").write_bytes(b"a\nb\n")
    await call(ws, "edit", path="lf.txt", old_string="a\n", new_string="a\nz\n")
    assert (ws / "lf.txt").read_bytes() == b"a\nz\nb\n"
