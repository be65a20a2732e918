"""Every surface's questions through one dispatcher (issue 41; docs/plans/dispatcher.md §5).

``intents`` (what a person asked, where, by whom), ``conversation`` (which conversation an
event belongs to, decided once), ``checks`` (claim once, bursts), ``bursts``, ``outcome`` and
``dispatcher``. Import the modules themselves: this package's face imports nothing, so that
``adapters.answering``, which the dispatcher still runs on, may import ``outcome`` and
``bursts`` without a cycle.
"""
