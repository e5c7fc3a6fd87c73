import apis.core


def test_all_is_sorted_and_importable() -> None:
    names = apis.core.__all__
    constants = [n for n in names if n.isupper()]
    classes = [n for n in names if n[0].isupper() and not n.isupper()]
    functions = [n for n in names if n[0].islower()]
    # isort-style order (ruff RUF022): constants, classes, functions, each alphabetical.
    assert names == sorted(constants) + sorted(classes) + sorted(functions)
    for name in names:
        assert getattr(apis.core, name) is not None


def test_public_surface() -> None:
    assert set(apis.core.__all__) >= {
        "FrozenDict",
        "ParseError",
        "Pod",
        "Node",
        "QuantityError",
        "find_untolerated_taint",
        "label_selector_matches",
        "node_selector_matches",
        "node_selector_term_matches",
        "parse_node",
        "parse_pod",
        "parse_quantity",
        "tolerates",
    }
