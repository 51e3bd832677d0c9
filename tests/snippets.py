"""Running the Python snippet an export's model card shows, as a user would paste it."""


def card_snippet(export, source: str, response: str, question: str | None) -> dict:
    """Runs the export's model card's Python snippet on one input; its variables."""
    card = (export / "README.md").read_text(encoding="utf-8")
    code = card.split("```python\n", 1)[1].split("```", 1)[0]
    for placeholder, value in (('"THIS_DIR"', str(export)), ('"SOURCE"', source), ('"RESPONSE"', response),
                               ("question = None", f"question = {question!r}")):
        assert placeholder in code
        code = code.replace(placeholder, repr(value) if placeholder.startswith('"') else value, 1)
    scope: dict = {}
    exec(compile(code, str(export / "README.md"), "exec"), scope)
    return scope
