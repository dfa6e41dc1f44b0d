"""The shipped provider catalog: generated from scripts/provider_catalog/ (and up to
date), every reference provider and model in it, our own entries kept, and the two
listing commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agent_support import run_cli

from codemode.providers.catalog import builtin_providers, model_facts, provider_models

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "scripts" / "provider_catalog"
REFERENCE = json.loads((DATA / "reference.json").read_text(encoding="utf-8"))["providers"]


def test_shipped_files_match_the_generator() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_provider_catalog.py"), "--check"],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_every_reference_provider_and_model_is_shipped() -> None:
    catalog = builtin_providers()
    assert len(REFERENCE) >= 115
    for entry in REFERENCE:
        info = catalog[entry["id"]]
        assert info.env_key == entry["env_key"], entry["id"]
        shipped = {m.id: m for m in provider_models(entry["id"])}
        for model in entry["models"]:
            facts = shipped[model["id"]]
            assert facts.context_window == (model["context_window"] or None)
            assert (facts.reasoning, facts.tool_calling) == (model["reasoning"],
                                                             model["tool_calling"])
    assert sum(len(provider_models(name)) for name in catalog) >= 3165


def test_base_urls_are_api_roots() -> None:
    catalog = builtin_providers()
    for info in catalog.values():
        assert not info.base_url.endswith(("/", "/chat/completions")), info.name
    # The Messages wire appends /messages to a versioned root.
    assert catalog["freemodel"].base_url == "https://cc.freemodel.dev/v1"
    assert catalog["bailing"].base_url == "https://api.tbox.cn/api/llm/v1"
    assert catalog["minimax"].wire_api == "anthropic"


def test_our_entries_are_kept_and_lead() -> None:
    catalog = builtin_providers()
    for name in ("openai", "openai-chat", "dashscope", "gemini", "ollama", "llamacpp"):
        assert name in catalog
    # Ours win over the reference's fields; the reference's models stay.
    assert catalog["anthropic"].base_url == "https://api.anthropic.com/v1"
    assert catalog["anthropic"].default_model == "claude-sonnet-4-5"
    assert catalog["deepseek"].family == "deepseek"
    assert len(provider_models("deepseek")) == 4
    # Our names for a reference service share its models.
    assert provider_models("dashscope") == provider_models("alibaba")
    assert catalog["alibaba"].family == "qwen"
    gpt5 = model_facts("openai", "gpt-5")
    assert gpt5 is not None and gpt5.context_window == 400_000 and gpt5.reasoning


def test_model_lookup_forgives_case_and_a_vendor_prefix() -> None:
    assert model_facts("deepseek", "DeepSeek-Chat") == model_facts("deepseek", "deepseek-chat")
    assert model_facts("deepseek", "deepseek/deepseek-chat") is not None
    assert model_facts("deepseek", "no-such-model") is None
    assert model_facts("no-such-provider", "x") is None


def test_providers_table(home: Path, tmp_path: Path) -> None:
    run = run_cli(["providers", "-c", "model_provider=deepseek",
                   "-c", "model_providers.mine.base_url=http://127.0.0.1:9/v1"],
                  home=home, cwd=tmp_path, DEEPSEEK_API_KEY="sk-x")
    assert run.code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["PROVIDER", "WIRE", "KEY", "VARIABLE", "KEY", "MODELS",
                                "DESCRIPTION"]
    rows = {line.split()[1] if line.startswith("*") else line.split()[0]: line
            for line in lines[1:]}
    assert len(rows) >= 125
    assert rows["deepseek"].startswith("*")
    assert rows["deepseek"].split()[1:6] == ["deepseek", "chat", "DEEPSEEK_API_KEY", "set", "4"]
    assert rows["anthropic"].split()[:4] == ["anthropic", "messages", "ANTHROPIC_API_KEY",
                                             "not"]
    assert rows["ollama"].split()[:5] == ["ollama", "chat", "-", "not", "needed"]
    assert rows["mine"].split()[:6] == ["mine", "chat", "-", "not", "needed", "-"]


def test_models_table(home: Path, tmp_path: Path) -> None:
    run = run_cli(["models", "anthropic"], home=home, cwd=tmp_path)
    assert run.code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["MODEL", "CONTEXT", "REASONING", "TOOLS", "INPUT"]
    assert len(lines) == 1 + len(provider_models("anthropic"))
    row = next(line for line in lines if line.startswith("claude-sonnet-4-5 "))
    assert row.split()[1:] == ["200,000", "yes", "yes", "image+text"]


def test_models_of_an_unknown_provider(home: Path, tmp_path: Path) -> None:
    run = run_cli(["models", "antropic"], home=home, cwd=tmp_path)
    assert run.code == 2
    assert "did you mean anthropic?" in run.stderr and "Traceback" not in run.stderr
    run = run_cli(["models", "ollama"], home=home, cwd=tmp_path)
    assert run.code == 1 and "no models" in run.stderr and "Traceback" not in run.stderr
    run = run_cli(["models", "-c", "model_providers.mine.base_url=http://127.0.0.1:9/v1",
                   "mine"], home=home, cwd=tmp_path)
    assert run.code == 1 and "no models for 'mine'" in run.stderr
