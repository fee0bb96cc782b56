"""Sample RAPPOR files in the reference implementation's formats (docs/math/rappor.md).

    .venv/bin/python examples/make_rappor_files.py [DIR]

writes ``params.csv`` (k,h,m,p,q,f), ``candidates.txt`` (one string a line) and ``reports.csv``
(client,cohort,rappor) for 50,000 simulated clients, each holding one of ``url-0`` ... ``url-9``
(a Zipf population, ``url-0`` the most frequent; ``url-10`` ... ``url-19`` are candidates nobody
holds). Decode them with
``ldp-analyze rappor-decode``.
"""

import sys
from pathlib import Path

import numpy as np

from analysis.kinds.rappor.estimate import write_candidates, write_params, write_reports
from client_sdk import mechanism_from_config

out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
out.mkdir(parents=True, exist_ok=True)
rappor = mechanism_from_config(
    {"mechanism": "rappor", "k": 32, "h": 2, "m": 8, "p": 0.5, "q": 0.75, "f": 0.5}
)
candidates = [f"url-{i}" for i in range(20)]
held = (np.random.default_rng(0).zipf(1.5, 50_000) - 1) % 10  # a simulated population: seeded
# One report from each simulated client (its permanent response from a fresh secret).
reports = rappor.simulate_clients([candidates[v] for v in held])
write_params(out / "params.csv", rappor)
write_candidates(out / "candidates.txt", candidates)
write_reports(out / "reports.csv", rappor, reports)
print(f"wrote {out / 'params.csv'}, {out / 'candidates.txt'}, {out / 'reports.csv'}")
