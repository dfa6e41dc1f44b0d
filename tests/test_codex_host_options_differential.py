"""`interpreter code-mode-host` parses its options without click (``host_options``,
codemode/codex_host/serve/start.py) where it can, and leaves the rest to click. A list of
arguments the fast parser accepts must be one click accepts, with the same values:
otherwise the host serves what `--help` does not offer (a listen address beyond loopback
without the flag, a timeout click refuses) or a value other than the one asked for.
Refusing (None: click then answers) is always allowed.

Click's side is click's own parsing of the real command under the real group (the group's
context settings, ``-h`` included), then what the command's body does with the values
(``parse_listen``)."""

from __future__ import annotations

import contextlib
import io

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.cli.codex_host import code_mode_host
from codemode.cli.root import cli
from codemode.codex_host.serve.listen import NETWORK_FLAG, parse_listen
from codemode.codex_host.serve.start import HostOptions, host_options
from codemode.codex_host.session.limits import ClientBounds

OPTIONS = [
    "--listen",
    "--engine",
    "--timeout",
    "--memory-mb",
    "--max-sessions",
    "--max-cells",
    "--max-connections",
    "--max-cells-per-connection",
]
NUMBERS = ["1", "16", "0", "-1", "+5", "-0", "0.1", "0.09", "1.5", "16.0", "256", "00017"]
ODD_NUMBERS = [
    *["inf", "-inf", "+inf", "Infinity", "nan", "NaN", "-nan", "1e3", "1E3", "1e-1", "1e400"],
    *["1_000", "1__0", "_1", "0x10", "0o7", "0b1", "٣", "１６", "²", "৩২", " 5", "5 ", "\t5"],
    *["5\n", "\u00a05", "", " ", "1" * 5000, "9" * 30, "١٦", "𝟙𝟞", "5\x00", "\udcff"],
]
LISTEN = [
    *["stdio", "stdio://", "", "grpc+stdio://", "grpc+stdio", "grpc://127.0.0.1:1"],
    *["grpc://127.0.0.2:80", "grpc://[::1]:5", "grpc://localhost:9", "grpc://0.0.0.0:1"],
    *["grpc://10.0.0.1:5", "tcp://127.0.0.1:٣", "http://127.0.0.1:80/", "grpc://:1"],
    *["grpc://[::ffff:127.0.0.1]:1", "grpc://127.1:1", "grpc://LOCALHOST:1", "--"],
]
ENGINES = ["quickjs", "v8", "V8", "QuickJS", " v8", "v8 ", "quick", "q", ""]
SPELLINGS = [
    *["--", "-", "", "-h", "--help", "--version", "--listen-", "--time", "--max", "--max-cell"],
    *["--Listen", "--LISTEN", "—listen", "--lísten", "-listen", "---listen", NETWORK_FLAG],
    *[NETWORK_FLAG + "=", NETWORK_FLAG + "=1", "--allow", "--allow-unauthenticated"],
    *["--engine=", "--listen=", "--timeout=5=5", "-c", "x", "code-mode-host"],
]


def _via_click(args: list[str]) -> HostOptions | None:
    """What the click command serves for ``args``, or None where click refuses them."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            parent = cli.make_context("interpreter", [], resilient_parsing=False)
            ctx = code_mode_host.make_context(
                "code-mode-host", list(args), parent=parent, resilient_parsing=False
            )
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            return None
    p = ctx.params
    try:
        where = parse_listen(p["listen"], beyond_loopback=p["beyond_loopback"])
    except ValueError:  # the command raises click.BadParameter
        return None
    bounds = ClientBounds(p["max_sessions"], p["max_connections"], p["max_connection_cells"])
    return HostOptions(where, p["engine"], p["timeout_s"], p["memory_mb"], p["max_cells"], bounds)


def _same(fast: HostOptions, slow: HostOptions | None) -> bool:
    # repr: values and their types (3 and 3.0 differ), NaN equal to itself.
    return slow is not None and repr(fast) == repr(slow)


def _check(args: list[str]) -> None:
    fast = host_options(list(args))
    if fast is None:
        return  # click answers: always allowed
    slow = _via_click(args)
    assert _same(fast, slow), (args, fast, slow)
    # The property the flag exists for, said outright.
    if fast.where.kind == "tcp" and NETWORK_FLAG not in args:
        assert fast.where.host in ("127.0.0.1", "::1", "localhost") or fast.where.host.startswith(
            "127."
        ), args


def _table() -> list[list[str]]:
    cases: list[list[str]] = [[]]
    for opt in OPTIONS[2:]:
        for value in NUMBERS + ODD_NUMBERS:
            cases += [[opt, value], [f"{opt}={value}"], [opt, value, opt, value]]
    for value in ENGINES:
        cases += [["--engine", value], [f"--engine={value}"]]
    for value in LISTEN:
        cases += [["--listen", value], [f"--listen={value}"]]
        cases += [["--listen", value, NETWORK_FLAG], [NETWORK_FLAG, f"--listen={value}"]]
    for spelling in SPELLINGS:
        cases += [[spelling], [spelling, "5"], ["--timeout", "5", spelling], [spelling, "--"]]
    cases += [
        [NETWORK_FLAG, NETWORK_FLAG],
        ["--listen", "--engine", "v8"],
        ["--listen", NETWORK_FLAG],
        ["--engine", "--", "v8"],
        ["--", "--timeout", "5"],
        ["--timeout", "5", "--", "x"],
        ["--max-cells", "--max-cells", "3"],
        ["--timeout", "5", "--timeout", "6"],
        ["--listen=grpc://0.0.0.0:1", "--listen=stdio"],
        ["--listen", "grpc://0.0.0.0:1", "--listen", "grpc://127.0.0.1:1"],
    ]
    return cases


@pytest.mark.parametrize("args", _table(), ids=repr)
def test_what_the_fast_parser_accepts_click_accepts_with_the_same_values(args: list[str]) -> None:
    _check(args)


def test_the_fast_parser_serves_the_common_spellings() -> None:
    """The point of the fast parser: what Codex and the docs pass is served without click
    (a parser that refused everything would pass the differential)."""
    for args in (
        [],
        ["--listen", "grpc+stdio://"],
        ["--listen=grpc://127.0.0.1:8080", "--engine", "v8", "--timeout", "30"],
        ["--memory-mb", "512", "--max-sessions", "4", "--max-cells=8"],
        ["--listen", "grpc://0.0.0.0:9", NETWORK_FLAG, "--max-connections", "2"],
    ):
        fast = host_options(args)
        assert fast is not None and _same(fast, _via_click(args)), args


_TOKEN = st.one_of(
    st.sampled_from(OPTIONS + SPELLINGS),
    st.sampled_from(NUMBERS + ODD_NUMBERS + LISTEN + ENGINES),
    st.builds(lambda o, v: f"{o}={v}", st.sampled_from(OPTIONS), st.sampled_from(NUMBERS + LISTEN)),
    st.text(max_size=6),
    st.integers(-(10**6), 10**6).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_TOKEN, max_size=8))
def test_generated_argument_lists_agree(args: list[str]) -> None:
    _check(args)


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(OPTIONS), st.sampled_from(NUMBERS + ODD_NUMBERS + LISTEN)),
        max_size=4,
        unique_by=lambda pair: pair[0],
    ),
    st.booleans(),
)
def test_generated_well_formed_lists_agree(pairs: list[tuple[str, str]], flag: bool) -> None:
    """Each option once with a value: the lists most likely to be accepted."""
    args = [word for pair in pairs for word in pair] + ([NETWORK_FLAG] if flag else [])
    _check(args)
