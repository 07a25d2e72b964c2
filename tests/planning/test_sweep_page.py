"""sweep.html comes from an autoescaped template: workload, mix, policy and title cannot inject markup."""

from __future__ import annotations

from slosched.evaluation.capacity import Spread
from slosched.planning.output import write_html
from slosched.planning.sweep import SweepRow


def test_sweep_page_escapes_names(tmp_path):
    spread = Spread(1.0, 0.9, 1.1, (0.9, 1.0, 1.1))
    row = SweepRow("w<b>", "m", "<script>x</script>", ("a100",), {0.9: spread, 0.95: spread})
    write_html(tmp_path / "s.html", [row], [], "<i>title</i>")
    page = (tmp_path / "s.html").read_text()
    assert "<script>x" not in page and "<i>title" not in page and "<b>" not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "&lt;i&gt;title&lt;/i&gt;" in page
    assert "<th>90%</th><th>95%</th>" in page and "<img" in page  # the capacity chart, inlined
