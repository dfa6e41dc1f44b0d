SETTINGS = {"limit": 3, "title": "Report"}
