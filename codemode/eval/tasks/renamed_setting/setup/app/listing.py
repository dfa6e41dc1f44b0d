from app.settings import SETTINGS


def first_items(items: list[str], settings: dict = SETTINGS) -> list[str]:
    return items[: settings["max_items"]]
