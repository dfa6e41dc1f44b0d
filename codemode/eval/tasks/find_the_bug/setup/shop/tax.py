RATES = {"none": 0.0, "low": 0.05, "high": 0.2}


def add_tax(amount: float, region: str) -> float:
    return amount * (1 + RATES[region])
