"""Every surface's questions through one dispatcher (issue 41; docs/plans/dispatcher.md §5).

``intents`` (what a person asked, where, by whom), ``conversation`` (which conversation an
event belongs to, decided once), ``checks`` (claim once, bursts, Retry once, a question's
admission chain), ``bursts``, ``outcome``, ``handlers`` (an admitted question's run; Stop,
Decide, Retry; ``memory``) and ``dispatcher``. Import the modules themselves: this
package's face imports nothing, so no module here is loaded for another's sake.
"""
