/**
 * The element at `index` of an array the caller has bounds-checked (a loop's index, a regex group that
 * always takes part). Where the caller was wrong it throws, naming the index, instead of letting an
 * undefined travel on: a bug, never the client's input.
 */
export function at<T>(items: ArrayLike<T>, index: number): T {
  const item = items[index]
  if (item === undefined) throw new RangeError(`index ${index} is outside 0..${items.length - 1}`)
  return item
}
