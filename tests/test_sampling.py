"""Sampling keys: max_output_tokens, temperature, top_p and seed, at every level of the
config, reach each wire in that wire's own request fields."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_support import provider_flags, run_cli

from codemode.assembly.model import session_sampling
from codemode.config import load_config
from codemode_testkit.scripted_server import ScriptedModelServer

ALL = ["-c", "max_output_tokens=300", "-c", "temperature=0.25", "-c", "top_p=0.5",
       "-c", "seed=7"]


def first_body(wire: str, *flags: str, home: Path, cwd: Path) -> dict:
    with ScriptedModelServer([{"text": "ok"}]) as server:
        run = run_cli(["exec", *provider_flags(server.base_url, wire), *flags, "hi"],
                      home=home, cwd=cwd)
        assert run.code == 0, run.stderr
        return server.requests[0].body


def test_chat_sends_all_four(home: Path, work: Path) -> None:
    body = first_body("chat", *ALL, home=home, cwd=work)
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"]) == (
        300, 0.25, 0.5, 7)


def test_chat_output_field_follows_the_provider(home: Path, work: Path) -> None:
    body = first_body("chat", "-c", "model_providers.scripted.max_tokens_field="
                      "max_completion_tokens", "-c", "max_output_tokens=64", home=home, cwd=work)
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body


def test_responses_sends_its_own_fields(home: Path, work: Path) -> None:
    body = first_body("responses", *ALL, home=home, cwd=work)
    assert (body["max_output_tokens"], body["temperature"], body["top_p"]) == (300, 0.25, 0.5)
    assert "seed" not in body  # the Responses API has no seed


def test_anthropic_sends_max_tokens_and_one_of_temperature_or_top_p(
    home: Path, work: Path
) -> None:
    body = first_body("anthropic", *ALL, home=home, cwd=work)
    assert (body["max_tokens"], body["temperature"]) == (300, 0.25)
    assert "top_p" not in body and "seed" not in body
    body = first_body("anthropic", "-c", "top_p=0.5", home=home, cwd=work)
    assert body["top_p"] == 0.5 and "temperature" not in body


def test_nothing_is_sent_when_nothing_is_set(home: Path, work: Path) -> None:
    body = first_body("chat", home=home, cwd=work)
    assert not {"max_tokens", "temperature", "top_p", "seed"} & set(body)


def test_levels_most_specific_wins_and_command_line_beats_all(
    home: Path, work: Path
) -> None:
    (home / "config.toml").write_text(
        "temperature = 0.9\nmax_output_tokens = 1000\n"
        "[model_providers.scripted]\nmax_output_tokens = 500\ntop_p = 0.8\n"
        '[model_settings."test-model"]\ntop_p = 0.3\nseed = 11\n',
        encoding="utf-8",
    )
    body = first_body("chat", home=home, cwd=work)
    assert (body["temperature"], body["max_tokens"], body["top_p"], body["seed"]) == (
        0.9, 500, 0.3, 11)
    body = first_body("chat", "-c", "top_p=0.6", "-c", "max_output_tokens=20",
                      home=home, cwd=work)
    assert (body["top_p"], body["max_tokens"], body["seed"]) == (0.6, 20, 11)


def test_local_servers_get_an_output_cap_from_the_catalog(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    config = load_config()
    assert session_sampling(config, "llamacpp", "any", []).max_output_tokens == 4096
    assert session_sampling(config, "ollama", "any", []).max_output_tokens == 4096
    assert session_sampling(config, "vllm", "any", []).max_output_tokens is None
    lowered = load_config(["max_output_tokens=128"])
    assert session_sampling(lowered, "llamacpp", "any", []).max_output_tokens == 128


@pytest.mark.parametrize("flag", ["temperature=5", "top_p=0", "max_output_tokens=-1",
                                  "model_settings.m.colour=1"])
def test_bad_values_are_a_usage_error(flag: str, home: Path, work: Path) -> None:
    with ScriptedModelServer([{"text": "never"}]) as server:
        run = run_cli(["exec", *provider_flags(server.base_url, "chat"), "-c", flag, "hi"],
                      home=home, cwd=work)
    assert run.code == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert flag.split("=")[0].split(".")[0] in run.stderr
    assert server.requests == []
