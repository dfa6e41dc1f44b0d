import { money } from "./format.js";

export function calc_total(items) {
  return items.reduce((sum, item) => sum + item.cents * item.qty, 0);
}

export function summary(items) {
  return `${items.length} items, ${money(calc_total(items))}`;
}
