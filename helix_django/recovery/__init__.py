"""Recovery of interrupted generations: the relaunch scan, the state inventory and recovery actions.

000, "How to Resume or Recover an Interrupted AI Generation": recover from the last state
whose meaning is understood. Modules:

- :mod:`.scan`: the relaunch scan (``arecover``, ``arecover_run``), run by ``helix_recover``,
  at ASGI start-up (:mod:`.startup`) and periodically;
- :mod:`.inventory`: stuck runs, unknown tool outcomes, continuation validity, offered actions;
- :mod:`.partial`: partial output rebuilt from the last checkpoint and the run's chunks;
- :mod:`.outcomes`: ending a run interrupted, completed from the provider, or cancelled;
- :mod:`.provider`: bounded status queries and cancels of a provider operation;
- :mod:`.actions`: the staff actions (Check status, Mark interrupted, Cancel, Regenerate,
  Continue, Keep partial, Discard partial, tool resolution).
"""
