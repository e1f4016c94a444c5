"""Model resolution (MODEL -> config.json) and the ModelProfile computed from it."""
