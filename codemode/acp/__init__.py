"""``interpreter acp``: the agent for editors, over the Agent Client Protocol on stdio."""
