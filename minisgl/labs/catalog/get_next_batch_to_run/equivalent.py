"""Mutants of get_next_batch_to_run that cannot change what it does (see minisgl/labs/mutants.py)."""

EQUIVALENT = {
    "Scheduler.get_next_batch_to_run#16": "running_batch is never empty there: update_running_batch only "
                                          "retracts, and retract_decode keeps the last request (it raises "
                                          "rather than take it out)",
}
