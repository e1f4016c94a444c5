"""Rules engine: rules are data (top-level ``rules/*.yaml``); this package validates and applies them."""
