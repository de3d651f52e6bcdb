"""The library's layout conventions that a script can check (../shared/DESIGN.md): no module over about 800
lines. Three modules had passed it (evaluation, recommenders, sampling, split in their own commits); this
keeps the next one from doing so silently."""
from pathlib import Path

import sampling_lib

MAX_LINES = 800


def test_no_module_is_over_800_lines():
    root = Path(sampling_lib.__file__).parent
    sizes = {str(p.relative_to(root)): len(p.read_text(encoding="utf-8").splitlines()) for p in root.rglob("*.py")}
    assert len(sizes) > 50                              # the package's own modules were found
    over = {k: v for k, v in sizes.items() if v > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: {over}"
