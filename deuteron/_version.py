"""deuteron's version (a leaf module: the config cache keys on it without importing the package)."""

__version__ = "0.1.0"
