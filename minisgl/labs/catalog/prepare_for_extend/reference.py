"""The engine's own prepare_for_extend, in the shape of the starter (what CI grades to show the lab can
pass)."""

from minisgl.scheduler.schedule_batch import ScheduleBatch as _SB

prepare_for_extend = _SB.prepare_for_extend
