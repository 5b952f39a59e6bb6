import json

import pytest


def rows(folder, data):
    """``data``: id -> (seconds, tokens_in, lm_calls, cached_calls)."""
    folder.mkdir(parents=True)
    lines = [
        {
            "id": q,
            "scores": dict(
                zip(("seconds", "tokens_in", "lm_calls", "cached_calls"), v, strict=True)
            ),
        }
        for q, v in data.items()
    ]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


def test_inference_compares_only_questions_both_rows_answered_without_the_cache(script, tmp_path):
    tuned = rows(
        tmp_path / "t", {"q1": (3.0, 100, 3, 0), "q2": (9.0, 300, 3, 0), "q3": (1, 1, 3, 3)}
    )
    plain = rows(
        tmp_path / "u", {"q1": (2.0, 100, 3, 0), "q2": (4.0, 200, 3, 0), "q4": (5, 5, 3, 0)}
    )
    cost = script("finetune_cost")
    table = cost.inference_rows(cost.read_rows(tuned), cost.read_rows(plain))
    # q3 came from the cache, q4 is not in the tuned row: only q1 and q2 count
    assert table[0] == ["seconds a question", "6.0", "3.0", "2.00x"]
    assert table[1] == ["prompt tokens a question", "200.0", "150.0", "1.33x"]
    assert table[-1] == ["questions", 2, 2, "-"]
    cached = rows(tmp_path / "c", {"q1": (1.0, 1, 3, 1)})
    with pytest.raises(SystemExit, match="no question both rows answered"):
        cost.inference_rows(cost.read_rows(cached), cost.read_rows(plain))


def test_training_reads_the_recipes_adapter_entry(script):
    recipe = {
        "finetune": {
            "examples": {
                "count": 4,
                "per_step": {"a": 3, "b": 1},
                "teacher": "annotations",
                "split": "train",
                "limit": 2,
            },
            "loss_curve": [1.0, 1.0, 0.5, 0.5, 0.2, 0.2, 0.1, 0.1],
            "seconds": 20.0,
            "peak_memory": 2**31,
            "adapter": {"size": 3 * 2**20},
            "rank": 16,
        }
    }
    table = dict(script("finetune_cost").training_rows(recipe["finetune"]))
    assert table["examples"] == "4 (a 3, b 1)"
    assert table["seconds an example"] == "5.0"
    assert table["peak memory (the training's processes, highest)"] == "2.0 GiB"
    assert table["adapter"] == "3.0 MiB (rank 16)"
    assert table["loss, first and last 2 steps"] == "1.000 -> 0.100"
    assert table["memory check's estimate"] == "not recorded"  # an artifact from before it was
    assert "seconds tracing the teacher" not in table  # annotations: no model traced
    recipe["finetune"]["examples"] |= {"teacher": "big", "trace_seconds": 1512.4}
    table = dict(script("finetune_cost").training_rows(recipe["finetune"]))
    assert table["seconds tracing the teacher"] == "1,512"
    recipe["finetune"] |= {"memory_estimate": 2**32, "longest_tokens": 1500}
    table = dict(script("finetune_cost").training_rows(recipe["finetune"]))
    assert table["memory check's estimate"] == "4.0 GiB (longest example 1,500 tokens; peak 0.50x)"
    recipe["finetune"]["gradient_checkpointing"] = True
    table = dict(script("finetune_cost").training_rows(recipe["finetune"]))
    assert table["memory check's estimate"] == (
        "4.0 GiB (longest example 1,500 tokens; gradient checkpointing; peak 0.50x)"
    )
