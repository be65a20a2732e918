"""The README's and docs' examples work as written (documentation that lies is a bug)."""

from __future__ import annotations

import re
from pathlib import Path

from core.agent import Agent
from core.events import Finished, ObservationReady
from core.scripted import ScriptedModel
from core.tools import ToolRegistry

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
TOOLS = REPO / "docs" / "tools.md"
SURFACES = REPO / "docs" / "discord-and-slack.md"


async def test_the_readme_example_tool_runs_in_the_loop() -> None:
    section = TOOLS.read_text().split("## Add a tool", 1)[1]
    snippet = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert snippet is not None
    registry = ToolRegistry()
    exec(snippet.group(1), {"registry": registry})  # our own documentation, not model output
    model = ScriptedModel(
        ["Thought: count\nAction: word_count[one two three]", "Thought: ok\nAction: finish[3]"]
    )
    events = [e async for e in Agent(model, registry).run("How many words?")]
    observation = next(e for e in events if isinstance(e, ObservationReady))
    assert observation.text == "3 words"
    assert (
        "word_count: Counts words. Example: word_count[a b c]"
        in model.calls[0].messages[0]["content"]
    )
    assert isinstance(events[-1], Finished)


async def test_the_readme_multi_argument_tool_runs_and_is_checked() -> None:
    section = TOOLS.read_text().split("## Add a tool", 1)[1]
    snippets = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(snippets) == 2
    registry = ToolRegistry()
    namespace = {"registry": registry}
    exec("from core.tools import FunctionTool\n" + snippets[1], namespace)  # our own docs
    model = ScriptedModel(
        [
            'Thought: convert\nAction: convert[{"amount": 3, "unit": "yards"}]',
            'Thought: again\nAction: convert[{"amount": 3, "unit": "km"}]',
            "Thought: ok\nAction: finish[1.86 mi]",
        ]
    )
    events = [e async for e in Agent(model, registry).run("3 km in miles?")]
    observations = [e.text for e in events if isinstance(e, ObservationReady)]
    assert observations[0].startswith("Error: convert: field 'unit': 'yards' is not one of")
    assert observations[1] == "1.86 mi"
    assert isinstance(events[-1], Finished)


def test_the_readme_mcp_examples_are_valid_configs(tmp_path: Path) -> None:
    from bot.config import load_config

    section = TOOLS.read_text().split("## Bring your own tools: MCP servers", 1)[1]
    stdio, http = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)[:2]
    assert len(stdio.splitlines()) <= 10 and len(http.splitlines()) <= 10
    (tmp_path / "stdio.yaml").write_text(stdio)
    (tmp_path / "http.yaml").write_text(http)
    env = {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_x", "GITHUB_MCP_AUTH": "Bearer ghp_x"}
    (github,) = load_config(tmp_path / "stdio.yaml", env).tools.mcp.servers
    assert github.transport == "stdio" and github.env_from == ("GITHUB_PERSONAL_ACCESS_TOKEN",)
    assert github.tools == ("search_issues", "get_issue")
    config = load_config(tmp_path / "http.yaml", env)
    (remote,) = config.tools.mcp.servers
    assert remote.transport == "http" and remote.approval is True
    assert config.tools.mcp.timeout == 60
    assert config.secrets.mcp["GITHUB_MCP_AUTH"].get_secret_value() == "Bearer ghp_x"


def test_the_readme_slack_streaming_example_is_a_valid_config(tmp_path: Path) -> None:
    from bot.config import load_config

    section = SURFACES.read_text().split("### Slack: native streaming", 1)[1]
    snippet = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)[0]
    path = tmp_path / "config.yaml"
    path.write_text(snippet)
    slack = load_config(path, {}).slack
    assert slack.streaming_mode == "auto"
    assert [p.title for p in slack.suggested_prompts] == ["Calculate"]


def test_the_readme_settings_example_is_a_valid_config(tmp_path: Path) -> None:
    from bot.config import load_config

    section = README.read_text().split("## The settings everyone changes", 1)[1]
    snippet = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)[0]
    path = tmp_path / "config.yaml"
    path.write_text(snippet)
    config = load_config(path, {"REACTBOT_LINK_SECRET": "x" * 32})
    assert config.agent.mode == "tools" and config.slack.verbosity == "compact"
    assert config.agent.approval.tools == ("calculate",)


def test_the_readme_stays_short_and_its_links_resolve() -> None:
    text = README.read_text()
    assert len(text.splitlines()) < 250
    for target in re.findall(r"\]\(((?:docs|bot)/[^)#]+)\)", text):
        assert (REPO / target).exists(), target
    for page in (REPO / "docs").glob("*.md"):
        for target in re.findall(r"\]\((?!https?:)([^)#]+)\)", page.read_text()):
            assert (page.parent / target).resolve().exists(), f"{page.name}: {target}"
