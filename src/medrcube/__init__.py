"""medrcube: a pytest-based qualification gate for multimodal LLMs in medical imaging."""

__version__ = "0.1.0"
