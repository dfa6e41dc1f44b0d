"""The interactive session driven in a real pseudo-terminal (pexpect) against the
scripted model server: turns in both dialects, approvals, slash commands, Ctrl-C,
resume, undo, the first-run wizard, and plain output when stdout is not a terminal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from agent_support import INTERPRETER, call, cli_env, provider_flags, records, session_files

from codemode_testkit.scripted_server import ScriptedModelServer

# Generous: the machine running the suite may be busy.
WAIT = 30
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]")


class Terminal:
    """``interpreter`` running in a pseudo-terminal; ``expect`` waits for text."""

    def __init__(self, args: list[str], *, home: Path, cwd: Path, **env: str) -> None:
        environment = cli_env(home, TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1", **env)
        self.child = pexpect.spawn(
            str(INTERPRETER),
            args,
            cwd=str(cwd),
            env=environment,
            encoding="utf-8",
            codec_errors="replace",
            dimensions=(50, 200),  # room for the long temp paths under pytest-xdist
            timeout=WAIT,
        )
        self.seen = ""  # output not yet matched
        self.log = ""  # everything it printed

    def expect(self, text: str) -> str:
        """Wait until ``text`` appears (escape codes ignored); returns what came before."""
        deadline = time.monotonic() + WAIT
        while True:
            plain = ANSI.sub("", self.seen)
            at = plain.find(text)
            if at >= 0:
                # Consume up to the match so the next expect looks at newer output.
                self.seen = _cut_after(self.seen, text)
                return plain[:at]
            if time.monotonic() > deadline:
                raise AssertionError(f"did not see {text!r}; screen so far:\n{plain[-3000:]}")
            try:
                chunk = self.child.read_nonblocking(4096, timeout=0.5)
                self.seen += chunk
                self.log += chunk
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF as exc:
                if text in ANSI.sub("", self.seen):
                    continue
                raise AssertionError(
                    f"program ended before {text!r}:\n{ANSI.sub('', self.seen)[-3000:]}"
                ) from exc

    def prompt(self) -> None:
        """Wait for the input line."""
        self.expect("›")

    def send_line(self, text: str) -> None:
        self.child.send(text + "\r")

    def finish(self) -> int:
        """Ctrl-D at the prompt; returns the exit status."""
        # A Ctrl-D typed before the input line is up can be swallowed: repeat it.
        deadline = time.monotonic() + WAIT
        while True:
            self.child.sendcontrol("d")
            try:
                self.log += self.child.read_nonblocking(65536, timeout=2) or ""
            except pexpect.TIMEOUT:
                pass
            except pexpect.EOF:
                break
            assert time.monotonic() < deadline, "Ctrl-D did not end the session"
        self.child.close()
        return self.child.exitstatus if self.child.exitstatus is not None else -1

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)


def _cut_after(raw: str, text: str) -> str:
    """``raw`` from just after the first occurrence of ``text`` in its plain form."""
    for end in range(len(text), len(raw) + 1):
        if text in ANSI.sub("", raw[:end]):
            return raw[end:]
    return ""


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for t in opened:
        t.close()


def start(
    terminals: list[Terminal],
    server: ScriptedModelServer,
    *args: str,
    home: Path,
    cwd: Path,
    wire: str = "chat",
    **env: str,
) -> Terminal:
    flags = [*provider_flags(server.base_url, wire), "--sandbox", "danger-full-access"]
    term = Terminal([*flags, *args], home=home, cwd=cwd, **env)
    terminals.append(term)
    return term


def sent_text(server: ScriptedModelServer, index: int = -1) -> str:
    return json.dumps(server.requests[index].body, ensure_ascii=False)


# --- turns -----------------------------------------------------------------------------


def test_classic_turn_streams_and_records(
    home: Path, work: Path, terminals: list[Terminal]
) -> None:
    script = [
        {
            "reasoning": "The user wants gamma.\nA shell call does it.",
            "text": "Appending now.",
            "tool_calls": [
                call("shell", {"command": "echo gamma >> notes.txt; wc -l < notes.txt"})
            ],
        },
        {"text": "Done: **gamma** added.\n\n- notes.txt has 3 lines\n"},
    ]
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=work, check=True)
    subprocess.run([*git, "add", "notes.txt"], cwd=work, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=work, check=True)
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, "add gamma to @notes.txt", home=home, cwd=work)
        term.expect("attached: notes.txt")
        term.expect("thinking: The user wants gamma.")
        term.expect("$ echo gamma >> notes.txt")
        term.expect("3")
        term.expect("✓ exit 0")
        term.expect("Done: gamma added.")
        term.expect("notes.txt has 3 lines")
        term.expect("2 requests")
        term.prompt()
        term.send_line("/reasoning")
        term.expect("reasoning: shown in full")
        term.expect("A shell call does it.")  # the line the summary left out
        term.prompt()
        term.send_line("/diff")
        term.expect("+++ b/notes.txt")
        term.expect("+gamma")
        term.prompt()
        term.send_line("/status")
        term.expect("dialect    classic")
        status = term.expect("workspace")
        assert term.finish() == 0
    assert (work / "notes.txt").read_text() == "alpha\nbeta\ngamma\n"
    first = sent_text(server, 0)
    assert "Attached files" in first and "alpha\\nbeta" in first  # the @mention
    files = session_files(home)
    assert len(files) == 1 and files[0].stem in status and str(files[0]) in status
    prompts = [r for r in records(files[0]) if r.get("prompt")]
    assert prompts and "add gamma" in prompts[0]["message"]["text"]


def test_code_mode_turn_shows_program_output_and_nested_calls(
    home: Path, work: Path, terminals: list[Terminal]
) -> None:
    program = (
        "const notes = await tools.read_file({path: 'notes.txt'});\n"
        "const r = await tools.shell({command: 'echo from-shell'});\n"
        "console.log('lines:', notes.total_lines, r.output.trim());\n"
        "return {ok: true};"
    )
    script = [{"tool_calls": [call("exec", {"code": program})]}, {"text": "All read."}]
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, "--code-mode", home=home, cwd=work)
        term.prompt()
        term.send_line("read the notes")
        term.expect("exec")
        term.expect("tools.read_file({path: 'notes.txt'})")  # the program, highlighted
        term.expect("· read_file")  # nested calls as they happen
        term.expect("$ echo from-shell")
        term.expect("✓ exit 0")
        term.expect("│ lines: 2 from-shell")  # console output
        term.expect('→ {"ok": true}')
        term.expect("✓ done (2 tool calls)")
        term.expect("All read.")
        term.prompt()
        assert term.finish() == 0
    offered = server.requests[0].body["tools"]
    assert [t["function"]["name"] for t in offered] == ["exec", "wait"]


# --- approvals -----------------------------------------------------------------------


def test_approval_once_deny_always_and_code_mode_program_shown(
    home: Path, work: Path, terminals: list[Terminal]
) -> None:
    rules = home / "rules"
    rules.mkdir()
    (rules / "team.rules").write_text(
        'prefix_rule(pattern=["touch"], decision="prompt", '
        'justification="creating files needs a yes")\n',
        encoding="utf-8",
    )
    program = "await tools.shell({command: 'touch denied.txt'});\nreturn 'unreachable';"
    twice = (
        "await tools.shell({command: 'mkdir -p out/a'});\n"
        "await tools.shell({command: 'mkdir -p out/a'});"
    )
    script = [
        {"tool_calls": [call("shell", {"command": "touch once.txt"})]},
        {"text": "Created once.txt."},
        {"tool_calls": [call("exec", {"code": program})]},
        {"text": "The user said no."},
        {"tool_calls": [call("exec", {"code": twice})]},
        {"text": "Both ran."},
    ]
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, home=home, cwd=work)
        term.prompt()
        term.send_line("make once.txt")
        term.expect("approval needed")
        term.expect("touch once.txt")
        term.expect("creating files needs a yes")
        term.expect("[y] approve once")
        term.child.send("y")
        term.expect("→ approve once")
        term.expect("Created once.txt.")
        term.prompt()

        term.send_line("/code-mode")
        term.expect("dialect: code mode")
        term.prompt()
        term.send_line("make denied.txt")
        term.expect("approval needed")
        term.expect("from this program (line 1)")
        term.expect("return 'unreachable'")  # the program around the nested call
        term.child.send("n")
        term.expect("→ deny")
        term.expect("declined")
        term.expect("The user said no.")
        term.prompt()

        term.send_line("/permissions untrusted")  # now unmatched commands ask too
        term.expect("approval  untrusted")
        term.prompt()
        term.send_line("make out/a")
        term.expect("approval needed")
        term.expect("mkdir -p out/a")
        # "always" shows what it stores: the exact line, or a prefix picked from a list
        term.expect("always   exactly this command line, nothing else: mkdir -p out/a")
        term.expect("[a] always this exact command  [p] always for a prefix")
        term.child.send("p")
        term.expect("[1] `mkdir -p out/a` followed by any further arguments")
        term.expect("[2] `mkdir -p` followed by any further arguments")
        term.child.send("2")
        term.expect("→ always: `mkdir -p` followed by")
        between = term.expect("Both ran.")
        assert "approval needed" not in between  # the second call was not asked about
        assert "✓ done (2 tool calls)" in between
        term.prompt()
        assert term.finish() == 0
    assert (work / "once.txt").exists() and not (work / "denied.txt").exists()
    assert (work / "out" / "a").is_dir()
    assert "the user declined" in sent_text(server, 3)
    remembered = (rules / "default.rules").read_text(encoding="utf-8")
    assert 'prefix_rule(pattern=["mkdir", "-p"], decision="allow")' in remembered


# --- slash commands ------------------------------------------------------------------


def test_harness_and_code_mode_switching(home: Path, work: Path, terminals: list[Terminal]) -> None:
    script = [{"text": "code reply"}, {"text": "classic reply"}]
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, home=home, cwd=work)
        term.prompt()
        term.child.send("/harn\t")  # Tab completes the command
        term.expect("/harness")
        term.send_line("")
        term.expect("* native")
        term.prompt()
        term.send_line("/harness nosuch")
        term.expect("unknown harness 'nosuch'")
        term.prompt()
        term.send_line("/code-mode on")
        term.expect("dialect: code mode")
        term.prompt()
        term.child.send("first line")
        term.child.sendcontrol("j")  # a newline, not the end of the message
        term.send_line("second line")
        term.expect("code reply")
        term.prompt()
        term.send_line("/code-mode")
        term.expect("dialect: classic")
        term.prompt()
        term.send_line("/model other-model")
        term.expect("now using other-model via scripted")
        term.prompt()
        term.send_line("second")
        term.expect("classic reply")
        term.prompt()
        term.send_line("/help")
        term.expect("/undo")
        term.prompt()
        term.send_line("/nonsense")
        term.expect("unknown command /nonsense")
        term.prompt()
        assert term.finish() == 0
    code_tools = [t["function"]["name"] for t in server.requests[0].body["tools"]]
    classic_tools = [t["function"]["name"] for t in server.requests[1].body["tools"]]
    assert code_tools == ["exec", "wait"]
    assert server.requests[1].body["model"] == "other-model"
    assert "shell" in classic_tools and "exec" not in classic_tools
    assert server.requests[0].body["messages"][-1]["content"] == "first line\nsecond line"
    # The instructions follow the dialect.
    assert "JavaScript" in server.requests[0].body["messages"][0]["content"]
    assert "JavaScript" not in server.requests[1].body["messages"][0]["content"]


def test_ctrl_c_kills_a_long_command_and_the_session_goes_on(
    home: Path, work: Path, terminals: list[Terminal]
) -> None:
    long_command = "echo $$ > pid.txt; sleep 120; echo LATE_$((1+1))"
    script = [
        {"tool_calls": [call("shell", {"command": long_command})]},
        {"text": "still here"},
    ]
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, home=home, cwd=work)
        term.prompt()
        term.send_line("wait a while")
        term.expect("$ echo $$ > pid.txt")
        pid_file = work / "pid.txt"
        deadline = time.monotonic() + WAIT
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.1)
        pid = int(pid_file.read_text())
        term.child.sendintr()
        term.expect("interrupted")
        term.prompt()
        deadline = time.monotonic() + WAIT
        while _alive(pid):
            assert time.monotonic() < deadline, "the shell of the interrupted command lives on"
            time.sleep(0.1)
        term.send_line("are you there?")
        term.expect("still here")
        term.prompt()
        term.child.sendintr()  # at an empty prompt: a hint, then the second one exits
        term.expect("Ctrl-C again")
        term.prompt()
        term.child.sendintr()
        term.child.expect(pexpect.EOF, timeout=WAIT)
        term.child.close()
        assert term.child.exitstatus == 0
    # The interrupted call was answered, so the next request was well formed.
    assert "interrupted" in sent_text(server, 1)
    assert "LATE_2" not in sent_text(server, 1)


def test_ctrl_c_stops_a_program_spinning_in_javascript(
    home: Path, work: Path, terminals: list[Terminal]
) -> None:
    # exec_timeout_s is long: only Ctrl-C can end this program within the test.
    spin = "console.log('spinning'); while (true) {}"
    script = [
        {"tool_calls": [call("exec", {"code": spin})]},
        {"text": "back again"},
    ]
    with ScriptedModelServer(script) as server:
        term = start(
            terminals, server, "--code-mode", "-c", "exec_timeout_s=600", home=home, cwd=work
        )
        term.prompt()
        term.send_line("spin")
        term.expect("spinning")
        started = time.monotonic()
        term.child.sendintr()
        term.expect("interrupted")
        term.prompt()
        assert time.monotonic() - started < WAIT
        term.send_line("still there?")
        term.expect("back again")
        term.prompt()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


def test_resume_last_reopens_interactively(
    home: Path, work: Path, terminals: list[Terminal]
) -> None:
    script = [{"text": "first answer"}, {"text": "second answer"}]
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, "remember the word kumquat", home=home, cwd=work)
        term.expect("first answer")
        term.prompt()
        assert term.finish() == 0
        flags = provider_flags(server.base_url, "chat")
        again = Terminal(["resume", "--last", *flags], home=home, cwd=work)
        terminals.append(again)
        again.expect("resumed test-model")
        again.expect("remember the word kumquat")
        again.prompt()
        again.send_line("/code-mode")  # recorded: the next resume is in code mode
        again.expect("dialect: code mode")
        again.prompt()
        again.send_line("what was the word?")
        again.expect("second answer")
        again.prompt()
        assert len(session_files(home)) == 1  # the same session file, continued
        first_id = session_files(home)[0].stem
        again.send_line("/new")
        again.expect("session ")
        again.prompt()
        again.send_line("/resume")
        again.expect(first_id)  # listed
        again.prompt()
        again.send_line("/code-mode off")
        again.expect("dialect: classic")
        again.prompt()
        again.send_line(f"/resume {first_id[-6:]}")
        again.expect("resumed test-model · native code")
        again.expect("what was the word?")
        again.prompt()
        assert again.finish() == 0
    assert "kumquat" in sent_text(server, 1) and "first answer" in sent_text(server, 1)
    files = session_files(home)
    assert len(files) == 1  # the session /new opened got no message, so it left no file
    prompts = [r for r in records(home / "sessions" / f"{first_id}.jsonl") if r.get("prompt")]
    assert len(prompts) == 2


def test_undo_reverts_the_last_turn_without_git(
    home: Path, work: Path, terminals: list[Terminal]
) -> None:
    script = [
        {
            "tool_calls": [
                call("write_file", {"path": "sub/new.txt", "content": "fresh\n"}),
                call("shell", {"command": "echo changed > notes.txt"}),
            ]
        },
        {"text": "Edited."},
    ]
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, home=home, cwd=work)
        term.prompt()
        term.send_line("edit things")
        term.expect("A sub/new.txt")  # the write as a diff
        term.expect("+fresh")
        term.expect("Edited.")
        term.expect("changed: notes.txt, sub/new.txt")
        term.prompt()
        assert (work / "notes.txt").read_text() == "changed\n"
        term.send_line("/diff")  # no git here: the files the turns changed
        term.expect("not a git repository")
        term.expect("sub/new.txt")
        term.prompt()
        term.send_line("/undo")
        term.expect("restored notes.txt")
        term.expect("removed sub/new.txt")
        term.prompt()
        term.send_line("/undo")
        term.expect("nothing to undo")
        term.prompt()
        term.send_line("/compact")
        term.expect("compacted ")
        term.prompt()
        assert term.finish() == 0
    assert server.requests  # the turn reached the model
    assert (work / "notes.txt").read_text() == "alpha\nbeta\n"
    assert not (work / "sub").exists()


# --- first run, plain output ---------------------------------------------------------


def test_first_run_wizard_writes_the_config_and_keeps_its_content(
    home: Path, work: Path, terminals: list[Terminal]
) -> None:
    config = home / "config.toml"
    config.write_text("# my settings\nmax_turns = 7\n", encoding="utf-8")
    with ScriptedModelServer([{"text": "hello from the new provider"}]) as server:
        term = Terminal([], home=home, cwd=work)
        terminals.append(term)
        term.expect("No model provider is configured yet")
        term.expect("provider (number or name)")
        term.send_line("other")
        term.expect("base URL")
        term.send_line(server.base_url)
        term.expect("wire")
        term.send_line("")
        term.expect("model")
        term.send_line("wizard-model")
        term.expect("Code mode: the model writes short JavaScript programs")
        term.expect("use code mode? [Y/n]")
        term.send_line("")
        term.expect("wrote")
        term.prompt()
        term.send_line("hi")
        term.expect("hello from the new provider")
        term.prompt()
        assert term.finish() == 0
    text = config.read_text(encoding="utf-8")
    assert "# my settings" in text and "max_turns = 7" in text
    assert 'model_provider = "local"' in text and 'model = "wizard-model"' in text
    assert "code_mode = true" in text
    assert server.requests[0].body["model"] == "wizard-model"
    tools = server.requests[0].body.get("tools") or []
    assert [t["function"]["name"] for t in tools] == ["exec", "wait"]  # the code dialect


def test_plain_output_without_a_terminal(home: Path, work: Path) -> None:
    (home / "rules").mkdir()
    (home / "rules" / "team.rules").write_text(
        'prefix_rule(pattern=["touch"], decision="prompt")\n', encoding="utf-8"
    )
    script = [
        {"tool_calls": [call("shell", {"command": "touch piped.txt; echo piped-run"})]},
        {"text": "Plain **answer**. " + "long " * 40},
    ]
    with ScriptedModelServer(script) as server:
        proc = subprocess.run(
            [
                str(INTERPRETER),
                *provider_flags(server.base_url, "chat"),
                "--sandbox",
                "danger-full-access",
            ],
            input="say something\ny\n/status\n",  # y: the approval
            capture_output=True,
            text=True,
            cwd=work,
            env=cli_env(home, TERM="xterm-256color"),
            timeout=60,
        )
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout
    assert "approval needed" in proc.stdout and (work / "piped.txt").exists()
    assert "$ touch piped.txt; echo piped-run" in proc.stdout and "piped-run" in proc.stdout
    assert "Plain **answer**." in proc.stdout  # the model's markdown as written
    assert "dialect    classic" in proc.stdout
    assert "long " * 40 in proc.stdout  # not folded at 80 columns


def test_no_color_in_a_terminal(home: Path, work: Path, terminals: list[Terminal]) -> None:
    script = [{"tool_calls": [call("shell", {"command": "false"})]}, {"text": "It failed."}]
    with ScriptedModelServer(script) as server:
        term = start(terminals, server, "run false", home=home, cwd=work, NO_COLOR="1")
        before = term.expect("It failed.")
        term.prompt()
        assert term.finish() == 0
    assert "✗ exit 1" in before
    colours = re.compile(r"\x1b\[[0-9;]*3[0-7]m|\x1b\[[0-9;]*38;")
    assert not colours.search(term.log)
