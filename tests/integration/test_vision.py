"""Images attached to a question reach a model that reads them, as image parts of the
question, through the real openai client to a fake that refuses image parts for a model
that does not (as OpenAI does); a text-only model's channel is told they are ignored."""

from __future__ import annotations

import base64

import pytest

from core.agent import Agent
from core.events import Failed, Finished
from core.files import Incoming, Intake, see
from core.openai_model import OpenAIChatModel, wire_messages
from core.tools import ToolRegistry
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.test_discord_files import CONVERSATION, _is_totals, running

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def test_a_question_with_images_goes_as_content_parts_and_nothing_else_changes() -> None:
    wired = wire_messages(
        [
            {"role": "system", "content": "rules"},
            {
                "role": "user",
                "content": "Question: what is this?",
                "images": ["data:image/png;base64,AA=="],
            },
        ]
    )
    assert wired[0] == {"role": "system", "content": "rules"}
    assert wired[1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Question: what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
        ],
    }


async def test_images_become_data_urls_within_the_limits() -> None:
    async def fetch() -> bytes:
        return PNG

    items = [
        Incoming(f"p{n}.png", len(PNG), "image/png", f"https://x/p{n}.png", fetch) for n in range(3)
    ]
    items.append(Incoming("movie.mp4", 10, "video/mp4", "https://x/movie.mp4", fetch))
    intake = Intake(images=[items[3], *items[:3]])
    urls = await see(intake, max_images=3)
    assert urls == [f"data:image/png;base64,{base64.b64encode(PNG).decode()}"] * 2
    assert intake.shown == urls
    assert intake.notice().splitlines() == [
        "⚠️ movie.mp4: not an image type models read.",
        "⚠️ p2.png: not shown, at most 3 images per question.",
    ]
    assert "ignored" not in intake.notice()
    assert "Images are ignored" in Intake(images=items[:1]).notice()


async def test_a_vision_model_receives_the_images_and_a_text_model_refuses_them() -> None:
    image = f"data:image/png;base64,{base64.b64encode(PNG).decode()}"
    async with FakeOpenAI(model="eyes", vision=True) as fake:
        fake.reply("Thought: I see a tiny PNG.\nAction: finish[A tiny black image.]")
        model = OpenAIChatModel(model="eyes", base_url=fake.base_url, api_key="sk-test")
        try:
            final = await Agent(model, ToolRegistry()).start("What is this?", images=[image]).wait()
        finally:
            await model.aclose()
    assert isinstance(final, Finished) and final.answer == "A tiny black image."
    question = fake.requests[0]["messages"][-1]
    assert question["content"][1] == {"type": "image_url", "image_url": {"url": image}}
    assert "1 attached image(s) shown to the model" in final.trace.notices
    assert "images" not in final.trace.to_json(), "the trace keeps the fact, not the bytes"
    async with FakeOpenAI(model="text-only") as fake:
        model = OpenAIChatModel(model="text-only", base_url=fake.base_url, api_key="sk-test")
        try:
            refused = await Agent(model, ToolRegistry()).start("What?", images=[image]).wait()
        finally:
            await model.aclose()
    assert isinstance(refused, Failed) and "image_url is only supported" in refused.reason


@pytest.mark.parametrize("vision", [True, False])
async def test_a_discord_channel_on_a_vision_model_shows_it_the_attached_image(
    vision: bool,
) -> None:
    async with FakeOpenAI(model="eyes", vision=vision) as fake:
        fake.reply("Thought: Looked.\nAction: finish[It is a PNG.]")
        model = OpenAIChatModel(model="eyes", base_url=fake.base_url, api_key="sk-test")
        try:
            async with running([], catalogue={"eyes": model}) as h:
                h.choices.vision = frozenset({"eyes"}) if vision else frozenset()
                await h.choices.set_model(CONVERSATION, "eyes")
                photo = h.fake.add_attachment("photo.png", PNG, content_type="image/png")
                payload = h.fake.message_create("What is in it?", attachments=[photo])
                await h.fake.dispatch("MESSAGE_CREATE", payload)
                await h.fake.wait_for_calls(_is_totals, 1, within=10)
                said = [c for c in h.fake.calls if "Images are ignored" in str(c.json)]
        finally:
            await model.aclose()
    content = fake.requests[0]["messages"][-1]["content"]
    if vision:
        expected = f"data:image/png;base64,{base64.b64encode(PNG).decode()}"
        assert content[1]["image_url"]["url"] == expected and said == []
    else:
        assert isinstance(content, str) and len(said) == 1
