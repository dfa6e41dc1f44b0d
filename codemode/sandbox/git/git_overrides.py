"""The settings codemode's own git runs with in a repository it publishes from
(``batch/publish.py``, and the recovery of a publish killed partway:
``tools/store/publish_marker.py``), and in the programs that run git there for it
(``batch/pull_request.py``)."""

from __future__ import annotations

# Defence in depth: the settings known to start a program, off on the command line too
# (``repo_config.check`` has already refused a repository that sets any of them).
SAFE_CONFIG = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("core.untrackedCache", "false"),
    ("credential.helper", ""),
    ("core.askPass", ""),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("core.alternateRefsCommand", ""),
    ("diff.external", ""),
    ("uploadpack.packObjectsHook", ""),
    ("protocol.ext.allow", "never"),
)
SAFE_GIT = ("git", *(arg for key, value in SAFE_CONFIG for arg in ("-c", f"{key}={value}")))


def safe_config_env() -> dict[str, str]:
    """``SAFE_CONFIG`` as the variables git reads command-line settings from: for a
    program that runs git itself in the repository (``gh``), where no ``-c`` can go."""
    env = {"GIT_CONFIG_COUNT": str(len(SAFE_CONFIG))}
    for i, (key, value) in enumerate(SAFE_CONFIG):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env
