"""What Gradescope accepts in results.json (its autograder specification), as a list of what a file gets wrong.

    problems(results) -> ["tests[3].status is 'ok', not passed or failed", ...]   ([] when it is fine)
"""
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
FORMATS = {"text", "html", "md", "simple_format", "ansi"}


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def problems(res) -> list:
    out = []
    if not isinstance(res, dict):
        return ["results.json is not an object"]
    if "score" not in res and not isinstance(res.get("tests"), list):
        out.append("neither a score nor tests")
    for key in ("score", "execution_time"):
        if key in res and not _number(res[key]):
            out.append(f"{key} is not a number")
    for key in ("output",):
        if key in res and not isinstance(res[key], str):
            out.append(f"{key} is not text")
    if res.get("output_format", "text") not in FORMATS:
        out.append(f"output_format {res['output_format']!r} is not one of {sorted(FORMATS)}")
    for key in ("visibility", "stdout_visibility"):
        if key in res and res[key] not in VISIBILITY:
            out.append(f"{key} {res[key]!r} is not one of {sorted(VISIBILITY)}")
    if "extra_data" in res and not isinstance(res["extra_data"], dict):
        out.append("extra_data is not an object")
    for i, t in enumerate(res.get("tests") or []):
        where = f"tests[{i}]"
        if not isinstance(t, dict):
            out.append(f"{where} is not an object")
            continue
        for key in ("score", "max_score"):
            if key in t and not _number(t[key]):
                out.append(f"{where}.{key} is not a number")
        if "status" in t and t["status"] not in ("passed", "failed"):
            out.append(f"{where}.status is {t['status']!r}, not passed or failed")
        for key in ("name", "number", "output"):
            if key in t and not isinstance(t[key], str):
                out.append(f"{where}.{key} is not text")
        if "visibility" in t and t["visibility"] not in VISIBILITY:
            out.append(f"{where}.visibility {t['visibility']!r} is not one of {sorted(VISIBILITY)}")
    board = res.get("leaderboard", [])
    if not isinstance(board, list):
        out.append("leaderboard is not a list")
        board = []
    for i, e in enumerate(board):
        where = f"leaderboard[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not e["name"]:
            out.append(f"{where} has no name")
            continue
        if not (_number(e.get("value")) or isinstance(e.get("value"), str)):
            out.append(f"{where}.value is neither a number nor text")
        if "order" in e and e["order"] not in ("asc", "desc"):
            out.append(f"{where}.order {e['order']!r} is not asc or desc")
    return out
