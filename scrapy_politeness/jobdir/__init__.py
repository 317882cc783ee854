"""What the plugin keeps in ``JOBDIR`` across a pause: learnt host and IP state,
the suspended hosts, the scheduler queue's own state, and telling a forced
shutdown from a pause. May import ``policy``.
"""
