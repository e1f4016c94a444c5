"""The domain floor: value types every layer shares (pydantic, ``extra="forbid"``), no behaviour
beyond validation and serialisation, no I/O, no imports from the rest of ``advisor``."""
