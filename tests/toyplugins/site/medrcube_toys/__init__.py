"""A site package extending medrcube by entry point (tests/toyplugins/README.md)."""
