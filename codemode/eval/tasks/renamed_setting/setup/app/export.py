from app.settings import SETTINGS


def export(items: list[str], settings: dict = SETTINGS) -> str:
    shown = items[: settings["max_items"]]
    return settings["title"] + ": " + ", ".join(shown)
