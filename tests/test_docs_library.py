"""The documentation's notebook session (``docs/library.md``) runs as written: a doctest over its Python block."""

import doctest
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "library.md"


def test_the_library_session_runs_as_written():
    block = re.search(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S).group(1)
    test = doctest.DocTestParser().get_doctest(block, {}, "docs/library.md", str(PAGE), 0)
    assert len(test.examples) >= 8
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} example(s) of docs/library.md failed"
