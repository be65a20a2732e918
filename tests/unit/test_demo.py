"""The offline demo model: a fixed policy that writes real ReAct text through the real loop."""

from __future__ import annotations

from core.agent import Agent, AgentSettings
from core.approval import AutoApprover
from core.demo import DemoModel
from core.events import Finished
from core.tools import FunctionTool, ToolError, ToolRegistry, ToolResult


def tools(
    *, lookup_text: str = "1. slack.md › Connect\nInvite the bot with /invite."
) -> ToolRegistry:
    async def calculate(arg: str) -> str:
        if "/0" in arg:
            raise ToolError("division by zero")
        return "1024"

    async def lookup(arg: str) -> ToolResult:
        return ToolResult(lookup_text, sources=("slack.md",))

    registry = ToolRegistry()
    registry.add(FunctionTool("calculate", calculate, "Arithmetic.", "calculate[2+2]"))
    registry.add(FunctionTool("lookup", lookup, "Knowledge base.", "lookup[slack]"))
    return registry


async def answer(question: str, registry: ToolRegistry | None = None) -> Finished:
    registry = tools() if registry is None else registry
    events = [e async for e in Agent(DemoModel(), registry).run(question)]
    final = events[-1]
    assert isinstance(final, Finished), final
    return final


async def test_arithmetic_goes_through_calculate_and_says_it_is_the_demo() -> None:
    done = await answer("What is 2^10?")
    first = done.trace.steps[0]
    assert first.thought.startswith("I am the offline demo model")
    assert (first.action, first.action_input, first.observation) == ("calculate", "2^10", "1024")
    assert done.answer == "2^10 = 1024"


async def test_a_refused_expression_is_reported_honestly() -> None:
    done = await answer("What is 1/0?")
    assert done.answer == "The calculator could not evaluate 1/0: Error: division by zero"


async def test_questions_about_the_bot_use_lookup_and_quote_the_best_passage() -> None:
    done = await answer("How do I connect you to Slack?")
    assert done.trace.steps[0].action == "lookup"
    assert done.answer.startswith("Here is what the reactbot knowledge base says:")
    assert "/invite" in done.answer


async def test_no_passage_falls_back_to_how_to_configure_a_model() -> None:
    done = await answer(
        "How do I configure you?", tools(lookup_text="no passage in the knowledge base matches 'x'")
    )
    assert "configure a real model" in done.answer


async def test_anything_else_explains_that_a_real_model_is_needed_in_the_users_language() -> None:
    english = await answer("What is the capital of Peru?")
    assert "configure a real model" in english.answer and english.trace.step_count == 1
    chinese = await answer("秘鲁的首都是哪里？")
    assert "离线演示模型" in chinese.answer


async def test_without_tools_the_demo_still_finishes() -> None:
    done = await answer("What is 2+2?", ToolRegistry())
    assert done.trace.step_count == 1 and "OPENAI_API_KEY" in done.answer
    observations = [s.observation for s in done.trace.steps if s.observation]
    assert observations == []


async def test_how_to_questions_about_what_it_covers_are_looked_up() -> None:
    for question in ("How do I add a tool?", "How do I use MCP servers?", "How do I stop a run?"):
        done = await answer(question)
        assert done.trace.steps[0].action == "lookup", question
        assert done.answer.startswith("Here is what the reactbot knowledge base says:")


async def test_what_can_you_do_is_answered_without_a_tool() -> None:
    done = await answer("What can you do?")
    assert done.trace.steps[0].action is None
    assert "arithmetic" in done.answer and "knowledge base" in done.answer


async def test_percent_off_and_number_words_become_expressions() -> None:
    registry = ToolRegistry()
    seen: list[str] = []

    async def calculate(arg: str) -> str:
        seen.append(arg)
        return {"50-20/100*50": "40", "2 + 2": "4"}[arg]

    registry.add(FunctionTool("calculate", calculate, "Arithmetic.", "calculate[2+2]"))
    assert (await answer("what is 20% off 50?", registry)).answer == "20% off 50 = 40"
    assert (await answer("What's 2 + two?", registry)).answer == "2 + 2 = 4"
    assert seen == ["50-20/100*50", "2 + 2"]


async def test_a_denied_action_is_answered_honestly() -> None:
    """Found by a newcomer: "2+2 = The user denied this action." with a ✓ footer."""
    agent = Agent(
        DemoModel(),
        tools(),
        approve=AutoApprover("deny", by="ada"),
        settings=AgentSettings(approval_tools=frozenset({"calculate"})),
    )
    events = [e async for e in agent.run("What is 2+2?")]
    final = events[-1]
    assert isinstance(final, Finished)
    assert final.answer.startswith("I was not allowed to use the calculator")
    assert "=" not in final.answer.split("(")[0]
