"""Providers: streaming wire clients (chat completions, responses, anthropic messages) and the
provider catalog. Filled in by the agent-loop issue.
"""
