"""pytest plugin of medrcube (registered through the pytest11 entry point)."""
