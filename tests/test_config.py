"""Config file + -c overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.config import ConfigError, load_config, parse_override


def test_override_values_are_toml_with_a_plain_string_fallback() -> None:
    assert parse_override("max_turns=5") == (["max_turns"], 5)
    assert parse_override("code_mode=true") == (["code_mode"], True)
    assert parse_override('model="gpt-5"') == (["model"], "gpt-5")
    assert parse_override("model=gpt-5.1-codex") == (["model"], "gpt-5.1-codex")
    assert parse_override("a.b.c=[1, 2]") == (["a", "b", "c"], [1, 2])


@pytest.mark.parametrize("bad", ["novalue", "=3", "a..b=1"])
def test_malformed_overrides_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="-c"):
        parse_override(bad)


def test_file_then_overrides(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'model = "from-file"\nmodel_provider = "ollama"\n'
        "[model_providers.local]\n"
        'base_url = "http://127.0.0.1:9/v1"\n'
        'wire_api = "chat"\n',
        encoding="utf-8",
    )
    config = load_config(
        ["model=from-flag", "model_providers.local.wire_api=responses", "code_mode=true"],
        home=tmp_path,
    )
    assert config.model == "from-flag"
    assert config.model_provider == "ollama"
    assert config.code_mode is True
    assert config.model_providers["local"] == {
        "base_url": "http://127.0.0.1:9/v1",
        "wire_api": "responses",
    }


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    config = load_config(home=tmp_path)
    assert config.model is None and config.code_mode is False and config.max_turns == 50


def test_unknown_key_and_bad_value_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="modle"):
        load_config(["modle=x"], home=tmp_path)
    with pytest.raises(ConfigError, match="max_turns"):
        load_config(["max_turns=-1"], home=tmp_path)


def test_a_broken_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("model = \n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config\.toml"):
        load_config(home=tmp_path)


def test_override_into_a_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a value, not a table"):
        load_config(["model=x", "model.sub=y"], home=tmp_path)
