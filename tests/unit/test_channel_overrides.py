"""A channel's own model, tools and persona for one run: the agent's defaults stay as they
are, the persona sits below every core instruction, and the trace says what was in effect."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from core import prompt
from core.agent import Agent
from core.events import Finished
from core.scripted import ScriptedModel
from core.tools import FunctionTool, ToolRegistry
from core.trace import Trace
from tests.properties import property_settings


def registry(*names: str) -> ToolRegistry:
    tools = ToolRegistry()
    for name in names:

        async def run(arg: str, name: str = name) -> str:
            return f"{name} says {arg}"

        tools.add(FunctionTool(name, run, f"The {name} tool.", f"{name}[x]"))
    return tools


async def test_a_run_uses_the_channels_model_and_tools_and_leaves_the_defaults_alone() -> None:
    default = ScriptedModel([], model_name="default-model")
    channel = ScriptedModel(
        ["Thought: ask.\nAction: weather[Paris]", "Answer: sunny"], model_name="channel-model"
    )
    agent = Agent(default, registry("calculate"))
    final = await agent.start("weather?", model=channel, tools=registry("weather")).wait()
    assert isinstance(final, Finished) and final.answer == "sunny"
    assert default.calls == [], "the default model was not asked"
    assert final.trace.models == ["channel-model"]
    system = channel.calls[0].messages[0]["content"]
    assert "- weather:" in system and "- calculate:" not in system
    assert final.trace.steps[0].observation == "weather says Paris"
    again = Agent(ScriptedModel(["Answer: 4"]), registry("calculate"))
    assert (await again.start("2+2").wait()).trace.models == ["scripted"]


async def test_a_tool_the_channel_turned_off_is_an_unknown_action() -> None:
    model = ScriptedModel(["Thought: x.\nAction: calculate[1+1]", "Answer: done"])
    final = await Agent(model, registry("calculate")).start("q", tools=ToolRegistry()).wait()
    observation = final.trace.steps[0].observation or ""
    assert observation.startswith("Unknown action 'calculate'")


async def test_the_persona_comes_after_the_core_instructions_and_is_kept_in_the_trace() -> None:
    model = ScriptedModel(["Answer: Arr, 4."])
    agent = Agent(model, registry("calculate"))
    final = await agent.start("2+2?", persona="  Talk like a pirate.  ").wait()
    system = model.calls[0].messages[0]["content"]
    core = prompt.system_prompt(agent.tools, "text")
    assert system.startswith(core), "the core instructions come first, untouched"
    assert system.endswith(f"{prompt.PERSONA_OPEN}\nTalk like a pirate.\n{prompt.PERSONA_CLOSE}")
    assert "reply format or the tool rules above" in system
    trace = final.trace
    assert trace.persona == "Talk like a pirate."
    assert Trace.from_json(trace.to_json()).persona == "Talk like a pirate."
    assert "**Channel persona:**" in trace.to_markdown()
    assert "channel persona" in Trace.from_json(trace.to_json()).to_markdown().lower()
    old = trace.to_dict()
    del old["persona"]
    assert Trace.from_dict(old).persona == "", "traces from before personas still load"


@property_settings(200)
@given(persona=st.text(max_size=3000), mode=st.sampled_from(["text", "tools", "json"]))
def test_no_persona_can_close_its_fence_or_displace_the_core_prompt(
    persona: str, mode: str
) -> None:
    tools = registry("calculate")
    core = prompt.system_prompt(tools, mode)  # type: ignore[arg-type]
    system = prompt.system_prompt(tools, mode, persona)  # type: ignore[arg-type]
    assert system.startswith(core)
    section = system[len(core) :]
    if not persona.strip():
        assert section == ""
        return
    assert section.count(prompt.PERSONA_OPEN) == 1 and section.count(prompt.PERSONA_CLOSE) == 1
    assert section.endswith(prompt.PERSONA_CLOSE)
    body = section.split(prompt.PERSONA_OPEN + "\n", 1)[1]
    assert len(body) <= prompt.PERSONA_CHARS + len(prompt.PERSONA_CLOSE) + 1 + 16


async def test_a_channels_model_writes_its_own_answer_not_the_default_answer_model() -> None:
    """``model.answer_model`` polishes the default model's answers; a run on a channel's (or
    a question's) own model is that model's run from the first step to the answer, so a
    comparison across channels compares the models chosen, and a vision model's images never
    reach a default answer model that cannot read them."""
    default = ScriptedModel([], model_name="default-model")
    large = ScriptedModel([], model_name="default-answer-model")
    channel = ScriptedModel(["Thought: easy.\nAction: finish[4]"], model_name="channel-model")
    agent = Agent(default, registry("calculate"), answer_model=large)
    final = await agent.start("2+2?", model=channel, images=["data:image/png;base64,AAAA"]).wait()
    assert isinstance(final, Finished) and final.answer == "4"
    assert large.calls == [], "the default answer model was not asked"
    assert final.trace.models == ["channel-model"]
    channel.assert_complete()
    polished = ScriptedModel(["Thought: polish\nAction: finish[Four.]"], model_name="large")
    steps = ScriptedModel(["Thought: ok\nAction: finish[4]"], model_name="small")
    done = await Agent(steps, registry(), answer_model=polished).start("2+2?").wait()
    assert done.trace.models == ["small", "large"], "the default's answer model still answers"
