"""Qwen 2.5's (and Hermes') format: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, one block
per call (SGLang's function_call/qwen25_detector.py)."""

from __future__ import annotations

from minisgl.function_call.base_format_detector import BaseFormatDetector


class Qwen25Detector(BaseFormatDetector):
    bot_token = "<tool_call>"
    eot_token = "</tool_call>"
