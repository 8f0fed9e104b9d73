"""cast-toolkit: knowledge-driven answer generation for conversational search.

Importing this package is cheap: torch, transformers, spaCy and the JVM are imported only inside the
stages that need them.
"""

__version__ = "0.1.0"
