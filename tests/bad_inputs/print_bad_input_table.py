"""Print the bad-input corpus as a Markdown table: case → where it enters → how it is answered.

    python tests/bad_inputs/print_bad_input_table.py          # the declared answers (instant)
    python tests/bad_inputs/print_bad_input_table.py --run    # run every row and print the observed message
                                                              # (~2 minutes: inner conformance runs)

With ``--run`` the exit status is 1 when a row is not answered as declared (the same verdict as
tests/bad_inputs/test_bad_inputs.py, which CI runs).
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]

from bad_input_corpus import (  # noqa: E402
    BAD_INPUTS,
    CASES,
    QUIET,
    REPO,
    CheckFails,
    Ctx,
    Handled,
    adapter_results,
    first_line,
    inner_env,
    observe,
    start_adapter_run,
    verify,
)


def _subprocess_pytest(args: list[str]) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *QUIET, "conformance/gru4rec", *args],
        cwd=REPO,
        env=inner_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, proc.stdout + proc.stderr


def _cell(text: str, width: int = 220) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="run every row and print the observed answer")
    args = parser.parse_args(argv)
    counts = collections.Counter(c.enters for c in BAD_INPUTS)
    print(
        f"{len(BAD_INPUTS)} bad inputs ("
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + f") and {len(CASES) - len(BAD_INPUTS)} valid-but-awkward inputs handled by documented behaviour\n"
    )
    head = ["id", "enters", "input", "answer"] + (["observed", "ok"] if args.run else [])
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    failures = 0
    with tempfile.TemporaryDirectory(prefix="bad-inputs-") as tmp:
        tmp = Path(tmp)
        proc = start_adapter_run(tmp / "adapter-run") if args.run else None
        cache: dict = {}

        def results():
            if "r" not in cache:
                cache["r"] = adapter_results(proc, tmp / "adapter-run")
            return cache["r"]

        for case in CASES:
            row = [case.id, case.enters, case.input, case.answer.describe()]
            if args.run:
                reason = case.skip_if() if case.skip_if else None
                if reason:
                    row += [f"skipped: {reason}", "–"]
                else:
                    (tmp / case.id).mkdir()
                    obs = observe(case, Ctx(tmp / case.id, _subprocess_pytest, results))
                    problems = verify(case, obs)
                    failures += bool(problems)
                    shown = obs.text if isinstance(case.answer, Handled) else first_line(obs, case)
                    row += [
                        f"{obs.kind}: {shown}"
                        if not isinstance(case.answer, (CheckFails,))
                        else f"{obs.kind}: {shown}",
                        "yes" if not problems else "NO: " + "; ".join(problems),
                    ]
            print("| " + " | ".join(_cell(c) for c in row) + " |", flush=True)
        if proc is not None and proc.poll() is None:
            proc.kill()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
