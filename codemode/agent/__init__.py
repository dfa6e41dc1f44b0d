"""Agent: the turn loop, events, session recording (rollout) and resume. Filled in by the
agent-loop issue.
"""
