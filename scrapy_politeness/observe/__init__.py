"""What the plugin tells people: stats, the live log line, the trace, the plot.

Reads the policy's state; changes nothing a decision depends on. May import
``policy`` only.
"""
