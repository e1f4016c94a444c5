"""Command-line interface: thin typer adapters over the pure core."""
