"""Skills: folders with a ``SKILL.md`` the model can load when a task calls for them."""
