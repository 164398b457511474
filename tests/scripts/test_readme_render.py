"""The README example renderer shortens answers without changing a value."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from readme_render import laid_out, render_answer, shortened


def test_lists_keep_two_items_and_numbers_are_untouched() -> None:
    assert (
        render_answer('{"items": [1.25, 2, 3, 4], "n": 0.1}')
        == '{"items": [1.25, 2, ...], "n": 0.1}'
    )


def test_long_strings_are_cut_to_110_characters() -> None:
    assert len(shortened("x" * 500)) == 110
    assert shortened("x" * 500).endswith("...")
    assert shortened("x" * 110) == "x" * 110


def test_elided_members_show_as_dots_at_any_list_item() -> None:
    answer = '{"items": [{"a": 1, "carbon": {"g": 2}}, {"type": "problem"}]}'
    assert render_answer(answer, elide=("items.*.carbon",)) == (
        '{"items": [{"a": 1, "carbon": ...}, {"type": "problem"}]}'
    )


def test_wide_objects_pack_members_into_lines_of_at_most_100_characters() -> None:
    value = {f"key_{i:02d}": 1000.0 + i for i in range(12)}
    lines = laid_out(value).splitlines()
    assert lines[0] == "{" and lines[-1] == "}"
    assert all(len(line) <= 100 for line in lines)
    # Members are 16 characters ('"key_00": 1000.0'); after the 2-space indent and with ", "
    # between them, 5 fit in 100 (2 + 5 x 16 + 4 x 2 = 90, a 6th makes 108): lines of 5, 5, 2.
    assert [line.count("key_") for line in lines[1:-1]] == [5, 5, 2]
    assert "".join(lines).count("key_") == 12


def test_http_answers_keep_status_named_headers_and_split_glued_responses() -> None:
    raw = (
        "HTTP/1.1 422 Unprocessable Entity\r\ndate: x\r\ncontent-type: application/problem+json"
        '\r\n\r\n{"status": 422}HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer\r\n'
        'server: uvicorn\r\n\r\n{"status": 401}'
    )
    assert render_answer(raw, keep_headers=("content-type", "www-authenticate")) == (
        "HTTP/1.1 422 Unprocessable Entity\ncontent-type: application/problem+json\n\n"
        '{"status": 422}\n\nHTTP/1.1 401 Unauthorized\nwww-authenticate: Bearer\n\n{"status": 401}'
    )
