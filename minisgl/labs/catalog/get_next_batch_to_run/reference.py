"""The engine's own Scheduler.get_next_batch_to_run, in the shape of the starter (what CI grades to show the
lab can pass)."""

from minisgl.scheduler.scheduler import Scheduler as _Scheduler

get_next_batch_to_run = _Scheduler.get_next_batch_to_run
