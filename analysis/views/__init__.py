"""What every kind's view shares (``analysis/kinds/<kind>/view.py``): the report's cells and
tables (:mod:`~analysis.views.cells`, :mod:`~analysis.views.table`), the context a report view
builds from (:mod:`~analysis.views.report`) and the dashboard's charts and tables
(:mod:`~analysis.views.dashboard`). Leaf modules: they import no kind and no command.
"""
