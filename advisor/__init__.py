"""advisor: a decision-tree config advisor for vLLM."""

__version__ = "0.1.0"
