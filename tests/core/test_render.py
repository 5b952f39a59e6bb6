from netcast.render import DECISIVE_N, adapter_line, verdict_lines


def test_a_small_dev_set_is_called_a_smoke_run_with_the_command_that_decides():
    before = {f"q{i}": 0.0 for i in range(10)}
    after = {f"q{i}": (1.0 if i < 3 else 0.0) for i in range(10)}
    lines = verdict_lines(before, after, compared="uncompiled", searched=True)
    assert lines[0].startswith("What this run shows: compiled - uncompiled")
    assert "on the same 10 dev questions: +0.300 [" in lines[0]
    assert "(no difference shown)" in lines[0]  # 3 of 10 better: p = 0.25
    assert any("held-out training questions" in line for line in lines)
    assert any(line.startswith("n = 10 is a smoke run") for line in lines)
    assert f"--dev-limit {DECISIVE_N}" in lines[-1] and "p < 0.05" in lines[-1]


def test_a_decisive_dev_set_gets_its_difference_and_no_smoke_warning():
    before = {f"q{i}": 0.0 for i in range(DECISIVE_N)}
    after = {f"q{i}": (1.0 if i % 3 == 0 else 0.0) for i in range(DECISIVE_N)}
    lines = verdict_lines(before, after, compared="its defaults", searched=False)
    assert len(lines) == 1 and "(a difference at p < 0.05)" in lines[0]
    assert f"{DECISIVE_N} dev questions: +0.333" in lines[0]


def test_questions_scored_on_one_side_only_are_left_out():
    lines = verdict_lines({"a": 0.5}, {"b": 1.0}, compared="x", searched=False)
    assert lines == []


def test_a_compile_that_changed_no_answer_gets_no_interval_width_in_its_smoke_line():
    same = {f"q{i}": 0.5 for i in range(10)}
    lines = verdict_lines(same, same, compared="uncompiled", searched=False)
    assert "+0.000 [+0.000, +0.000]" in lines[0] and "(no difference shown)" in lines[0]
    smoke = next(line for line in lines if line.startswith("n = 10 is a smoke run"))
    assert smoke.endswith("not whether it helps.") and "wide" not in smoke


def test_an_adapter_line_ends_with_its_training_time_when_the_recipe_has_one():
    entry = {
        "adapter": {"file": "lora.gguf", "sha256": "ab" * 32},
        "base": {"name": "embedded", "sha256": "cd" * 32},
        "rank": 16,
        "examples": {"count": 4, "teacher": "annotations", "questions": 2, "split": "train"},
        "loss_curve": [0.5, 0.25],
        "seconds": 4680.4,
    }
    line = adapter_line({"finetune": entry})
    assert line.startswith("adapter: lora.gguf (sha256 abababababab...), a rank-16 LoRA of ")
    assert line.endswith("; 2 steps, loss 0.500 -> 0.250, 4,680 s of training")
    assert adapter_line({"finetune": entry | {"seconds": 0.0}}).endswith(", 0 s of training")
    assert adapter_line({"finetune": {k: v for k, v in entry.items() if k != "seconds"}}).endswith(
        "loss 0.500 -> 0.250"
    )
    assert adapter_line({}) is None


def test_an_adapter_line_says_how_long_a_model_teacher_traced():
    examples = {"count": 54, "teacher": "big", "passing": 54, "questions": 100, "split": "train"}
    entry = {"adapter": {}, "base": {}, "rank": 16, "examples": examples}
    line = adapter_line({"finetune": entry | {"examples": examples | {"trace_seconds": 1512.4}}})
    assert line.endswith(
        "from big passing traces on 54 of 100 train questions (1,512 s of tracing)"
    )
    assert adapter_line({"finetune": entry}).endswith("on 54 of 100 train questions")
