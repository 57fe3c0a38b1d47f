/**
 * Serialized values as records hold them ({@link StoredValue}): what LangGraph's serializer
 * returned, kept as JSON structure when it comes back byte for byte, as base64 bytes otherwise.
 *
 * A value kept as structure also has its JSON text beside it (a property under a symbol of
 * this module, so the text lives exactly as long as the object, and `JSON.stringify` and
 * `factlog dump` never see it): the serde's own text for a value
 * this process wrote, the structure written out once for one read from the log. Reading the
 * value hands the serde that text, and the value cache measures records by it, so neither
 * writes the structure out again. Both are the text `JSON.stringify` gives: only text that
 * comes back byte for byte is kept as structure.
 *
 * @module
 */

import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import type { StoredValue } from "./records.js";

/** A `\uD800`-`\uDFFF` escape in JSON text: only `JSON.stringify`'s escape of a lone
 * surrogate writes one (a paired surrogate is written as the character itself). */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;

/** The key of the JSON text kept on a stored value: a symbol, so `JSON.stringify` (and with
 * it the record appended to the store) never sees it. */
const TEXT = Symbol("factlog.langgraph.text");

/** A stored value with its JSON text beside it. */
type WithText = { [TEXT]?: string };

function textOf(stored: object): string | undefined {
  return (stored as WithText)[TEXT];
}

function keepText(stored: object, text: string): void {
  Object.defineProperty(stored, TEXT, { value: text, enumerable: false, writable: true });
}

/** `value` serialized by `serde`, as a record holds it (see {@link StoredValue}), after the
 * record's own `fields` (a channel value's `channel` and `version`, a write's `idx`, ...). */
export async function dumpValue<F extends object>(
  serde: SerializerProtocol,
  value: unknown,
  fields: F,
): Promise<F & StoredValue> {
  const [type, bytes] = await serde.dumpsTyped(value);
  if (type === "json") {
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
    // `includes` first: a scan for a fixed string is much cheaper than the regular expression.
    const surrogate = text.includes("\\u") && SURROGATE_ESCAPE.test(text);
    if (!surrogate && !text.includes('"$secret')) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      // Only text that comes back byte for byte is kept as structure, so that the serde
      // reads exactly what it wrote.
      if (parsed !== undefined && JSON.stringify(parsed) === text) {
        const stored = { ...fields, type, value: parsed };
        keepText(stored, text);
        return stored;
      }
    }
  }
  return { ...fields, type, base64: Buffer.from(bytes).toString("base64") };
}

/** The JSON text of a stored value kept as structure: the serde's own text when this process
 * serialized it, else the structure written out (once: the text is kept beside it). */
export function storedText(stored: { type: string; value: unknown }): string {
  let text = textOf(stored);
  if (text === undefined) {
    text = JSON.stringify(stored.value);
    keepText(stored, text);
  }
  return text;
}

/** The value a stored value holds, read by `serde`. */
export async function loadValue(serde: SerializerProtocol, stored: StoredValue): Promise<unknown> {
  if ("base64" in stored) {
    const bytes = Uint8Array.from(Buffer.from(stored.base64, "base64"));
    return serde.loadsTyped(stored.type, bytes);
  }
  return serde.loadsTyped(stored.type, storedText(stored));
}
