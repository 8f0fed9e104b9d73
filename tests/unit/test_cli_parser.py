def test_verbose_is_accepted_before_or_after_the_command():
    from cast.cli import build_parser

    parser = build_parser()
    retrieval = ["eval", "retrieval", "--run", "a.run", "--qrels", "q.txt"]
    assert parser.parse_args(["-v", *retrieval]).verbose
    assert parser.parse_args([*retrieval, "-v"]).verbose
    assert parser.parse_args(["index", "build", "--input", "c.jsonl", "--index", "ix", "--verbose"]).verbose
    assert not parser.parse_args(retrieval).verbose
