"""The two DAP aggregators (draft-ietf-ppm-dap-18) inside the collector service.

``task``: a task's public description (the task file) and an aggregator's secrets;
``aggregator``: the protocol logic over SQLite (uploads, the Helper's aggregation jobs, the
Leader's driver, collection, aggregate shares, noise), Flask-free; ``api``: the HTTP API under
``/dap/``; ``cli``: ``ldp-collector dap keygen|task add|drive``. See docs/dap.md.
"""
