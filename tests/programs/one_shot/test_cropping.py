from netcast.programs.one_shot.cropping import DROP, sentences, verified_crop

TEXT = 'He said "Hi." Then he left (quietly.) The end came in 1990. Nobody saw it!'


def test_sentences_keep_their_closing_quotes_and_brackets():
    assert sentences(TEXT) == [
        'He said "Hi."',
        "Then he left (quietly.)",
        "The end came in 1990.",
        "Nobody saw it!",
    ]


def test_a_faithful_crop_with_quotes_is_accepted_in_the_original_order():
    crop = 'The end came in 1990.\nHe said "Hi."'
    assert verified_crop(TEXT, crop, "exact") == 'He said "Hi." The end came in 1990.'


def test_near_verbatim_copies_pass_only_in_fuzzy_mode_and_keep_the_original_text():
    crop = "The end came in 1990"  # the full stop dropped, as small models do
    assert verified_crop(TEXT, crop + " and then more.", "fuzzy") is None  # invented text
    assert verified_crop(TEXT, "then he left (quietly).", "exact") is None
    assert verified_crop(TEXT, "then he left (quietly).", "fuzzy") == "Then he left (quietly.)"


def test_no_sentence_helps_drops_the_chunk_and_empty_replies_are_rejected():
    assert verified_crop(TEXT, "NONE") == DROP == ""
    assert verified_crop(TEXT, "Nothing.") == DROP
    assert verified_crop(TEXT, "") is None  # an empty reply is a failed step: the chunk stays
    assert verified_crop(TEXT, "Completely different words here.") is None
