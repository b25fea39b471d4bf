"""The HTTP side of minisgl: OpenAI-compatible request and response shapes, and the server that uses them."""
