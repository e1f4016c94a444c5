"""Planning: orchestrates rules, prediction and the memory planner into a Recommendation; boot feasibility and the layout search (pure functions over advisor.domain values)."""
