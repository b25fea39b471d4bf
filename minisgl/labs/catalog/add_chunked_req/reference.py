"""The engine's own PrefillAdder.add_chunked_req, in the shape of the starter (what CI grades to show the lab
can pass)."""

from minisgl.scheduler.schedule_policy import PrefillAdder as _PA

add_chunked_req = _PA.add_chunked_req
