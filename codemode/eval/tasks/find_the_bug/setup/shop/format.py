def money(amount: float) -> str:
    return f"${amount:,.2f}"
