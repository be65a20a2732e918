"""One module per intent's handler (docs/plans/dispatcher.md §5.3): what an intent does once
its checks passed, written once for every surface."""
