"""Real speech for the voice tests, offline: Debian's espeak-ng speaks a sentence into a WAV
file, pocketsphinx (an English model inside its wheel) hears it. Used as the speech fake's
recogniser (``FakeSpeech.hear(recognise)``) and by ``bench/speech_local.py``.

How well they understand each other (bench/speech_local.py, a dozen questions): a word error
rate near 70 %, far from what a question needs, so no embedded ``stt.model: local`` is built
on them; they prove real audio crosses the wire, the fakes and the pipeline end to end.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import wave

__all__ = ["ESPEAK", "recognise", "speak", "word_error_rate"]

ESPEAK = shutil.which("espeak-ng")
"""The synthesiser's path; None where it is not installed (``scripts/ensure-espeak``)."""


def speak(text: str) -> bytes:
    """``text`` spoken by espeak-ng's default English voice: a 16-bit mono WAV file."""
    if ESPEAK is None:
        raise RuntimeError("espeak-ng is not installed (scripts/ensure-espeak)")
    done = subprocess.run([ESPEAK, "--stdout", text], check=True, capture_output=True, timeout=30)
    return done.stdout


def recognise(wav: bytes) -> str:
    """What pocketsphinx hears in a 16-bit mono WAV file, at the file's own rate."""
    from pocketsphinx import Decoder

    with wave.open(io.BytesIO(wav)) as audio:
        if audio.getsampwidth() != 2 or audio.getnchannels() != 1:
            raise ValueError("pocketsphinx reads 16-bit mono audio")
        rate, frames = audio.getframerate(), audio.readframes(audio.getnframes())
    decoder = Decoder(samprate=rate, loglevel="FATAL")
    decoder.start_utt()
    decoder.process_raw(frames, full_utt=True)
    decoder.end_utt()
    hypothesis = decoder.hyp()
    return hypothesis.hypstr if hypothesis is not None else ""


def word_error_rate(reference: str, heard: str) -> float:
    """Word-level edit distance over the reference's length (case and punctuation aside)."""
    ref = [w.strip(".,?!").lower() for w in reference.split()]
    hyp = [w.strip(".,?!").lower() for w in heard.split()]
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, start=1):
        previous, row[0] = row[0], i
        for j, other in enumerate(hyp, start=1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (word != other))
    return row[-1] / max(1, len(ref))
