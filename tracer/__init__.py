"""Trace events of the minisgl engine: schema, emit API, reader, replay. Imports nothing from minisgl."""
