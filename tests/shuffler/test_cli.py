"""ldp-shuffler's argument errors: one line naming the flag and the value, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from shuffler.cli import main


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--restart-delay", "-1", "must be a number of seconds >= 0; got '-1'"),
        ("--restart-delay", "abc", "must be a number of seconds >= 0; got 'abc'"),
        ("--restart-delay", "nan", "must be a number of seconds >= 0; got 'nan'"),
        ("--max-wait", "soon", "must be a number of seconds >= 0; got 'soon'"),
        ("--concurrency", "0", "must be at least 1; got '0'"),
        ("--concurrency", "two", "must be at least 1; got 'two'"),
        ("--max-batch", "-5", "must be at least 1; got '-5'"),
    ],
)
def test_a_bad_number_of_seconds_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str, value: str, says: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(
            [
                "serve",
                "--db",
                str(tmp_path / "s.db"),
                "--collector",
                "http://127.0.0.1:1",
                flag,
                value,
            ]
        )
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {flag}: {says}" in error
    assert not (tmp_path / "s.db").exists()
