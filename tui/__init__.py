"""The Textual replay app. Reads traces through `tracer` only."""
