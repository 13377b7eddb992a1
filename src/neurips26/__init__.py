"""neurips26: the NeurIPS 2026 papers of ABSTRACTS.txt as working, tested software.

Each paper lives in its own sub-package ``neurips26.<slug>``; import the one you need, e.g.
``from neurips26.delayed_hits import simulate``. The command line is ``neurips26``.
"""

__version__ = "0.1.0"
