/**
 * The cache of record values shared by a saver's threads: {@link ValueCache}.
 *
 * @module
 */

/** The record values a saver read or wrote, by seq, least recently used out, bounded by the
 * size of their JSON text. Values are never mutated once cached. */
export class ValueCache {
  readonly #entries = new Map<number, { value: unknown; bytes: number }>();
  #bytes = 0;

  constructor(readonly bytesMax: number) {}

  get(seq: number): unknown {
    const entry = this.#entries.get(seq);
    if (entry === undefined) {
      return undefined;
    }
    this.#entries.delete(seq);
    this.#entries.set(seq, entry);
    return entry.value;
  }

  /** Caches `value`, whose size is `bytes` when the caller knows it (the length of its JSON
   * text, plus whatever else the value keeps alive), else the length of its JSON text. */
  set(seq: number, value: unknown, bytes?: number): void {
    if (this.bytesMax === 0 || this.#entries.has(seq)) {
      return;
    }
    bytes ??= JSON.stringify(value).length;
    if (bytes > this.bytesMax) {
      return;
    }
    this.#entries.set(seq, { value, bytes });
    this.#bytes += bytes;
    for (const [oldest, entry] of this.#entries) {
      if (this.#bytes <= this.bytesMax) {
        break;
      }
      this.#entries.delete(oldest);
      this.#bytes -= entry.bytes;
    }
  }

  clear(): void {
    this.#entries.clear();
    this.#bytes = 0;
  }
}
