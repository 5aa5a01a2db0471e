"""The step kit: what a step kind is written with.

The run's environment from a step's context, the target host, bounded waits with progress, stable
observations, the projected facts a plan carries between steps (a stop planned earlier makes a later
step see the broker stopped), and the broker unit watch that fails a wait as soon as the broker's unit
dies. Nothing here registers a step kind.
"""
