from app.settings import SETTINGS


def header(settings: dict = SETTINGS) -> str:
    return settings["title"].upper()
