"""A session's scripts: writes remembered, runs described by what the script contains."""

from __future__ import annotations

from tao_harness.readiness.call import Forecaster
from tao_harness.readiness.session_files import SOURCE_MARK, SessionFiles, split_writes

WRITE = "cat <<'EOF' > train_v2.py\nimport torch\nfor epoch in range(50):\n    train()\nEOF"


def test_split_writes_takes_out_bodies_copied_to_files_only() -> None:
    stripped, files = split_writes(WRITE + "\npython3 train_v2.py")
    assert stripped == "cat <<'EOF' > train_v2.py\nEOF\npython3 train_v2.py"
    assert files == {"train_v2.py": "import torch\nfor epoch in range(50):\n    train()"}
    assert split_writes("cd /app && cat > /tmp/x.sh << \"END\"\nls\nEND")[1] == {"x.sh": "ls"}
    fed = "python3 - <<'EOF' > out.txt\nimport torch\nEOF"  # a script python runs: work, not data
    assert split_writes(fed) == (fed, {})
    assert split_writes("cat <<EOF | python3\nprint(1)\nEOF")[1] == {}


def test_a_run_gets_the_words_of_the_script_its_session_wrote() -> None:
    files = SessionFiles()
    stripped, words = files.read("s1", WRITE, None)
    assert stripped == "cat <<'EOF' > train_v2.py\nEOF" and words == frozenset()  # a write alone uses nothing
    _, words = files.read("s1", "timeout 60 python3 train_v2.py --fast", None)
    assert {SOURCE_MARK + "torch", SOURCE_MARK + "epoch"} <= words
    assert files.read("s2", "python3 train_v2.py", None)[1] == frozenset()  # another session's file
    assert files.read("s1", "python3 train_v2.py > train_v2.py.log", None)[1] == words
    files.read("s3", None, {"file_path": "/app/bench.py", "content": "import numpy"})  # a Write tool
    assert files.read("s3", "python bench.py", None)[1] == {SOURCE_MARK + "import", SOURCE_MARK + "numpy"}


def test_a_new_script_is_predicted_from_runs_of_scripts_like_it() -> None:
    # Every session writes a script under a new name and runs it: the name says nothing, the contents do.
    forecaster = Forecaster()

    def run(session: str, name: str, body: str, duration_s: float | None) -> float:
        write_key, write_hints = forecaster.describe("bash", f"cat <<'EOF' > {name}.py\n{body}\nEOF",
                                                     session=session, harness="mini")
        forecaster.observe(write_key, write_hints, 0.02)
        key, hints = forecaster.describe("bash", f"python3 {name}.py", session=session, harness="mini")
        predicted = forecaster.estimate(key, hints).prediction.predicted_s
        if duration_s is not None:
            forecaster.observe(key, hints, duration_s)
        return predicted

    slow = "import torch\nmodel = Net()\nfor epoch in range(20):\n    model.fit(batch)"
    fast = "import json\nprint(json.load(open('config.json'))['name'])"
    for index in range(4):
        run(f"s{index}", f"train_{index}", slow, 25.0)
        run(f"s{index}", f"show_{index}", fast, 0.05)
    assert run("new", "fit_model", slow, None) == 25.0
    assert run("new", "peek", fast, None) == 0.05
    write_key, write_hints = forecaster.describe("bash", f"cat <<'EOF' > again.py\n{slow}\nEOF", session="new",
                                                 harness="mini")
    assert forecaster.estimate(write_key, write_hints).prediction.predicted_s == 0.02  # writing it is instant
