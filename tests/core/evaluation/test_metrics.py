import pytest

from netcast.evaluation import metrics


def test_squad_normalization():
    assert metrics.normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert metrics.normalize_answer("An apple, a pear") == "apple pear"


def test_exact_match_and_f1_take_the_best_gold():
    assert metrics.exact_match("the Midland", ["Midland", "Michigan"]) == 1.0
    assert metrics.exact_match("Midland, Michigan", ["Midland"]) == 0.0
    assert metrics.f1_score("Midland, Michigan", ["Midland, Michigan, United States"]) == (
        pytest.approx(2 * 1.0 * 0.5 / 1.5)
    )
    assert metrics.f1_score("yes", ["no"]) == 0.0
    assert metrics.f1_score("", ["no"]) == 0.0
    assert metrics.f1_score("anything", []) == 0.0


def test_retrieval_prf_maps_chunks_to_documents():
    prf = metrics.retrieval_prf(["d1#0", "d1#1", "d2#0", "d3#0"], ["d1", "d4"])
    assert prf["precision"] == pytest.approx(1 / 3)
    assert prf["recall"] == pytest.approx(1 / 2)
    assert prf["f1"] == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    assert metrics.retrieval_prf([], ["d1"]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert metrics.retrieval_prf(["d1#0"], []) == {"precision": None, "recall": None, "f1": None}


def test_answer_in_context_matches_whole_normalized_words():
    passages = ["Midland is a city in Michigan.", "Other text"]
    assert metrics.answer_in_context(passages, ["midland, MICHIGAN", "Ohio"]) == 0.0
    assert metrics.answer_in_context(passages, ["Ohio", "Michigan"]) == 1.0
    assert metrics.answer_in_context(["Michiganders"], ["Michigan"]) == 0.0
    assert metrics.answer_in_context(passages, ["."]) == 0.0


def test_one_table_names_every_measure_evaluation_scores():
    import dspy

    from netcast.evaluation.evaluate import score
    from netcast.trace import Trace

    names = [m.name for m in metrics.MEASURES]
    assert len(set(names)) == len(names) and list(metrics.BY_NAME) == names
    scopes = {m.scope for m in metrics.MEASURES}
    assert {"answer", "retrieval", "cost"} <= scopes
    quality = {m.name for m in metrics.MEASURES if m.scope in ("answer", "retrieval")}
    assert set(metrics.QUALITY) == quality
    assert set(metrics.COST) == {m.name for m in metrics.MEASURES if m.scope == "cost"}
    assert not set(metrics.QUALITY) & set(metrics.COST)
    assert set(metrics.ANSWER) == {"em", "f1", "judge"} <= set(metrics.QUALITY)
    f1, calls = metrics.BY_NAME["f1"], metrics.BY_NAME["lm_calls"]
    assert f1.higher_is_better and not calls.higher_is_better
    assert f1.format(0.5) == "0.500" and f1.format(None) == "-"
    example = dspy.Example(question="q", answers=["Paris"], gold_ids=["paris"])
    prediction = dspy.Prediction(
        answer="Paris", evidence=["paris#0"], context=["Paris: Paris."], trace=Trace().to_dict()
    )
    assert set(score(example, prediction)) == set(names)


def test_token_prf_is_token_overlap_with_the_gold_supporting_text():
    gold = ["Paris: Paris is the capital of France."]
    # the refined context: a segment of the gold passage ("…" joins segments: not a token)
    prf = metrics.token_prf(["Paris: Paris is … the capital"], gold)
    # retrieved tokens: paris paris is capital (4); gold: paris paris is capital of france (6)
    assert prf["precision"] == 1.0
    assert prf["recall"] == pytest.approx(4 / 6)
    assert prf["f1"] == pytest.approx(2 * (4 / 6) / (1 + 4 / 6))
    # repeated tokens count as often as both sides have them
    assert metrics.token_prf(["Paris Paris Paris"], ["Paris"])["precision"] == pytest.approx(1 / 3)
    assert metrics.token_prf([], gold) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert metrics.token_prf(["x"], []) == {"precision": None, "recall": None, "f1": None}
    assert metrics.token_prf(["Berlin"], gold)["f1"] == 0.0


def test_top_k_answer_recall_reads_the_first_k_documents():
    ranked = ["Berlin: capital of Germany.", "Seine: a river in Paris.", "Paris: the city."]
    assert metrics.documents_with_answer(ranked, ["paris"]) == [False, True, True]
    assert metrics.top_k_answer_recall(ranked, ["Paris"], 1) == 0.0
    assert metrics.top_k_answer_recall(ranked, ["Paris"], 2) == 1.0
    assert metrics.top_k_answer_recall(ranked, ["Parisian"], 3) == 0.0  # whole words
    assert metrics.top_k_answer_recall([], ["Paris"], 5) == 0.0


def _squad_f1(prediction: str, gold: str) -> float:
    """SQuAD's token F1, as netcast computed it for every answer before mixed segmentation."""
    from collections import Counter

    pred, ref = metrics.normalize_answer(prediction).split(), metrics.normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    return 0.0 if not common else 2 * common / (len(pred) + len(ref))


def test_a_cjk_gold_answer_is_scored_by_mixed_segmentation_and_any_other_exactly_as_squad():
    # MLQA / CMRC 2018: punctuation removed, each CJK character a token
    assert metrics.mixed_tokens("中国首都是北京。") == ["中", "国", "首", "都", "是", "北", "京"]
    assert metrics.mixed_tokens("2008年北京奥运会, the Games") == [
        "2008", "年", "北", "京", "奥", "运", "会", "games",
    ]  # fmt: skip
    assert metrics.f1_score("中国首都是北京。", ["北京"]) == pytest.approx(
        2 * (2 / 7) / (2 / 7 + 1)
    )
    assert metrics.exact_match("北京。", ["北京"]) == 1.0
    assert metrics.exact_match("北京市", ["北京"]) == 0.0
    assert metrics.answer_in_context(["中国的首都是北京。"], ["北京"]) == 1.0
    assert metrics.answer_in_context(["上海是中国最大的城市"], ["北京"]) == 0.0
    prf = metrics.token_prf(["北京是中国的首都"], ["北京是首都"])
    assert prf["recall"] == 1.0 and prf["precision"] == pytest.approx(5 / 8)
    # a gold answer not mostly CJK keeps SQuAD's words, whatever the prediction holds
    pairs = [
        ("Zhang Yimou (张艺谋)", "Zhang Yimou"),
        ("Beijing 北京", "Beijing"),
        ("北京", "Beijing (北京)"),
        ("the Eiffel–Tower", "Eiffel Tower"),
        ("“Midland”, Michigan", "Midland, Michigan, United States"),
    ]
    for prediction, gold in pairs:
        assert metrics.f1_score(prediction, [gold]) == _squad_f1(prediction, gold)
        squad_em = metrics.normalize_answer(prediction) == metrics.normalize_answer(gold)
        assert metrics.exact_match(prediction, [gold]) == float(squad_em)
