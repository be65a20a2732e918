"""The totals under a natively streamed Slack reply say what the chat.update rendering's
footer says about the run's choices: its model, and "channel persona" when a channel's
persona was in effect (issue 16's footer, on the streamed path too)."""

from __future__ import annotations

from adapters.live import RunView
from adapters.slack.stream_render import stop_blocks
from core.agent import Agent
from core.scripted import ScriptedModel
from core.tools import ToolRegistry


async def _totals(persona: str) -> str:
    model = ScriptedModel(["Thought: easy\nAction: finish[4]"], model_name="channel-model")
    run = Agent(model, ToolRegistry()).start("2+2?", persona=persona)
    view = RunView(question="2+2?")
    async for event in run.events():
        view.apply(event)
    assert view.is_final
    text: str = stop_blocks(view, run.trace.id)[0]["elements"][0]["text"]
    return text


async def test_the_streamed_totals_name_the_model_and_the_channel_persona() -> None:
    with_persona = await _totals("Talk like a pirate.")
    assert "channel-model" in with_persona
    assert "channel persona" in with_persona
    assert "channel persona" not in await _totals("")
