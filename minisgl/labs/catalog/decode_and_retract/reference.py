"""The engine's own prepare_for_decode and retract_decode, in the shape of the starter (what CI grades to
show the lab can pass)."""

from minisgl.scheduler.schedule_batch import ScheduleBatch as _SB

prepare_for_decode = _SB.prepare_for_decode
retract_decode = _SB.retract_decode
