class ScriptedProvider:  # pragma: no cover
    pass
