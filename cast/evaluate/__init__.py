"""Evaluation: retrieval measures of run files, answer measures of answers files, comparison tables with
paired significance tests, and reports with the paper's figures (``cast eval``).

Modules: :mod:`~cast.evaluate.experiment` (the library entry points: several systems' files scored in one call,
no command-line state), :mod:`~cast.evaluate.retrieval`, :mod:`~cast.evaluate.answers`,
:mod:`~cast.evaluate.significance`, :mod:`~cast.evaluate.report`, :mod:`~cast.evaluate.plots`,
:mod:`~cast.evaluate.wordnet` (METEOR's WordNet, offline) and :mod:`~cast.commands.evaluate` (the command on top).
Heavy libraries are imported inside the functions that use them.
"""
