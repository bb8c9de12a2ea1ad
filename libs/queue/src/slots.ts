// Redis Cluster hash slots: a key's slot is CRC16 (XModem) of its hash tag (the text between the
// first `{` and the next `}`, when that is not empty) or else of the whole key, mod 16384. Keys
// touched by one Lua script or MULTI must share a slot; BullMQ's scripts touch every key of a
// queue (and, in a flow, its parent's), so every queue name carries a tag (names.ts).

export const SLOTS = 16384;

const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let b = 0; b < 8; b++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

/** CRC16-CCITT (XModem), the checksum Redis Cluster hashes keys with. */
export function crc16(text: string): number {
  let crc = 0;
  for (const byte of Buffer.from(text, 'utf8')) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc;
}

/** The part of a key Redis Cluster hashes: its hash tag when it has a non-empty one, else the key. */
export function hashTagOf(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return key;
  const close = key.indexOf('}', open + 1);
  if (close < 0 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

/** The hash slot of a key (0..16383), as CLUSTER KEYSLOT answers. */
export const keySlot = (key: string): number => crc16(hashTagOf(key)) % SLOTS;
