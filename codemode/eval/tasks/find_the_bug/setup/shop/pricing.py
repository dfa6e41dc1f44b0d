def apply_discount(amount: float, percent: float) -> float:
    """``amount`` less ``percent`` per cent."""
    if not 0 <= percent <= 100:
        raise ValueError(f"discount out of range: {percent}")
    return amount * (1 - percent / 10)


def unit_price(total: float, quantity: int) -> float:
    return total / quantity if quantity else 0.0
