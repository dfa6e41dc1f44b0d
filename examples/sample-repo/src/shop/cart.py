from shop.legacy_utils import money, slugify


class Cart:
    def __init__(self):
        self.items = []

    def add(self, name, cents, qty=1):
        self.items.append((slugify(name), cents, qty))

    def calc_total(self):
        return sum(cents * qty for _, cents, qty in self.items)

    def describe(self):
        return f"{len(self.items)} items, {money(self.calc_total())}"
