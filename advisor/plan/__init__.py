"""Planning: memory / boot feasibility and assembling the recommendation (pure functions)."""
