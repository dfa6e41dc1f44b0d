"""The C API of the V8 library that the mini-racer package ships, declared for ctypes.

We load ``libmini_racer`` from the installed package ourselves rather than importing
``py_mini_racer``: its Python layer costs ~23 ms to import, a fifth of a whole
``interpreter run --engine v8``, and ``v8_isolate.py`` needs none of it. The functions,
the value struct and the type codes are mini-racer's own contract between its Python
and C++ halves (``mini_racer.cc``), which is why ``pyproject.toml`` pins its minor
version; the V8 tests exercise every declaration here.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import threading
from pathlib import Path
from typing import Any

# The flags mini-racer itself starts V8 with; V8 can be initialised once per process
# (a second mr_init_v8 is ignored), so ours and a MiniRacer's must agree.
_FLAGS = b"--single-threaded"

STRING = 5  # a value's type: UTF-8 text at value_ptr, len bytes
ARRAY = 6  # an array (held by the value, which keeps it alive)
UNDEFINED = 11
FUNCTION = 100  # a function (held by the value, which keeps it alive)
ARRAY_BUFFER = 102  # an ArrayBuffer: its bytes at value_ptr, len of them
ERRORS = {  # a value's type when an evaluation failed; the message is UTF-8 text
    200: "execute",
    201: "parse",
    202: "oom",
    203: "timeout",
    204: "terminated",
    205: "value",
    206: "key",
}


class Value(ctypes.Structure):
    """A value handed across the API (``ValueHandle`` in mini-racer's ``value.h``: a
    union of a pointer and two numbers, a length, a type); freed with
    ``mr_free_value``. Values travel as plain addresses (``c_void_p``): a ctypes
    pointer object per value would be made and dropped on every crossing."""

    _pack_ = 1
    _fields_ = [
        ("value_ptr", ctypes.c_void_p),  # (the union: only its pointer is read here)
        ("len", ctypes.c_size_t),
        ("type", ctypes.c_uint8),
    ]


# Called on the V8 thread with (callback id given to the call, result value's address).
CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_void_p)

_u64, _size, _value = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
_SIGNATURES: dict[str, tuple[list[Any], Any]] = {
    "mr_init_v8": ([ctypes.c_char_p, ctypes.c_char_p], None),
    "mr_init_context": ([CALLBACK], _u64),
    "mr_free_context": ([_u64], None),
    "mr_set_hard_memory_limit": ([_u64, _size], None),
    "mr_hard_memory_limit_reached": ([_u64], ctypes.c_bool),
    "mr_alloc_string_val": ([_u64, ctypes.c_char_p, _size, ctypes.c_uint8], _value),
    "mr_alloc_int_val": ([_u64, ctypes.c_int64, ctypes.c_uint8], _value),
    "mr_free_value": ([_u64, _value], None),
    "mr_eval": ([_u64, _value, _u64], _u64),
    # (context, function, this, argv: an array, callback id): calls the function on the
    # isolate's thread, as a task of its own like mr_eval's, without compiling anything.
    "mr_call_function": ([_u64, _value, _value, _value, _u64], _u64),
    "mr_cancel_task": ([_u64, _u64], None),
}


_lock = threading.Lock()
_loaded: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """The loaded library with V8 initialised; the first call takes ~25 ms (a 74 MB
    library to map and relocate, then V8's own start), or waits for ``preload``."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _load()
        return _loaded


def preload() -> None:
    """Start ``library()`` on a thread, so that its ~25 ms overlap the caller's imports.

    Both halves run without the GIL: the library is mapped by calling the C library's
    ``dlopen`` through ctypes (``ctypes.CDLL`` would hold the GIL while it maps), and
    ``mr_init_v8`` is a ctypes call.
    """
    threading.Thread(target=library, name="codemode-v8-preload", daemon=True).start()


def _load() -> ctypes.CDLL:
    spec = importlib.util.find_spec("py_mini_racer")  # finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the V8 engine needs the mini-racer package (pip install mini-racer)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    suffix = {"darwin": ".dylib", "win32": ".dll"}.get(sys.platform, ".so")
    path = str(folder / (("" if sys.platform == "win32" else "lib") + "mini_racer" + suffix))
    _map_without_the_gil(path)
    dll = ctypes.CDLL(path)  # already mapped: only looks it up
    for function, (argtypes, restype) in _SIGNATURES.items():
        getattr(dll, function).argtypes = argtypes
        getattr(dll, function).restype = restype
    dll.mr_init_v8(_FLAGS, str(folder / "icudtl.dat").encode())
    return dll


def _map_without_the_gil(path: str) -> None:
    dlopen = getattr(ctypes.CDLL(None), "dlopen", None) if sys.platform != "win32" else None
    if dlopen is None:
        return  # ctypes.CDLL maps it then
    dlopen.argtypes, dlopen.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_void_p
    # The handle is deliberately kept: the library stays loaded for the process anyway.
    dlopen(path.encode(), os.RTLD_NOW | os.RTLD_LOCAL)
