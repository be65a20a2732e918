"""How well pocketsphinx hears espeak-ng: the word error rate on a dozen spoken questions,
offline (the measure behind "no ``stt.model: local``" in docs/voice.md).

Run: ``.venv/bin/python bench/speech_local.py``. Each question is spoken by Debian's
espeak-ng (default English voice, its own 22,050 Hz) and heard by pocketsphinx's English
model (inside its wheel); it prints what was heard, each question's word errors, the
seconds each took to hear, the total word error rate and the machine's load.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.spoken import ESPEAK, recognise, speak, word_error_rate

QUESTIONS = [
    "What is the capital of France",
    "How many days are in a week",
    "What time is it in London",
    "Who wrote the book about the white whale",
    "What is seventeen times twenty three",
    "How do I reset my password",
    "What is the weather like today",
    "Tell me a joke about computers",
    "How far is the moon from the earth",
    "What is the population of Germany",
    "Can you summarize the last meeting",
    "Where is the nearest train station",
]


def main() -> None:
    if ESPEAK is None:
        sys.exit("espeak-ng is not installed: scripts/ensure-espeak")
    print(f"load before: {Path('/proc/loadavg').read_text().split()[:3]}")
    errors = words = 0.0
    for question in QUESTIONS:
        wav = speak(question)
        started = time.perf_counter()
        heard = recognise(wav)
        took = time.perf_counter() - started
        rate = word_error_rate(question, heard)
        errors += rate * len(question.split())
        words += len(question.split())
        print(f"{rate:5.0%}  {took:5.2f} s  {question!r} -> {heard!r}")
    print(
        f"word error rate: {errors / words:.0%} over {len(QUESTIONS)} questions, {words:.0f} words"
    )
    print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
