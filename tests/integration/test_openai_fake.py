"""The OpenAI fake's ``when``: replies kept for the requests they are meant for, whatever
order the requests arrive in (several processes asking at once), and the strict script
still refusing a request nobody scripted."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.fakes.openai_server import FakeOpenAI


def asks(word: str) -> Any:
    return lambda body: word in body["messages"][-1]["content"]


async def test_each_request_takes_the_reply_its_when_accepts() -> None:
    async with FakeOpenAI() as fake, aiohttp.ClientSession() as http:
        fake.reply("for alpha", when=asks("alpha")).reply("for beta", when=asks("beta"))
        fake.reply("for anyone")
        url = f"{fake.base_url}/chat/completions"

        async def say(word: str) -> tuple[int, str]:
            body = {"model": "fake-model", "messages": [{"role": "user", "content": word}]}
            async with http.post(url, json=body) as response:
                data = await response.json()
                if response.status != 200:
                    return response.status, ""
                return 200, data["choices"][0]["message"]["content"]

        assert await say("beta") == (200, "for beta")  # asked first, scripted second
        assert await say("gamma") == (200, "for anyone")  # not alpha's, though queued first
        assert await say("alpha") == (200, "for alpha")
        assert await say("alpha") == (500, "")  # answered once: a second run is refused
        assert len(fake.request_times) == len(fake.requests) == 4
        with pytest.raises(AssertionError, match=r"1 request\(s\) arrived with the script empty"):
            fake.assert_complete()
