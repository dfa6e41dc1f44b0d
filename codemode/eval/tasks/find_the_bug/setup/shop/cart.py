from shop.pricing import apply_discount
from shop.tax import add_tax


class Cart:
    def __init__(self) -> None:
        self.items: list[tuple[str, float, int]] = []

    def add(self, name: str, price: float, quantity: int = 1) -> None:
        self.items.append((name, price, quantity))

    def subtotal(self) -> float:
        return sum(price * quantity for _, price, quantity in self.items)

    def total(self, discount_percent: float = 0.0, region: str = "none") -> float:
        discounted = apply_discount(self.subtotal(), discount_percent)
        return round(add_tax(discounted, region), 2)
