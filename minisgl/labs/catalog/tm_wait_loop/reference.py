"""The engine's own TokenizerManager._wait_one_response and handle_loop, in the shape of the starter (what CI
grades to show the lab can pass)."""

from minisgl.server.tokenizer_manager import TokenizerManager as _TM

_wait_one_response = _TM._wait_one_response
handle_loop = _TM.handle_loop
