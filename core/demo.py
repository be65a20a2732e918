"""The offline demo model: a small deterministic policy that writes genuine ReAct text.

Used when no model is configured, so a fresh clone shows the whole loop with no key and no
network. It is not a language model and says so in its first thought:

- arithmetic in the question (a percentage of a number too) -> ``calculate`` -> answer with
  the result;
- a question about the bot itself -> ``lookup`` in the bundled knowledge base -> quote it;
- anything else -> an answer that says plainly it cannot answer, what it can do, and how to
  configure a real model.

It speaks all three modes: ReAct text, native tool calls (when it is given ``tools``) and a
JSON object (when it is given a ``response_format``), deciding the same way in each.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from core.cuts import cut_in
from core.llm import (
    Message,
    ModelChunk,
    ResponseFormat,
    ToolCallDelta,
    ToolSpec,
    stream_text,
)

_MATH = re.compile(
    r"(?:\d[\d_]*(?:\.\d+)?(?:e[-+]?\d+)?|\b(?:sqrt|sin|cos|tan|asin|acos|atan|log10|log2|log|exp"
    r"|abs|round|floor|ceil|factorial|hypot|min|max|pi)\b|[-+*/^%()×÷.,]|\s)+",
    re.IGNORECASE,
)
_OPERATOR = re.compile(r"[-+*/^%×÷]|\b[a-z]+\(", re.IGNORECASE)
_NUMBER = r"\d[\d_]*(?:\.\d+)?"
_ABOUT_BOT = re.compile(
    r"\b(you|your|reactbot|bot|slack|discord|telegram|web chat|config\w*|install\w*|setup|"
    r"set up|trace\w*|redis|command|commands|model|token|key|tools?|mcp|stop|approv\w*|"
    r"persona|verbosity|thread|mention)\b|^\s*how (?:do|can|should) (?:i|we|you)\b|"
    r"你|机器人|配置|安装|连接|命令",
    re.IGNORECASE,
)
_WHAT_CAN_YOU_DO = re.compile(
    r"^\s*what (?:can|do) you (?:do|know)\b|^\s*who are you\b|^\s*help\s*[?!.]*$",
    re.IGNORECASE,
)
_PERCENT_OFF = re.compile(
    rf"(?P<rate>{_NUMBER})\s*(?:%|％|percent\b|per cent\b)\s*off\s+(?P<base>{_NUMBER})",
    re.IGNORECASE,
)
_NUMBER_WORDS = {
    w: str(n)
    for n, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ]
    )
}
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
_DENIED = ("The user denied this action", "No decision within", "This tool needs a person")


def _has_cjk(text: str) -> bool:
    """Whether ``text`` holds a Han character (U+3400-U+9FFF); no regex, whose class of
    27,000 code points took a few ms of every start-up to compile."""
    return not text.isascii() and any("\u3400" <= ch <= "\u9fff" for ch in text)


_PERCENT_OF = re.compile(
    rf"(?P<rate>{_NUMBER})\s*(?:%|％|percent\b|per cent\b)\s*of\s+(?P<base>{_NUMBER})",
    re.IGNORECASE,
)
_OF_PERCENT = re.compile(
    rf"(?P<base>{_NUMBER})\s*的\s*(?:百分之(?P<zh>{_NUMBER})|(?P<rate>{_NUMBER})\s*[%％])"
)
_OBSERVATION = re.compile(r"<observation>\n?(.*?)\n?</observation>", re.DOTALL)
_NEXT_RESULT = re.compile(r"\n\s*\n2\. [^\n]*\.[A-Za-z0-9]{1,10}(?:, page \d+| › [^\n]*)?\n")
"""Where lookup's second result starts: its number and the file it is from."""
_FILES_NOTE = "attached in this conversation"
"""What ``lookup``'s description says when the conversation has files (``core.knowledge``)."""
_REACT_ACTION = re.compile(r"Action: (\w+)\[(.*)\]\s*$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Decision:
    """One step of the policy, before it is written in a mode's format."""

    thought: str
    action: tuple[str, str] | None = None
    answer: str | None = None

    def as_text(self) -> str:
        name, argument = self.action or ("finish", self.answer or "")
        return f"Thought: {self.thought}\nAction: {name}[{argument}]"

    def as_json(self) -> str:
        action = {"name": self.action[0], "input": self.action[1]} if self.action else None
        step = {"thought": self.thought, "action": action, "answer": self.answer}
        return json.dumps(step, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class _Turn:
    question: str
    tools: frozenset[str]
    observations: list[str]
    last_action: tuple[str, str] | None
    must_finish: bool
    files: bool = False
    """The conversation has attached files (its ``lookup`` says it searches them)."""


class DemoModel:
    """Deterministic; streams its reply in small chunks (``delay`` seconds apart)."""

    def __init__(self, *, chunk_size: int = 4, delay: float = 0.0) -> None:
        self.chunk_size = chunk_size
        self.delay = delay

    @property
    def name(self) -> str:
        return "offline demo model"

    def stream(
        self,
        messages: Sequence[Message],
        *,
        stop: Sequence[str],
        tools: Sequence[ToolSpec] | None = None,
        response_format: ResponseFormat | None = None,
    ) -> AsyncIterator[ModelChunk]:
        decision = decide(_read(messages, tools))
        if response_format is not None:
            return stream_text(decision.as_json(), size=self.chunk_size, delay=self.delay)
        if tools is not None or _native(messages):
            return self._native(decision, tools or ())
        return stream_text(decision.as_text(), size=self.chunk_size, delay=self.delay)

    async def _native(
        self, decision: Decision, tools: Sequence[ToolSpec]
    ) -> AsyncIterator[ModelChunk]:
        """The thought (or the answer) as content, then the call, as providers stream them."""
        text = decision.thought if decision.action else (decision.answer or "")
        async for chunk in stream_text(text, size=self.chunk_size, delay=self.delay):
            yield chunk
        if decision.action is not None:
            name, argument = decision.action
            arguments = json.dumps({_input_name(tools, name): argument}, ensure_ascii=False)
            yield ModelChunk(tool_calls=(ToolCallDelta(0, "call_demo", name, arguments),))
            yield ModelChunk(finish="tool_calls")


def _native(messages: Sequence[Message]) -> bool:
    return any(m["role"] == "tool" for m in messages)


def _input_name(tools: Sequence[ToolSpec], name: str) -> str:
    for spec in tools:
        function = spec.get("function", {})
        if function.get("name") == name:
            required = function.get("parameters", {}).get("required") or ["input"]
            return str(required[0])
    return "input"


def _read(messages: Sequence[Message], specs: Sequence[ToolSpec] | None = None) -> _Turn:
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    tools = frozenset(re.findall(r"^- (\w+):", system, re.MULTILINE))
    tools |= {str(s.get("function", {}).get("name")) for s in specs or ()}
    start = max(
        (i for i, m in enumerate(messages) if m["content"].startswith("Question: ")), default=0
    )
    question = messages[start]["content"].removeprefix("Question: ") if messages else ""
    after = messages[start + 1 :]
    observations = [
        found.group(1)
        for m in after
        if m["role"] in ("user", "tool") and (found := _OBSERVATION.search(m["content"]))
    ]
    actions = [_action_in(m) for m in after if m["role"] == "assistant"]
    must_finish = (
        bool(after)
        and after[-1]["role"] == "user"
        and not after[-1]["content"].startswith("Observation:")
    )
    last_action = actions[-1] if actions else None
    described = [system, *(str(s.get("function", {}).get("description", "")) for s in specs or ())]
    files = any(_FILES_NOTE in text for text in described)
    return _Turn(question, tools, observations, last_action, must_finish, files)


def _action_in(message: Message) -> tuple[str, str] | None:
    """The action an earlier reply took, whatever the mode it was written in."""
    for call in message.get("tool_calls", ()):
        arguments = json.loads(call["function"]["arguments"] or "{}")
        return call["function"]["name"], str(next(iter(arguments.values()), ""))
    content = message["content"]
    if content.lstrip().startswith("{"):
        try:
            action = json.loads(content).get("action")
        except (ValueError, AttributeError):
            return None
        return (str(action["name"]), str(action["input"])) if isinstance(action, dict) else None
    found = _REACT_ACTION.search(content)
    return (found.group(1), found.group(2)) if found else None


def reply_for(turn: _Turn) -> str:
    """The policy's reply in the ReAct text format."""
    return decide(turn).as_text()


def decide(turn: _Turn) -> Decision:
    chinese = _has_cjk(turn.question)
    if turn.observations:
        return _answer_from(turn, turn.observations[-1], chinese)
    intro = (
        "我是离线演示模型（没有配置语言模型），按固定规则工作。"
        if chinese
        else "I am the offline demo model (no language model is configured), following a fixed policy."
    )
    if _WHAT_CAN_YOU_DO.search(turn.question):
        return Decision(f"{intro} This asks what I can do; I can say that myself.", answer=CAN_DO)
    expression = _find_expression(turn.question)
    if expression and "calculate" in turn.tools and not turn.must_finish:
        plan = (
            "这是算术，我用计算器。"
            if chinese
            else "This is arithmetic, so I will use the calculator."
        )
        return Decision(f"{intro} {plan}", ("calculate", expression))
    about_bot = _ABOUT_BOT.search(turn.question)
    if (about_bot or turn.files) and "lookup" in turn.tools and not turn.must_finish:
        if about_bot:
            plan = (
                "这是关于 reactbot 的问题，我查一下知识库。"
                if chinese
                else "This is a question about reactbot, so I will look it up in the knowledge base."
            )
        else:
            plan = (
                "这个对话附有文件，我在其中查找。"
                if chinese
                else "This conversation has attached files, so I will look it up in them."
            )
        keywords = turn.question.strip().rstrip("?？")
        return Decision(f"{intro} {plan}", ("lookup", keywords))
    return Decision(f"{intro} {_no_model_thought(chinese)}", answer=_no_model_answer(chinese))


def _answer_from(turn: _Turn, observation: str, chinese: bool) -> Decision:
    name, expression = turn.last_action or ("", "")
    if observation.startswith(_DENIED):  # a person said no (or nobody said yes): say so
        tool = "the calculator" if name == "calculate" else f"the {name} tool"
        answer = (
            f"我没有得到使用{tool}的许可，所以无法给出结果。{observation}"
            if chinese
            else f"I was not allowed to use {tool}, so I cannot give the result. ({observation})"
        )
        return Decision("The action was not allowed.", answer=answer)
    if name == "calculate":
        if observation.startswith("Error"):
            answer = (
                f"计算器无法计算 {expression}：{observation}"
                if chinese
                else f"The calculator could not evaluate {expression}: {observation}"
            )
            return Decision("The calculator refused the expression.", answer=answer)
        percentage = _percentage(turn.question)
        said = expression
        if percentage is not None and percentage[2] == expression:
            rate, base, _ = percentage
            if rate.endswith(" off"):
                said = f"{base} 减去 {rate[:-4]}" if chinese else f"{rate} {base}"
            else:
                said = f"{base} 的 {rate}%" if chinese else f"{rate}% of {base}"
        # "22/7 = 22/7 = 3.142857142857…": the fraction the calculator leads with is the
        # expression itself when nothing was left to reduce.
        answer = f"{said} = {observation.removeprefix(expression.replace(' ', '') + ' = ')}"
        thought = "计算器给出了结果。" if chinese else "The calculator returned the result."
        return Decision(thought, answer=answer)
    # The best section, whole (the tool bounds it): every step of a how-to, not its first line.
    passage = _NEXT_RESULT.split(observation.strip(), maxsplit=1)[0]
    if passage.startswith("no passage") or passage.startswith("Error"):
        return Decision("The knowledge base has nothing on this.", answer=_no_model_answer(chinese))
    if turn.files:
        lead = (
            "找到的最相关内容："
            if chinese
            else "Here is the best match in the attached files and the knowledge base:"
        )
    else:
        lead = (
            "知识库中的相关内容：" if chinese else "Here is what the reactbot knowledge base says:"
        )
    thought = "知识库里有答案。" if chinese else "The knowledge base has a matching passage."
    return Decision(thought, answer=f"{lead}\n{_whole_or_pointed(passage, chinese)}")


def _whole_or_pointed(passage: str, chinese: bool) -> str:
    """The passage as the model read it; when it was shortened for the model (at a heading,
    ``core.cuts``), what was shown and where the whole section is."""
    cut = cut_in(passage)
    if cut is None:
        return passage
    label = cut.shown.partition("\n")[0].removeprefix("1. ").strip()
    if chinese:
        more = (
            f"（本节还有 {cut.rest:,} 个字符：完整内容见 {label}；"
            "这次回答的 trace 保存了完整的查找结果。）"
        )
    else:
        more = (
            f"(This section goes on for {cut.rest:,} more characters: all of it is in "
            f"{label}, and this answer's trace keeps the whole lookup result.)"
        )
    return f"{cut.shown}\n\n{more}"


def _percentage(question: str) -> tuple[str, str, str] | None:
    """``("15", "80", "15/100*80")`` for a percentage of a number (English or Chinese);
    "20% off 50" is what is left: ``50-20/100*50``."""
    off = _PERCENT_OFF.search(question)
    if off is not None:
        rate, base = off.group("rate"), off.group("base")
        return f"{rate}% off", base, f"{base}-{rate}/100*{base}"
    found = _PERCENT_OF.search(question) or _OF_PERCENT.search(question)
    if found is None:
        return None
    rate = found.group("rate") or found.group("zh")
    base = found.group("base")
    return rate, base, f"{rate}/100*{base}"


def _find_expression(question: str) -> str | None:
    percentage = _percentage(question)
    if percentage is not None:
        return percentage[2]
    # "2 + two": number words up to twelve count as digits.
    question = _NUMBER_WORD.sub(lambda m: _NUMBER_WORDS[m.group(1).lower()], question)
    candidates = [m.group(0).strip(" ,.") for m in _MATH.finditer(question)]
    usable = [c for c in candidates if re.search(r"\d", c) and _OPERATOR.search(c)]
    return max(usable, key=len) if usable else None


CAN_DO = (
    "I am reactbot's offline demo model, a fixed policy rather than a language model. I can do "
    'arithmetic with the calculate tool ("What is 17*23+4?", "what\'s 15% of 80?", "20% off '
    '50") and answer questions about reactbot from its knowledge base with the lookup tool '
    '("How do I connect you to Slack?", "How do I add a tool?", "How do I stop a run?"). '
    "Each step is shown as it happens: Thought, Action, Observation, then the Answer. For "
    "anything else, configure a real model: set REACTBOT_MODEL and OPENAI_API_KEY (or "
    "OPENAI_BASE_URL for any OpenAI-compatible server)."
)
"""What the demo says it can do ("What can you do?", a suggested prompt on Slack)."""


def _no_model_thought(chinese: bool) -> str:
    return (
        "这个问题需要真正的语言模型来回答。"
        if chinese
        else "Answering this needs a real language model, which is not configured."
    )


def _no_model_answer(chinese: bool) -> str:
    if chinese:
        return (
            "这个问题我回答不了。我是离线演示模型，不是语言模型：只能做算术（包括百分比）和查询 "
            "reactbot 的知识库，不能回答其他问题，也不能上网搜索。要回答这个问题，请配置一个真正的模型："
            "设置 REACTBOT_MODEL（例如 gpt-4o-mini）和 OPENAI_API_KEY，或用 OPENAI_BASE_URL 指向 "
            "Ollama、vLLM、llama.cpp 等兼容 OpenAI 的服务，然后再问一次。"
        )
    return (
        "I can't answer this. I am the offline demo model, not a language model: I can only do "
        "arithmetic (percentages too) and look things up in reactbot's own knowledge base; I "
        "cannot answer other questions or search the web. To answer this, configure a real "
        "model: set REACTBOT_MODEL (e.g. gpt-4o-mini) and OPENAI_API_KEY, or point "
        "OPENAI_BASE_URL at any OpenAI-compatible server (Ollama, vLLM, llama.cpp), then ask "
        "again."
    )
