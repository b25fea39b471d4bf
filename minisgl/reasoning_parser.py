"""ReasoningParser (SGLang's python/sglang/srt/reasoning_parser.py): a thinking model's reasoning, written
between `<think>` and `</think>` before its answer, taken out of the content into reasoning_content.

    deepseek-r1   the chat template opens `<think>` itself: everything up to `</think>` is reasoning
    qwen3         reasoning only if the answer starts with `<think>`

Streamed, the same split is made piece by piece (a tail that may be the start of a tag is held back).
"""

from __future__ import annotations

THINK_START, THINK_END = "<think>", "</think>"


class ReasoningParser:
    names = ("deepseek-r1", "qwen3")

    def __init__(self, model_type: str):
        if model_type not in self.names:
            raise ValueError(f"unknown reasoning parser {model_type!r}; there are: {', '.join(self.names)}")
        self.starts_in_reasoning = model_type == "deepseek-r1"
        self._buffer = ""
        self._state = "start"  # start -> reasoning -> answer
        self._after_reasoning = self._content_started = False

    def parse_non_stream(self, text: str) -> tuple[str | None, str]:
        """(reasoning_content or None, content)."""
        stripped = text.lstrip()
        if stripped.startswith(THINK_START):
            stripped = stripped[len(THINK_START):]
        elif not self.starts_in_reasoning:
            return None, text
        reasoning, found, answer = stripped.partition(THINK_END)
        return reasoning.strip(), answer.lstrip() if found else ""

    def parse_stream_chunk(self, chunk: str) -> tuple[str, str]:
        """(reasoning piece, content piece) of a new piece of the answer."""
        self._buffer += chunk
        reasoning = content = ""
        if self._state == "start":
            head = self._buffer.lstrip()
            if THINK_START.startswith(head) and len(head) < len(THINK_START):
                return "", ""  # may still become <think>
            if head.startswith(THINK_START):
                self._buffer, self._state = head[len(THINK_START):], "reasoning"
            else:
                self._state = "reasoning" if self.starts_in_reasoning else "answer"
        if self._state == "reasoning":
            before, found, after = self._buffer.partition(THINK_END)
            if found:
                reasoning, self._buffer, self._state = before, after, "answer"
                self._after_reasoning = True
            else:
                keep = next((n for n in range(min(len(THINK_END) - 1, len(before)), 0, -1)
                             if THINK_END.startswith(before[-n:])), 0)
                reasoning, self._buffer = before[:len(before) - keep], before[len(before) - keep:]
        if self._state == "answer":
            content, self._buffer = self._buffer, ""
            if self._after_reasoning and not self._content_started:  # the answer's leading blank lines
                content = content.lstrip()
            self._content_started = self._content_started or bool(content)
        return reasoning, content

    def flush(self) -> tuple[str, str]:
        """The stream ended: what was held back goes where it stood."""
        text, self._buffer = self._buffer, ""
        if self._state == "reasoning" or (self._state == "start" and self.starts_in_reasoning):
            return text, ""
        return "", text.lstrip() if self._after_reasoning and not self._content_started else text
