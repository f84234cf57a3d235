/**
 * A fetch response's body as text, read no further than `max` bytes, so that a server that
 * streams without end cannot grow the service's memory. Past `max`: `truncate` keeps the first
 * `max` bytes and stops reading; otherwise it throws `BodyTooLarge`.
 */
export class BodyTooLarge extends Error {}

export async function readBody(
  res: Response,
  max: number,
  /** `hold`: told each chunk's size before it is kept; a throw stops the read with that error. */
  opts: { truncate?: boolean; hold?: (bytes: number) => void } = {},
): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (size + value.byteLength > max) {
      chunks.push(value.subarray(0, max - size));
      await reader.cancel().catch(() => {});
      if (opts.truncate) break;
      throw new BodyTooLarge(`response body is larger than ${max} bytes`);
    }
    try {
      opts.hold?.(value.byteLength);
    } catch (err) {
      await reader.cancel().catch(() => {});
      throw err;
    }
    size += value.byteLength;
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}
